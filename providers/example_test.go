package providers_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"time"

	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/errclass"
	"github.com/oncely/oncely/providers"
)

// A keyed POST survives a 500: the retry carries the same Idempotency-Key,
// so the provider can answer it with the first result instead of acting
// twice.
func ExampleClient_Do() {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		fmt.Fprintf(w, `{"id":"ord_1","key":%q}`, r.Header.Get("Idempotency-Key"))
	}))
	defer srv.Close()

	c := providers.NewClient(srv.URL, &providers.Config{RetryWaitMin: time.Millisecond})
	var order struct{ ID, Key string }
	res, err := c.Do(context.Background(), &providers.Request{
		Method: http.MethodPost, Path: "/v1/orders",
		Body: []byte(`{"sku":"A1"}`), ContentType: "application/json",
		Key: client.DownstreamKey("3f2a", 1), KeyHeader: "Idempotency-Key",
		Replay: providers.ReplayKeyed,
	}, &order)
	if err != nil {
		panic(err)
	}
	fmt.Println(order.ID, order.Key, "after", res.Attempts, "attempts")
	// Output: ord_1 3f2a after 2 attempts
}

// A request that reached the provider and got no answer may have taken
// effect: its error is ambiguous, and an unkeyed POST is not resent.
func ExampleProviderError() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		<-r.Context().Done() // never answers; returns when the client leaves
	}))
	defer srv.Close()

	c := providers.NewClient(srv.URL, &providers.Config{Timeout: time.Second}) // only a server that never answers reaches it
	_, err := c.Do(context.Background(), &providers.Request{
		Method: http.MethodPost, Path: "/v1/messages", Body: []byte(`{}`), ContentType: "application/json",
	}, nil)
	var pe *providers.ProviderError
	if errors.As(err, &pe) {
		fmt.Println(errclass.Of(err), "after", pe.Attempts, "attempt")
	}
	// Output: ambiguous after 1 attempt
}
