package mcpgateway

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// HTTPConfig configures the streamable-HTTP transport (Handler).
type HTTPConfig struct {
	// AllowedOrigins are the origins ("https://app.example.com", scheme,
	// host and port, as a browser sends them in Origin) whose cross-origin
	// requests are served. Every other request that a browser marks as
	// cross-origin (Origin or Sec-Fetch-Site) is refused with 403, whatever
	// its method, as the MCP transport specification requires against DNS
	// rebinding; requests without those headers (clients that are not
	// browsers) and same-origin ones are served. oncely mcp adds
	// --allow-origin.
	AllowedOrigins []string `json:"allowedOrigins,omitempty"`
	// Auth says how clients authenticate; without it every client that
	// reaches the port is served (oncely mcp refuses to listen off
	// loopback without it, unless --trusted-network says so).
	Auth AuthConfig `json:"auth,omitzero"`
}

// AuthConfig says which credentials the HTTP transport accepts: a
// request without a valid one is answered 401 with a WWW-Authenticate
// header (RFC 6750, with the protected-resource metadata's URL when OAuth
// is set). A static bearer token (Options.Token: oncely mcp reads it from
// the environment variable TokenEnv or from TokenFile, never from a flag
// or this file), OAuth 2.1 access tokens (OAuth), or either.
type AuthConfig struct {
	// TokenFile is a file whose content (trimmed) is the bearer token
	// clients send (Authorization: Bearer TOKEN). oncely mcp reads it;
	// --token-file overrides it.
	TokenFile string `json:"tokenFile,omitempty"`
	// OAuth makes the gateway an OAuth 2.1 resource server, as the MCP
	// authorization specification describes.
	OAuth *OAuthConfig `json:"oauth,omitempty"`
}

// OAuthConfig makes the gateway an OAuth 2.1 resource server: it accepts
// access tokens that are JWTs signed by a key of the issuer's JWKS, issued
// by Issuer, for Resource (the aud claim), not expired, with the Scopes,
// and serves the protected-resource metadata (RFC 9728) at
// /.well-known/oauth-protected-resource (and at that path followed by the
// resource's path), naming Issuer as the authorization server.
type OAuthConfig struct {
	// Issuer is the authorization server's issuer identifier (https, or
	// http on loopback). Required.
	Issuer string `json:"issuer"`
	// Resource is the gateway's canonical URL as clients reach it
	// ("https://mcp.example.com/mcp"): tokens must name it in aud (RFC
	// 8707). Required.
	Resource string `json:"resource"`
	// JWKSURL is where the issuer's signing keys are (default: the
	// jwks_uri of the issuer's metadata, RFC 8414 or OpenID Connect
	// discovery).
	JWKSURL string `json:"jwksUrl,omitempty"`
	// Scopes every token must carry (the scope claim).
	Scopes []string `json:"scopes,omitempty"`
}

// TokenEnv is the environment variable from which oncely mcp takes the
// bearer token of its HTTP transport (Options.Token).
const TokenEnv = "ONCELY_MCP_TOKEN"

// ProtectedResourcePath is where the protected-resource metadata is served.
const ProtectedResourcePath = "/.well-known/oauth-protected-resource"

// Authenticated reports whether Handler requires credentials: a bearer
// token (opts.Token) or OAuth.
func (g *Gateway) Authenticated() bool { return g.token != "" || g.cfg.HTTP.Auth.OAuth != nil }

// secure wraps the MCP handler with the origin check and authentication.
func (g *Gateway) secure(h http.Handler) http.Handler {
	h = g.authenticate(h)
	return g.checkOrigin(h)
}

// checkOrigin refuses cross-origin browser requests of every method: the
// standard library's CrossOriginProtection, which lets GET, HEAD and
// OPTIONS through (safe methods, for a web page), is asked about each
// request as if it were a POST, since an MCP GET opens a stream.
func (g *Gateway) checkOrigin(next http.Handler) http.Handler {
	cop := http.NewCrossOriginProtection()
	for _, o := range g.cfg.HTTP.AllowedOrigins {
		_ = cop.AddTrustedOrigin(o) // Validate checked them
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, ProtectedResourcePath) {
			// Public metadata, served to any origin (RFC 9728 §3).
			next.ServeHTTP(w, r)
			return
		}
		asPost := *r
		asPost.Method = http.MethodPost
		if err := cop.Check(&asPost); err != nil {
			g.log.Warn("mcpgateway: refused a cross-origin request", "origin", r.Header.Get("Origin"), "host", r.Host)
			http.Error(w, "Forbidden: cross-origin request (origin "+fmt.Sprintf("%q", r.Header.Get("Origin"))+" is not allowed; see http.allowedOrigins)", http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// authenticate requires a bearer token or an OAuth access token, when
// either is configured, and serves the protected-resource metadata.
func (g *Gateway) authenticate(next http.Handler) http.Handler {
	oc := g.cfg.HTTP.Auth.OAuth
	if g.token == "" && oc == nil {
		return next
	}
	// A static token carries no expiry (it is revoked by changing it);
	// jwtVerifier requires one of every JWT.
	opts := &auth.RequireBearerTokenOptions{AllowMissingExpiration: true}
	mux := http.NewServeMux()
	var v *jwtVerifier
	if oc != nil {
		v = &jwtVerifier{cfg: *oc, client: &http.Client{Timeout: 10 * time.Second}}
		u, _ := url.Parse(oc.Resource) // Validate checked it
		opts.ResourceMetadataURL = (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: ProtectedResourcePath + strings.TrimSuffix(u.Path, "/")}).String()
		opts.Scopes = oc.Scopes
		meta := auth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{
			Resource:               oc.Resource,
			AuthorizationServers:   []string{oc.Issuer},
			ScopesSupported:        oc.Scopes,
			BearerMethodsSupported: []string{"header"},
			ResourceName:           g.cfg.Name,
		})
		mux.Handle(ProtectedResourcePath, meta)
		if p := strings.TrimSuffix(u.Path, "/"); p != "" {
			mux.Handle(ProtectedResourcePath+p, meta)
		}
	}
	verify := func(ctx context.Context, token string, r *http.Request) (*auth.TokenInfo, error) {
		if g.token != "" && subtle.ConstantTimeCompare([]byte(token), []byte(g.token)) == 1 {
			return &auth.TokenInfo{Scopes: oc.scopes(), UserID: "bearer-token"}, nil
		}
		if v == nil {
			return nil, fmt.Errorf("%w: not the configured bearer token", auth.ErrInvalidToken)
		}
		return v.verify(ctx, token)
	}
	guarded := auth.RequireBearerToken(verify, opts)(next)
	mux.Handle("/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		guarded.ServeHTTP(&challenge{ResponseWriter: w}, r)
	}))
	return mux
}

// challenge adds the bare Bearer challenge RFC 6750 requires to a 401
// that carries none (a gateway with a bearer token and no OAuth).
type challenge struct{ http.ResponseWriter }

func (c *challenge) WriteHeader(status int) {
	if status == http.StatusUnauthorized && c.Header().Get("WWW-Authenticate") == "" {
		c.Header().Set("WWW-Authenticate", "Bearer")
	}
	c.ResponseWriter.WriteHeader(status)
}

func (c *challenge) Flush() {
	if f, ok := c.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (c *challenge) Unwrap() http.ResponseWriter { return c.ResponseWriter }

func (oc *OAuthConfig) scopes() []string {
	if oc == nil {
		return nil
	}
	return oc.Scopes
}

// jwtVerifier validates OAuth access tokens that are JWTs: the signature
// with a key of the issuer's JWKS, the issuer, the audience (the
// resource), the expiry and the not-before time.
type jwtVerifier struct {
	cfg    OAuthConfig
	client *http.Client

	mu      sync.Mutex
	keys    map[string]any // by kid
	fetched time.Time
}

// verify is an auth.TokenVerifier.
func (v *jwtVerifier) verify(ctx context.Context, token string) (*auth.TokenInfo, error) {
	var claims struct {
		jwt.RegisteredClaims
		Scope string `json:"scope"`
		Scp   any    `json:"scp"`
	}
	_, err := jwt.ParseWithClaims(token, &claims, func(t *jwt.Token) (any, error) {
		kid, _ := t.Header["kid"].(string)
		return v.key(ctx, kid)
	},
		jwt.WithValidMethods([]string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}),
		jwt.WithIssuer(v.cfg.Issuer), jwt.WithExpirationRequired(), jwt.WithLeeway(30*time.Second))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", auth.ErrInvalidToken, err)
	}
	if !oauthex.MatchesResource(claims.Audience, v.cfg.Resource) {
		return nil, fmt.Errorf("%w: the token's audience %q does not name this resource %q", auth.ErrInvalidToken, []string(claims.Audience), v.cfg.Resource)
	}
	scopes := strings.Fields(claims.Scope)
	switch s := claims.Scp.(type) {
	case string:
		scopes = append(scopes, strings.Fields(s)...)
	case []any:
		for _, x := range s {
			if str, ok := x.(string); ok {
				scopes = append(scopes, str)
			}
		}
	}
	return &auth.TokenInfo{Scopes: scopes, Expiration: claims.ExpiresAt.Time, UserID: claims.Subject}, nil
}

// key returns the issuer's key kid (any key when kid is empty and the set
// has one), fetching the JWKS when it does not know it (at most every 10
// seconds: a token naming an unknown kid must not make the gateway hammer
// the issuer).
func (v *jwtVerifier) key(ctx context.Context, kid string) (any, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if k := pick(v.keys, kid); k != nil {
		return k, nil
	}
	if !v.fetched.IsZero() && time.Since(v.fetched) < 10*time.Second {
		return nil, fmt.Errorf("no key %q in the issuer's JWKS", kid)
	}
	keys, err := v.fetch(ctx)
	v.fetched = time.Now()
	if err != nil {
		return nil, fmt.Errorf("fetching the issuer's JWKS: %w", err)
	}
	v.keys = keys
	if k := pick(keys, kid); k != nil {
		return k, nil
	}
	return nil, fmt.Errorf("no key %q in the issuer's JWKS", kid)
}

func pick(keys map[string]any, kid string) any {
	if k, ok := keys[kid]; ok {
		return k
	}
	if kid == "" && len(keys) == 1 {
		for _, k := range keys {
			return k
		}
	}
	return nil
}

// fetch reads the JWKS, discovering its URL from the issuer's metadata
// when it is not configured.
func (v *jwtVerifier) fetch(ctx context.Context) (map[string]any, error) {
	jwksURL := v.cfg.JWKSURL
	if jwksURL == "" {
		u, err := v.discover(ctx)
		if err != nil {
			return nil, err
		}
		jwksURL = u
	}
	var set struct {
		Keys []jwk `json:"keys"`
	}
	if err := getJSON(ctx, v.client, jwksURL, &set); err != nil {
		return nil, err
	}
	keys := map[string]any{}
	for _, k := range set.Keys {
		if k.Use != "" && k.Use != "sig" {
			continue
		}
		if pub, err := k.public(); err == nil {
			keys[k.Kid] = pub
		}
	}
	return keys, nil
}

// discover reads the jwks_uri of the issuer's metadata: RFC 8414's
// well-known URL, then OpenID Connect's.
func (v *jwtVerifier) discover(ctx context.Context) (string, error) {
	u, err := url.Parse(v.cfg.Issuer)
	if err != nil {
		return "", err
	}
	path := strings.TrimSuffix(u.Path, "/")
	candidates := []string{
		(&url.URL{Scheme: u.Scheme, Host: u.Host, Path: "/.well-known/oauth-authorization-server" + path}).String(),
		strings.TrimSuffix(v.cfg.Issuer, "/") + "/.well-known/openid-configuration",
	}
	var errs []error
	for _, c := range candidates {
		var meta struct {
			Issuer  string `json:"issuer"`
			JWKSURI string `json:"jwks_uri"`
		}
		if err := getJSON(ctx, v.client, c, &meta); err != nil {
			errs = append(errs, err)
			continue
		}
		if strings.TrimSuffix(meta.Issuer, "/") != strings.TrimSuffix(v.cfg.Issuer, "/") {
			return "", fmt.Errorf("%s names the issuer %q, not %q", c, meta.Issuer, v.cfg.Issuer)
		}
		if meta.JWKSURI == "" {
			return "", fmt.Errorf("%s names no jwks_uri", c)
		}
		return meta.JWKSURI, nil
	}
	return "", errors.Join(errs...)
}

func getJSON(ctx context.Context, c *http.Client, u string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	return json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(v)
}

// jwk is one key of a JWKS (RFC 7517): RSA, EC (P-256, P-384, P-521) or
// OKP (Ed25519).
type jwk struct {
	Kty string `json:"kty"`
	Kid string `json:"kid"`
	Use string `json:"use"`
	N   string `json:"n"`
	E   string `json:"e"`
	Crv string `json:"crv"`
	X   string `json:"x"`
	Y   string `json:"y"`
}

func (k jwk) public() (any, error) {
	b := func(s string) ([]byte, error) { return base64.RawURLEncoding.DecodeString(s) }
	switch k.Kty {
	case "RSA":
		n, err1 := b(k.N)
		e, err2 := b(k.E)
		if err := errors.Join(err1, err2); err != nil || len(n) == 0 || len(e) == 0 || len(e) > 4 {
			return nil, fmt.Errorf("bad RSA key %q", k.Kid)
		}
		return &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: int(new(big.Int).SetBytes(e).Int64())}, nil
	case "EC":
		var curve elliptic.Curve
		switch k.Crv {
		case "P-256":
			curve = elliptic.P256()
		case "P-384":
			curve = elliptic.P384()
		case "P-521":
			curve = elliptic.P521()
		default:
			return nil, fmt.Errorf("unknown curve %q", k.Crv)
		}
		x, err1 := b(k.X)
		y, err2 := b(k.Y)
		if err := errors.Join(err1, err2); err != nil {
			return nil, err
		}
		pub := &ecdsa.PublicKey{Curve: curve, X: new(big.Int).SetBytes(x), Y: new(big.Int).SetBytes(y)}
		if !curve.IsOnCurve(pub.X, pub.Y) { //nolint:staticcheck // the check a JWK needs
			return nil, fmt.Errorf("EC key %q is not on its curve", k.Kid)
		}
		return pub, nil
	case "OKP":
		x, err := b(k.X)
		if err != nil || k.Crv != "Ed25519" || len(x) != ed25519.PublicKeySize {
			return nil, fmt.Errorf("bad OKP key %q", k.Kid)
		}
		return ed25519.PublicKey(x), nil
	}
	return nil, fmt.Errorf("unknown key type %q", k.Kty)
}
