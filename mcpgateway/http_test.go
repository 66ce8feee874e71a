package mcpgateway_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/oncely/oncely/internal/tooling"
)

// transferPlan is one transfer through the TypeScript client, over HTTP.
func transferPlan(headers map[string]string, account int) map[string]any {
	return map[string]any{"headers": headers, "steps": []any{
		tsCall("transfer", map[string]any{"account": account, "amount": "5"}, nil),
	}}
}

// tsConnectError is what client.mjs prints when it cannot connect.
type tsConnectError struct {
	ConnectError *struct {
		Code    any    `json:"code"`
		Message string `json:"message"`
	} `json:"connectError"`
}

func connectError(t *testing.T, lines []json.RawMessage) string {
	t.Helper()
	if len(lines) != 1 {
		t.Fatalf("the client printed %d lines: %s", len(lines), lines)
	}
	var ce tsConnectError
	if err := json.Unmarshal(lines[0], &ce); err != nil || ce.ConnectError == nil {
		return ""
	}
	return fmt.Sprintf("%v: %s", ce.ConnectError.Code, ce.ConnectError.Message)
}

// The HTTP transport refuses a browser's cross-origin requests (the MCP
// transport specification's Origin validation, against DNS rebinding):
// the TypeScript client sending Origin: http://evil.example does not
// open a session and nothing is transferred, while the same client
// without an Origin, with the gateway's own origin, or with an origin of
// --allow-origin is served. A GET (the stream a session opens) from
// another origin is refused too. Before, the evil origin's call ran.
func TestOriginValidated(t *testing.T) {
	t.Parallel()
	s := newSetup(t, map[string]any{"transfer": map[string]any{"identity": []any{map[string]any{"path": "account"}}}}, nil)
	url := s.http(t, nil, "--run-id", "origin", "--allow-origin", "https://app.example.com")
	own := strings.TrimSuffix(strings.TrimPrefix(url, "http://"), "/")
	own = "http://" + strings.SplitN(own, "/", 2)[0]

	lines := runTS(t, transferPlan(map[string]string{"Origin": "http://evil.example"}, 1), "--url", url)
	if msg := connectError(t, lines); !strings.HasPrefix(msg, "403: ") {
		t.Fatalf("Origin: http://evil.example: %s; want the connection refused with 403", lines)
	}
	if j := journal(t, s.dir); countPrefix(j, "transfer 1 ") != 0 {
		t.Fatalf("a cross-origin call ran: %q", j)
	}
	for i, h := range []map[string]string{nil, {"Origin": own}, {"Origin": "https://app.example.com"}} {
		res := decodeTS(t, runTS(t, transferPlan(h, 10+i), "--url", url))
		if len(res) != 1 || res[0].outcome() != "executed" {
			t.Fatalf("headers %v: %+v", h, res)
		}
	}
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("Origin", "http://evil.example")
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("a cross-origin GET: %s, want 403", resp.Status)
	}
	if j := journal(t, s.dir); countPrefix(j, "transfer ") != 3 {
		t.Fatalf("journal: %q", j)
	}
}

// freeAddr returns a loopback address no one listens on at the moment.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// startFails runs oncely mcp with args and env, which must exit with an
// error; it returns what it wrote on stderr.
func (s *setup) startFails(t *testing.T, environ []string, extra ...string) string {
	t.Helper()
	cmd := exec.Command(oncelyBinary(t), s.args(extra...)...)
	cmd.Env = environ
	stderr := &tooling.Buffer{Max: 1 << 20}
	cmd.Stderr = stderr
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatalf("oncely %s started:\n%s", extra, stderr)
		}
	case <-time.After(time.Minute):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("oncely %s did not refuse to start:\n%s", extra, stderr)
	}
	return stderr.String()
}

// Off loopback, oncely mcp refuses to listen without authentication
// unless --trusted-network says so (and then warns); with a bearer token
// from ONCELY_MCP_TOKEN or --token-file, the TypeScript client is served
// only with the token, and --help shows no token. Before, --http 0.0.0.0
// served any peer and logged nothing.
func TestBearerToken(t *testing.T) {
	t.Parallel()
	s := newSetup(t, map[string]any{"transfer": map[string]any{"identity": []any{map[string]any{"path": "account"}}}}, nil)
	msg := s.startFails(t, env(t), "--http", "0.0.0.0:0")
	if !strings.Contains(msg, "without authentication") || !strings.Contains(msg, "ONCELY_MCP_TOKEN") || !strings.Contains(msg, "--trusted-network") {
		t.Fatalf("off loopback without authentication: %s", msg)
	}
	_, stderr := s.httpLog(t, env(t), "--http", "0.0.0.0:0", "--trusted-network")
	waitFor(t, "the warning", func() bool { return strings.Contains(stderr.String(), "without authentication (--trusted-network)") })

	const secret = "s3cret-token-of-the-test"
	for _, how := range []string{"env", "file"} {
		t.Run(how, func(t *testing.T) {
			environ, extra := env(t, "ONCELY_MCP_TOKEN="+secret), []string{"--run-id", "token-" + how}
			if how == "file" {
				f := filepath.Join(t.TempDir(), "token")
				if err := os.WriteFile(f, []byte(secret+"\n"), 0o600); err != nil {
					t.Fatal(err)
				}
				environ, extra = env(t), append(extra, "--token-file", f)
			}
			url, _ := s.httpLog(t, environ, append(extra, "--http", "0.0.0.0:0")...)
			url = strings.NewReplacer("0.0.0.0", "127.0.0.1", "[::]", "127.0.0.1").Replace(url)
			account := map[string]int{"env": 100, "file": 200}[how]
			for _, h := range []map[string]string{nil, {"Authorization": "Bearer wrong"}} {
				if msg := connectError(t, runTS(t, transferPlan(h, account), "--url", url)); msg == "" {
					t.Fatalf("headers %v: connected", h)
				}
			}
			lines := runTS(t, transferPlan(map[string]string{"Authorization": "Bearer " + secret}, account), "--url", url)
			if res := decodeTS(t, lines); len(res) != 1 || res[0].outcome() != "executed" {
				t.Fatalf("with the token: %s", lines)
			}
			if j := journal(t, s.dir); countPrefix(j, fmt.Sprintf("transfer %d ", account)) != 1 {
				t.Fatalf("journal: %q", j)
			}
		})
	}
	url, _ := s.httpLog(t, env(t, "ONCELY_MCP_TOKEN="+secret), "--run-id", "challenge")
	resp, err := http.Post(url, "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") != "Bearer" {
		t.Errorf("without the token: %s, WWW-Authenticate %q", resp.Status, resp.Header.Get("WWW-Authenticate"))
	}
	help, err := exec.Command(oncelyBinary(t), "mcp", "--help").CombinedOutput()
	if err != nil || strings.Contains(string(help), secret) || !strings.Contains(string(help), "ONCELY_MCP_TOKEN") {
		t.Errorf("oncely mcp --help (%v):\n%s", err, help)
	}
}

// httpLog is http, with what oncely mcp writes on stderr; extra may set
// --http again (the last one counts).
func (s *setup) httpLog(t *testing.T, environ []string, extra ...string) (string, *tooling.Buffer) {
	t.Helper()
	cmd := exec.Command(oncelyBinary(t), s.args(append([]string{"--http", "127.0.0.1:0"}, extra...)...)...)
	cmd.Env = environ
	stderr := &tooling.Buffer{Max: 1 << 20}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
	})
	var url string
	waitFor(t, "oncely mcp to listen", func() bool {
		_, rest, ok := strings.Cut(stderr.String(), "serving streamable HTTP on ")
		if ok {
			url, _, ok = strings.Cut(rest, " ")
		}
		return ok
	})
	return url, stderr
}

// issuer is a small OAuth 2.1 authorization server on 127.0.0.1: RFC 8414
// metadata, a JWKS, and a token endpoint for the client-credentials grant
// that issues JWT access tokens for the resource the client asks for.
type issuer struct {
	srv    *httptest.Server
	key    *ecdsa.PrivateKey
	issued atomic.Int64
}

func newIssuer(t *testing.T) *issuer {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	is := &issuer{key: key}
	mux := http.NewServeMux()
	is.srv = httptest.NewServer(mux)
	t.Cleanup(is.srv.Close)
	b64 := func(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }
	mux.HandleFunc("/.well-known/oauth-authorization-server", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, map[string]any{
			"issuer": is.srv.URL, "authorization_endpoint": is.srv.URL + "/authorize", "token_endpoint": is.srv.URL + "/token",
			"jwks_uri": is.srv.URL + "/jwks", "response_types_supported": []string{"code"},
			"grant_types_supported":            []string{"client_credentials"},
			"code_challenge_methods_supported": []string{"S256"}, "token_endpoint_auth_methods_supported": []string{"client_secret_basic"},
		})
	})
	mux.HandleFunc("/jwks", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, map[string]any{"keys": []any{map[string]any{
			"kty": "EC", "crv": "P-256", "kid": "k1", "use": "sig", "alg": "ES256",
			"x": b64(key.X.FillBytes(make([]byte, 32))), "y": b64(key.Y.FillBytes(make([]byte, 32))),
		}}})
	})
	mux.HandleFunc("/token", func(w http.ResponseWriter, r *http.Request) {
		id, secret, ok := r.BasicAuth()
		if err := r.ParseForm(); err != nil || !ok || id != "agent" || secret != "agent-secret" || r.Form.Get("grant_type") != "client_credentials" {
			w.WriteHeader(http.StatusUnauthorized)
			writeJSON(w, map[string]any{"error": "invalid_client"})
			return
		}
		is.issued.Add(1)
		writeJSON(w, map[string]any{"access_token": is.token(t, is.srv.URL, r.Form.Get("resource"), time.Hour, "mcp:tools"), "token_type": "Bearer", "expires_in": 3600})
	})
	return is
}

// token signs an access token.
func (is *issuer) token(t *testing.T, iss, aud string, ttl time.Duration, scope string) string {
	tok := jwt.NewWithClaims(jwt.SigningMethodES256, jwt.MapClaims{
		"iss": iss, "aud": aud, "sub": "agent", "scope": scope,
		"exp": time.Now().Add(ttl).Unix(), "iat": time.Now().Unix(),
	})
	tok.Header["kid"] = "k1"
	s, err := tok.SignedString(is.key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// The gateway as an OAuth 2.1 resource server: the TypeScript client with
// the SDK's client-credentials provider gets a 401 whose WWW-Authenticate
// names the protected-resource metadata, reads it, takes a token from the
// issuer it names for the gateway's resource, and its call runs; tokens
// of another issuer, for another audience, expired, or signed by another
// key are refused and run nothing. Before, the gateway had no
// authentication.
func TestOAuthResourceServer(t *testing.T) {
	t.Parallel()
	is := newIssuer(t)
	addr := freeAddr(t)
	resource := "http://" + addr + "/mcp"
	s := newSetup(t, map[string]any{"transfer": map[string]any{"identity": []any{map[string]any{"path": "account"}}}},
		map[string]any{"http": map[string]any{"auth": map[string]any{"oauth": map[string]any{
			"issuer": is.srv.URL, "resource": resource, "scopes": []string{"mcp:tools"}}}}})
	url, _ := s.httpLog(t, env(t), "--run-id", "oauth", "--http", addr)
	url = strings.TrimSuffix(url, "/") + "/mcp"

	resp, err := http.Post(url, "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	want := `Bearer resource_metadata="http://` + addr + `/.well-known/oauth-protected-resource/mcp", scope="mcp:tools"`
	if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") != want {
		t.Fatalf("without a token: %s, WWW-Authenticate %q; want 401 and %q", resp.Status, resp.Header.Get("WWW-Authenticate"), want)
	}
	for _, p := range []string{"/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"} {
		req, _ := http.NewRequest(http.MethodGet, "http://"+addr+p, nil)
		req.Header.Set("Origin", "https://browser-client.example") // public: any origin
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var meta map[string]any
		err = json.NewDecoder(resp.Body).Decode(&meta)
		resp.Body.Close()
		if err != nil || meta["resource"] != resource || fmt.Sprint(meta["authorization_servers"]) != "["+is.srv.URL+"]" {
			t.Fatalf("%s: %v %v", p, meta, err)
		}
	}

	plan := transferPlan(nil, 1)
	plan["oauth"] = map[string]any{"clientId": "agent", "clientSecret": "agent-secret", "scope": "mcp:tools"}
	res := decodeTS(t, runTS(t, plan, "--url", url))
	if len(res) != 1 || res[0].outcome() != "executed" || is.issued.Load() != 1 {
		t.Fatalf("with the client-credentials provider: %+v (tokens issued: %d)", res, is.issued.Load())
	}

	other, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	forged := &issuer{key: other}
	for name, tok := range map[string]string{
		"another issuer":   is.token(t, "http://127.0.0.1:1", resource, time.Hour, "mcp:tools"),
		"another audience": is.token(t, is.srv.URL, "http://127.0.0.1:1/mcp", time.Hour, "mcp:tools"),
		"expired":          is.token(t, is.srv.URL, resource, -time.Hour, "mcp:tools"),
		"another key":      forged.token(t, is.srv.URL, resource, time.Hour, "mcp:tools"),
		"no scope":         is.token(t, is.srv.URL, resource, time.Hour, "other"),
	} {
		lines := runTS(t, transferPlan(map[string]string{"Authorization": "Bearer " + tok}, 2), "--url", url)
		if msg := connectError(t, lines); msg == "" {
			t.Errorf("%s: connected: %s", name, lines)
		}
	}
	good := is.token(t, is.srv.URL, resource, time.Hour, "mcp:tools")
	if res := decodeTS(t, runTS(t, transferPlan(map[string]string{"Authorization": "Bearer " + good}, 3), "--url", url)); len(res) != 1 || res[0].outcome() != "executed" {
		t.Fatalf("a good token in the header: %+v", res)
	}
	if j := journal(t, s.dir); countPrefix(j, "transfer 1 ") != 1 || countPrefix(j, "transfer 2 ") != 0 || countPrefix(j, "transfer 3 ") != 1 {
		t.Fatalf("journal: %q", j)
	}
}
