package slack_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	goslack "github.com/slack-go/slack"

	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/clock"
	"github.com/oncely/oncely/errclass"
	"github.com/oncely/oncely/fakes"
	"github.com/oncely/oncely/fakes/slackfake"
	"github.com/oncely/oncely/providers"
	"github.com/oncely/oncely/providers/internal/adaptertest"
	"github.com/oncely/oncely/providers/slack"
	"github.com/oncely/oncely/reconcile"
)

const (
	route   = "POST /api/chat.postMessage"
	general = "C0000000001"
)

func newFake(t *testing.T, cfg *slackfake.Config) *slackfake.Server {
	t.Helper()
	if cfg == nil {
		cfg = &slackfake.Config{}
	}
	cfg.Token = "xoxb-test"
	s := slackfake.NewServer(cfg)
	t.Cleanup(s.Close)
	return s
}

func newClient(url string, cfg slack.Config) *slack.Client {
	cfg.APIURL = url + "/api/"
	if cfg.Token == "" {
		cfg.Token = "xoxb-test"
	}
	if cfg.Channel == "" {
		cfg.Channel = general
	}
	clk := cfg.HTTP.Clock
	cfg.HTTP = adaptertest.HTTPConfig()
	cfg.HTTP.Clock = clk
	c, err := slack.New(&cfg)
	if err != nil {
		panic(err) // the tests' configurations are valid
	}
	return c
}

// New refuses an event type Slack drops (a period, other punctuation):
// the adapter would post messages it can never find again.
func TestNewRefusesEventTypeSlackDrops(t *testing.T) {
	for _, et := range []string{"oncely.action", "oncely action", "oncely/action", "ação", "a:b"} {
		if _, err := slack.New(&slack.Config{Token: "xoxb-test", Channel: "C1", EventType: et}); !errors.Is(err, slack.ErrConfig) {
			t.Errorf("New with event type %q: %v, want ErrConfig", et, err)
		}
	}
	for _, et := range []string{"", "oncely_action", "deploy-announced", "Task2"} {
		if _, err := slack.New(&slack.Config{Token: "xoxb-test", Channel: "C1", EventType: et}); err != nil {
			t.Errorf("New with event type %q: %v", et, err)
		}
	}
}

func TestPostUnderFaults(t *testing.T) {
	t.Parallel()
	for _, c := range adaptertest.Faults(route, false) {
		t.Run(c.Name, func(t *testing.T) {
			t.Parallel()
			s := newFake(t, nil)
			for _, r := range c.Rules {
				s.Faults.Add(r)
			}
			key := client.DownstreamKey("c0ffee", 1)
			p, err := newClient(s.URL, slack.Config{}).Post(context.Background(), key, "Deploy finished")
			adaptertest.Check(t, c, err, func() []fakes.Effect { return fakes.Filter(s.Journal(), slackfake.KindMessage, key) })
			if err == nil && (p.Channel != general || p.TS == "" || p.Ref() != general+"/"+p.TS) {
				t.Fatalf("posted %+v", p)
			}
		})
	}
}

func TestLookupIsLagAware(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	s := newFake(t, &slackfake.Config{Clock: clk, HistoryLag: 20 * time.Second})
	c := newClient(s.URL, slack.Config{HistoryLag: 30 * time.Second, PageSize: 2, HTTP: providers.Config{Clock: clk}})
	ctx := context.Background()
	for _, k := range []string{"a", "b", "c"} {
		if _, err := c.Post(ctx, k, "message "+k); err != nil {
			t.Fatal(err)
		}
		clk.Advance(time.Millisecond)
	}
	if caps := c.Capabilities(); caps.Lookup != providers.Eventual || caps.IndexLag != 30*time.Second || caps.Upsert || caps.DedupWindow != 0 {
		t.Fatalf("capabilities %+v", caps)
	}
	// Inside the lag the history shows nothing: inconclusive, not absent.
	if res, err := c.Lookup(ctx, "a"); err != nil || res.Status != providers.Inconclusive {
		t.Fatalf("inside the lag: %+v, %v", res, err)
	}
	clk.Advance(20 * time.Second)
	// "a" is the oldest, on the second page of two.
	res, err := c.Lookup(ctx, "a")
	if err != nil || res.Status != providers.Found || res.Ref == "" {
		t.Fatalf("after the lag: %+v, %v", res, err)
	}
	if res, err := c.Lookup(ctx, "zzz"); err != nil || res.Status != providers.Inconclusive {
		t.Fatalf("absent: %+v, %v", res, err)
	}
	// A history longer than the pages a lookup reads is an error.
	short := newClient(s.URL, slack.Config{PageSize: 1, MaxPages: 2, HTTP: providers.Config{Clock: clk}})
	if _, err := short.Lookup(ctx, "zzz"); !errors.Is(err, slack.ErrHistoryTruncated) {
		t.Fatalf("truncated: %v", err)
	}
	// Before the window (more than Lookback ago) a message is not read.
	old := newClient(s.URL, slack.Config{Lookback: time.Second, HTTP: providers.Config{Clock: clk}})
	if res, err := old.Lookup(ctx, "a"); err != nil || res.Status != providers.Inconclusive {
		t.Fatalf("outside the lookback: %+v, %v", res, err)
	}
}

// The reconciler reads from shortly before the attempt began, and an empty
// history becomes absent only after the lag bound.
func TestReconciler(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	s := newFake(t, &slackfake.Config{Clock: clk})
	c := newClient(s.URL, slack.Config{HistoryLag: 30 * time.Second, Skew: time.Minute, Lookback: time.Hour, HTTP: providers.Config{Clock: clk}})
	ctx := context.Background()
	start := clk.Now()
	if _, err := c.Post(ctx, "k1", "hello"); err != nil {
		t.Fatal(err)
	}
	rcfg := &reconcile.Config{Clock: clk, MaxWait: time.Second, InFlight: 10 * time.Second, Sleep: func(_ context.Context, d time.Duration) error {
		clk.Advance(d)
		return nil
	}}
	rec := reconcile.New(c, rcfg)
	got, err := rec.Reconcile(ctx, client.Invocation{Key: "k1", DownstreamKey: "k1", AttemptAt: start, SentBy: clk.Now()})
	if err != nil || got.Verdict != client.VerdictFound || got.Effect.Ref == "" {
		t.Fatalf("found: %+v, %v", got, err)
	}
	// Not posted: unknown within InFlight + HistoryLag, absent after.
	inv := client.Invocation{Key: "k2", DownstreamKey: "k2", AttemptAt: clk.Now(), SentBy: clk.Now()}
	if got, err := rec.ReconcileByLookup(ctx, inv); err != nil || got.Verdict != client.VerdictUnknown {
		t.Fatalf("inside the bound: %+v, %v", got, err)
	}
	clk.Advance(41 * time.Second)
	if got, err := rec.ReconcileByLookup(ctx, inv); err != nil || got.Verdict != client.VerdictAbsent {
		t.Fatalf("past the bound: %+v, %v", got, err)
	}
	// An attempt that began after the message was posted (minus the skew)
	// does not read it.
	clk.Advance(2 * time.Minute)
	late := client.Invocation{Key: "k1", DownstreamKey: "k1", AttemptAt: clk.Now(), SentBy: clk.Now().Add(-time.Minute)}
	if got, err := rec.ReconcileByLookup(ctx, late); err != nil || got.Verdict == client.VerdictFound {
		t.Fatalf("outside the window: %+v, %v", got, err)
	}
}

func TestClassification(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clk := clock.NewFake(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	s := newFake(t, &slackfake.Config{Clock: clk, PostsPerSecond: 1})
	var pe *providers.ProviderError

	_, err := newClient(s.URL, slack.Config{Channel: "C999"}).Post(ctx, "k", "x")
	if errclass.Of(err) != errclass.Permanent || !errors.As(err, &pe) || pe.Code != "channel_not_found" {
		t.Fatalf("unknown channel: %v", err)
	}
	_, err = newClient(s.URL, slack.Config{Token: "xoxb-other"}).Post(ctx, "k", "x")
	if errclass.Of(err) != errclass.Permanent || !errors.As(err, &pe) || pe.Code != "invalid_auth" {
		t.Fatalf("bad token: %v", err)
	}
	c := newClient(s.URL, slack.Config{})
	if _, err := c.Post(ctx, "k", ""); errclass.Of(err) != errclass.Permanent || !errors.As(err, &pe) || pe.Code != "no_text" {
		t.Fatalf("no text: %v", err)
	}
	if _, err := c.Post(ctx, "", "x"); !errors.Is(err, providers.ErrInvalidRequest) {
		t.Fatalf("no key: %v", err)
	}
	if _, err := c.Post(ctx, "k", "first"); err != nil {
		t.Fatal(err)
	}
	// Slack's per-channel limit: 429 ratelimited with Retry-After.
	_, err = c.Post(ctx, "k2", "second")
	if errclass.Of(err) != errclass.Definite || !errors.As(err, &pe) || pe.Code != "ratelimited" || pe.RetryAfter != time.Second {
		t.Fatalf("rate limited: %v (%+v)", err, pe)
	}
	// User metadata cannot replace the key's.
	clk.Advance(time.Second)
	p, err := c.Post(ctx, "k3", "third", goslack.MsgOptionMetadata(goslack.SlackMetadata{EventType: "x", EventPayload: map[string]any{"oncely_key": "forged"}}))
	if err != nil {
		t.Fatal(err)
	}
	if j := fakes.Filter(s.Journal(), slackfake.KindMessage, "k3"); len(j) != 1 || j[0].ID != p.Ref() {
		t.Fatalf("journal %+v", s.Journal())
	}
	if n := len(s.Journal()); n != 2 {
		t.Fatalf("%d effects", n)
	}
}

func TestSlackErrorCodes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		status int
		header string
		body   string
		class  errclass.Class
	}{
		{200, "", `{"ok":false,"error":"internal_error"}`, errclass.Ambiguous},
		{200, "", `{"ok":false,"error":"fatal_error"}`, errclass.Ambiguous},
		{200, "", `{"ok":false,"error":"request_timeout"}`, errclass.Definite},
		{200, "", `{"ok":false,"error":"is_archived"}`, errclass.Permanent},
		{200, "", `{"ok":true,`, errclass.Ambiguous},
		{502, "", `<html>`, errclass.Ambiguous},
		{503, "1", `{}`, errclass.Definite},
		{400, "", `{}`, errclass.Permanent},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if tc.header != "" {
				w.Header().Set("Retry-After", tc.header)
			}
			w.WriteHeader(tc.status)
			io.WriteString(w, tc.body)
		}))
		_, err := newClient(srv.URL, slack.Config{}).Post(context.Background(), "k", "x")
		srv.Close()
		if errclass.Of(err) != tc.class {
			t.Errorf("%d %s: %v is %v, want %v", tc.status, tc.body, err, errclass.Of(err), tc.class)
		}
	}
}

// A refused connection is definite: nothing was posted.
func TestNotSent(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	_, err := newClient(url, slack.Config{}).Post(context.Background(), "k", "x")
	var pe *providers.ProviderError
	if errclass.Of(err) != errclass.Definite || !errors.As(err, &pe) || pe.Attempts != 4 {
		t.Fatalf("%v (%+v)", err, pe)
	}
}
