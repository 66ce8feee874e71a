package stripefake_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oncely/oncely/fakes"
	"github.com/oncely/oncely/fakes/fault"
	"github.com/oncely/oncely/fakes/internal/testutil"
	"github.com/oncely/oncely/fakes/stripefake"
)

func TestIdempotentReplay(t *testing.T) {
	t.Parallel()
	s := start(t, nil)
	first := post(t, s, "/v1/payment_intents", "act-1", piForm("1000", "metadata[oncely_key]", "act-1", "expand[]", "latest_charge"))
	wantStatus(t, first, http.StatusOK)
	if first.Header.Get("Idempotent-Replayed") != "" {
		t.Fatal("first response marked as a replay")
	}
	// Same parameters in another order and array notation.
	second := call(t, s, request{method: http.MethodPost, path: "/v1/payment_intents", key: "act-1",
		body: "expand[0]=latest_charge&metadata[oncely_key]=act-1&currency=usd&amount=1000"})
	wantStatus(t, second, http.StatusOK)
	if second.Raw != first.Raw || second.Header.Get("Idempotent-Replayed") != "true" ||
		second.Header.Get("Idempotency-Key") != "act-1" || second.Header.Get("Original-Request") != first.Header.Get("Request-Id") ||
		second.Header.Get("Request-Id") == first.Header.Get("Request-Id") {
		t.Fatalf("replay: headers %v body %s", second.Header, second.Raw)
	}
	if n := len(s.Journal()); n != 1 {
		t.Fatalf("journal has %d effects, want 1", n)
	}
	// GETs ignore the header.
	if g := call(t, s, request{method: http.MethodGet, path: "/v1/payment_intents/" + first.Str("id"), key: "act-1"}); g.Status != http.StatusOK || g.Header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("GET with a key: %d %v", g.Status, g.Header)
	}
}

func TestIdempotencyKeyMisuse(t *testing.T) {
	t.Parallel()
	s := start(t, nil)
	wantStatus(t, post(t, s, "/v1/payment_intents", "k", piForm("1000")), http.StatusOK)
	other := post(t, s, "/v1/payment_intents", "k", piForm("2000"))
	wantError(t, other, http.StatusBadRequest, "idempotency_error", "")
	if other.Header.Get("Idempotency-Key") != "k" || !strings.Contains(other.Str("error", "message"), "same parameters") {
		t.Fatalf("reuse with other params: %v %s", other.Header, other.Raw)
	}
	endpoint := post(t, s, "/v1/refunds", "k", url.Values{"charge": {"ch_1"}})
	wantError(t, endpoint, http.StatusBadRequest, "idempotency_error", "")
	if !strings.Contains(endpoint.Str("error", "message"), "POST /v1/payment_intents") {
		t.Fatalf("reuse on another endpoint: %s", endpoint.Raw)
	}
	wantError(t, post(t, s, "/v1/payment_intents", strings.Repeat("k", 256), piForm("1")), http.StatusBadRequest, "invalid_request_error", "")
	if n := len(s.Journal()); n != 1 {
		t.Fatalf("journal has %d effects, want 1", n)
	}
}

// Validation failures happen before execution: nothing is saved and the key
// can be used again, even with other parameters.
func TestValidationErrorsAreNotSaved(t *testing.T) {
	t.Parallel()
	s := start(t, nil)
	wantError(t, post(t, s, "/v1/payment_intents", "k", url.Values{"currency": {"usd"}}), http.StatusBadRequest, "invalid_request_error", "parameter_missing")
	wantError(t, post(t, s, "/v1/payment_intents", "k", piForm("1", "bogus", "1")), http.StatusBadRequest, "invalid_request_error", "parameter_unknown")
	wantError(t, call(t, s, request{method: http.MethodPost, path: "/v1/payment_intents", key: "k", auth: "-"}), http.StatusUnauthorized, "invalid_request_error", "")
	r := post(t, s, "/v1/payment_intents", "k", piForm("1000"))
	wantStatus(t, r, http.StatusOK)
	if r.Header.Get("Idempotent-Replayed") != "" {
		t.Fatal("a failed validation was replayed")
	}
}

func TestKeysExpireAfterTheWindow(t *testing.T) {
	t.Parallel()
	clock := testutil.NewClock()
	s := start(t, &stripefake.Config{Clock: clock, KeyWindow: time.Hour})
	first := post(t, s, "/v1/payment_intents", "k", piForm("1000"))
	clock.Advance(time.Hour - time.Second)
	if r := post(t, s, "/v1/payment_intents", "k", piForm("1000")); r.Str("id") != first.Str("id") {
		t.Fatal("key forgotten inside its window")
	}
	clock.Advance(time.Second)
	again := post(t, s, "/v1/payment_intents", "k", piForm("2000")) // other params are fine once pruned
	wantStatus(t, again, http.StatusOK)
	if again.Str("id") == first.Str("id") || again.Header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("expired key replayed: %s", again.Raw)
	}
	if n := len(s.Journal()); n != 2 {
		t.Fatalf("journal has %d effects, want 2", n)
	}
}

func TestInFlightKeyConflicts(t *testing.T) {
	t.Parallel()
	clock := testutil.NewSignalClock()
	s := start(t, &stripefake.Config{Clock: clock})
	// The first request holds its key until its client gives up.
	s.Faults.Add(fault.Rule{Route: "POST /v1/payment_intents", Attempt: 1, Action: fault.Delay})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		hr, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.URL+"/v1/payment_intents", strings.NewReader(piForm("1000").Encode()))
		hr.Header.Set("Authorization", "Bearer "+testKey)
		hr.Header.Set("Idempotency-Key", "busy")
		resp, err := testutil.FreshClient(0).Do(hr)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	<-clock.Read
	busy := post(t, s, "/v1/payment_intents", "busy", piForm("1000"))
	wantError(t, busy, http.StatusConflict, "invalid_request_error", "idempotency_key_in_use")
	if busy.Header.Get("Idempotency-Key") != "busy" {
		t.Fatalf("409 without the key echoed: %v", busy.Header)
	}
	if n := len(s.Journal()); n != 0 {
		t.Fatalf("journal has %d effects while the first request waits", n)
	}
	cancel()
	if err := <-done; err == nil {
		t.Fatal("the cancelled client got an answer")
	}
	testutil.WaitFor(t, "the late commit", func() bool { return len(s.Journal()) == 1 })
	testutil.WaitFor(t, "the key to be released", func() bool {
		return post(t, s, "/v1/payment_intents", "busy", piForm("1000")).Header.Get("Idempotent-Replayed") == "true"
	})
	if n := len(s.Journal()); n != 1 {
		t.Fatalf("journal has %d effects, want 1", n)
	}
}

func TestConcurrentRequestsWithOneKey(t *testing.T) {
	t.Parallel()
	s := start(t, nil)
	const n = 32
	replies := make([]reply, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			replies[i], errs[i] = send(s, request{method: http.MethodPost, path: "/v1/payment_intents", key: "same", body: piForm("4200", "metadata[oncely_key]", "same").Encode()})
		})
	}
	wg.Wait()
	journal := s.Journal()
	if len(journal) != 1 {
		t.Fatalf("%d parallel requests committed %d effects, want 1", n, len(journal))
	}
	fresh, replayed, conflicts := 0, 0, 0
	for i, r := range replies {
		if errs[i] != nil {
			t.Fatalf("request %d: %v", i, errs[i])
		}
		switch {
		case r.Status == http.StatusOK && r.Header.Get("Idempotent-Replayed") == "true":
			replayed++
		case r.Status == http.StatusOK:
			fresh++
		case r.Status == http.StatusConflict && r.Str("error", "code") == "idempotency_key_in_use":
			conflicts++
			continue
		default:
			t.Fatalf("request %d: %d %s", i, r.Status, r.Raw)
		}
		if r.Str("id") != journal[0].ID {
			t.Fatalf("request %d answered %s, journal has %s", i, r.Str("id"), journal[0].ID)
		}
	}
	if fresh != 1 || replayed+conflicts != n-1 {
		t.Fatalf("fresh %d, replayed %d, conflicts %d", fresh, replayed, conflicts)
	}
}

func TestConcurrentDistinctKeys(t *testing.T) {
	t.Parallel()
	s := start(t, nil)
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			key := "k-" + string(rune('a'+i))
			if r, err := send(s, request{method: http.MethodPost, path: "/v1/payment_intents", key: key, body: piForm("100").Encode()}); err != nil || r.Status != http.StatusOK {
				t.Errorf("%s: %v %d", key, err, r.Status)
			}
		})
	}
	wg.Wait()
	effects := s.Journal()
	seen := map[string]bool{}
	for _, e := range effects {
		seen[e.Key] = true
	}
	if len(effects) != 16 || len(seen) != 16 || len(fakes.Filter(effects, fakes.KindPaymentIntent, "k-a")) != 1 {
		t.Fatalf("journal = %+v", effects)
	}
}
