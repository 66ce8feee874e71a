package providers

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/oncely/oncely/errclass"
)

// Sentinel errors, found in a ProviderError's chain with errors.Is.
var (
	// ErrBadResponse: the provider answered with a body that cannot be
	// read as the expected answer (not JSON, truncated, an HTML page, an
	// unexpected shape). After a 2xx the error is ambiguous: the effect
	// may exist.
	ErrBadResponse = errors.New("providers: unexpected response")
	// ErrBodyTooLarge: the response body exceeds Config.MaxBodyBytes.
	ErrBodyTooLarge = errors.New("providers: response body too large")
	// ErrInvalidRequest: the request is malformed (no method or path, a
	// keyed request without its key); nothing was sent.
	ErrInvalidRequest = errors.New("providers: invalid request")
	// ErrNoLookup: the adapter cannot ask its provider whether an effect
	// exists (Capabilities.Lookup is NoLookup).
	ErrNoLookup = errors.New("providers: the provider offers no lookup")
)

// MaxErrorBody caps ProviderError.Body.
const MaxErrorBody = 8 << 10

// ProviderError is the error of a request that did not produce a usable
// answer: a transport failure, an error status, or a 2xx that could not be
// read. It tells what happened to the side effect:
//
//   - Ambiguous: the effect may exist. Set when any attempt may have been
//     processed: a connection was made and then the request timed out or
//     was reset, a 5xx answered it (503 with Retry-After excepted), or a
//     2xx body could not be read. It is sticky across retries: a final
//     refusal after an earlier attempt that may have been processed is
//     still ambiguous.
//   - otherwise Retryable: nothing happened and the same request may
//     succeed later (not sent: DNS, dial or TLS failure; 408, 409 in
//     flight, 425, 429, 503 with Retry-After).
//   - otherwise permanent: the provider refused and will refuse again (a
//     validation error, a declined card, a payload mismatch).
//
// It implements errclass.Classified.
type ProviderError struct {
	// Op is the request, "POST /v1/refunds".
	Op string
	// Status is the HTTP status of the last attempt; 0 when no response
	// arrived.
	Status int
	// Code, Type, Message and Param come from the provider's error body
	// when it has them (Stripe: error.code, error.type, error.message,
	// error.param; RFC 9457 problem details: type, detail or title).
	Code    string
	Type    string
	Message string
	Param   string
	// Retryable: the same request may succeed if sent again.
	Retryable bool
	// Ambiguous: the effect may exist.
	Ambiguous bool
	// RetryAfter is what the provider asked to wait (429, 503), if it did.
	RetryAfter time.Duration
	// Attempts is how many attempts were made.
	Attempts int
	// Body is the start of the last response body, at most MaxErrorBody
	// bytes.
	Body []byte
	// Err is the cause: the transport error, ErrBadResponse or
	// ErrBodyTooLarge, or a sentinel an adapter attached.
	Err error
}

// Error describes the failure in one line.
func (e *ProviderError) Error() string {
	var b strings.Builder
	b.WriteString("providers: ")
	if e.Op != "" {
		b.WriteString(e.Op)
		b.WriteString(": ")
	}
	switch {
	case e.Status != 0:
		fmt.Fprintf(&b, "status %d", e.Status)
	case e.Ambiguous:
		b.WriteString("maybe sent")
	default:
		b.WriteString("not sent")
	}
	for _, s := range []string{e.Type, e.Code} {
		if s != "" {
			b.WriteString(" ")
			b.WriteString(s)
		}
	}
	if e.Message != "" {
		b.WriteString(": ")
		b.WriteString(e.Message)
	}
	if e.Param != "" {
		fmt.Fprintf(&b, " (param %s)", e.Param)
	}
	if e.Err != nil && (e.Message == "" || e.Message != e.Err.Error()) {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	if e.Ambiguous && e.Status != 0 {
		b.WriteString(" (outcome unknown)")
	}
	return b.String()
}

// Unwrap returns the cause.
func (e *ProviderError) Unwrap() error { return e.Err }

// ErrorClass implements errclass.Classified.
func (e *ProviderError) ErrorClass() errclass.Class {
	switch {
	case e.Ambiguous:
		return errclass.Ambiguous
	case e.Retryable:
		return errclass.Definite
	default:
		return errclass.Permanent
	}
}

// classifyStatus is the default reading of an error status: whether a retry
// may succeed, and whether the effect may exist.
func classifyStatus(status int, retryAfter bool) (retryable, ambiguous bool) {
	switch {
	case status == http.StatusRequestTimeout, status == http.StatusConflict,
		status == http.StatusTooEarly, status == http.StatusTooManyRequests:
		// Refused before processing: the request did not arrive in time,
		// the same key is in flight, or a rate limit.
		return true, false
	case status == http.StatusServiceUnavailable:
		// A 503 that says when to come back is load shedding before
		// processing; a bare one may come from a gateway after a commit.
		return true, !retryAfter
	case status == http.StatusNotImplemented, status == http.StatusHTTPVersionNotSupported:
		return false, false
	case status >= 500:
		return true, true
	}
	// Other 4xx: a validation error or a decline. 1xx and 3xx (redirects
	// are never followed) are unexpected answers that did nothing.
	return false, false
}

// errorBody is the union of the error bodies providers send: Stripe's
// {"error": {...}}, RFC 9457 problem details, and the common flat
// {"code", "message"} or {"error": "text"}.
type errorBody struct {
	Error   json.RawMessage `json:"error"`
	Code    any             `json:"code"`
	Message string          `json:"message"`
	Type    string          `json:"type"`
	Title   string          `json:"title"`
	Detail  string          `json:"detail"`
	Param   string          `json:"param"`
}

type stripeErrorBody struct {
	Type        string `json:"type"`
	Code        string `json:"code"`
	DeclineCode string `json:"decline_code"`
	Message     string `json:"message"`
	Param       string `json:"param"`
}

// parseErrorBody fills Code, Type, Message and Param from the body, or, when
// the body is not a JSON error, Message from the status text.
func (e *ProviderError) parseErrorBody(body []byte) {
	var eb errorBody
	if json.Unmarshal(body, &eb) == nil {
		var se stripeErrorBody
		var text string
		switch {
		case len(eb.Error) > 0 && json.Unmarshal(eb.Error, &se) == nil:
			e.Type, e.Code, e.Message, e.Param = se.Type, se.Code, se.Message, se.Param
			if se.DeclineCode != "" && e.Code == "" {
				e.Code = se.DeclineCode
			}
		case len(eb.Error) > 0 && json.Unmarshal(eb.Error, &text) == nil:
			e.Code, e.Message = text, eb.Message
		default:
			e.Type, e.Message, e.Param = eb.Type, eb.Message, eb.Param
			switch c := eb.Code.(type) {
			case string:
				e.Code = c
			case float64:
				e.Code = strconv.FormatFloat(c, 'f', -1, 64)
			}
			if e.Message == "" {
				e.Message = eb.Detail
			}
			if e.Message == "" {
				e.Message = eb.Title
			}
		}
	}
	if e.Message == "" && e.Code == "" {
		e.Message = http.StatusText(e.Status)
	}
}

func capBody(b []byte) []byte {
	if len(b) > MaxErrorBody {
		b = b[:MaxErrorBody]
	}
	return append([]byte(nil), b...)
}
