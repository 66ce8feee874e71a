package mail_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/clock"
	"github.com/oncely/oncely/errclass"
	"github.com/oncely/oncely/fakes"
	"github.com/oncely/oncely/fakes/fault"
	"github.com/oncely/oncely/fakes/mailfake"
	"github.com/oncely/oncely/providers"
	"github.com/oncely/oncely/providers/internal/adaptertest"
	"github.com/oncely/oncely/providers/mail"
	"github.com/oncely/oncely/reconcile"
)

var msg = mail.Message{From: "support@example.com", To: "ada@example.com", Subject: "Your refund", Text: "It is on its way.", Metadata: map[string]string{"ticket": "42"}}

func newFake(t *testing.T, cfg *mailfake.Config) *mailfake.Server {
	t.Helper()
	s := mailfake.NewServer(cfg)
	t.Cleanup(s.Close)
	return s
}

func newClient(url string, cfg *mail.Config) *mail.Client {
	if cfg == nil {
		cfg = &mail.Config{}
	}
	cfg.HTTP = adaptertest.HTTPConfig()
	return mail.New(url, cfg)
}

func effects(s *mailfake.Server, key string) func() []fakes.Effect {
	return func() []fakes.Effect { return fakes.Filter(s.Journal(), fakes.KindMessage, key) }
}

// The send is a plain POST the provider does not deduplicate: every
// failure after it may have reached the provider is ambiguous.
func TestSendUnderFaults(t *testing.T) {
	t.Parallel()
	for _, c := range adaptertest.Faults("POST /v1/messages", false) {
		t.Run(c.Name, func(t *testing.T) {
			t.Parallel()
			s := newFake(t, &mailfake.Config{Seed: 1})
			for _, r := range c.Rules {
				s.Faults.Add(r)
			}
			key := client.DownstreamKey("9f8e7d", 1)
			sent, err := newClient(s.URL, nil).Send(context.Background(), key, msg)
			adaptertest.Check(t, c, err, effects(s, key))
			if err == nil {
				e := s.Journal()[0]
				if sent.ID != e.ID || sent.Existing || sent.Reference != key || e.Params["metadata.oncely_key"] != key || e.Params["metadata.ticket"] != "42" {
					t.Fatalf("sent %+v, effect %+v", sent, e)
				}
			}
		})
	}
}

// The search before sending is a GET: retried, and when it fails for good
// nothing is sent, whatever the search met.
func TestSearchFaults(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		rule fault.Rule
		want adaptertest.Want
	}{
		{"500 once", fault.Rule{Attempt: 1, Action: fault.FailBeforeCommit}, adaptertest.Success},
		{"dropped once", fault.Rule{Attempt: 1, Action: fault.DropBeforeCommit}, adaptertest.Success},
		{"500 always", fault.Rule{Action: fault.FailBeforeCommit}, adaptertest.Definite},
		{"dropped always", fault.Rule{Action: fault.DropBeforeCommit}, adaptertest.Definite},
		{"delayed always", fault.Rule{Action: fault.Delay}, adaptertest.Definite},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newFake(t, &mailfake.Config{Seed: 2})
			tc.rule.Route = "GET /v1/messages"
			s.Faults.Add(tc.rule)
			_, err := newClient(s.URL, nil).Send(context.Background(), "k", msg)
			adaptertest.Check(t, adaptertest.Case{Name: tc.name, Want: tc.want}, err, effects(s, "k"))
			if tc.want == adaptertest.Definite && !errors.Is(err, mail.ErrSearchFailed) {
				t.Fatalf("%v: want ErrSearchFailed", err)
			}
		})
	}
}

func TestSendFindsEarlierMessage(t *testing.T) {
	t.Parallel()
	s := newFake(t, &mailfake.Config{Seed: 3})
	c := newClient(s.URL, nil)
	ctx := context.Background()
	first, err := c.Send(ctx, "k", msg)
	if err != nil {
		t.Fatal(err)
	}
	again, err := c.Send(ctx, "k", msg)
	if err != nil || again.ID != first.ID || !again.Existing {
		t.Fatalf("repeat: %+v, %v", again, err)
	}
	if _, err := c.Send(ctx, "k-2", msg); err != nil {
		t.Fatal(err)
	}
	if n := len(s.Journal()); n != 2 {
		t.Fatalf("%d messages sent, want 2", n)
	}
}

func TestInvalidSends(t *testing.T) {
	t.Parallel()
	s := newFake(t, &mailfake.Config{Seed: 4})
	c := newClient(s.URL, nil)
	ctx := context.Background()
	if _, err := c.Send(ctx, "", msg); !errors.Is(err, providers.ErrInvalidRequest) {
		t.Fatalf("empty key: %v", err)
	}
	bad := msg
	bad.Metadata = map[string]string{mail.MetadataKey: "x"}
	if _, err := c.Send(ctx, "k", bad); !errors.Is(err, providers.ErrInvalidRequest) {
		t.Fatalf("reserved metadata: %v", err)
	}
	bad = msg
	bad.To = "not an address"
	_, err := c.Send(ctx, "k", bad)
	var pe *providers.ProviderError
	if errclass.Of(err) != errclass.Permanent || !errors.As(err, &pe) || pe.Status != 400 || pe.Code != "invalid_field" {
		t.Fatalf("bad address: %v", err)
	}
	if n := len(s.Journal()); n != 0 {
		t.Fatalf("%d messages sent", n)
	}
}

func TestRequestShape(t *testing.T) {
	t.Parallel()
	var got map[string]any
	var auth string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth = r.Header.Get("Authorization")
		if r.Method == http.MethodGet {
			if r.URL.Query().Get("reference") != "k" {
				t.Errorf("search %v", r.URL)
			}
			io.WriteString(w, `{"data":[]}`)
			return
		}
		json.NewDecoder(r.Body).Decode(&got)
		w.WriteHeader(http.StatusAccepted)
		io.WriteString(w, `{"id":"msg_1","reference":"k","status":"queued"}`)
	}))
	t.Cleanup(srv.Close)
	if _, err := newClient(srv.URL, &mail.Config{APIKey: "key"}).Send(context.Background(), "k", msg); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"from": msg.From, "to": msg.To, "subject": msg.Subject, "text": msg.Text, "reference": "k",
		"metadata": map[string]any{"oncely_key": "k", "ticket": "42"}}
	if g, w := mustJSON(got), mustJSON(want); g != w || auth != "Bearer key" {
		t.Fatalf("body %s\nwant %s, auth %q", g, w, auth)
	}
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func TestLookup(t *testing.T) {
	t.Parallel()
	clock := clock.NewFake(time.Date(2030, 5, 1, 10, 0, 0, 0, time.UTC))
	s := newFake(t, &mailfake.Config{Seed: 5, Clock: clock, IndexLag: time.Minute})
	c := newClient(s.URL, &mail.Config{IndexLag: time.Minute})
	ctx := context.Background()
	sent, err := c.Send(ctx, "k", msg)
	if err != nil {
		t.Fatal(err)
	}
	if caps := c.Capabilities(); caps.Lookup != providers.Eventual || caps.IndexLag != time.Minute || caps.DedupWindow != 0 || caps.Upsert {
		t.Fatalf("capabilities %+v", caps)
	}
	lookup := func(key string) providers.LookupResult {
		t.Helper()
		res, err := c.Lookup(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	// Inside the lag, the search shows nothing yet.
	if res := lookup("k"); res.Status != providers.Inconclusive {
		t.Fatalf("inside the lag: %+v", res)
	}
	clock.Advance(61 * time.Second)
	if res := lookup("k"); res.Status != providers.Found || res.Ref != sent.ID || res.Summary == "" {
		t.Fatalf("past the lag: %+v", res)
	}
	// A search never proves absence by itself.
	if res := lookup("never-sent"); res.Status != providers.Inconclusive {
		t.Fatalf("absent: %+v", res)
	}

	s.Faults.Add(fault.Rule{Route: "GET /v1/messages", Action: fault.FailBeforeCommit, Status: 500})
	if _, err := c.Lookup(ctx, "k"); errclass.Of(err) != errclass.Ambiguous {
		t.Fatalf("failed lookup: %v", err)
	}
}

// The reconcile policy turns the adapter's Inconclusive into NotFound once
// the index lag has passed, and finds a message the index shows.
func TestLookupWithReconcilePolicy(t *testing.T) {
	t.Parallel()
	clock := clock.NewFake(time.Date(2030, 5, 1, 10, 0, 0, 0, time.UTC))
	s := newFake(t, &mailfake.Config{Seed: 6, Clock: clock, IndexLag: time.Minute})
	c := newClient(s.URL, &mail.Config{IndexLag: time.Minute})
	ctx := context.Background()
	sent, err := c.Send(ctx, "k", msg)
	if err != nil {
		t.Fatal(err)
	}
	policy := reconcile.New(c, &reconcile.Config{
		Clock: clock, InFlight: time.Second, MaxWait: 5 * time.Minute,
		Sleep: func(_ context.Context, d time.Duration) error { clock.Advance(d); return nil },
	})
	f, err := policy.ReconcileByLookup(ctx, client.Invocation{DownstreamKey: "k"})
	if err != nil || f.Verdict != client.VerdictFound || f.Effect.Ref != sent.ID {
		t.Fatalf("sent: %+v, %v", f, err)
	}
	f, err = policy.ReconcileByLookup(ctx, client.Invocation{DownstreamKey: "never-sent"})
	if err != nil || f.Verdict != client.VerdictAbsent {
		t.Fatalf("never sent: %+v, %v", f, err)
	}
}
