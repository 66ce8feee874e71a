package resend_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/clock"
	"github.com/oncely/oncely/errclass"
	"github.com/oncely/oncely/fakes"
	"github.com/oncely/oncely/fakes/fault"
	"github.com/oncely/oncely/fakes/prismtest"
	"github.com/oncely/oncely/fakes/resendfake"
	"github.com/oncely/oncely/providers"
	"github.com/oncely/oncely/providers/internal/adaptertest"
	"github.com/oncely/oncely/providers/resend"
)

const apiKey = "re_test_adapter"

// specPath is Resend's OpenAPI description, kept with the fake.
const specPath = "../../fakes/resendfake/testdata/openapi/resend.yaml"

func newFake(t *testing.T, cfg *resendfake.Config) *resendfake.Server {
	t.Helper()
	s := resendfake.NewServer(cfg)
	t.Cleanup(s.Close)
	return s
}

func newClient(url string, cfg *resend.Config) *resend.Client {
	if cfg == nil {
		cfg = &resend.Config{}
	}
	cfg.APIKey = apiKey
	if cfg.HTTP.Timeout == 0 {
		clk, hc := cfg.HTTP.Clock, cfg.HTTP.HTTPClient
		cfg.HTTP = adaptertest.HTTPConfig()
		cfg.HTTP.Clock, cfg.HTTP.HTTPClient = clk, hc
	}
	return resend.New(url, cfg)
}

func effects(s *resendfake.Server, key string) func() []fakes.Effect {
	return func() []fakes.Effect { return fakes.Filter(s.Journal(), resendfake.KindEmail, key) }
}

var order = resend.Email{
	From: "Acme <orders@acme.test>", To: []string{"ada@example.com"}, Subject: "Order 42 confirmed",
	HTML: "<p>Your order is confirmed.</p>", Tags: map[string]string{"category": "order"},
}

// Every fault case of the adapters' table: a keyed send recovers from a
// failure of its first attempt by resending with its key.
func TestSendUnderFaults(t *testing.T) {
	t.Parallel()
	for _, c := range adaptertest.Faults("POST /emails", true) {
		t.Run(c.Name, func(t *testing.T) {
			t.Parallel()
			s := newFake(t, &resendfake.Config{Seed: 1})
			for _, r := range c.Rules {
				s.Faults.Add(r)
			}
			key := client.DownstreamKey("a1b2c3", 1)
			sent, err := newClient(s.URL, nil).Send(context.Background(), key, order)
			adaptertest.Check(t, c, err, effects(s, key))
			if err == nil {
				e := s.Journal()[0]
				if sent.ID != e.ID || e.Params["tag.oncely_key"] != resend.TagValue(key) || e.Params["tag.category"] != "order" {
					t.Fatalf("answer %+v, effect %+v", sent, e)
				}
			}
		})
	}
}

// Every request the adapter sends and every answer it gets, through a
// send, its replay, a reused key, and lookups found and not found, is
// within Resend's own OpenAPI description (Stoplight Prism).
func TestRequestsMatchResendDescription(t *testing.T) {
	t.Parallel()
	s := newFake(t, nil)
	proxy := prismtest.Start(t, specPath, s.URL)
	// Prism is a Node process that may answer slowly on a busy machine; how
	// long it takes is not what this test checks.
	c := newClient(proxy.URL, &resend.Config{HTTP: providers.Config{HTTPClient: &http.Client{Transport: proxy.Transport(nil)}, Timeout: 5 * time.Minute}})
	ctx := context.Background()
	first, err := c.Send(ctx, "order-42", order)
	if err != nil {
		t.Fatal(err)
	}
	again, err := c.Send(ctx, "order-42", order)
	if err != nil || again.ID != first.ID {
		t.Fatalf("replay = %+v, %v; want %s", again, err, first.ID)
	}
	other := order
	other.Subject = "Order 43"
	if _, err := c.Send(ctx, "order-42", other); !errors.Is(err, resend.ErrKeyReused) || errclass.Of(err) != errclass.Permanent {
		t.Fatalf("reused key: %v (%v)", err, errclass.Of(err))
	}
	if r, err := c.Lookup(ctx, "order-42"); err != nil || r.Status != providers.Found || r.Ref != first.ID {
		t.Fatalf("lookup = %+v, %v", r, err)
	}
	if r, err := c.Lookup(ctx, "order-43"); err != nil || r.Status != providers.NotFound {
		t.Fatalf("lookup of a key never sent = %+v, %v", r, err)
	}
	if n := len(s.Journal()); n != 1 {
		t.Fatalf("journal has %d emails, want 1", n)
	}
	proxy.Check(t)
}

// Resend's answers map to definite, permanent and ambiguous failures.
func TestClassification(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	noRetry := func(clk clock.Clock) *resend.Config {
		cfg := &resend.Config{HTTP: adaptertest.HTTPConfig()}
		cfg.HTTP.MaxRetries, cfg.HTTP.Clock = -1, clk
		return cfg
	}

	t.Run("rate limit", func(t *testing.T) {
		t.Parallel()
		clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		s := newFake(t, &resendfake.Config{Clock: clk, RateLimit: 1})
		c := newClient(s.URL, noRetry(clk))
		if _, err := c.Send(ctx, "r-1", order); err != nil {
			t.Fatal(err)
		}
		_, err := c.Send(ctx, "r-2", order)
		var pe *providers.ProviderError
		if !errors.As(err, &pe) || !errors.Is(err, resend.ErrRateLimited) || errclass.Of(err) != errclass.Definite ||
			pe.RetryAfter != time.Second || pe.Status != http.StatusTooManyRequests || !pe.Retryable {
			t.Fatalf("429: %v (%+v)", err, pe)
		}
		clk.Advance(time.Second)
		if _, err := c.Send(ctx, "r-2", order); err != nil {
			t.Fatalf("after the window: %v", err)
		}
	})

	t.Run("key in use", func(t *testing.T) {
		t.Parallel()
		sig := newSignal()
		s := newFake(t, &resendfake.Config{Clock: sig})
		s.Faults.Add(fault.Rule{Route: "POST /emails", Attempt: 1, Action: fault.Delay})
		slow := &resend.Config{HTTP: adaptertest.HTTPConfig()}
		slow.HTTP.MaxRetries, slow.HTTP.Timeout = -1, 10*time.Second
		ctx1, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { _, err := newClient(s.URL, slow).Send(ctx1, "busy", order); done <- err }()
		<-sig.read
		_, err := newClient(s.URL, noRetry(nil)).Send(ctx, "busy", order)
		cancel()
		<-done
		if !errors.Is(err, resend.ErrKeyInUse) || errclass.Of(err) != errclass.Definite {
			t.Fatalf("409 concurrent: %v (%v)", err, errclass.Of(err))
		}
	})

	t.Run("quota", func(t *testing.T) {
		t.Parallel()
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusTooManyRequests)
			fmt.Fprint(w, `{"statusCode":429,"name":"daily_quota_exceeded","message":"You have reached your daily email sending quota."}`)
		}))
		t.Cleanup(srv.Close)
		_, err := newClient(srv.URL, noRetry(nil)).Send(ctx, "q-1", order)
		if !errors.Is(err, resend.ErrQuotaExceeded) || errclass.Of(err) != errclass.Permanent {
			t.Fatalf("quota: %v (%v)", err, errclass.Of(err))
		}
	})

	t.Run("validation", func(t *testing.T) {
		t.Parallel()
		s := newFake(t, nil)
		bad := order
		bad.To = []string{"nobody"}
		_, err := newClient(s.URL, nil).Send(ctx, "v-1", bad)
		var pe *providers.ProviderError
		if !errors.As(err, &pe) || pe.Code != "validation_error" || errclass.Of(err) != errclass.Permanent || pe.Attempts != 1 {
			t.Fatalf("422: %v (%+v)", err, pe)
		}
	})

	t.Run("server error", func(t *testing.T) {
		t.Parallel()
		s := newFake(t, nil)
		s.Faults.Add(fault.Rule{Route: "POST /emails", Action: fault.CommitThenError, Status: 502})
		_, err := newClient(s.URL, noRetry(nil)).Send(ctx, "e-1", order)
		if errclass.Of(err) != errclass.Ambiguous || len(s.Journal()) != 1 {
			t.Fatalf("502 after the send: %v (%v), %d emails", err, errclass.Of(err), len(s.Journal()))
		}
	})

	t.Run("not sent", func(t *testing.T) {
		t.Parallel()
		ln := httptest.NewServer(http.NotFoundHandler())
		url := ln.URL
		ln.Close() // nothing listens: the dial fails
		_, err := newClient(url, noRetry(nil)).Send(ctx, "n-1", order)
		if errclass.Of(err) != errclass.Definite {
			t.Fatalf("dial failure: %v (%v)", err, errclass.Of(err))
		}
	})

	t.Run("bad answer", func(t *testing.T) {
		t.Parallel()
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"id": 42}`)
		}))
		t.Cleanup(srv.Close)
		_, err := newClient(srv.URL, noRetry(nil)).Send(ctx, "b-1", order)
		if !errors.Is(err, providers.ErrBadResponse) || errclass.Of(err) != errclass.Ambiguous {
			t.Fatalf("unreadable 2xx: %v (%v)", err, errclass.Of(err))
		}
	})
}

// Bad input is refused before anything is sent.
func TestBadInputSendsNothing(t *testing.T) {
	t.Parallel()
	s := newFake(t, nil)
	c := newClient(s.URL, nil)
	reserved := order
	reserved.Tags = map[string]string{resend.TagName: "mine"}
	badTag := order
	badTag.Tags = map[string]string{"order id": "42"}
	noBody := order
	noBody.HTML = ""
	for name, tc := range map[string]struct {
		key string
		e   resend.Email
	}{
		"no key":       {"", order},
		"long key":     {strings.Repeat("k", 257), order},
		"reserved tag": {"k", reserved},
		"bad tag":      {"k", badTag},
		"no body":      {"k", noBody},
		"no recipient": {"k", resend.Email{From: order.From, Subject: "s", Text: "t"}},
	} {
		_, err := c.Send(context.Background(), tc.key, tc.e)
		if !errors.Is(err, providers.ErrInvalidRequest) || errclass.Of(err) != errclass.Permanent {
			t.Fatalf("%s: %v", name, err)
		}
	}
	if n := len(s.Journal()); n != 0 {
		t.Fatalf("bad input sent %d emails", n)
	}
}

// TagValue keeps a key Resend accepts as a tag value and hashes any other.
func TestTagValue(t *testing.T) {
	t.Parallel()
	valid := regexp.MustCompile(`^[A-Za-z0-9_-]{1,256}$`)
	for _, key := range []string{"a1b2c3", "a1b2c3-2", "ak:run/1", strings.Repeat("k", 300), "é"} {
		v := resend.TagValue(key)
		if !valid.MatchString(v) {
			t.Fatalf("TagValue(%q) = %q, which Resend refuses", key, v)
		}
		if (v == key) != valid.MatchString(key) {
			t.Fatalf("TagValue(%q) = %q", key, v)
		}
	}
	if resend.TagValue("ak:run/1") == resend.TagValue("ak:run/2") {
		t.Fatal("two keys, one tag value")
	}
}

// Past the key window, Lookup finds the email by its tag in the list, and
// says NotFound only when it read the whole list.
func TestLookupPastTheWindow(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	s := newFake(t, &resendfake.Config{Clock: clk})
	c := newClient(s.URL, &resend.Config{HTTP: providers.Config{Clock: clk}})
	ctx := context.Background()
	first, err := c.Send(ctx, "welcome-7", order)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 120 { // more than a page of 100
		if _, err := c.Send(ctx, fmt.Sprintf("other-%d", i), order); err != nil {
			t.Fatal(err)
		}
	}
	clk.Advance(resend.DedupWindow + time.Hour)
	if caps := c.Capabilities(); caps.DedupWindow != resend.DedupWindow || caps.Lookup != providers.Consistent {
		t.Fatalf("capabilities %+v", caps)
	}
	r, err := c.Lookup(ctx, "welcome-7")
	if err != nil || r.Status != providers.Found || r.Ref != first.ID || !strings.Contains(r.Summary, first.ID) {
		t.Fatalf("lookup = %+v, %v", r, err)
	}
	if r, err := c.Lookup(ctx, "welcome-8"); err != nil || r.Status != providers.NotFound {
		t.Fatalf("lookup of a key never sent = %+v, %v", r, err)
	}
	short := newClient(s.URL, &resend.Config{MaxListPages: 1})
	if r, err := short.Lookup(ctx, "welcome-7"); err != nil || r.Status != providers.Inconclusive {
		t.Fatalf("lookup past its page bound = %+v, %v; want inconclusive", r, err)
	}
}

// An answer without tags (Resend's description does not promise them) is
// read by retrieving the email; when that has none either, the lookup is
// Inconclusive, never NotFound.
func TestLookupWithoutTags(t *testing.T) {
	t.Parallel()
	s := newFake(t, nil)
	if _, err := newClient(s.URL, nil).Send(context.Background(), "k-1", order); err != nil {
		t.Fatal(err)
	}
	strip := regexp.MustCompile(`,"tags":\[[^\]]*\]`)
	var retrieves atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/emails/") {
			retrieves.Add(1)
		}
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, r)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(rec.Code)
		io.Copy(w, bytes.NewReader(strip.ReplaceAll(rec.Body.Bytes(), nil)))
	}))
	t.Cleanup(srv.Close)
	c := newClient(srv.URL, nil)
	for _, key := range []string{"k-1", "k-2"} {
		if r, err := c.Lookup(context.Background(), key); err != nil || r.Status != providers.Inconclusive {
			t.Fatalf("lookup %s without tags = %+v, %v; want inconclusive", key, r, err)
		}
	}
	if n := retrieves.Load(); n != 2 {
		t.Fatalf("%d retrieves, want one per lookup", n)
	}
}

// signal is a fixed clock that closes read on its first reading; the fake
// first reads its clock while claiming a request's idempotency key.
type signal struct {
	read chan struct{}
	once chan struct{}
}

func newSignal() *signal {
	s := &signal{read: make(chan struct{}), once: make(chan struct{}, 1)}
	s.once <- struct{}{}
	return s
}

func (s *signal) Now() time.Time {
	select {
	case <-s.once:
		close(s.read)
	default:
	}
	return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
}
