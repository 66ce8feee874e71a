package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/oncely/oncely/clock"
	"github.com/oncely/oncely/fakes"
	"github.com/oncely/oncely/fakes/crmfake"
	"github.com/oncely/oncely/fakes/fault"
	"github.com/oncely/oncely/fakes/githubfake"
	"github.com/oncely/oncely/fakes/hubspotfake"
	"github.com/oncely/oncely/fakes/keyheaderfake"
	"github.com/oncely/oncely/fakes/mailfake"
	"github.com/oncely/oncely/fakes/resendfake"
	"github.com/oncely/oncely/fakes/slackfake"
	"github.com/oncely/oncely/fakes/stripefake"
)

// The fake providers, in the order they are printed.
var fakeNames = []string{"stripe", "mail", "crm", "keyheader", "hubspot", "slack", "resend", "github"}

// controlPrefix is where each fake serves its journal and fault log, next
// to its API: GET /_oncely/journal, GET /_oncely/faults, POST /_oncely/reset.
const controlPrefix = "/_oncely/"

// fakeHandler is what every fake provider handler offers.
type fakeHandler interface {
	http.Handler
	Journal() []fakes.Effect
	Reset()
}

// fakeServer is one fake provider listening on loopback.
type fakeServer struct {
	name    string
	handler fakeHandler
	faults  *fault.Injector
	url     string
	srv     *http.Server
	done    chan struct{}
}

// fakeConfig configures a set of fakes.
type fakeConfig struct {
	seed  int64
	clock clock.Clock // nil: the wall clock
	// indexLag delays search visibility on the fake Stripe and mail, and
	// history visibility on the fake Slack; search on the fake GitHub.
	indexLag time.Duration
	ports    map[string]int // fixed ports by fake name; 0 or missing: a free port
	// conns, when set, sees every server connection end.
	conns *connTracker
	// limits are the fakes' rate limits (zero: none).
	limits fakeLimits
}

// fakeLimits are the rate limits of the fakes that model them.
type fakeLimits struct {
	githubCore, githubSearch int // per hour, per minute
	hubspot                  int // per hubspotWindow
	hubspotWindow            time.Duration
	resend                   int // per second and API key
	slackPosts, slackHistory int // per second and channel, per minute
}

// fakeSet is the fake providers.
type fakeSet struct {
	servers map[string]*fakeServer
}

// startFakes starts every fake on 127.0.0.1.
func startFakes(cfg fakeConfig) (*fakeSet, error) {
	set := &fakeSet{servers: map[string]*fakeServer{}}
	for _, name := range fakeNames {
		var h fakeHandler
		var faults *fault.Injector
		switch name {
		case "stripe":
			s := stripefake.NewHandler(&stripefake.Config{Seed: cfg.seed, Clock: cfg.clock, SearchLag: cfg.indexLag})
			h, faults = s, s.Faults
		case "mail":
			s := mailfake.NewHandler(&mailfake.Config{Seed: cfg.seed, Clock: cfg.clock, IndexLag: cfg.indexLag})
			h, faults = s, s.Faults
		case "crm":
			s := crmfake.NewHandler(&crmfake.Config{Seed: cfg.seed, Clock: cfg.clock})
			h, faults = s, s.Faults
		case "keyheader":
			s := keyheaderfake.NewHandler(&keyheaderfake.Config{Seed: cfg.seed, Clock: cfg.clock})
			h, faults = s, s.Faults
		case "hubspot":
			s := hubspotfake.NewHandler(&hubspotfake.Config{Seed: cfg.seed, Clock: cfg.clock, RateLimit: cfg.limits.hubspot, RateWindow: cfg.limits.hubspotWindow})
			h, faults = s, s.Faults
		case "slack":
			s := slackfake.NewHandler(&slackfake.Config{Seed: cfg.seed, Clock: cfg.clock, HistoryLag: cfg.indexLag,
				PostsPerSecond: cfg.limits.slackPosts, HistoryPerMinute: cfg.limits.slackHistory})
			h, faults = s, s.Faults
		case "resend":
			s := resendfake.NewHandler(&resendfake.Config{Seed: cfg.seed, Clock: cfg.clock, RateLimit: cfg.limits.resend})
			h, faults = s, s.Faults
		case "github":
			s := githubfake.NewHandler(&githubfake.Config{Seed: cfg.seed, Clock: cfg.clock, IndexLag: cfg.indexLag,
				RateLimit: cfg.limits.githubCore, SearchRateLimit: cfg.limits.githubSearch})
			h, faults = s, s.Faults
		}
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(cfg.ports[name])))
		if err != nil {
			set.close()
			return nil, fmt.Errorf("fake %s: %w", name, err)
		}
		fs := &fakeServer{name: name, handler: h, faults: faults, url: "http://" + ln.Addr().String(), done: make(chan struct{})}
		fs.srv = &http.Server{Handler: fs.mux(), ReadHeaderTimeout: 10 * time.Second}
		if cfg.conns != nil {
			fs.srv.ConnState = cfg.conns.serverState
		}
		set.servers[name] = fs
		go func() {
			defer close(fs.done)
			_ = fs.srv.Serve(ln)
		}()
	}
	return set, nil
}

// mux serves the fake's API and its control endpoints.
func (fs *fakeServer) mux() http.Handler {
	m := http.NewServeMux()
	m.HandleFunc("GET "+controlPrefix+"journal", func(w http.ResponseWriter, _ *http.Request) {
		effects := fs.handler.Journal()
		out := make([]effectJSON, len(effects))
		for i, e := range effects {
			out[i] = effectJSON{Seq: e.Seq, Kind: e.Kind, ID: e.ID, Key: e.Key, Params: e.Params, At: e.At}
		}
		serveJSON(w, out)
	})
	m.HandleFunc("GET "+controlPrefix+"faults", func(w http.ResponseWriter, _ *http.Request) {
		applied := fs.faults.Log()
		out := make([]string, len(applied))
		for i, a := range applied {
			out[i] = a.String()
		}
		serveJSON(w, out)
	})
	m.HandleFunc("POST "+controlPrefix+"reset", func(w http.ResponseWriter, _ *http.Request) {
		fs.handler.Reset()
		w.WriteHeader(http.StatusNoContent)
	})
	m.Handle("/", fs.handler)
	return m
}

// effectJSON is a journal entry as GET /_oncely/journal serves it.
type effectJSON struct {
	Seq    int               `json:"seq"`
	Kind   string            `json:"kind"`
	ID     string            `json:"id"`
	Key    string            `json:"key"`
	Params map[string]string `json:"params"`
	At     time.Time         `json:"at"`
}

func serveJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// shutdown stops accepting and waits for the requests being served, up
// to ctx.
func (s *fakeSet) shutdown(ctx context.Context) error {
	var errs []error
	for _, fs := range s.servers {
		if err := fs.srv.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("fake %s: %w", fs.name, err))
		}
		<-fs.done
	}
	return errors.Join(errs...)
}

// close stops the fakes at once.
func (s *fakeSet) close() {
	for _, fs := range s.servers {
		_ = fs.srv.Close()
		<-fs.done
	}
}

// connTracker knows whether a request of a client may still be executing
// at the fakes: every connection the client dialed must have been closed
// on the server's side (or hijacked, which is how a fake drops one). A
// client that uses it dials without keep-alives, so that a connection
// carries one request.
//
// A fake commits a delayed request when it notices that the client went
// away; quiet waits for that, so a reconciliation never mistakes a
// request still on its way for one that never happened, however slow the
// machine.
type connTracker struct {
	mu      sync.Mutex
	open    map[string]int // by the client's local address
	changed chan struct{}  // closed and replaced on every change
}

func newConnTracker() *connTracker {
	return &connTracker{open: map[string]int{}, changed: make(chan struct{})}
}

// change applies fn to the open connections and wakes the waiters.
func (t *connTracker) change(fn func(open map[string]int)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	fn(t.open)
	close(t.changed)
	t.changed = make(chan struct{})
}

// serverState is an http.Server ConnState hook. Connections of other
// clients (kept alive, closed whenever) are not counted.
func (t *connTracker) serverState(c net.Conn, s http.ConnState) {
	if s != http.StateClosed && s != http.StateHijacked {
		return
	}
	addr := c.RemoteAddr().String()
	t.change(func(open map[string]int) {
		if open[addr]--; open[addr] <= 0 {
			delete(open, addr)
		}
	})
}

// dial is the client's DialContext. The connection is counted before
// any request can be written on it, so its server side ends after.
func (t *connTracker) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	local := c.LocalAddr().String()
	t.change(func(open map[string]int) { open[local]++ })
	return c, nil
}

// client returns an HTTP client whose connections t tracks.
func (t *connTracker) client() *http.Client {
	return &http.Client{Transport: &http.Transport{DialContext: t.dial, DisableKeepAlives: true}}
}

// quiet returns once no connection is open, or when ctx ends.
func (t *connTracker) quiet(ctx context.Context) error {
	for {
		t.mu.Lock()
		n, ch := len(t.open), t.changed
		t.mu.Unlock()
		if n == 0 {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
