// Package console is an operator console for an oncely ledger, served
// over HTTP as server-rendered HTML: the actions that need attention
// (uncertain ones, and pending ones whose lease ran out), every field of
// one action with the actions an operator takes on it (reconcile now, mark
// done, mark failed), a search, and an overview of outcomes over time.
//
// Every page renders on the server from html/template; the stylesheet and
// the one script (live refresh of the attention list and the overview) are
// embedded in the binary, and no page loads anything from elsewhere.
//
// A resolution goes through ledger.Resolve, so the console refuses exactly
// what the library refuses (a record with a live lease, a failure while a
// request may still commit) and records who resolved it and why. State
// changes are POSTs checked against cross-origin requests and a CSRF token;
// Config.ReadOnly serves none. Config.Token or Config.UserHeader protect a
// console that listens beyond loopback (CheckListen). Pages read the ledger
// a bounded number of records at a time (ledger.Filter with a Limit), from
// the listings the stores index: on SQLite and PostgreSQL every page
// answers in about the same time on a ledger of 10^3 records or 10^6
// (make bench-console; ledgerpg's migration 7 indexes the settled records
// by time). A search by tool or key prefix, and by run on a store without
// an index of runs (ledgerpg without Config.RunIndex), reads records by
// time, a bounded number a page, and says how far it read. The overview's
// replay and reconcile rates come from the counter records executors and
// sweeps write (ledger.CountersRun, client.Config.NoCounters).
package console

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/oncely/oncely/clock"
	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/providers"
)

//go:embed templates/*.html static/*
var assets embed.FS

// Config configures a console. Store is required.
type Config struct {
	// Store is the ledger the console reads and resolves records in.
	Store ledger.Store
	// Adapters maps tool names to the provider adapters that reconcile
	// their records: with one, an action of the tool can be reconciled now
	// from its page, and the attention list says when the reconciler can
	// conclude on its own. Tools without one are settled by hand only.
	Adapters map[string]providers.Adapter
	// Clock tells the time (default: the system clock); it must be the
	// clock of the executors that wrote the records.
	Clock clock.Clock
	// InFlight is how long a provider may still commit a request after
	// its sender stopped sending (default ledger.DefaultInFlight): the
	// bound ledger.Resolve and the reconcilers wait for before a failure.
	InFlight time.Duration
	// ReadOnly serves no action: the pages show records, and every POST is
	// refused.
	ReadOnly bool
	// Token, when set, is required on every request: as the bearer token
	// of an Authorization header, or once as ?token=, after which a
	// cookie carries it.
	Token string
	// UserHeader, when set, names the header in which a reverse proxy in
	// front of the console passes the authenticated user's name (such as
	// X-Forwarded-User or X-Auth-Request-User). A request without it is
	// refused, and resolutions record its value as who resolved them.
	// The header is believed only on requests from TrustedProxies.
	UserHeader string
	// TrustedProxies are the addresses of the reverse proxies whose
	// UserHeader the console believes (default: loopback addresses only,
	// a proxy on the same machine). A request from any other address is
	// refused, whatever it carries: anyone could send the header.
	// CheckListen refuses UserHeader beyond loopback without them.
	TrustedProxies []netip.Prefix
	// User is who resolutions are recorded as made by when UserHeader is
	// not set (default "operator").
	User string
	// Refresh is how often the live parts of the pages refresh
	// (default 5 seconds).
	Refresh time.Duration
}

// Console is the operator console, an http.Handler.
type Console struct {
	cfg    Config
	tmpl   *template.Template
	static http.Handler
	mux    *http.ServeMux
	secret []byte // signs CSRF tokens
	h      http.Handler
}

// ErrConfig: the console cannot serve as configured.
var ErrConfig = errors.New("console: configuration")

// New returns a console for cfg.
func New(cfg Config) (*Console, error) {
	if cfg.Store == nil {
		return nil, fmt.Errorf("%w: a Store is required", ErrConfig)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.System{}
	}
	if cfg.InFlight <= 0 {
		cfg.InFlight = ledger.DefaultInFlight
	}
	if cfg.User == "" {
		cfg.User = "operator"
	}
	if strings.ContainsAny(cfg.User, ":") {
		return nil, fmt.Errorf("%w: user %q contains ':'", ErrConfig, cfg.User)
	}
	if cfg.Refresh <= 0 {
		cfg.Refresh = 5 * time.Second
	}
	if h := cfg.UserHeader; h != "" && (strings.ContainsAny(h, " :\r\n") || http.CanonicalHeaderKey(h) == "Cookie") {
		return nil, fmt.Errorf("%w: %q is not a header name", ErrConfig, h)
	}
	tmpl, err := template.New("").Funcs(funcs).ParseFS(assets, "templates/*.html")
	if err != nil {
		return nil, err
	}
	static, err := fs.Sub(assets, "static")
	if err != nil {
		return nil, err
	}
	c := &Console{cfg: cfg, tmpl: tmpl, static: http.FileServerFS(static), mux: http.NewServeMux(), secret: make([]byte, 32)}
	if _, err := rand.Read(c.secret); err != nil {
		return nil, err
	}
	c.routes()
	cop := http.NewCrossOriginProtection()
	c.h = c.authenticate(cop.Handler(c.mux))
	return c, nil
}

// ServeHTTP serves the console.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) { c.h.ServeHTTP(w, r) }

// CheckListen returns an error when a console configured by cfg must not
// listen on addr (host:port): any address but a loopback one needs
// Config.Token or Config.UserHeader, since anyone who reaches the console
// could otherwise settle records, and Config.UserHeader there needs
// Config.TrustedProxies.
func CheckListen(addr string, cfg *Config) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%w: listen address %q: %v", ErrConfig, addr, err)
	}
	switch {
	case loopback(host):
		return nil
	case cfg.UserHeader != "" && len(cfg.TrustedProxies) == 0:
		return fmt.Errorf("%w: listening on %s, beyond loopback, with the user header %s needs the addresses of the proxies that set it (anyone who reaches the console could send it)", ErrConfig, addr, cfg.UserHeader)
	case cfg.Token != "" || cfg.UserHeader != "":
		return nil
	}
	return fmt.Errorf("%w: listening on %s, beyond loopback, needs a token or a reverse proxy's user header", ErrConfig, addr)
}

// loopback reports whether host names only the local machine.
func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

const tokenCookie = "oncely_console_token"

// authenticate checks the token or the proxy's user header, and, for a
// console without either, that the request names a loopback host (so that
// a page of another site cannot reach it through DNS rebinding).
func (c *Console) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("X-Frame-Options", "DENY")
		w.Header().Set("Referrer-Policy", "no-referrer")
		w.Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
		if c.cfg.UserHeader != "" {
			if !c.fromProxy(r) {
				http.Error(w, "console: requests reach this console only through its proxy, which sets "+c.cfg.UserHeader, http.StatusForbidden)
				return
			}
			if strings.TrimSpace(r.Header.Get(c.cfg.UserHeader)) == "" {
				http.Error(w, "console: the request carries no "+c.cfg.UserHeader+" header from the proxy", http.StatusUnauthorized)
				return
			}
		}
		if c.cfg.Token != "" {
			if q := r.URL.Query().Get("token"); q != "" && r.Method == http.MethodGet {
				if !c.tokenOK(q) {
					http.Error(w, "console: wrong token", http.StatusUnauthorized)
					return
				}
				http.SetCookie(w, &http.Cookie{Name: tokenCookie, Value: q, Path: "/", HttpOnly: true,
					SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
				u := *r.URL
				qs := u.Query()
				qs.Del("token")
				u.RawQuery = qs.Encode()
				http.Redirect(w, r, u.RequestURI(), http.StatusSeeOther)
				return
			}
			tok := ""
			if a, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
				tok = a
			} else if ck, err := r.Cookie(tokenCookie); err == nil {
				tok = ck.Value
			}
			if !c.tokenOK(tok) {
				http.Error(w, "console: a token is required (open the console's URL with ?token=...)", http.StatusUnauthorized)
				return
			}
		}
		if c.cfg.Token == "" && c.cfg.UserHeader == "" {
			host, _, err := net.SplitHostPort(r.Host)
			if err != nil {
				host = r.Host
			}
			if !loopback(strings.Trim(host, "[]")) {
				http.Error(w, "console: without a token the console answers only to a loopback host name", http.StatusForbidden)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// fromProxy reports whether r comes from a trusted proxy's address.
func (c *Console) fromProxy(r *http.Request) bool {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return false
	}
	a := ap.Addr().Unmap()
	if len(c.cfg.TrustedProxies) == 0 {
		return a.IsLoopback()
	}
	for _, p := range c.cfg.TrustedProxies {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

func (c *Console) tokenOK(tok string) bool {
	a, b := sha256.Sum256([]byte(tok)), sha256.Sum256([]byte(c.cfg.Token))
	return tok != "" && subtle.ConstantTimeCompare(a[:], b[:]) == 1
}

// user returns who makes the request: the proxy's user header, or
// Config.User. Characters a resolution cannot record (':') are replaced.
func (c *Console) user(r *http.Request) string {
	if c.cfg.UserHeader != "" {
		u := strings.TrimSpace(r.Header.Get(c.cfg.UserHeader))
		u = strings.ReplaceAll(u, ":", "_")
		if len(u) > 200 {
			u = u[:200]
		}
		return u
	}
	return c.cfg.User
}

// csrf returns the form token of the user: an HMAC of the user's name under
// the console's secret, which a page of another origin cannot read.
func (c *Console) csrf(r *http.Request) string {
	m := hmac.New(sha256.New, c.secret)
	m.Write([]byte("csrf\x00" + c.user(r)))
	return hex.EncodeToString(m.Sum(nil))
}

// checkCSRF reports whether a POST carries the user's form token.
func (c *Console) checkCSRF(r *http.Request) bool {
	got := r.PostFormValue("csrf")
	want := c.csrf(r)
	return len(got) == len(want) && hmac.Equal([]byte(got), []byte(want))
}

// pathKey escapes a key for a URL path.
func pathKey(k string) string { return url.PathEscape(k) }
