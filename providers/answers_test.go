package providers

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/oncely/oncely/errclass"
)

// thing is an answer type with a shape check.
type thing struct {
	ID     string `json:"id"`
	Object string `json:"object"`
}

func (t *thing) Validate() error {
	if t.ID == "" || t.Object != "thing" {
		return fmt.Errorf("not a thing: id %q, object %q", t.ID, t.Object)
	}
	return nil
}

// truncated answers with a Content-Length longer than what it sends, then
// closes the connection.
func truncated(status int, partial string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		conn, buf, err := http.NewResponseController(w).Hijack()
		if err != nil {
			panic(err)
		}
		defer conn.Close()
		fmt.Fprintf(buf, "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
			status, http.StatusText(status), len(partial)+100, partial)
		buf.Flush()
	}
}

func respond(status int, contentType, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if contentType != "" {
			w.Header().Set("Content-Type", contentType)
		}
		w.WriteHeader(status)
		io.WriteString(w, body)
	}
}

const htmlPage = "<!DOCTYPE html><html><head><title>502 Bad Gateway</title></head><body><h1>Bad Gateway</h1></body></html>"

// Every bad answer becomes a typed error of the class it deserves: a 2xx
// that cannot be read is ambiguous, an error status keeps its class.
func TestBadAnswers(t *testing.T) {
	t.Parallel()
	huge := strings.Repeat("x", 2<<20)
	for _, tc := range []struct {
		name    string
		h       http.HandlerFunc
		replay  Replay
		class   errclass.Class
		status  int
		is      error // in the chain, if set
		message string
	}{
		{"200 not JSON", respond(200, "text/plain", "ok, done"), ReplayUnsafe, errclass.Ambiguous, 200, ErrBadResponse, ""},
		{"200 HTML page", respond(200, "text/html", htmlPage), ReplayUnsafe, errclass.Ambiguous, 200, ErrBadResponse, ""},
		{"200 empty body", respond(200, "", ""), ReplayUnsafe, errclass.Ambiguous, 200, ErrBadResponse, ""},
		{"204 no content", respond(204, "", ""), ReplayUnsafe, errclass.Ambiguous, 204, ErrBadResponse, ""},
		{"200 null", respond(200, "application/json", "null"), ReplayUnsafe, errclass.Ambiguous, 200, ErrBadResponse, ""},
		{"200 unexpected shape", respond(200, "application/json", `{"object":"list","data":[]}`), ReplayUnsafe, errclass.Ambiguous, 200, ErrBadResponse, ""},
		{"200 array", respond(200, "application/json", `[{"id":"th_1"}]`), ReplayUnsafe, errclass.Ambiguous, 200, ErrBadResponse, ""},
		{"200 trailing garbage", respond(200, "application/json", `{"id":"th_1","object":"thing"} <html>`), ReplayUnsafe, errclass.Ambiguous, 200, ErrBadResponse, ""},
		{"200 truncated", truncated(200, `{"id":"th_1","obj`), ReplayUnsafe, errclass.Ambiguous, 200, io.ErrUnexpectedEOF, ""},
		{"200 truncated, keyed and retried", truncated(200, `{"id":`), ReplayKeyed, errclass.Ambiguous, 200, ErrBadResponse, ""},
		{"200 enormous", respond(200, "application/json", `{"id":"`+huge+`"}`), ReplayKeyed, errclass.Ambiguous, 200, ErrBodyTooLarge, ""},
		{"500 HTML page", respond(500, "text/html", htmlPage), ReplayUnsafe, errclass.Ambiguous, 500, nil, "Internal Server Error"},
		{"502 empty", respond(502, "", ""), ReplayUnsafe, errclass.Ambiguous, 502, nil, "Bad Gateway"},
		{"400 HTML page", respond(400, "text/html", htmlPage), ReplayUnsafe, errclass.Permanent, 400, nil, "Bad Request"},
		{"400 not JSON", respond(400, "text/plain", "amount must be positive"), ReplayUnsafe, errclass.Permanent, 400, nil, "Bad Request"},
		{"400 truncated", truncated(400, `{"error":{"mess`), ReplayUnsafe, errclass.Permanent, 400, io.ErrUnexpectedEOF, ""},
		{"400 enormous", respond(400, "text/plain", huge), ReplayUnsafe, errclass.Permanent, 400, ErrBodyTooLarge, ""},
		{"429 not JSON", respond(429, "text/plain", "slow down"), ReplayUnsafe, errclass.Definite, 429, nil, "Too Many Requests"},
		{"404 problem details", respond(404, "application/problem+json", `{"type":"https://example.com/nope","title":"Not Found","status":404,"detail":"no such thing"}`), ReplayUnsafe, errclass.Permanent, 404, nil, "no such thing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, n := counting(t, tc.h)
			var out thing
			res, err := NewClient(s.URL, testConfig()).Do(context.Background(), post(tc.replay), &out)
			if res != nil {
				t.Fatalf("a bad answer returned a response: %+v", res)
			}
			pe := wantClass(t, err, tc.class)
			if pe.Status != tc.status {
				t.Fatalf("status %d, want %d", pe.Status, tc.status)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Fatalf("%v: want %v in the chain", err, tc.is)
			}
			if tc.message != "" && pe.Message != tc.message {
				t.Fatalf("message %q, want %q", pe.Message, tc.message)
			}
			if len(pe.Body) > MaxErrorBody {
				t.Fatalf("body of %d bytes kept", len(pe.Body))
			}
			// An unkeyed request is never resent once it reached the
			// provider.
			if tc.replay == ReplayUnsafe && n.Load() != 1 {
				t.Fatalf("%d requests", n.Load())
			}
		})
	}
}

// A truncated 2xx is resent when the provider replays keyed requests, and
// the replay's whole body is the answer.
func TestTruncatedAnswerRecoveredByReplay(t *testing.T) {
	t.Parallel()
	var first atomic.Bool
	first.Store(true)
	s, n := counting(t, func(w http.ResponseWriter, r *http.Request) {
		if first.Swap(false) {
			truncated(200, `{"id":"th_1",`)(w, r)
			return
		}
		respond(200, "application/json", `{"id":"th_1","object":"thing"}`)(w, r)
	})
	var out thing
	if _, err := NewClient(s.URL, testConfig()).Do(context.Background(), post(ReplayKeyed), &out); err != nil {
		t.Fatal(err)
	}
	if out.ID != "th_1" || n.Load() != 2 {
		t.Fatalf("%+v after %d requests", out, n.Load())
	}
}

// A connection closed in the middle of the status line is a transport
// error after the request was sent: ambiguous.
func TestGarbageStatusLine(t *testing.T) {
	t.Parallel()
	l := listen(t, func(_ int, c net.Conn, _ *rawListener) {
		readRequest(c)
		io.WriteString(c, "HTTP/1.1 2")
		c.Close()
	})
	_, err := NewClient(l.url(), testConfig()).Do(context.Background(), post(ReplayUnsafe), &thing{})
	pe := wantClass(t, err, errclass.Ambiguous)
	if pe.Status != 0 || l.accepted.Load() != 1 {
		t.Fatalf("%+v", pe)
	}
}
