package keyheaderfake_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oncely/oncely/fakes"
	"github.com/oncely/oncely/fakes/fault"
	"github.com/oncely/oncely/fakes/internal/testutil"
	"github.com/oncely/oncely/fakes/keyheaderfake"
)

func start(t *testing.T, cfg *keyheaderfake.Config) *keyheaderfake.Server {
	t.Helper()
	s := keyheaderfake.NewServer(cfg)
	t.Cleanup(s.Close)
	return s
}

const order = `{"sku":"SKU-1","quantity":2,"customer":"cus_7","metadata":{"run":"r1"}}`

func create(t *testing.T, s *keyheaderfake.Server, key, body string) testutil.Reply {
	t.Helper()
	if key == "" {
		return testutil.MustDo(t, s.Client(), http.MethodPost, s.URL+"/v1/orders", body)
	}
	return testutil.MustDo(t, s.Client(), http.MethodPost, s.URL+"/v1/orders", body, "Idempotency-Key", key)
}

func wantProblem(t *testing.T, r testutil.Reply, status int, typ string) {
	t.Helper()
	if r.Status != status || r.Str("type") != typ || r.Get("status") != float64(status) || r.Str("title") == "" ||
		r.Header.Get("Content-Type") != "application/problem+json" {
		t.Fatalf("want a %d %s problem, got %d %v %s", status, typ, r.Status, r.Header.Get("Content-Type"), r.Raw)
	}
}

func TestCreateReplayAndGet(t *testing.T) {
	t.Parallel()
	clock := testutil.NewClock()
	s := start(t, &keyheaderfake.Config{Clock: clock})
	first := create(t, s, `"k-1"`, order)
	if first.Status != http.StatusCreated || !strings.HasPrefix(first.Str("id"), "ord_") || first.Str("status") != "created" ||
		first.Header.Get("Location") != "/v1/orders/"+first.Str("id") || first.Header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("create: %d %v %s", first.Status, first.Header, first.Raw)
	}
	var o keyheaderfake.Order
	if err := json.Unmarshal([]byte(first.Raw), &o); err != nil || o.Quantity != 2 || o.Metadata["run"] != "r1" {
		t.Fatalf("answer does not decode as an Order: %v %+v", err, o)
	}
	// Same key as a bare token, same payload with other key order and spacing.
	again := create(t, s, "k-1", `{ "metadata":{"run":"r1"}, "customer":"cus_7", "quantity":2, "sku":"SKU-1" }`)
	if again.Status != http.StatusCreated || again.Raw != first.Raw || again.Header.Get("Idempotent-Replayed") != "true" ||
		again.Header.Get("Location") != first.Header.Get("Location") {
		t.Fatalf("replay: %d %v %s", again.Status, again.Header, again.Raw)
	}
	got := testutil.MustDo(t, s.Client(), http.MethodGet, s.URL+"/v1/orders/"+o.ID, nil)
	if got.Status != http.StatusOK || got.Raw != first.Raw {
		t.Fatalf("get: %d %s", got.Status, got.Raw)
	}
	wantProblem(t, testutil.MustDo(t, s.Client(), http.MethodGet, s.URL+"/v1/orders/ord_nope", nil), http.StatusNotFound, "about:blank")
	e := s.Journal()
	if len(e) != 1 || e[0].Kind != fakes.KindOrder || e[0].Key != "k-1" || e[0].ID != o.ID || e[0].Params["quantity"] != "2" ||
		e[0].Params["metadata.run"] != "r1" || !e[0].At.Equal(clock.Now()) {
		t.Fatalf("journal = %+v", e)
	}
}

func TestKeyErrors(t *testing.T) {
	t.Parallel()
	s := start(t, nil)
	wantProblem(t, create(t, s, "", order), http.StatusBadRequest, "/problems/idempotency-key-missing")
	for _, bad := range []string{`"unterminated`, `"bad\q"`, `""`, strings.Repeat("k", 256), `"a"b"`} {
		wantProblem(t, create(t, s, bad, order), http.StatusBadRequest, "/problems/idempotency-key-missing")
	}
	req, _ := http.NewRequest(http.MethodPost, s.URL+"/v1/orders", strings.NewReader(order))
	req.Header.Add("Idempotency-Key", "a")
	req.Header.Add("Idempotency-Key", "b")
	resp, err := s.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("two key fields: %d", resp.StatusCode)
	}
	if r := create(t, s, `"with \"escapes\" \\ ok"`, order); r.Status != http.StatusCreated {
		t.Fatalf("escaped sf-string: %d %s", r.Status, r.Raw)
	}
	if e := s.Journal(); len(e) != 1 || e[0].Key != `with "escapes" \ ok` {
		t.Fatalf("journal = %+v", e)
	}
}

func TestKeyReusedWithOtherPayload(t *testing.T) {
	t.Parallel()
	s := start(t, nil)
	create(t, s, "k", order)
	wantProblem(t, create(t, s, "k", strings.Replace(order, `"quantity":2`, `"quantity":3`, 1)), http.StatusUnprocessableEntity, "/problems/idempotency-key-reused")
	if n := len(s.Journal()); n != 1 {
		t.Fatalf("journal has %d orders", n)
	}
}

// Requests rejected before execution store nothing: the key stays free.
func TestInvalidBodiesAreNotStored(t *testing.T) {
	t.Parallel()
	s := start(t, nil)
	for _, body := range []string{"", "{", `{"sku":"A","quantity":0}`, `{"sku":"","quantity":1}`, `{"sku":"A","quantity":1,"colour":"red"}`, `{"sku":"A","quantity":1}}`, `{"sku":"A","quantity":"1"}`} {
		r := create(t, s, "k", body)
		if r.Status != http.StatusBadRequest || r.Header.Get("Content-Type") != "application/problem+json" {
			t.Fatalf("body %q: %d %s", body, r.Status, r.Raw)
		}
	}
	big := `{"sku":"A","quantity":1,"customer":"` + strings.Repeat("c", 1<<20) + `"}`
	wantProblem(t, create(t, s, "k", big), http.StatusRequestEntityTooLarge, "about:blank")
	if r := create(t, s, "k", order); r.Status != http.StatusCreated || r.Header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("the key was taken by an invalid request: %d %s", r.Status, r.Raw)
	}
}

func TestKeysExpire(t *testing.T) {
	t.Parallel()
	clock := testutil.NewClock()
	s := start(t, &keyheaderfake.Config{Clock: clock, KeyWindow: time.Hour})
	a := create(t, s, "k", order)
	clock.Advance(59 * time.Minute)
	if r := create(t, s, "k", order); r.Str("id") != a.Str("id") {
		t.Fatal("key forgotten inside its window")
	}
	clock.Advance(time.Minute)
	if r := create(t, s, "k", order); r.Str("id") == a.Str("id") || r.Status != http.StatusCreated {
		t.Fatalf("expired key replayed: %s", r.Raw)
	}
	if n := len(s.Journal()); n != 2 {
		t.Fatalf("journal has %d orders, want 2", n)
	}
}

func TestConflictWhileInFlight(t *testing.T) {
	t.Parallel()
	clock := testutil.NewSignalClock()
	s := start(t, &keyheaderfake.Config{Clock: clock})
	s.Faults.Add(fault.Rule{Route: "POST /v1/orders", Attempt: 1, Action: fault.Delay})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.URL+"/v1/orders", strings.NewReader(order))
		req.Header.Set("Idempotency-Key", "busy")
		resp, err := testutil.FreshClient(0).Do(req)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	<-clock.Read
	wantProblem(t, create(t, s, "busy", order), http.StatusConflict, "/problems/idempotency-key-in-use")
	cancel()
	if err := <-done; err == nil {
		t.Fatal("the cancelled client got an answer")
	}
	testutil.WaitFor(t, "the late order", func() bool { return len(s.Journal()) == 1 })
	testutil.WaitFor(t, "the replay", func() bool { return create(t, s, "busy", order).Header.Get("Idempotent-Replayed") == "true" })
	if n := len(s.Journal()); n != 1 {
		t.Fatalf("journal has %d orders", n)
	}
}

func TestConcurrentRequestsWithOneKey(t *testing.T) {
	t.Parallel()
	s := start(t, nil)
	replies := make([]testutil.Reply, 32)
	var wg sync.WaitGroup
	for i := range replies {
		wg.Go(func() {
			r, err := testutil.Do(s.Client(), http.MethodPost, s.URL+"/v1/orders", order, "Idempotency-Key", "same")
			if err != nil {
				t.Errorf("request %d: %v", i, err)
			}
			replies[i] = r
		})
	}
	wg.Wait()
	journal := s.Journal()
	if len(journal) != 1 {
		t.Fatalf("%d orders, want 1", len(journal))
	}
	fresh := 0
	for i, r := range replies {
		switch {
		case r.Status == http.StatusCreated && r.Header.Get("Idempotent-Replayed") == "":
			fresh++
		case r.Status == http.StatusCreated || r.Status == http.StatusConflict:
		default:
			t.Fatalf("request %d: %d %s", i, r.Status, r.Raw)
		}
		if r.Status == http.StatusCreated && r.Str("id") != journal[0].ID {
			t.Fatalf("request %d answered %s", i, r.Str("id"))
		}
	}
	if fresh != 1 {
		t.Fatalf("%d fresh answers, want 1", fresh)
	}
}

func TestFaults(t *testing.T) {
	t.Parallel()
	const route = "POST /v1/orders"
	cases := []struct {
		rule       fault.Rule
		wantErr    bool
		status     int
		committed  int
		retryFresh bool // the retry executes instead of replaying
	}{
		{fault.Rule{Route: route, Action: fault.FailBeforeCommit, Status: 503, RetryAfter: time.Second}, false, 503, 0, true},
		{fault.Rule{Route: route, Action: fault.DropBeforeCommit}, true, 0, 0, true},
		{fault.Rule{Route: route, Action: fault.CommitThenDrop}, true, 0, 1, false},
		{fault.Rule{Route: route, Action: fault.CommitThenError}, false, 500, 1, false},
	}
	for _, tc := range cases {
		t.Run(tc.rule.Action.String(), func(t *testing.T) {
			t.Parallel()
			s := start(t, nil)
			tc.rule.Attempt = 1
			s.Faults.Add(tc.rule)
			r, err := testutil.Do(testutil.FreshClient(5*time.Second), http.MethodPost, s.URL+"/v1/orders", order, "Idempotency-Key", "k")
			if tc.wantErr != (err != nil) {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if !tc.wantErr {
				wantProblem(t, r, tc.status, "about:blank")
			}
			if n := len(s.Journal()); n != tc.committed {
				t.Fatalf("journal has %d orders, want %d", n, tc.committed)
			}
			retry := create(t, s, "k", order)
			if retry.Status != http.StatusCreated || (retry.Header.Get("Idempotent-Replayed") == "") != tc.retryFresh {
				t.Fatalf("retry: %d %v", retry.Status, retry.Header)
			}
			if n := len(s.Journal()); n != 1 {
				t.Fatalf("after the retry the journal has %d orders, want 1", n)
			}
		})
	}
}

func TestSaveErrorReplaysTheError(t *testing.T) {
	t.Parallel()
	s := start(t, nil)
	s.Faults.Add(fault.Rule{Route: "POST /v1/orders", Attempt: 1, Action: fault.CommitThenError, Status: 502, SaveError: true})
	wantProblem(t, create(t, s, "k", order), http.StatusBadGateway, "about:blank")
	r := create(t, s, "k", order)
	wantProblem(t, r, http.StatusBadGateway, "about:blank")
	if r.Header.Get("Idempotent-Replayed") != "true" || len(s.Journal()) != 1 {
		t.Fatalf("replayed error: %v, %d orders", r.Header, len(s.Journal()))
	}
}

func TestDelayCommitsAfterTimeout(t *testing.T) {
	t.Parallel()
	s := start(t, nil)
	s.Faults.Add(fault.Rule{Route: "POST /v1/orders", Attempt: 1, Action: fault.Delay, Delay: time.Minute})
	if _, err := testutil.Do(testutil.FreshClient(100*time.Millisecond), http.MethodPost, s.URL+"/v1/orders", order, "Idempotency-Key", "k"); err == nil {
		t.Fatal("the client did not time out")
	}
	testutil.WaitFor(t, "the late order", func() bool { return len(s.Journal()) == 1 })
	testutil.WaitFor(t, "the replay", func() bool { return create(t, s, "k", order).Header.Get("Idempotent-Replayed") == "true" })
}

func TestResetAndSeed(t *testing.T) {
	t.Parallel()
	s1 := start(t, &keyheaderfake.Config{Seed: 4})
	s2 := start(t, &keyheaderfake.Config{Seed: 4})
	a, b := create(t, s1, "k", order), create(t, s2, "k", order)
	if a.Str("id") != b.Str("id") {
		t.Fatalf("same seed: %s vs %s", a.Str("id"), b.Str("id"))
	}
	s1.Reset()
	again := create(t, s1, "k", order)
	if again.Header.Get("Idempotent-Replayed") != "" || again.Str("id") != a.Str("id") || len(s1.Journal()) != 1 {
		t.Fatalf("after Reset: %v %s, %d orders", again.Header, again.Raw, len(s1.Journal()))
	}
}

func FuzzCreate(f *testing.F) {
	for _, seed := range []string{order, `{}`, `{"sku":"a","quantity":1e3}`, `{"quantity":-1}`, `nul`, `{"metadata":{"a":null},"sku":"x","quantity":1}`} {
		f.Add(`"k"`, seed)
	}
	h := keyheaderfake.NewHandler(nil)
	f.Fuzz(func(t *testing.T, key, body string) {
		req := httptest.NewRequest(http.MethodPost, "/v1/orders", strings.NewReader(body))
		req.Header.Set("Idempotency-Key", key)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		switch rec.Code {
		case http.StatusCreated, http.StatusBadRequest, http.StatusUnprocessableEntity:
		default:
			t.Fatalf("key %q body %q: status %d", key, body, rec.Code)
		}
		var v map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &v); err != nil {
			t.Fatalf("answer is not JSON: %q", rec.Body)
		}
	})
}
