// Package testutil holds helpers shared by the fakes' tests: settable and
// signalling clocks, polling with a deadline, and JSON requests.
package testutil

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/oncely/oncely/clock"
)

// NewClock returns a fake clock set to a fixed instant.
func NewClock() *clock.Fake { return clock.NewFake(time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)) }

// SignalClock is a fixed clock that closes Read on its first reading; a
// fake first reads its clock while claiming a request's idempotency key.
type SignalClock struct {
	once sync.Once
	// Read is closed by the first call of Now.
	Read chan struct{}
}

// NewSignalClock returns a SignalClock that has not been read.
func NewSignalClock() *SignalClock { return &SignalClock{Read: make(chan struct{})} }

// Now closes Read on its first call and returns a fixed instant.
func (c *SignalClock) Now() time.Time {
	c.once.Do(func() { close(c.Read) })
	return time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC)
}

// WaitFor polls cond until it holds, failing the test after 5 seconds.
func WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// FreshClient returns a client that never reuses connections, so that a
// dropped connection is reported instead of being retried by the transport.
func FreshClient(timeout time.Duration) *http.Client {
	return &http.Client{Timeout: timeout, Transport: &http.Transport{DisableKeepAlives: true}}
}

// Reply is a decoded JSON answer.
type Reply struct {
	Status int
	Header http.Header
	Body   map[string]any
	Raw    string
}

// Str returns the string at path in the body ("" if absent).
func (r Reply) Str(path ...string) string {
	v, _ := r.Get(path...).(string)
	return v
}

// Num returns the number at path in the body (0 if absent).
func (r Reply) Num(path ...string) float64 {
	v, _ := r.Get(path...).(float64)
	return v
}

// Get returns the value at path in the body (nil if absent).
func (r Reply) Get(path ...string) any {
	var cur any = r.Body
	for _, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[p]
	}
	return cur
}

// Data returns the body's "data" array of objects.
func (r Reply) Data() []map[string]any {
	items, _ := r.Body["data"].([]any)
	out := make([]map[string]any, len(items))
	for i, it := range items {
		out[i], _ = it.(map[string]any)
	}
	return out
}

// IDs returns the "id" of each object.
func IDs(items []map[string]any) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i], _ = it["id"].(string)
	}
	return out
}

// Do sends method url with body (JSON-encoded unless it is a string or nil)
// and the given header pairs, and decodes the JSON answer.
func Do(client *http.Client, method, url string, body any, header ...string) (Reply, error) {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = bytes.NewBufferString(b)
	default:
		enc, err := json.Marshal(b)
		if err != nil {
			return Reply{}, err
		}
		rd = bytes.NewReader(enc)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		return Reply{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := client.Do(req)
	if err != nil {
		return Reply{}, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return Reply{}, err
	}
	out := Reply{Status: resp.StatusCode, Header: resp.Header, Raw: string(raw)}
	if err := json.Unmarshal(raw, &out.Body); err != nil {
		return out, err
	}
	return out, nil
}

// MustDo is Do failing the test on a transport or decoding error.
func MustDo(t testing.TB, client *http.Client, method, url string, body any, header ...string) Reply {
	t.Helper()
	r, err := Do(client, method, url, body, header...)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	return r
}
