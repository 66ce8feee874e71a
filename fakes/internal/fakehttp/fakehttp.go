// Package fakehttp holds the plumbing the fake providers share: seeded id
// generation, capped body reading, JSON answers and the loopback server.
package fakehttp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/mail"
	"sync"
	"time"

	"github.com/oncely/oncely/clock"
	"github.com/oncely/oncely/fakes/fault"
)

// MaxBody is the largest request body a fake accepts (1 MiB); larger bodies
// are answered 413.
const MaxBody = 1 << 20

// ReadBody reads r's body, at most MaxBody bytes. tooLarge reports that the
// cap was hit; any other failure is a malformed or aborted body.
func ReadBody(w http.ResponseWriter, r *http.Request) (body []byte, tooLarge bool, err error) {
	body, err = io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBody))
	var mbe *http.MaxBytesError
	return body, errors.As(err, &mbe), err
}

// DecodeJSON reads r's body (at most MaxBody bytes) into v, rejecting empty
// bodies, unknown fields and trailing data. On failure it returns the status
// to answer: 413 for an oversized body, 400 otherwise.
func DecodeJSON(w http.ResponseWriter, r *http.Request, v any) (status int, err error) {
	body, tooLarge, err := ReadBody(w, r)
	if tooLarge {
		return http.StatusRequestEntityTooLarge, fmt.Errorf("request body larger than %d bytes", MaxBody)
	}
	if err != nil {
		return http.StatusBadRequest, fmt.Errorf("reading the body: %w", err)
	}
	if err := StrictJSON(body, v); err != nil {
		return http.StatusBadRequest, err
	}
	return 0, nil
}

// StrictJSON decodes body into v, rejecting an empty body, unknown fields
// and trailing data.
func StrictJSON(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if errors.Is(err, io.EOF) {
			return errors.New("empty body: a JSON object is required")
		}
		return fmt.Errorf("malformed JSON: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("malformed JSON: data after the value")
	}
	return nil
}

// ErrorJSON is the {"error": {"code", "message"}} answer of the mail and CRM
// fakes.
func ErrorJSON(status int, code, message string) fault.Response {
	type body struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	}
	return JSON(status, "", map[string]body{"error": {code, message}})
}

// FaultErrorJSON renders an injected failure with ErrorJSON.
func FaultErrorJSON(status int, message string) fault.Response {
	code := "internal_error"
	switch status {
	case http.StatusTooManyRequests:
		code = "rate_limited"
	case http.StatusServiceUnavailable:
		code = "unavailable"
	}
	return ErrorJSON(status, code, message)
}

// ValidEmail reports whether s is a bare email address (no display name).
func ValidEmail(s string) bool {
	a, err := mail.ParseAddress(s)
	return err == nil && a.Address == s && len(s) <= 254
}

// Timestamp formats t as the JSON fakes do: RFC 3339 in UTC.
func Timestamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// Clock returns c's Now, or time.Now when c is nil.
func Clock(c clock.Clock) func() time.Time {
	if c == nil {
		return time.Now
	}
	return c.Now
}

const idAlphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// IDs generates provider-style ids from a seeded source, so that a run can
// be replayed. It is safe for concurrent use.
type IDs struct {
	mu   sync.Mutex
	seed int64
	rng  *rand.Rand
}

// NewIDs returns a generator seeded with seed.
func NewIDs(seed int64) *IDs {
	g := &IDs{seed: seed}
	g.Reset()
	return g
}

// New returns prefix followed by n random base-62 characters.
func (g *IDs) New(prefix string, n int) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	b := make([]byte, len(prefix), len(prefix)+n)
	copy(b, prefix)
	for range n {
		b = append(b, idAlphabet[g.rng.IntN(len(idAlphabet))])
	}
	return string(b)
}

// Reset restarts the sequence from the seed.
func (g *IDs) Reset() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.rng = rand.New(rand.NewPCG(uint64(g.seed), 0x1de41d5))
}

// JSON returns a response with v encoded as JSON and the given content type
// ("application/json" when empty).
func JSON(status int, contentType string, v any) fault.Response {
	if contentType == "" {
		contentType = "application/json"
	}
	body, err := json.Marshal(v)
	if err != nil {
		// The fakes only encode their own plain structs; this is a bug.
		status, body = http.StatusInternalServerError, []byte(`{"error":"fakehttp: cannot encode response"}`)
	}
	body = append(body, '\n')
	return fault.Response{Status: status, Header: http.Header{"Content-Type": {contentType}}, Body: body}
}
