package providers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-retryablehttp"

	"github.com/oncely/oncely"
	"github.com/oncely/oncely/clock"
)

// Defaults of Config.
const (
	DefaultTimeout       = 30 * time.Second
	DefaultMaxRetries    = 3
	DefaultRetryWaitMin  = 100 * time.Millisecond
	DefaultRetryWaitMax  = 2 * time.Second
	DefaultMaxRetryAfter = 10 * time.Second
	DefaultMaxBodyBytes  = 1 << 20
)

// Config configures a Client. A nil *Config, or a zero field, means the
// default.
type Config struct {
	// HTTPClient sends the requests; nil: a new pooled client. It is
	// copied, never modified: the copy never follows redirects (a
	// redirected POST would silently turn into a GET), and takes Timeout
	// when that is set.
	HTTPClient *http.Client
	// Timeout bounds one attempt, from dialing to the end of the body.
	// Default DefaultTimeout, unless HTTPClient has a Timeout of its own.
	Timeout time.Duration
	// MaxRetries is how many times a failed attempt is retried, when it
	// may be (see Client.Do). 0: DefaultMaxRetries; negative: never.
	MaxRetries int
	// RetryWaitMin and RetryWaitMax bound the exponential backoff between
	// attempts, with jitter. Defaults DefaultRetryWaitMin and
	// DefaultRetryWaitMax.
	RetryWaitMin, RetryWaitMax time.Duration
	// MaxRetryAfter caps a Retry-After (on 429 and 503) that is honoured. A
	// provider asking for a longer wait ends the retries: the error is
	// returned at once, with its RetryAfter. Default DefaultMaxRetryAfter.
	MaxRetryAfter time.Duration
	// MaxBodyBytes caps what is read of a response body. Default
	// DefaultMaxBodyBytes. A larger 2xx body is an ambiguous error.
	MaxBodyBytes int64
	// Classify, when set, adjusts the error built for an error status
	// after the default classification: an adapter maps its provider's
	// codes to sentinels (ProviderError.Err) and corrects Retryable or
	// Ambiguous. It runs for every attempt, so it also decides retries. It
	// cannot clear the ambiguity an earlier attempt left.
	Classify func(*ProviderError)
	// Clock is the clock Retry-After dates are read against, and the one
	// adapters reckon lookup windows from (default: the system clock).
	Clock clock.Clock
}

// Replay says what sending a request again does at the provider.
type Replay int

const (
	// ReplayUnsafe: a repeat may make a second effect (a create the
	// provider does not deduplicate). Once the request may have reached
	// the provider it is never retried.
	ReplayUnsafe Replay = iota
	// ReplayKeyed: the provider deduplicates on Request.Key, sent in
	// Request.KeyHeader, and answers a repeat with the first answer.
	ReplayKeyed
	// ReplayUpsert: the request is an upsert (a PUT by external id): a
	// repeat converges to the same state.
	ReplayUpsert
)

// Request is one call to a provider.
type Request struct {
	Method string
	// Path is appended to the client's base URL ("/v1/refunds").
	Path string
	// Query is encoded into the URL.
	Query url.Values
	// Header is sent as given (authorization, versions). Without a
	// User-Agent of the caller's, oncely.UserAgent is sent.
	Header http.Header
	// Body and its ContentType; nil for none.
	Body        []byte
	ContentType string
	// Key is the downstream key; when KeyHeader is set it is sent in that
	// header ("Idempotency-Key"). An adapter that carries the key in the
	// body or the path puts it there itself and may leave both empty.
	Key       string
	KeyHeader string
	// Replay decides whether the request is retried once it may have
	// reached the provider. GET, HEAD and OPTIONS always may be.
	Replay Replay
}

// Response is a 2xx answer.
type Response struct {
	Status int
	Header http.Header
	// Body is the whole body (at most Config.MaxBodyBytes).
	Body []byte
	// Attempts is how many attempts were made.
	Attempts int
}

// Validator is implemented by answer types that can tell a well-formed
// answer from an unexpected shape (a JSON object without an id, a list
// where an object was expected). Client.Do calls Validate after decoding a
// 2xx body into it; a failed validation is an ambiguous ErrBadResponse.
type Validator interface {
	Validate() error
}

// Client sends requests to one provider through a single retry layer
// (go-retryablehttp), and classifies every failure by what it means for
// the side effect. It is safe for concurrent use.
type Client struct {
	base          string
	rc            *retryablehttp.Client
	maxBody       int64
	maxRetryAfter time.Duration
	classify      func(*ProviderError)
	clock         clock.Clock
}

// NewClient returns a client for the provider at baseURL
// ("https://api.example.com").
func NewClient(baseURL string, cfg *Config) *Client {
	var c Config
	if cfg != nil {
		c = *cfg
	}
	var hc http.Client
	if c.HTTPClient != nil {
		hc = *c.HTTPClient
	} else {
		hc = http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	}
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	switch {
	case c.Timeout > 0:
		hc.Timeout = c.Timeout
	case hc.Timeout == 0:
		hc.Timeout = DefaultTimeout
	}
	switch {
	case c.MaxRetries == 0:
		c.MaxRetries = DefaultMaxRetries
	case c.MaxRetries < 0:
		c.MaxRetries = 0
	}
	if c.RetryWaitMin <= 0 {
		c.RetryWaitMin = DefaultRetryWaitMin
	}
	if c.RetryWaitMax <= 0 {
		c.RetryWaitMax = DefaultRetryWaitMax
	}
	if c.RetryWaitMax < c.RetryWaitMin {
		c.RetryWaitMax = c.RetryWaitMin
	}
	if c.MaxRetryAfter <= 0 {
		c.MaxRetryAfter = DefaultMaxRetryAfter
	}
	if c.MaxBodyBytes <= 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if c.Clock == nil {
		c.Clock = clock.System{}
	}
	cl := &Client{
		base:          strings.TrimRight(baseURL, "/"),
		maxBody:       c.MaxBodyBytes,
		maxRetryAfter: c.MaxRetryAfter,
		classify:      c.Classify,
		clock:         c.Clock,
	}
	cl.rc = &retryablehttp.Client{
		HTTPClient:   &hc,
		RetryWaitMin: c.RetryWaitMin,
		RetryWaitMax: c.RetryWaitMax,
		RetryMax:     c.MaxRetries,
		CheckRetry:   cl.checkRetry,
		Backoff:      cl.backoff,
		// Keep the last response: its body is the provider's error.
		ErrorHandler: retryablehttp.PassthroughErrorHandler,
	}
	return cl
}

// call is the state of one Do across its attempts.
type call struct {
	req       *Request
	op        string
	connected atomic.Bool // this attempt got a connection (httptrace)
	resent    atomic.Bool
	attempts  int
	ambiguous bool           // some attempt may have been processed
	last      *ProviderError // the last attempt's failure; nil after a 2xx
	ok        *http.Response // the 2xx, its Body read into okBody
	okBody    []byte
}

type callKey struct{}

// Do sends the request and returns the 2xx answer, decoded as JSON into
// out when out is not nil. Every failure is a *ProviderError.
//
// Not sent or maybe sent: an attempt counts as maybe sent from the moment
// the transport hands it a connection (httptrace GotConn), since the
// request bytes may be written any time after (WroteRequest may even fire
// after a timed-out attempt returned). A DNS, dial or TLS handshake
// failure comes before that and is definite. Once maybe sent, a timeout, a
// reset or a 5xx is ambiguous, and stays so whatever later attempts
// answer.
//
// Retries: an attempt that failed in a way a retry may fix (not sent,
// timeout, reset, 408, 409, 425, 429, 5xx, a truncated 2xx body) is
// retried, up to Config.MaxRetries, with backoff, honouring Retry-After up
// to Config.MaxRetryAfter, when repeating it cannot make a second effect:
// it was never sent, it is a GET, HEAD or OPTIONS, or its Replay is
// ReplayKeyed or ReplayUpsert. The caller's context bounds the whole.
func (c *Client) Do(ctx context.Context, r *Request, out any) (*Response, error) {
	op := r.Method + " " + r.Path
	if r.Method == "" || !strings.HasPrefix(r.Path, "/") {
		return nil, &ProviderError{Op: op, Err: fmt.Errorf("%w: method and a path starting with / are required", ErrInvalidRequest)}
	}
	if r.Replay == ReplayKeyed && (r.Key == "" || r.KeyHeader == "") {
		return nil, &ProviderError{Op: op, Err: fmt.Errorf("%w: a keyed request needs Key and KeyHeader", ErrInvalidRequest)}
	}
	st := &call{req: r, op: op}
	ctx = context.WithValue(ctx, callKey{}, st)
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GotConn: func(httptrace.GotConnInfo) {
			if st.connected.Swap(true) {
				st.resent.Store(true) // the transport retried inside one attempt
			}
		},
	})
	u := c.base + r.Path
	if len(r.Query) > 0 {
		u += "?" + r.Query.Encode()
	}
	var body any
	if r.Body != nil {
		body = r.Body
	}
	req, err := retryablehttp.NewRequestWithContext(ctx, r.Method, u, body)
	if err != nil {
		return nil, &ProviderError{Op: op, Err: fmt.Errorf("%w: %v", ErrInvalidRequest, err)}
	}
	for k, vs := range r.Header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	if r.ContentType != "" {
		req.Header.Set("Content-Type", r.ContentType)
	}
	if req.Header.Get("Accept") == "" {
		req.Header.Set("Accept", "application/json")
	}
	if req.Header.Get("User-Agent") == "" {
		req.Header.Set("User-Agent", oncely.UserAgent)
	}
	if r.KeyHeader != "" && r.Key != "" {
		req.Header.Set(r.KeyHeader, r.Key)
	}

	resp, err := c.rc.Do(req)
	if resp != nil {
		resp.Body.Close()
	}
	if st.ok != nil && st.last == nil {
		return c.decode(st, out)
	}
	e := st.last
	if e == nil {
		// No attempt reached checkRetry (it always does in
		// go-retryablehttp); keep the error rather than guess success.
		e = &ProviderError{Retryable: true, Ambiguous: st.connected.Load(), Err: err}
	}
	e.Op = op
	e.Attempts = st.attempts
	e.Ambiguous = e.Ambiguous || st.ambiguous
	return nil, e
}

func (c *Client) decode(st *call, out any) (*Response, error) {
	res := &Response{Status: st.ok.StatusCode, Header: st.ok.Header, Body: st.okBody, Attempts: st.attempts}
	if out == nil {
		return res, nil
	}
	bad := func(err error) error {
		return &ProviderError{
			Op: st.op, Status: res.Status, Message: "cannot read the answer",
			Retryable: true, Ambiguous: true, Attempts: st.attempts,
			Body: capBody(res.Body), Err: fmt.Errorf("%w: %v", ErrBadResponse, err),
		}
	}
	if err := json.Unmarshal(res.Body, out); err != nil {
		return nil, bad(err)
	}
	if v, ok := out.(Validator); ok {
		if err := v.Validate(); err != nil {
			return nil, bad(err)
		}
	}
	return res, nil
}

// checkRetry is go-retryablehttp's CheckRetry: it runs after every attempt,
// reads its body, records what the attempt means, and decides the retry.
func (c *Client) checkRetry(ctx context.Context, resp *http.Response, err error) (bool, error) {
	st, _ := ctx.Value(callKey{}).(*call)
	if st == nil {
		return false, nil
	}
	st.attempts++
	sent := st.connected.Swap(false) || resp != nil
	e := c.attemptError(st, resp, err, sent)
	st.last = e
	if e == nil {
		return false, nil
	}
	st.ambiguous = st.ambiguous || e.Ambiguous || st.resent.Swap(false)
	if !e.Retryable || ctx.Err() != nil || e.RetryAfter > c.maxRetryAfter {
		return false, nil
	}
	if !sent {
		return true, nil
	}
	switch st.req.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return true, nil
	}
	return st.req.Replay != ReplayUnsafe, nil
}

// attemptError reads the attempt's answer and returns its failure, or nil
// (and st.ok set) for a readable 2xx.
func (c *Client) attemptError(st *call, resp *http.Response, err error, sent bool) *ProviderError {
	if err != nil {
		return &ProviderError{Retryable: true, Ambiguous: sent, Err: err}
	}
	body, rerr := readCapped(resp.Body, c.maxBody)
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		if rerr == nil {
			st.ok, st.okBody = resp, body
			return nil
		}
		// A truncated body may read whole on a replay; an oversized one
		// will not.
		return &ProviderError{
			Status: resp.StatusCode, Message: "cannot read the answer",
			Retryable: !errors.Is(rerr, ErrBodyTooLarge), Ambiguous: true,
			Body: capBody(body), Err: fmt.Errorf("%w: %w", ErrBadResponse, rerr),
		}
	}
	ra, hasRA := c.retryAfter(resp)
	e := &ProviderError{Status: resp.StatusCode, RetryAfter: ra, Body: capBody(body)}
	e.Retryable, e.Ambiguous = classifyStatus(resp.StatusCode, hasRA)
	e.parseErrorBody(body)
	if rerr != nil && e.Err == nil {
		e.Err = fmt.Errorf("%w: %w", ErrBadResponse, rerr)
	}
	if c.classify != nil {
		c.classify(e)
	}
	return e
}

// readCapped reads at most max bytes; a longer body is ErrBodyTooLarge with
// the first max bytes.
func readCapped(r io.Reader, max int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return b, err
	}
	if int64(len(b)) > max {
		return b[:max], fmt.Errorf("%w: more than %d bytes", ErrBodyTooLarge, max)
	}
	return b, nil
}

// retryAfter reads Retry-After on a 429 or 503: delay-seconds or an
// HTTP-date, read against the client's clock.
func (c *Client) retryAfter(resp *http.Response) (time.Duration, bool) {
	if resp == nil || (resp.StatusCode != http.StatusTooManyRequests && resp.StatusCode != http.StatusServiceUnavailable) {
		return 0, false
	}
	v := strings.TrimSpace(resp.Header.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	if s, err := strconv.ParseInt(v, 10, 64); err == nil {
		if s < 0 {
			return 0, false
		}
		if s > int64(24*time.Hour/time.Second) {
			s = int64(24 * time.Hour / time.Second)
		}
		return time.Duration(s) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return max(t.Sub(c.clock.Now()), 0), true
}

// backoff is go-retryablehttp's Backoff: the provider's Retry-After when it
// gave one (checkRetry already refused one beyond MaxRetryAfter), else
// exponential from min, capped at max, with jitter in [d/2, d].
func (c *Client) backoff(minWait, maxWait time.Duration, attempt int, resp *http.Response) time.Duration {
	if ra, ok := c.retryAfter(resp); ok {
		return min(ra, c.maxRetryAfter)
	}
	d := maxWait
	if attempt < 30 {
		d = min(minWait<<attempt, maxWait)
	}
	if half := int64(d / 2); half > 0 {
		d = time.Duration(half + rand.Int64N(half+1))
	}
	return d
}
