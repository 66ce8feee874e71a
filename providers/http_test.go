package providers

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oncely/oncely"
	"github.com/oncely/oncely/clock"
	"github.com/oncely/oncely/errclass"
)

// testConfig: short backoff, so that no test waits long, and a timeout
// that only a server that never answers reaches, so that a busy machine
// never turns a slow answer into a timeout.
func testConfig() *Config {
	return &Config{
		Timeout:      30 * time.Second, // never reached but by tests of timeouts, which set their own
		MaxRetries:   2,
		RetryWaitMin: time.Millisecond,
		RetryWaitMax: 5 * time.Millisecond,
	}
}

// hangTimeout is the attempt timeout of tests whose server never answers:
// long enough for a loopback connection and request on a busy machine,
// short enough that three attempts take a few seconds.
const hangTimeout = time.Second

// hangConfig is testConfig for a server that never answers.
func hangConfig() *Config {
	c := testConfig()
	c.Timeout = hangTimeout
	return c
}

func post(replay Replay) *Request {
	r := &Request{Method: http.MethodPost, Path: "/v1/things", Body: []byte(`{"a":1}`), ContentType: "application/json", Replay: replay}
	if replay == ReplayKeyed {
		r.Key, r.KeyHeader = "key-1", "Idempotency-Key"
	}
	return r
}

func asProviderError(t *testing.T, err error) *ProviderError {
	t.Helper()
	var pe *ProviderError
	if !errors.As(err, &pe) {
		t.Fatalf("error %v (%T) is not a *ProviderError", err, err)
	}
	return pe
}

func wantClass(t *testing.T, err error, want errclass.Class) *ProviderError {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want a %v one", want)
	}
	pe := asProviderError(t, err)
	if got := errclass.Of(fmt.Errorf("tool: %w", err)); got != want {
		t.Fatalf("class %v, want %v (error: %v)", got, want, err)
	}
	return pe
}

// counting serves h and counts the requests that reached it.
func counting(t *testing.T, h http.HandlerFunc) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var n atomic.Int32
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		h(w, r)
	}))
	t.Cleanup(s.Close)
	return s, &n
}

// rawListener accepts connections on 127.0.0.1 and hands each to serve,
// which runs until it returns; the test's end closes everything.
type rawListener struct {
	net.Listener
	accepted atomic.Int32
	mu       sync.Mutex
	conns    []net.Conn
}

func listen(t *testing.T, serve func(i int, c net.Conn, l *rawListener)) *rawListener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := &rawListener{Listener: ln}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			i := int(l.accepted.Add(1))
			l.mu.Lock()
			l.conns = append(l.conns, c)
			l.mu.Unlock()
			go serve(i, c, l)
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		l.mu.Lock()
		defer l.mu.Unlock()
		for _, c := range l.conns {
			c.Close()
		}
	})
	return l
}

func (l *rawListener) url() string { return "http://" + l.Addr().String() }

// readRequest reads one whole HTTP request from c.
func readRequest(c net.Conn) error {
	req, err := http.ReadRequest(bufio.NewReader(c))
	if err != nil {
		return err
	}
	_, err = io.Copy(io.Discard, req.Body)
	return err
}

func closedPortURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr
}

func TestNotSentClosedPort(t *testing.T) {
	t.Parallel()
	for _, replay := range []Replay{ReplayUnsafe, ReplayKeyed} {
		c := NewClient(closedPortURL(t), testConfig())
		_, err := c.Do(context.Background(), post(replay), nil)
		pe := wantClass(t, err, errclass.Definite)
		if pe.Status != 0 || pe.Ambiguous || !pe.Retryable {
			t.Fatalf("replay %v: %+v", replay, pe)
		}
		// Nothing was sent, so even an unkeyed POST may be retried.
		if pe.Attempts != 3 {
			t.Fatalf("replay %v: %d attempts, want 3", replay, pe.Attempts)
		}
		if !strings.Contains(pe.Error(), "not sent") {
			t.Fatalf("message %q", pe.Error())
		}
	}
}

func TestNotSentDNSFailure(t *testing.T) {
	t.Parallel()
	dnsErr := errors.New("resolver unreachable")
	dialer := &net.Dialer{Resolver: &net.Resolver{
		PreferGo: true,
		Dial: func(context.Context, string, string) (net.Conn, error) {
			return nil, dnsErr
		},
	}}
	tr := &http.Transport{DialContext: dialer.DialContext}
	cfg := testConfig()
	cfg.HTTPClient = &http.Client{Transport: tr}
	c := NewClient("http://provider.invalid", cfg)
	_, err := c.Do(context.Background(), post(ReplayUnsafe), nil)
	pe := wantClass(t, err, errclass.Definite)
	var de *net.DNSError
	if !errors.As(err, &de) {
		t.Fatalf("want a *net.DNSError in the chain, got %v", err)
	}
	if pe.Ambiguous || pe.Status != 0 {
		t.Fatalf("%+v", pe)
	}
}

func TestNotSentTLSFailure(t *testing.T) {
	t.Parallel()
	var reached atomic.Int32
	s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { reached.Add(1) }))
	s.Config.ErrorLog = log.New(io.Discard, "", 0) // the handshake failure is expected
	s.StartTLS()
	t.Cleanup(s.Close)
	// A client that does not trust the test server's certificate.
	cfg := testConfig()
	cfg.HTTPClient = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{}}}
	c := NewClient(s.URL, cfg)
	_, err := c.Do(context.Background(), post(ReplayUnsafe), nil)
	pe := wantClass(t, err, errclass.Definite)
	if pe.Ambiguous || reached.Load() != 0 {
		t.Fatalf("ambiguous=%v, reached=%d", pe.Ambiguous, reached.Load())
	}
}

func TestMaybeSentAcceptThenHang(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		replay   Replay
		attempts int
	}{{ReplayUnsafe, 1}, {ReplayKeyed, 3}} {
		l := listen(t, func(int, net.Conn, *rawListener) {}) // never answers
		c := NewClient(l.url(), hangConfig())
		start := time.Now()
		_, err := c.Do(context.Background(), post(tc.replay), nil)
		pe := wantClass(t, err, errclass.Ambiguous)
		if pe.Status != 0 || pe.Attempts != tc.attempts || int(l.accepted.Load()) != tc.attempts {
			t.Fatalf("replay %v: status %d, %d attempts, %d connections; want %d", tc.replay, pe.Status, pe.Attempts, l.accepted.Load(), tc.attempts)
		}
		if el := time.Since(start); el < hangTimeout {
			t.Fatalf("returned after %v, before the attempt timeout", el)
		}
		if !strings.Contains(pe.Error(), "maybe sent") {
			t.Fatalf("message %q", pe.Error())
		}
	}
}

func TestMaybeSentCloseAfterBody(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		replay   Replay
		attempts int
	}{{ReplayUnsafe, 1}, {ReplayKeyed, 3}} {
		var bodies atomic.Int32
		l := listen(t, func(_ int, c net.Conn, _ *rawListener) {
			if readRequest(c) == nil {
				bodies.Add(1)
			}
			c.Close()
		})
		c := NewClient(l.url(), testConfig())
		_, err := c.Do(context.Background(), post(tc.replay), nil)
		pe := wantClass(t, err, errclass.Ambiguous)
		if pe.Attempts != tc.attempts || int(bodies.Load()) != tc.attempts {
			t.Fatalf("replay %v: %d attempts, %d bodies read; want %d", tc.replay, pe.Attempts, bodies.Load(), tc.attempts)
		}
	}
}

// The first attempt may have been processed (it was read, then the
// connection hung); the later ones are refused before being sent. The
// failure stays ambiguous.
func TestMaybeSentIsSticky(t *testing.T) {
	t.Parallel()
	l := listen(t, func(i int, c net.Conn, l *rawListener) {
		if i == 1 {
			readRequest(c)
			l.Close() // from now on: connection refused
		}
	})
	c := NewClient(l.url(), hangConfig())
	_, err := c.Do(context.Background(), post(ReplayKeyed), nil)
	pe := wantClass(t, err, errclass.Ambiguous)
	if pe.Attempts != 3 || l.accepted.Load() != 1 {
		t.Fatalf("%d attempts, %d connections", pe.Attempts, l.accepted.Load())
	}
	var op *net.OpError
	if !errors.As(err, &op) || op.Op != "dial" {
		t.Fatalf("last attempt should be a dial error, got %v", pe.Err)
	}
}

func TestStickyAcrossStatuses(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		first func(w http.ResponseWriter)
		want  errclass.Class
	}{
		{"500 then 400 is ambiguous", func(w http.ResponseWriter) { w.WriteHeader(500) }, errclass.Ambiguous},
		{"429 then 400 is permanent", func(w http.ResponseWriter) {
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(429)
		}, errclass.Permanent},
		{"409 then 400 is permanent", func(w http.ResponseWriter) { w.WriteHeader(409) }, errclass.Permanent},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var n atomic.Int32
			s, _ := counting(t, func(w http.ResponseWriter, r *http.Request) {
				if n.Add(1) == 1 {
					tc.first(w)
					return
				}
				w.WriteHeader(400)
				io.WriteString(w, `{"error":{"type":"invalid_request_error","message":"bad amount","param":"amount"}}`)
			})
			_, err := NewClient(s.URL, testConfig()).Do(context.Background(), post(ReplayKeyed), nil)
			pe := wantClass(t, err, tc.want)
			if pe.Status != 400 || pe.Param != "amount" || pe.Attempts != 2 {
				t.Fatalf("%+v", pe)
			}
		})
	}
}

func TestRetryPolicy(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		method   string
		replay   Replay
		status   int
		header   string // Retry-After
		attempts int32
		class    errclass.Class
	}{
		{"unkeyed POST 500 is sent once", "POST", ReplayUnsafe, 500, "", 1, errclass.Ambiguous},
		{"keyed POST 500 is retried", "POST", ReplayKeyed, 500, "", 3, errclass.Ambiguous},
		{"upsert PUT 502 is retried", "PUT", ReplayUpsert, 502, "", 3, errclass.Ambiguous},
		{"GET 500 is retried", "GET", ReplayUnsafe, 500, "", 3, errclass.Ambiguous},
		{"unkeyed POST 429 is sent once", "POST", ReplayUnsafe, 429, "0", 1, errclass.Definite},
		{"keyed POST 429 is retried", "POST", ReplayKeyed, 429, "0", 3, errclass.Definite},
		{"keyed POST 409 in flight is retried", "POST", ReplayKeyed, 409, "", 3, errclass.Definite},
		{"keyed POST 503 with Retry-After is definite", "POST", ReplayKeyed, 503, "0", 3, errclass.Definite},
		{"keyed POST 503 without Retry-After is ambiguous", "POST", ReplayKeyed, 503, "", 3, errclass.Ambiguous},
		{"keyed POST 400 is not retried", "POST", ReplayKeyed, 400, "", 1, errclass.Permanent},
		{"keyed POST 402 is not retried", "POST", ReplayKeyed, 402, "", 1, errclass.Permanent},
		{"keyed POST 422 is not retried", "POST", ReplayKeyed, 422, "", 1, errclass.Permanent},
		{"keyed POST 501 is permanent", "POST", ReplayKeyed, 501, "", 1, errclass.Permanent},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var keys sync.Map
			s, n := counting(t, func(w http.ResponseWriter, r *http.Request) {
				keys.Store(r.Header.Get("Idempotency-Key"), true)
				if tc.header != "" {
					w.Header().Set("Retry-After", tc.header)
				}
				w.WriteHeader(tc.status)
			})
			r := post(tc.replay)
			r.Method = tc.method
			_, err := NewClient(s.URL, testConfig()).Do(context.Background(), r, nil)
			pe := wantClass(t, err, tc.class)
			if n.Load() != tc.attempts || pe.Attempts != int(tc.attempts) || pe.Status != tc.status {
				t.Fatalf("%d requests, %d attempts, status %d", n.Load(), pe.Attempts, pe.Status)
			}
			count := 0
			keys.Range(func(k, _ any) bool {
				count++
				if k != r.Key {
					t.Errorf("key header %q, want %q", k, r.Key)
				}
				return true
			})
			if count != 1 {
				t.Fatalf("%d distinct keys", count)
			}
		})
	}
}

func TestRetryThenSuccess(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	s, _ := counting(t, func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.Header.Get("Idempotency-Key") != "key-1" || string(body) != `{"a":1}` {
			w.WriteHeader(400) // the key and the whole body must be resent
			return
		}
		if calls.Add(1) == 1 {
			w.WriteHeader(500)
			return
		}
		io.WriteString(w, `{"id":"th_1"}`)
	})
	var out struct{ ID string }
	res, err := NewClient(s.URL, testConfig()).Do(context.Background(), post(ReplayKeyed), &out)
	if err != nil {
		t.Fatal(err)
	}
	if out.ID != "th_1" || res.Attempts != 2 || calls.Load() != 2 || res.Status != 200 {
		t.Fatalf("out %+v, res %+v, %d requests", out, res, calls.Load())
	}
}

func TestRetryAfterHonoured(t *testing.T) {
	t.Parallel()
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	var first atomic.Int64
	var gap atomic.Int64
	s, _ := counting(t, func(w http.ResponseWriter, r *http.Request) {
		now := time.Now().UnixNano()
		if first.CompareAndSwap(0, now) {
			w.Header().Set("Retry-After", at.Format(http.TimeFormat))
			w.WriteHeader(429)
			return
		}
		gap.Store(now - first.Load())
		io.WriteString(w, `{}`)
	})
	cfg := testConfig()
	// The provider's date is 120ms ahead of the client's clock.
	cfg.Clock = clock.NewFake(at.Add(-120 * time.Millisecond))
	if _, err := NewClient(s.URL, cfg).Do(context.Background(), post(ReplayKeyed), nil); err != nil {
		t.Fatal(err)
	}
	if g := time.Duration(gap.Load()); g < 120*time.Millisecond {
		t.Fatalf("retried after %v, before the provider's Retry-After", g)
	}
}

func TestRetryAfterBeyondCapStopsRetrying(t *testing.T) {
	t.Parallel()
	s, n := counting(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "3600")
		w.WriteHeader(429)
		io.WriteString(w, `{"error":{"type":"rate_limit_error","message":"slow down"}}`)
	})
	cfg := testConfig()
	cfg.MaxRetryAfter = time.Second
	// A client that waited for the hour would end with the context's error
	// (a hang guard, not a time budget: the answer comes at once).
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := NewClient(s.URL, cfg).Do(ctx, post(ReplayKeyed), nil)
	if ctx.Err() != nil {
		t.Fatalf("waited for a Retry-After beyond the cap: %v", err)
	}
	pe := wantClass(t, err, errclass.Definite)
	if n.Load() != 1 || pe.RetryAfter != time.Hour || pe.Type != "rate_limit_error" {
		t.Fatalf("%d requests, %+v", n.Load(), pe)
	}
}

// The caller's deadline ends a wait between attempts; the last attempt's
// answer is kept.
func TestContextEndsBackoff(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		status int
		class  errclass.Class
	}{{429, errclass.Definite}, {503, errclass.Definite}} {
		s, n := counting(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Retry-After", "5")
			w.WriteHeader(tc.status)
			io.WriteString(w, `{"error":{"code":"busy","message":"try later"}}`)
		})
		cfg := testConfig()
		cfg.MaxRetryAfter = 10 * time.Second
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		_, err := NewClient(s.URL, cfg).Do(ctx, post(ReplayKeyed), nil)
		cancel()
		pe := wantClass(t, err, tc.class)
		if n.Load() != 1 || pe.Status != tc.status || pe.Code != "busy" || !strings.Contains(string(pe.Body), "try later") {
			t.Fatalf("%d requests, %+v", n.Load(), pe)
		}
		// Had the context not ended the wait, the Retry-After of 5 s would
		// have passed and a second request been made (n above).
	}
}

func TestErrorBodyKeptAfterRetries(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	s, n := counting(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "0")
		w.WriteHeader(503)
		fmt.Fprintf(w, `{"error":{"type":"api_error","code":"overloaded","message":"attempt %d"}}`, calls.Add(1))
	})
	_, err := NewClient(s.URL, testConfig()).Do(context.Background(), post(ReplayKeyed), nil)
	pe := wantClass(t, err, errclass.Definite)
	if n.Load() != 3 || pe.Code != "overloaded" || pe.Message != "attempt 3" || !strings.Contains(string(pe.Body), "attempt 3") {
		t.Fatalf("%d requests, %+v", n.Load(), pe)
	}
}

func TestRedirectIsNotFollowed(t *testing.T) {
	t.Parallel()
	target, reached := counting(t, func(w http.ResponseWriter, r *http.Request) {})
	s, _ := counting(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL, http.StatusFound)
	})
	_, err := NewClient(s.URL, testConfig()).Do(context.Background(), post(ReplayKeyed), nil)
	pe := wantClass(t, err, errclass.Permanent)
	if pe.Status != 302 || reached.Load() != 0 {
		t.Fatalf("status %d, target reached %d times", pe.Status, reached.Load())
	}
}

func TestRequestIsSentAsBuilt(t *testing.T) {
	t.Parallel()
	var got *http.Request
	var body []byte
	s, _ := counting(t, func(w http.ResponseWriter, r *http.Request) {
		got = r.Clone(context.Background())
		body, _ = io.ReadAll(r.Body)
		io.WriteString(w, `{"ok":true}`)
	})
	r := post(ReplayKeyed)
	r.Path = "/v1/things/search"
	r.Query = map[string][]string{"query": {"metadata['k']:'v'"}}
	r.Header = http.Header{"Authorization": {"Bearer sk_test"}}
	res, err := NewClient(s.URL+"/", testConfig()).Do(context.Background(), r, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got.URL.Path != "/v1/things/search" || got.URL.Query().Get("query") != "metadata['k']:'v'" ||
		got.Header.Get("Authorization") != "Bearer sk_test" || got.Header.Get("Idempotency-Key") != "key-1" ||
		got.Header.Get("Content-Type") != "application/json" || string(body) != `{"a":1}` {
		t.Fatalf("request %s %v %v body %q", got.Method, got.URL, got.Header, body)
	}
	if string(res.Body) != `{"ok":true}` {
		t.Fatalf("body %q", res.Body)
	}
}

func TestInvalidRequestIsNotSent(t *testing.T) {
	t.Parallel()
	s, n := counting(t, func(w http.ResponseWriter, r *http.Request) {})
	c := NewClient(s.URL, testConfig())
	for _, r := range []*Request{
		{Method: "POST", Path: "/x", Replay: ReplayKeyed},                  // keyed without a key
		{Method: "POST", Path: "/x", Replay: ReplayKeyed, Key: "k"},        // nor a header
		{Method: "", Path: "/x"},                                           // no method
		{Method: "GET", Path: "x"},                                         // relative path
		{Method: "BAD METHOD", Path: "/x", Replay: ReplayUnsafe, Key: "k"}, // rejected by net/http
	} {
		_, err := c.Do(context.Background(), r, nil)
		pe := wantClass(t, err, errclass.Permanent)
		if !errors.Is(err, ErrInvalidRequest) {
			t.Fatalf("%+v: %v", r, pe)
		}
	}
	if n.Load() != 0 {
		t.Fatalf("%d requests sent", n.Load())
	}
}

func TestClassifyHook(t *testing.T) {
	t.Parallel()
	errInFlight := errors.New("test: in flight")
	s, n := counting(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(400)
		io.WriteString(w, `{"error":{"code":"key_in_use"}}`)
	})
	cfg := testConfig()
	cfg.Classify = func(e *ProviderError) {
		if e.Code == "key_in_use" {
			e.Retryable, e.Err = true, errInFlight
		}
	}
	_, err := NewClient(s.URL, cfg).Do(context.Background(), post(ReplayKeyed), nil)
	wantClass(t, err, errclass.Definite)
	if !errors.Is(err, errInFlight) || n.Load() != 3 {
		t.Fatalf("%v after %d requests", err, n.Load())
	}
}

func TestConcurrentCallsKeepTheirOwnState(t *testing.T) {
	t.Parallel()
	// Requests keyed "fail" always hang; the others succeed.
	s, _ := counting(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Idempotency-Key") == "fail" {
			io.Copy(io.Discard, r.Body) // lets the server see the client leave
			<-r.Context().Done()
			return
		}
		io.WriteString(w, `{}`)
	})
	c := NewClient(s.URL, hangConfig())
	var wg sync.WaitGroup
	errs := make([]error, 16)
	for i := range errs {
		wg.Go(func() {
			r := post(ReplayKeyed)
			if i%2 == 0 {
				r.Key = "fail"
			}
			_, errs[i] = c.Do(context.Background(), r, nil)
		})
	}
	wg.Wait()
	for i, err := range errs {
		switch {
		case i%2 == 1 && err != nil:
			t.Errorf("call %d: %v", i, err)
		case i%2 == 0 && errclass.Of(err) != errclass.Ambiguous:
			t.Errorf("call %d: %v, want ambiguous", i, err)
		}
	}
}

// Every request names oncely in its User-Agent, so a provider's logs tell
// its requests apart, unless the caller set one of its own.
func TestUserAgent(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var agents []string // of every attempt, retries included
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		agents = append(agents, r.Header.Get("User-Agent"))
		mu.Unlock()
		w.Write([]byte(`{}`))
	}))
	t.Cleanup(srv.Close)
	c := NewClient(srv.URL, testConfig())
	for _, tc := range []struct {
		req  *Request
		want string
	}{
		{&Request{Method: http.MethodGet, Path: "/v1/things"}, oncely.UserAgent},
		{post(ReplayKeyed), oncely.UserAgent},
		{&Request{Method: http.MethodGet, Path: "/v1/things", Header: http.Header{"User-Agent": {"my-agent/1.0"}}}, "my-agent/1.0"},
	} {
		if _, err := c.Do(context.Background(), tc.req, nil); err != nil {
			t.Fatalf("%s %s: %v", tc.req.Method, tc.req.Path, err)
		}
		mu.Lock()
		for _, ua := range agents {
			if ua != tc.want {
				t.Errorf("%s %s: User-Agent %q, want %q", tc.req.Method, tc.req.Path, ua, tc.want)
			}
		}
		if len(agents) == 0 {
			t.Errorf("%s %s: no request arrived", tc.req.Method, tc.req.Path)
		}
		agents = nil
		mu.Unlock()
	}
	if !strings.HasPrefix(oncely.UserAgent, "oncely/") || oncely.UserAgent == "oncely/" {
		t.Fatalf("UserAgent = %q, want oncely/<version>", oncely.UserAgent)
	}
}
