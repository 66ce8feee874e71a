package providers

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/oncely/oncely/clock"
	"github.com/oncely/oncely/errclass"
)

func TestParseErrorBody(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name                      string
		status                    int
		body                      string
		code, typ, message, param string
	}{
		{"stripe", 402, `{"error":{"type":"card_error","code":"card_declined","decline_code":"insufficient_funds","message":"Your card has insufficient funds.","param":"payment_method"}}`,
			"card_declined", "card_error", "Your card has insufficient funds.", "payment_method"},
		{"stripe decline code only", 402, `{"error":{"type":"card_error","decline_code":"do_not_honor"}}`,
			"do_not_honor", "card_error", "", ""},
		{"problem details", 422, `{"type":"https://example.com/mismatch","title":"Unprocessable","detail":"payload differs"}`,
			"", "https://example.com/mismatch", "payload differs", ""},
		{"problem title only", 409, `{"title":"Request in progress"}`, "", "", "Request in progress", ""},
		{"flat", 400, `{"code":"missing_key","message":"Idempotency-Key is required"}`, "missing_key", "", "Idempotency-Key is required", ""},
		{"numeric code", 400, `{"code":4001,"message":"bad"}`, "4001", "", "bad", ""},
		{"error string", 404, `{"error":"not_found","message":"no contact"}`, "not_found", "", "no contact", ""},
		{"not JSON", 503, `<html>down</html>`, "", "", "Service Unavailable", ""},
		{"empty", 500, ``, "", "", "Internal Server Error", ""},
		{"JSON without fields", 418, `{"x":1}`, "", "", "I'm a teapot", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := &ProviderError{Status: tc.status}
			e.parseErrorBody([]byte(tc.body))
			if e.Code != tc.code || e.Type != tc.typ || e.Message != tc.message || e.Param != tc.param {
				t.Fatalf("got code %q type %q message %q param %q", e.Code, e.Type, e.Message, e.Param)
			}
		})
	}
}

func TestClassifyStatus(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		status               int
		retryAfter           bool
		retryable, ambiguous bool
	}{
		{400, false, false, false}, {401, false, false, false}, {402, false, false, false},
		{404, false, false, false}, {422, false, false, false}, {302, false, false, false},
		{408, false, true, false}, {409, false, true, false}, {425, false, true, false},
		{429, false, true, false}, {429, true, true, false},
		{503, true, true, false}, {503, false, true, true},
		{500, false, true, true}, {502, false, true, true}, {504, false, true, true},
		{501, false, false, false},
	} {
		r, a := classifyStatus(tc.status, tc.retryAfter)
		if r != tc.retryable || a != tc.ambiguous {
			t.Errorf("status %d (Retry-After %v): retryable %v ambiguous %v, want %v %v", tc.status, tc.retryAfter, r, a, tc.retryable, tc.ambiguous)
		}
	}
}

func TestProviderErrorText(t *testing.T) {
	t.Parallel()
	dial := errors.New("dial tcp 127.0.0.1:1: connect: connection refused")
	for _, tc := range []struct {
		e    *ProviderError
		want string
	}{
		{&ProviderError{Op: "POST /v1/refunds", Err: dial, Retryable: true},
			"providers: POST /v1/refunds: not sent: dial tcp 127.0.0.1:1: connect: connection refused"},
		{&ProviderError{Op: "POST /v1/refunds", Err: errors.New("timeout"), Retryable: true, Ambiguous: true},
			"providers: POST /v1/refunds: maybe sent: timeout"},
		{&ProviderError{Op: "POST /v1/payment_intents", Status: 402, Type: "card_error", Code: "card_declined", Message: "Your card was declined.", Param: "payment_method"},
			"providers: POST /v1/payment_intents: status 402 card_error card_declined: Your card was declined. (param payment_method)"},
		{&ProviderError{Op: "POST /v1/x", Status: 500, Message: "Internal Server Error", Ambiguous: true, Retryable: true},
			"providers: POST /v1/x: status 500: Internal Server Error (outcome unknown)"},
	} {
		if got := tc.e.Error(); got != tc.want {
			t.Errorf("got  %q\nwant %q", got, tc.want)
		}
	}
}

func TestErrorClassAndUnwrap(t *testing.T) {
	t.Parallel()
	cause := errors.New("cause")
	for _, tc := range []struct {
		e    ProviderError
		want errclass.Class
	}{
		{ProviderError{Ambiguous: true, Retryable: true}, errclass.Ambiguous},
		{ProviderError{Ambiguous: true}, errclass.Ambiguous},
		{ProviderError{Retryable: true}, errclass.Definite},
		{ProviderError{}, errclass.Permanent},
	} {
		e := tc.e
		e.Err = cause
		var c errclass.Classified = &e
		if c.ErrorClass() != tc.want || !errors.Is(&e, cause) {
			t.Errorf("%+v: class %v, want %v", tc.e, c.ErrorClass(), tc.want)
		}
	}
}

func TestBackoffAndRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	c := NewClient("http://127.0.0.1", &Config{MaxRetryAfter: 5 * time.Second, Clock: clock.NewFake(now)})
	for i := range 40 {
		d := c.backoff(10*time.Millisecond, 80*time.Millisecond, i, nil)
		want := min(10*time.Millisecond<<min(i, 30), 80*time.Millisecond)
		if i >= 30 {
			want = 80 * time.Millisecond
		}
		if d < want/2 || d > want {
			t.Fatalf("attempt %d: backoff %v outside [%v, %v]", i, d, want/2, want)
		}
	}
	for _, tc := range []struct {
		status int
		header string
		want   time.Duration
		ok     bool
	}{
		{429, "2", 2 * time.Second, true},
		{503, "0", 0, true},
		{429, now.Add(2 * time.Second).Format(http.TimeFormat), 2 * time.Second, true},
		{429, now.Add(-time.Hour).Format(http.TimeFormat), 0, true},
		{429, "-3", 0, false},
		{429, "soon", 0, false},
		{500, "2", 0, false}, // only 429 and 503 carry a Retry-After worth honouring
		{429, "", 0, false},
	} {
		resp := &http.Response{StatusCode: tc.status, Header: http.Header{}}
		if tc.header != "" {
			resp.Header.Set("Retry-After", tc.header)
		}
		got, ok := c.retryAfter(resp)
		if got != tc.want || ok != tc.ok {
			t.Errorf("%d %q: %v %v, want %v %v", tc.status, tc.header, got, ok, tc.want, tc.ok)
		}
	}
	// The backoff honours Retry-After, bounded by MaxRetryAfter.
	resp := &http.Response{StatusCode: 429, Header: http.Header{"Retry-After": {"60"}}}
	if d := c.backoff(time.Millisecond, time.Millisecond, 0, resp); d != 5*time.Second {
		t.Fatalf("backoff %v, want the 5s cap", d)
	}
}
