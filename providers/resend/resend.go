// Package resend is oncely's adapter for sending email through Resend, on
// Resend's official Go client (github.com/resend/resend-go/v3): the
// mechanism of an idempotency header (see package providers).
//
// Send carries the downstream key twice: as the Idempotency-Key header, so
// that Resend answers a repeat within its 24-hour window with the first
// answer instead of sending again, and as a tag (TagName, whose value is
// TagValue of the key), so that the email can be found after the window.
//
// resend-go builds every request and reads every answer; its HTTP client
// is a transport that sends through the providers layer, so that retries
// and the classification of failures are oncely's: a failure is a
// *providers.ProviderError (found with errors.As in resend-go's error),
// definite, permanent or ambiguous. A keyed send is retried (Resend
// deduplicates it); 409 concurrent_idempotent_requests and 429 (with its
// retry-after) are definite and retried; 409 invalid_idempotent_request is
// permanent (ErrKeyReused), as are validation and authentication errors and
// 429 daily_quota_exceeded (ErrQuotaExceeded); a 5xx, a timeout or a reset
// once connected is ambiguous.
//
// # Reconciling
//
// Within 24 hours of an attempt the reconcile policy resends the same call
// with the same key (Capabilities.DedupWindow): Resend replays the first
// answer, or sends now if the first attempt never arrived. Past that, Lookup
// lists the account's emails, newest first, up to Config.MaxListPages pages
// of 100, and looks for the tag. Resend's list and retrieve answers are
// consistent (no index lag); Resend's published description does not list
// tags in them, so an email listed without tags is retrieved (up to
// Config.MaxRetrieves), and one whose tags cannot be read leaves the lookup
// Inconclusive, never NotFound. So does a scan that ends before the list
// does.
//
// The adapter sends one email per action, so it never uses Resend's POST
// /emails/batch: a batch carries one Idempotency-Key for all its emails
// (up to 100), accepted or refused as a whole in Resend's default strict
// validation (its permissive mode sends part of it), so one action's key
// could not stand for one email, and a repeat of a batch whose content
// changed would be refused (invalid_idempotent_request) rather than send
// the one email that is missing. An action that sends several emails is several
// actions, each with its own key (fakes/resendfake does not model the
// batch).
//
// Lag bound: none (a consistent list). What stays uncertain: an email the
// list no longer shows (beyond Resend's retention of the account's email
// log, or more than MaxListPages pages back), and any email whose tags the
// API does not return.
package resend

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	resendgo "github.com/resend/resend-go/v3"

	"github.com/oncely/oncely"
	"github.com/oncely/oncely/clock"
	"github.com/oncely/oncely/providers"
)

// TagName is the tag that carries the downstream key.
const TagName = "oncely_key"

// DedupWindow is how long Resend keeps an idempotency key.
const DedupWindow = 24 * time.Hour

// MaxKeyLength is the longest idempotency key Resend accepts.
const MaxKeyLength = 256

// Defaults of Config.
const (
	DefaultMaxListPages = 10
	DefaultMaxRetrieves = 20
	listPageSize        = 100
)

// Sentinel errors in a failed send's chain (errors.Is); the error itself is
// a *providers.ProviderError.
var (
	// ErrKeyReused: the idempotency key was used before with another
	// payload (409 invalid_idempotent_request). Permanent.
	ErrKeyReused = errors.New("resend: idempotency key used with a different payload")
	// ErrKeyInUse: a request with the same key is still in progress (409
	// concurrent_idempotent_requests). Definite and retryable.
	ErrKeyInUse = errors.New("resend: idempotency key in use by a request in progress")
	// ErrRateLimited: too many requests (429 rate_limit_exceeded); the
	// error's RetryAfter says how long to wait. Definite and retryable.
	ErrRateLimited = errors.New("resend: rate limit exceeded")
	// ErrQuotaExceeded: the daily or monthly sending quota is used up (429
	// daily_quota_exceeded, monthly_quota_exceeded). Definite; retrying
	// will not help before the quota resets.
	ErrQuotaExceeded = errors.New("resend: sending quota exceeded")
)

// Config configures the adapter. APIKey is required.
type Config struct {
	// APIKey is the Resend API key (re_...), sent as a Bearer token.
	APIKey string
	// HTTP configures the HTTP layer (timeouts, retries, clock).
	HTTP providers.Config
	// MaxListPages bounds a lookup's scan, in pages of 100 emails. Default
	// DefaultMaxListPages.
	MaxListPages int
	// MaxRetrieves bounds how many emails listed without tags a lookup
	// retrieves one by one. Default DefaultMaxRetrieves.
	MaxRetrieves int
}

// Email is what to send. From, To and Subject are required, and HTML or
// Text.
type Email struct {
	From    string
	To      []string
	Subject string
	HTML    string
	Text    string
	Cc      []string
	Bcc     []string
	ReplyTo string
	// Tags are sent with the email; TagName is reserved. Names and values
	// may hold only ASCII letters, digits, _ and -, at most 256 of them.
	Tags map[string]string
}

// Sent is a sent email.
type Sent struct {
	// ID is Resend's email id.
	ID string
	// To and Subject are those of the request.
	To      []string
	Subject string
}

// Summary describes the email in one line.
func (s *Sent) Summary() string {
	return fmt.Sprintf("email %s to %s (%s)", s.ID, strings.Join(s.To, ", "), s.Subject)
}

// Client sends email through Resend and finds it by downstream key. It
// implements providers.Adapter.
type Client struct {
	sdk *resendgo.Client
	cfg Config
}

// New returns an adapter for the Resend API at baseURL
// ("https://api.resend.com", or a fake's URL).
func New(baseURL string, cfg *Config) *Client {
	var c Config
	if cfg != nil {
		c = *cfg
	}
	if c.MaxListPages <= 0 {
		c.MaxListPages = DefaultMaxListPages
	}
	if c.MaxRetrieves <= 0 {
		c.MaxRetrieves = DefaultMaxRetrieves
	}
	if c.HTTP.Clock == nil {
		c.HTTP.Clock = clock.System{}
	}
	base := strings.TrimRight(baseURL, "/")
	hc := c.HTTP
	hc.Classify = chain(classify, hc.Classify)
	t := &transport{hc: providers.NewClient(base, &hc)}
	if u, err := url.Parse(base); err == nil {
		t.basePath = u.Path
	}
	sdk := resendgo.NewCustomClient(&http.Client{Transport: t}, c.APIKey)
	if u, err := url.Parse(base + "/"); err == nil {
		sdk.BaseURL = u
	}
	sdk.UserAgent = sdk.UserAgent + " " + oncely.UserAgent
	return &Client{sdk: sdk, cfg: c}
}

// SDK returns the resend-go client the adapter sends through, for calls the
// adapter does not wrap. Its requests go through the same retry and
// classification layer.
func (c *Client) SDK() *resendgo.Client { return c.sdk }

// chain runs ours, then the caller's own hook.
func chain(ours, theirs func(*providers.ProviderError)) func(*providers.ProviderError) {
	if theirs == nil {
		return ours
	}
	return func(e *providers.ProviderError) { ours(e); theirs(e) }
}

// classify reads Resend's {"statusCode", "name", "message"} and maps its
// names to the sentinels.
func classify(e *providers.ProviderError) {
	var body struct {
		Name    string `json:"name"`
		Message string `json:"message"`
	}
	if json.Unmarshal(e.Body, &body) == nil && body.Name != "" {
		e.Code = body.Name
		if body.Message != "" {
			e.Message = body.Message
		}
	}
	switch e.Code {
	case "invalid_idempotent_request":
		e.Err, e.Retryable = ErrKeyReused, false
	case "concurrent_idempotent_requests":
		e.Err, e.Retryable = ErrKeyInUse, true
	case "rate_limit_exceeded":
		e.Err, e.Retryable = ErrRateLimited, true
	case "daily_quota_exceeded", "monthly_quota_exceeded":
		e.Err, e.Retryable = ErrQuotaExceeded, false
	}
}

// transport is resend-go's HTTP transport: it sends each request through
// the providers layer, which retries and classifies.
type transport struct {
	hc       *providers.Client
	basePath string
}

// RoundTrip implements http.RoundTripper. A failure is the
// *providers.ProviderError.
func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		b, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, &providers.ProviderError{Op: req.Method + " " + req.URL.Path, Err: fmt.Errorf("%w: %v", providers.ErrInvalidRequest, err)}
		}
		body = b
	}
	path := strings.TrimPrefix(req.URL.Path, t.basePath)
	if !strings.HasPrefix(path, "/") {
		path = "/" + path
	}
	header := req.Header.Clone()
	contentType := header.Get("Content-Type")
	key := header.Get("Idempotency-Key")
	header.Del("Content-Type")
	header.Del("Idempotency-Key")
	pr := &providers.Request{
		Method: req.Method, Path: path, Query: req.URL.Query(), Header: header,
		Body: body, ContentType: contentType, Replay: providers.ReplayUnsafe,
	}
	if key != "" {
		pr.Key, pr.KeyHeader, pr.Replay = key, "Idempotency-Key", providers.ReplayKeyed
	}
	resp, err := t.hc.Do(req.Context(), pr, nil)
	if err != nil {
		return nil, err
	}
	return &http.Response{
		Status: fmt.Sprintf("%d %s", resp.Status, http.StatusText(resp.Status)), StatusCode: resp.Status,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: resp.Header, Body: io.NopCloser(bytes.NewReader(resp.Body)),
		ContentLength: int64(len(resp.Body)), Request: req,
	}, nil
}

var tagRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,256}$`)

// TagValue is the value of the TagName tag for a downstream key: the key
// itself when Resend accepts it as a tag value (ASCII letters, digits, _
// and -, at most 256), else "sha256-" and the hex SHA-256 of the key.
func TagValue(downstreamKey string) string {
	if tagRE.MatchString(downstreamKey) {
		return downstreamKey
	}
	sum := sha256.Sum256([]byte(downstreamKey))
	return "sha256-" + hex.EncodeToString(sum[:])
}

const sendOp = "POST /emails"

func invalid(format string, args ...any) error {
	return &providers.ProviderError{Op: sendOp, Err: fmt.Errorf("%w: "+format, append([]any{providers.ErrInvalidRequest}, args...)...)}
}

// Send sends e once per downstream key within Resend's 24-hour window: a
// repeat with the same key and email is answered with the first email's
// id, and nothing is sent again. Bad input (no key, a key longer than 256,
// missing fields, a tag Resend refuses, TagName among the tags) is refused
// before anything is sent.
//
// Failures are *providers.ProviderError, classified as the package doc
// says.
func (c *Client) Send(ctx context.Context, downstreamKey string, e Email) (*Sent, error) {
	switch {
	case downstreamKey == "":
		return nil, invalid("a downstream key is required")
	case len(downstreamKey) > MaxKeyLength:
		return nil, invalid("the downstream key has %d characters; Resend accepts at most %d", len(downstreamKey), MaxKeyLength)
	case e.From == "" || len(e.To) == 0 || e.Subject == "":
		return nil, invalid("from, to and subject are required")
	case e.HTML == "" && e.Text == "":
		return nil, invalid("html or text is required")
	}
	tags := []resendgo.Tag{{Name: TagName, Value: TagValue(downstreamKey)}}
	for name, value := range e.Tags {
		switch {
		case name == TagName:
			return nil, invalid("the tag %q is reserved for the downstream key", TagName)
		case !tagRE.MatchString(name) || !tagRE.MatchString(value):
			return nil, invalid("tag %q=%q: Resend accepts only ASCII letters, digits, _ and -, 1 to 256 of them", name, value)
		}
		tags = append(tags, resendgo.Tag{Name: name, Value: value})
	}
	req := &resendgo.SendEmailRequest{
		From: e.From, To: e.To, Subject: e.Subject, Html: e.HTML, Text: e.Text,
		Cc: e.Cc, Bcc: e.Bcc, ReplyTo: e.ReplyTo, Tags: tags,
	}
	resp, err := c.sdk.Emails.SendWithOptions(ctx, req, &resendgo.SendEmailOptions{IdempotencyKey: downstreamKey})
	if err != nil {
		return nil, sdkError(sendOp, err, true)
	}
	if resp.Id == "" {
		return nil, &providers.ProviderError{Op: sendOp, Status: http.StatusOK, Message: "an answer without an email id",
			Retryable: true, Ambiguous: true, Err: providers.ErrBadResponse}
	}
	return &Sent{ID: resp.Id, To: e.To, Subject: e.Subject}, nil
}

// sdkError returns the *providers.ProviderError inside a resend-go error;
// any other error came from resend-go reading an answer the layer accepted
// (a 2xx that is not the expected JSON): ambiguous after a send.
func sdkError(op string, err error, effect bool) error {
	var pe *providers.ProviderError
	if errors.As(err, &pe) {
		return pe
	}
	return &providers.ProviderError{Op: op, Status: http.StatusOK, Message: "cannot read the answer",
		Retryable: true, Ambiguous: effect, Err: fmt.Errorf("%w: %v", providers.ErrBadResponse, err)}
}

// Capabilities: Resend deduplicates by key for 24 hours; the list that
// Lookup reads is consistent.
func (c *Client) Capabilities() providers.Capabilities {
	return providers.Capabilities{DedupWindow: DedupWindow, Lookup: providers.Consistent}
}

// listedEmail is an email of the list or retrieve answer; Tags is nil when
// the answer carries none.
type listedEmail struct {
	ID      string          `json:"id"`
	To      []string        `json:"to"`
	Subject string          `json:"subject"`
	Tags    *[]resendgo.Tag `json:"tags"`
}

type emailList struct {
	Object  string        `json:"object"`
	HasMore bool          `json:"has_more"`
	Data    []listedEmail `json:"data"`
}

// Lookup looks for the email sent with downstreamKey by its tag: Found,
// NotFound once the whole list was read and every email's tags with it,
// Inconclusive otherwise (see the package doc).
func (c *Client) Lookup(ctx context.Context, downstreamKey string) (providers.LookupResult, error) {
	want := TagValue(downstreamKey)
	unread, retrieves := false, 0
	after := ""
	for range c.cfg.MaxListPages {
		page, err := c.listPage(ctx, after)
		if err != nil {
			return providers.LookupResult{}, err
		}
		for _, e := range page.Data {
			tags := e.Tags
			if tags == nil && retrieves < c.cfg.MaxRetrieves {
				retrieves++
				full, err := c.retrieve(ctx, e.ID)
				if err != nil {
					return providers.LookupResult{}, err
				}
				tags = full.Tags
			}
			if tags == nil {
				unread = true
				continue
			}
			for _, t := range *tags {
				if t.Name == TagName && t.Value == want {
					s := &Sent{ID: e.ID, To: e.To, Subject: e.Subject}
					return providers.LookupResult{Status: providers.Found, Ref: e.ID, Summary: s.Summary()}, nil
				}
			}
		}
		if !page.HasMore || len(page.Data) == 0 {
			if unread {
				return providers.LookupResult{Status: providers.Inconclusive}, nil
			}
			return providers.LookupResult{Status: providers.NotFound}, nil
		}
		after = page.Data[len(page.Data)-1].ID
	}
	return providers.LookupResult{Status: providers.Inconclusive}, nil
}

func (c *Client) listPage(ctx context.Context, after string) (*emailList, error) {
	path := fmt.Sprintf("emails?limit=%d", listPageSize)
	if after != "" {
		path += "&after=" + url.QueryEscape(after)
	}
	var out emailList
	if err := c.get(ctx, path, &out); err != nil {
		return nil, err
	}
	if out.Data == nil {
		return nil, &providers.ProviderError{Op: "GET /emails", Status: http.StatusOK, Message: `an answer without a "data" list`, Retryable: true, Err: providers.ErrBadResponse}
	}
	return &out, nil
}

func (c *Client) retrieve(ctx context.Context, id string) (*listedEmail, error) {
	var out listedEmail
	if err := c.get(ctx, "emails/"+url.PathEscape(id), &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// get sends a GET through resend-go's request builder and reader.
func (c *Client) get(ctx context.Context, path string, out any) error {
	op := "GET /" + strings.SplitN(path, "?", 2)[0]
	req, err := c.sdk.NewRequest(ctx, http.MethodGet, path, nil)
	if err != nil {
		return &providers.ProviderError{Op: op, Err: fmt.Errorf("%w: %v", providers.ErrInvalidRequest, err)}
	}
	if _, err := c.sdk.Perform(req, out); err != nil {
		return sdkError(op, err, false)
	}
	return nil
}

var _ providers.Adapter = (*Client)(nil)
