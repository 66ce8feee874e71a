package stripefake_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/oncely/oncely/fakes/fault"
	"github.com/oncely/oncely/fakes/internal/testutil"
	"github.com/oncely/oncely/fakes/stripefake"
)

const piRoute = "POST /v1/payment_intents"

func keyedCreate(key string, client *http.Client) request {
	return request{method: http.MethodPost, path: "/v1/payment_intents", key: key, body: piForm("1000", "metadata[oncely_key]", key).Encode(), client: client}
}

func TestFailBeforeCommitSavesNothing(t *testing.T) {
	t.Parallel()
	s := start(t, nil)
	s.Faults.Add(fault.Rule{Route: piRoute, Attempt: 1, Action: fault.FailBeforeCommit, Status: 503, RetryAfter: 2 * time.Second})
	s.Faults.Add(fault.Rule{Route: piRoute, Attempt: 2, Action: fault.FailBeforeCommit, Status: 429})
	first := call(t, s, keyedCreate("k", nil))
	wantError(t, first, http.StatusServiceUnavailable, "api_error", "")
	if first.Header.Get("Retry-After") != "2" || first.Header.Get("Idempotency-Key") != "k" {
		t.Fatalf("headers = %v", first.Header)
	}
	wantError(t, call(t, s, keyedCreate("k", nil)), http.StatusTooManyRequests, "invalid_request_error", "rate_limit")
	if n := len(s.Journal()); n != 0 {
		t.Fatalf("journal has %d effects after failures before commit", n)
	}
	third := call(t, s, keyedCreate("k", nil))
	wantStatus(t, third, http.StatusOK)
	if third.Header.Get("Idempotent-Replayed") != "" || len(s.Journal()) != 1 {
		t.Fatalf("the retry did not execute: %v, journal %d", third.Header, len(s.Journal()))
	}
	if log := s.Faults.Log(); len(log) != 2 || log[0].Rule.Status != 503 || log[1].Attempt != 2 {
		t.Fatalf("fault log = %v", log)
	}
}

func TestDropBeforeCommit(t *testing.T) {
	t.Parallel()
	s := start(t, nil)
	s.Faults.Add(fault.Rule{Route: piRoute, Attempt: 1, Action: fault.DropBeforeCommit})
	if _, err := send(s, keyedCreate("k", testutil.FreshClient(5*time.Second))); err == nil {
		t.Fatal("dropped request got an answer")
	}
	if n := len(s.Journal()); n != 0 {
		t.Fatalf("journal has %d effects", n)
	}
	r := call(t, s, keyedCreate("k", nil))
	if r.Status != http.StatusOK || r.Header.Get("Idempotent-Replayed") != "" || len(s.Journal()) != 1 {
		t.Fatalf("retry: %d %v", r.Status, r.Header)
	}
}

func TestCommitThenDropReplaysOnRetry(t *testing.T) {
	t.Parallel()
	s := start(t, nil)
	s.Faults.Add(fault.Rule{Route: piRoute, Attempt: 1, Action: fault.CommitThenDrop})
	if _, err := send(s, keyedCreate("k", testutil.FreshClient(5*time.Second))); err == nil {
		t.Fatal("dropped request got an answer")
	}
	journal := s.Journal()
	if len(journal) != 1 || journal[0].Key != "k" {
		t.Fatalf("journal = %+v, want the committed effect", journal)
	}
	r := call(t, s, keyedCreate("k", nil))
	if r.Status != http.StatusOK || r.Header.Get("Idempotent-Replayed") != "true" || r.Str("id") != journal[0].ID {
		t.Fatalf("retry: %d %v %s", r.Status, r.Header, r.Raw)
	}
	if n := len(s.Journal()); n != 1 {
		t.Fatalf("journal has %d effects", n)
	}
}

func TestCommitThenError(t *testing.T) {
	t.Parallel()
	for _, saveError := range []bool{false, true} {
		s := start(t, nil)
		s.Faults.Add(fault.Rule{Route: piRoute, Attempt: 1, Action: fault.CommitThenError, SaveError: saveError})
		wantError(t, call(t, s, keyedCreate("k", nil)), http.StatusInternalServerError, "api_error", "")
		if n := len(s.Journal()); n != 1 {
			t.Fatalf("journal has %d effects, want the committed one", n)
		}
		r := call(t, s, keyedCreate("k", nil))
		if r.Header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("SaveError %v: retry not replayed: %v", saveError, r.Header)
		}
		if saveError {
			wantError(t, r, http.StatusInternalServerError, "api_error", "")
		} else if r.Status != http.StatusOK || r.Str("id") != s.Journal()[0].ID {
			t.Fatalf("retry: %d %s", r.Status, r.Raw)
		}
		// Without a key, nothing is replayed: a retry is a second effect.
		s.Faults.Add(fault.Rule{Route: piRoute, Action: fault.CommitThenError})
		wantStatus(t, call(t, s, keyedCreate("", nil)), http.StatusInternalServerError)
		wantStatus(t, call(t, s, keyedCreate("", nil)), http.StatusInternalServerError)
		if n := len(s.Journal()); n != 3 {
			t.Fatalf("journal has %d effects, want 3", n)
		}
	}
}

func TestDelayCommitsAfterTheClientTimedOut(t *testing.T) {
	t.Parallel()
	s := start(t, nil)
	s.Faults.Add(fault.Rule{Route: piRoute, Attempt: 1, Action: fault.Delay, Delay: time.Minute})
	began := time.Now()
	if _, err := send(s, keyedCreate("k", testutil.FreshClient(100*time.Millisecond))); err == nil {
		t.Fatal("the client did not time out")
	}
	testutil.WaitFor(t, "the late commit", func() bool { return len(s.Journal()) == 1 })
	if time.Since(began) > 30*time.Second {
		t.Fatal("the delay did not end with the client's request")
	}
	testutil.WaitFor(t, "the replay", func() bool {
		r := call(t, s, keyedCreate("k", nil))
		return r.Status == http.StatusOK && r.Header.Get("Idempotent-Replayed") == "true" && r.Str("id") == s.Journal()[0].ID
	})
	if n := len(s.Journal()); n != 1 {
		t.Fatalf("journal has %d effects", n)
	}
}

func TestFaultsOnReads(t *testing.T) {
	t.Parallel()
	s := start(t, nil)
	id := call(t, s, keyedCreate("k", nil)).Str("id")
	s.Faults.Add(fault.Rule{Route: "GET /v1/payment_intents/{id}", Attempt: 1, Action: fault.FailBeforeCommit})
	s.Faults.Add(fault.Rule{Route: "GET /v1/payment_intents/search", Attempt: 1, Action: fault.DropBeforeCommit})
	wantError(t, get(t, s, "/v1/payment_intents/"+id), http.StatusInternalServerError, "api_error", "")
	wantStatus(t, get(t, s, "/v1/payment_intents/"+id), http.StatusOK)
	if _, err := send(s, request{method: http.MethodGet, path: "/v1/payment_intents/search?query=amount:1000", client: testutil.FreshClient(5 * time.Second)}); err == nil {
		t.Fatal("dropped search got an answer")
	}
}

// With random faults and a client that retries with the same key until it
// gets an answer, every key ends with exactly one effect.
func TestRandomFaultsKeepOneEffectPerKey(t *testing.T) {
	t.Parallel()
	s := start(t, &stripefake.Config{Seed: 5})
	s.Faults.SetRandomRules(0.4,
		fault.Rule{Route: piRoute, Action: fault.FailBeforeCommit, Status: 503},
		fault.Rule{Route: piRoute, Action: fault.CommitThenDrop},
		fault.Rule{Route: piRoute, Action: fault.CommitThenError},
		fault.Rule{Route: piRoute, Action: fault.DropBeforeCommit},
		fault.Rule{Route: piRoute, Action: fault.Delay, Delay: 5 * time.Millisecond},
	)
	client := testutil.FreshClient(5 * time.Second)
	for k := range 20 {
		key := "key-" + strings.Repeat("x", k)
		for attempt := 0; ; attempt++ {
			if attempt == 50 {
				t.Fatalf("%s: no success in 50 attempts; faults %v", key, s.Faults.Log())
			}
			r, err := send(s, keyedCreate(key, client))
			if err == nil && r.Status == http.StatusOK {
				break
			}
		}
	}
	effects := s.Journal()
	perKey := map[string]int{}
	for _, e := range effects {
		perKey[e.Key]++
	}
	if len(perKey) != 20 {
		t.Fatalf("%d keys have effects, want 20", len(perKey))
	}
	for k, n := range perKey {
		if n != 1 {
			t.Fatalf("%s has %d effects; faults:\n%v", k, n, s.Faults.Log())
		}
	}
	if len(s.Faults.Log()) == 0 {
		t.Fatal("no fault was injected")
	}
}
