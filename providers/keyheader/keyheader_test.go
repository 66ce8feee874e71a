package keyheader_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oncely/oncely"
	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/errclass"
	"github.com/oncely/oncely/fakes"
	"github.com/oncely/oncely/fakes/fault"
	"github.com/oncely/oncely/fakes/keyheaderfake"
	"github.com/oncely/oncely/providers"
	"github.com/oncely/oncely/providers/internal/adaptertest"
	"github.com/oncely/oncely/providers/keyheader"
)

type order struct {
	ID       string `json:"id"`
	Object   string `json:"object"`
	SKU      string `json:"sku"`
	Quantity int64  `json:"quantity"`
}

func (o *order) Validate() error {
	if o.ID == "" || o.Object != "order" {
		return errors.New("not an order")
	}
	return nil
}

var book = map[string]any{"sku": "BOOK-1", "quantity": 2, "metadata": map[string]string{"cart": "c9"}}

// withLookup serves an keyheaderfake with one more route, GET
// /v1/orders/by-key/{key}, answered from the fake's journal.
func withLookup(t *testing.T) (*keyheaderfake.Handler, string) {
	t.Helper()
	h := keyheaderfake.NewHandler(&keyheaderfake.Config{Seed: 1})
	mux := http.NewServeMux()
	mux.Handle("/", h)
	mux.HandleFunc("GET /v1/orders/by-key/{key}", func(w http.ResponseWriter, r *http.Request) {
		for _, e := range fakes.Filter(h.Journal(), fakes.KindOrder, r.PathValue("key")) {
			r2 := r.Clone(r.Context())
			r2.URL.Path = "/v1/orders/" + e.ID
			h.ServeHTTP(w, r2)
			return
		}
		w.WriteHeader(http.StatusNotFound)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return h, srv.URL
}

func newClient(url string, cfg *keyheader.Config) *keyheader.Client {
	if cfg == nil {
		cfg = &keyheader.Config{}
	}
	cfg.HTTP = adaptertest.HTTPConfig()
	return keyheader.New(url, cfg)
}

func TestPostUnderFaults(t *testing.T) {
	t.Parallel()
	for _, c := range adaptertest.Faults("POST /v1/orders", true) {
		for _, bare := range []bool{false, true} {
			name := c.Name
			if bare {
				name += ", bare key"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				s := keyheaderfake.NewServer(&keyheaderfake.Config{Seed: 1})
				t.Cleanup(s.Close)
				for _, r := range c.Rules {
					s.Faults.Add(r)
				}
				key := client.DownstreamKey("5eed", 2)
				var o order
				_, err := newClient(s.URL, &keyheader.Config{BareKey: bare}).Post(context.Background(), key, "/v1/orders", book, &o)
				adaptertest.Check(t, c, err, func() []fakes.Effect { return fakes.Filter(s.Journal(), fakes.KindOrder, key) })
				if err == nil && (o.ID != s.Journal()[0].ID || o.Quantity != 2) {
					t.Fatalf("order %+v", o)
				}
			})
		}
	}
}

func TestReplay(t *testing.T) {
	t.Parallel()
	s := keyheaderfake.NewServer(&keyheaderfake.Config{Seed: 2})
	t.Cleanup(s.Close)
	c := newClient(s.URL, nil)
	ctx := context.Background()
	var a, b order
	if _, err := c.Post(ctx, "k", "/v1/orders", book, &a); err != nil {
		t.Fatal(err)
	}
	res, err := c.Post(ctx, "k", "/v1/orders", []byte(`{"quantity": 2, "sku": "BOOK-1", "metadata": {"cart": "c9"}}`), &b)
	if err != nil || b.ID != a.ID || res.Header.Get("Idempotent-Replayed") != "true" || res.Status != 201 {
		t.Fatalf("replay: %+v %+v, %v", b, res, err)
	}
	if n := len(s.Journal()); n != 1 {
		t.Fatalf("%d orders", n)
	}
}

func TestDraftErrors(t *testing.T) {
	t.Parallel()
	s := keyheaderfake.NewServer(&keyheaderfake.Config{Seed: 3})
	t.Cleanup(s.Close)
	ctx := context.Background()
	// The API never sees the key under another header name.
	_, err := newClient(s.URL, &keyheader.Config{KeyHeader: "X-Request-Key"}).Post(ctx, "k", "/v1/orders", book, nil)
	if errclass.Of(err) != errclass.Permanent || !errors.Is(err, keyheader.ErrKeyMissing) {
		t.Fatalf("missing key: %v", err)
	}
	c := newClient(s.URL, nil)
	if _, err := c.Post(ctx, "k", "/v1/orders", book, nil); err != nil {
		t.Fatal(err)
	}
	_, err = c.Post(ctx, "k", "/v1/orders", map[string]any{"sku": "BOOK-1", "quantity": 3}, nil)
	if errclass.Of(err) != errclass.Permanent || !errors.Is(err, keyheader.ErrKeyReused) {
		t.Fatalf("payload mismatch: %v", err)
	}
	// An ordinary validation error is permanent but not about the key.
	_, err = c.Post(ctx, "k2", "/v1/orders", map[string]any{"sku": "BOOK-1", "quantity": 0}, nil)
	if errclass.Of(err) != errclass.Permanent || errors.Is(err, keyheader.ErrKeyMissing) {
		t.Fatalf("invalid order: %v", err)
	}
	for _, key := range []string{"", "naïve"} {
		if _, err := c.Post(ctx, key, "/v1/orders", book, nil); !errors.Is(err, providers.ErrInvalidRequest) {
			t.Fatalf("key %q: %v", key, err)
		}
	}
	if n := len(s.Journal()); n != 1 {
		t.Fatalf("%d orders", n)
	}
}

// 409 while the first request with the key is outstanding: nothing was
// done by this one; it is retried, then definite.
func TestKeyInUse(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		if r.Header.Get("Idempotency-Key") != `"k"` {
			t.Errorf("key header %q", r.Header.Get("Idempotency-Key"))
		}
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusConflict)
		io.WriteString(w, `{"type":"https://developer.example.com/idempotency","title":"A request is outstanding for this Idempotency-Key"}`)
	}))
	t.Cleanup(srv.Close)
	_, err := newClient(srv.URL, nil).Post(context.Background(), "k", "/v1/orders", book, nil)
	if errclass.Of(err) != errclass.Definite || !errors.Is(err, keyheader.ErrKeyInUse) || calls.Load() != 4 {
		t.Fatalf("%v after %d requests", err, calls.Load())
	}
}

func TestLookup(t *testing.T) {
	t.Parallel()
	h, url := withLookup(t)
	c := newClient(url, &keyheader.Config{LookupPath: "/v1/orders/by-key/{key}", DedupWindow: time.Hour})
	ctx := context.Background()
	var o order
	if _, err := c.Post(ctx, "k-1", "/v1/orders", book, &o); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		key  string
		want providers.LookupStatus
		ref  string
	}{{"k-1", providers.Found, o.ID}, {"k-2", providers.NotFound, ""}} {
		res, err := c.Lookup(ctx, tc.key)
		if err != nil || res.Status != tc.want || res.Ref != tc.ref {
			t.Fatalf("%s: %+v, %v", tc.key, res, err)
		}
	}
	if caps := c.Capabilities(); caps.Lookup != providers.Consistent || caps.DedupWindow != time.Hour {
		t.Fatalf("capabilities %+v", caps)
	}
	h.Faults.Add(fault.Rule{Route: "GET /v1/orders/{id}", Action: fault.FailBeforeCommit, Status: 500})
	if _, err := c.Lookup(ctx, "k-1"); err == nil {
		t.Fatal("a failing lookup returned no error")
	}

	plain := newClient(url, &keyheader.Config{DedupWindow: -1})
	if caps := plain.Capabilities(); caps.Lookup != providers.NoLookup || caps.DedupWindow != 0 {
		t.Fatalf("capabilities %+v", caps)
	}
	if _, err := plain.Lookup(ctx, "k-1"); !errors.Is(err, providers.ErrNoLookup) {
		t.Fatalf("no lookup: %v", err)
	}
}

// Posts and lookups carry oncely's User-Agent, or the one Config.Header
// sets.
func TestUserAgent(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	agents := map[string][]string{} // method → User-Agent of every attempt
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		agents[r.Method] = append(agents[r.Method], r.Header.Get("User-Agent"))
		mu.Unlock()
		w.Write([]byte(`{"id":"ord_1","object":"order"}`))
	}))
	t.Cleanup(srv.Close)
	ctx := context.Background()
	var o order
	if _, err := newClient(srv.URL, &keyheader.Config{LookupPath: "/v1/orders/by-key/{key}"}).Post(ctx, "k-1", "/v1/orders", book, &o); err != nil {
		t.Fatal(err)
	}
	if _, err := newClient(srv.URL, &keyheader.Config{Header: http.Header{"User-Agent": {"shop/2"}}, LookupPath: "/v1/orders/by-key/{key}"}).Lookup(ctx, "k-1"); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	for method, want := range map[string]string{http.MethodPost: oncely.UserAgent, http.MethodGet: "shop/2"} {
		if got := agents[method]; len(got) == 0 || slices.ContainsFunc(got, func(ua string) bool { return ua != want }) {
			t.Errorf("%s: User-Agent %q, want %q", method, got, want)
		}
	}
}
