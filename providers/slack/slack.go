// Package slack is oncely's adapter for posting Slack messages, on
// slack-go (github.com/slack-go/slack): the mechanism of a marker with a
// lookup (see package providers), since Slack's Web API has no
// idempotency.
//
// Post sends chat.postMessage with message metadata carrying the
// downstream key ({"event_type": Config.EventType, "event_payload":
// {"oncely_key": key}}). Slack does not deduplicate, so a post that may have
// reached Slack is never resent: its failure is ambiguous and left to
// reconciliation. Lookup reads conversations.history of the channel with
// include_all_metadata from Config.Skew before the attempt began (which
// package reconcile's policy passes, providers.WithAttempt), or over the
// last Config.Lookback when the attempt's start is not known, and matches
// the metadata. Slack does not promise that history shows a message the
// moment chat.postMessage answered; Config.HistoryLag bounds how long it
// may lag (Capabilities: Eventual), and an empty history is Inconclusive,
// never NotFound, until that bound has passed (package reconcile applies
// it). A history longer than Config.MaxPages pages is an error, not an
// empty answer.
//
// Rate limits matter to the lookup: conversations.history is Tier 3 (50+
// requests a minute), but apps created since 2025 outside the Slack
// Marketplace get one request a minute and 15 messages a page. Set
// PageSize to 15 for such an app; a lookup refused with a Retry-After
// above providers.Config.MaxRetryAfter fails, the reconciliation answers
// Unknown, and the record stays uncertain until a later pass (the
// Sweeper's) can read the history.
//
// # Errors
//
// Failures are *providers.ProviderError, classified from Slack's answer:
//
//   - Slack's own errors ({"ok": false, "error": code}, HTTP 200) are
//     permanent (channel_not_found, not_in_channel, is_archived, no_text,
//     msg_too_long, invalid_auth, missing_scope, invalid_metadata_* ...)
//     except: ratelimited (definite, retryable), request_timeout (the POST
//     body did not arrive: definite, retryable), and internal_error,
//     fatal_error and service_unavailable, which Slack says may follow a
//     partial success (ambiguous). The code is in ProviderError.Code.
//   - HTTP 429 (Slack's rate limits, per method and per channel) is
//     definite and retryable, with its Retry-After; it is waited out up to
//     providers.Config.MaxRetryAfter and retried, since nothing was posted.
//   - A DNS, dial or TLS failure is definite; once the connection was
//     made, a timeout, a reset, a 5xx or an unreadable 200 is ambiguous.
//
// One retry layer (go-retryablehttp) sits under slack-go: it retries what
// provably was not posted, and every failure of a history read.
package slack

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-retryablehttp"
	"github.com/slack-go/slack"

	"github.com/oncely/oncely/clock"
	"github.com/oncely/oncely/providers"
)

// Defaults of Config.
const (
	DefaultEventType  = "oncely_action"
	DefaultHistoryLag = 30 * time.Second
	DefaultLookback   = 24 * time.Hour
	DefaultSkew       = 5 * time.Minute
	DefaultPageSize   = 200
	DefaultMaxPages   = 10
)

// PayloadKey is the event_payload field that carries the downstream key.
const PayloadKey = "oncely_key"

// ErrHistoryTruncated is in the chain of a lookup that read Config.MaxPages
// pages of history without reaching the start of its window: the message
// may be in the pages it did not read.
var ErrHistoryTruncated = errors.New("slack: the history window has more pages than the lookup reads")

// Config configures the adapter.
type Config struct {
	// Token is the bot token (xoxb-...).
	Token string
	// Channel is the id of the channel the adapter posts to and reads
	// (conversations.history takes only ids).
	Channel string
	// APIURL is the Web API's base, ending in "/" (default slack.APIURL).
	APIURL string
	// HTTP configures the transport: HTTPClient, Timeout, MaxRetries,
	// RetryWaitMin/Max, MaxRetryAfter and Clock are used as package
	// providers documents them; MaxBodyBytes and Classify are not.
	HTTP providers.Config
	// EventType is the metadata's event_type (default DefaultEventType):
	// letters, digits, underscores and hyphens only. Slack drops metadata
	// whose event_type has a period or other punctuation (it posts the
	// message with an invalid_metadata_schema warning), so a lookup would
	// never find the message and a retry would post it twice: New refuses
	// such a name.
	EventType string
	// HistoryLag bounds how long after chat.postMessage answered a
	// message may still be missing from conversations.history (default
	// DefaultHistoryLag).
	HistoryLag time.Duration
	// Lookback is how far back Lookup reads when it does not know when the
	// attempt began (default DefaultLookback).
	Lookback time.Duration
	// Skew is read before an attempt's start, for the difference between
	// this machine's clock and Slack's (default DefaultSkew).
	Skew time.Duration
	// PageSize is the limit of each history page (default
	// DefaultPageSize; apps outside the Slack Marketplace get at most 15).
	PageSize int
	// MaxPages bounds the pages one lookup reads (default
	// DefaultMaxPages).
	MaxPages int
}

// Posted is a message Post sent.
type Posted struct {
	Channel string
	// TS is the message's timestamp, its id within the channel.
	TS   string
	Text string
}

// Ref is the message's reference: "<channel>/<ts>".
func (p *Posted) Ref() string { return p.Channel + "/" + p.TS }

// Client posts messages to one channel and finds them by downstream key.
// It implements providers.Adapter.
type Client struct {
	api           *slack.Client
	cfg           Config
	clock         clock.Clock
	maxRetryAfter time.Duration
}

// ErrConfig: the adapter cannot work as configured.
var ErrConfig = errors.New("slack: configuration")

// ValidEventType reports whether Slack keeps metadata of event type t:
// a non-empty name of letters, digits, underscores and hyphens.
func ValidEventType(t string) bool {
	if t == "" {
		return false
	}
	for _, r := range t {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}

// New returns the adapter. Config.Token and Config.Channel are required
// for requests to succeed (Slack answers not_authed, channel_not_found).
// It returns an error wrapping ErrConfig when Config.EventType is not a
// name Slack keeps (ValidEventType).
func New(cfg *Config) (*Client, error) {
	var c Config
	if cfg != nil {
		c = *cfg
	}
	if c.APIURL == "" {
		c.APIURL = slack.APIURL
	}
	if !strings.HasSuffix(c.APIURL, "/") {
		c.APIURL += "/"
	}
	if c.EventType == "" {
		c.EventType = DefaultEventType
	}
	if !ValidEventType(c.EventType) {
		return nil, fmt.Errorf("%w: event type %q: Slack keeps metadata only of an event_type of letters, digits, underscores and hyphens, and drops the rest (invalid_metadata_schema), so the message could never be found again", ErrConfig, c.EventType)
	}
	if c.HistoryLag <= 0 {
		c.HistoryLag = DefaultHistoryLag
	}
	if c.Lookback <= 0 {
		c.Lookback = DefaultLookback
	}
	if c.Skew <= 0 {
		c.Skew = DefaultSkew
	}
	if c.PageSize <= 0 {
		c.PageSize = DefaultPageSize
	}
	if c.MaxPages <= 0 {
		c.MaxPages = DefaultMaxPages
	}
	h := c.HTTP
	switch {
	case h.MaxRetries == 0:
		h.MaxRetries = providers.DefaultMaxRetries
	case h.MaxRetries < 0:
		h.MaxRetries = 0
	}
	if h.RetryWaitMin <= 0 {
		h.RetryWaitMin = providers.DefaultRetryWaitMin
	}
	if h.RetryWaitMax < h.RetryWaitMin {
		h.RetryWaitMax = max(providers.DefaultRetryWaitMax, h.RetryWaitMin)
	}
	if h.MaxRetryAfter <= 0 {
		h.MaxRetryAfter = providers.DefaultMaxRetryAfter
	}
	if h.Clock == nil {
		h.Clock = clock.System{}
	}
	var hc http.Client
	if h.HTTPClient != nil {
		hc = *h.HTTPClient
	}
	base := hc.Transport
	if base == nil {
		base = http.DefaultTransport.(*http.Transport).Clone()
	}
	hc.Transport = traced{base}
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	switch {
	case h.Timeout > 0:
		hc.Timeout = h.Timeout
	case hc.Timeout == 0:
		hc.Timeout = providers.DefaultTimeout
	}
	cl := &Client{cfg: c, clock: h.Clock, maxRetryAfter: h.MaxRetryAfter}
	rc := &retryablehttp.Client{
		HTTPClient:   &hc,
		RetryWaitMin: h.RetryWaitMin,
		RetryWaitMax: h.RetryWaitMax,
		RetryMax:     h.MaxRetries,
		CheckRetry:   cl.checkRetry,
		Backoff:      retryablehttp.DefaultBackoff, // honours Retry-After
		ErrorHandler: retryablehttp.PassthroughErrorHandler,
	}
	cl.api = slack.New(c.Token, slack.OptionAPIURL(c.APIURL), slack.OptionHTTPClient(rc.StandardClient()))
	return cl, nil
}

// call is the state of one API call across its attempts.
type call struct {
	write      bool        // a repeat may post twice
	connected  atomic.Bool // this attempt got a connection
	attempts   int
	ambiguous  bool // some attempt may have been processed
	status     int  // the last attempt's status; 0 without a response
	retryAfter time.Duration
}

type callKey struct{}

// traced marks the call's attempt connected when the transport hands it a
// connection: from then on the request may be processed.
type traced struct{ base http.RoundTripper }

func (t traced) RoundTrip(req *http.Request) (*http.Response, error) {
	if st, ok := req.Context().Value(callKey{}).(*call); ok {
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
			GotConn: func(httptrace.GotConnInfo) { st.connected.Store(true) },
		}))
	}
	return t.base.RoundTrip(req)
}

// checkRetry decides retries: a write only when its attempt provably was
// not processed (no connection, or a 429 or a 503 with Retry-After); a
// read after any failure.
func (c *Client) checkRetry(ctx context.Context, resp *http.Response, err error) (bool, error) {
	st, _ := ctx.Value(callKey{}).(*call)
	if st == nil {
		return false, err
	}
	st.attempts++
	connected := st.connected.Swap(false)
	retry := false
	st.status, st.retryAfter = 0, 0
	switch {
	case err != nil:
		if connected {
			st.ambiguous = st.ambiguous || st.write
			retry = !st.write
		} else {
			retry = true
		}
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable && resp.Header.Get("Retry-After") != "":
		st.status = resp.StatusCode
		if secs, perr := strconv.Atoi(resp.Header.Get("Retry-After")); perr == nil {
			st.retryAfter = time.Duration(secs) * time.Second
		}
		retry = st.retryAfter <= c.maxRetryAfter
	case resp.StatusCode >= 500:
		st.status = resp.StatusCode
		if resp.StatusCode != http.StatusNotImplemented {
			st.ambiguous = st.ambiguous || st.write
			retry = !st.write
		}
	default:
		st.status = resp.StatusCode
	}
	if cerr := ctx.Err(); cerr != nil {
		return false, cerr
	}
	return retry, nil
}

// classify turns what slack-go returned into a *providers.ProviderError.
func classify(op string, st *call, err error) *providers.ProviderError {
	pe := &providers.ProviderError{Op: op, Status: st.status, Attempts: st.attempts, Ambiguous: st.ambiguous, Retryable: st.ambiguous, RetryAfter: st.retryAfter, Err: err}
	var rl *slack.RateLimitedError
	var se slack.SlackErrorResponse
	var sce slack.StatusCodeError
	var ue *url.Error
	switch {
	case errors.As(err, &rl):
		pe.Status, pe.Code, pe.Retryable, pe.RetryAfter = http.StatusTooManyRequests, "ratelimited", true, rl.RetryAfter
	case errors.As(err, &se):
		pe.Code, pe.Message = se.Err, se.Err
		switch se.Err {
		case "ratelimited", "request_timeout":
			pe.Retryable = true
		case "internal_error", "fatal_error", "service_unavailable":
			pe.Retryable = true
			pe.Ambiguous = pe.Ambiguous || st.write
		}
	case errors.As(err, &sce):
		pe.Status = sce.Code
		pe.Retryable = pe.Retryable || sce.Code == http.StatusServiceUnavailable && st.retryAfter > 0 || sce.Code == http.StatusRequestTimeout || sce.Code == http.StatusTooManyRequests
	case errors.As(err, &ue):
		// A transport failure: ambiguous when the connection was made
		// (checkRetry recorded it), otherwise nothing was sent.
		pe.Retryable = true
	default:
		// An answer that could not be read: after a 200 the effect may
		// exist.
		pe.Err = fmt.Errorf("%w: %w", providers.ErrBadResponse, err)
		pe.Retryable = true
		pe.Ambiguous = pe.Ambiguous || st.write
	}
	return pe
}

// Post posts text (and opts, which must not set metadata) to the channel
// once per downstream key, as far as the executor's record and
// reconciliation can tell: the key travels in the message's metadata.
// Failures are *providers.ProviderError.
func (c *Client) Post(ctx context.Context, downstreamKey, text string, opts ...slack.MsgOption) (*Posted, error) {
	const op = "POST chat.postMessage"
	if downstreamKey == "" {
		return nil, &providers.ProviderError{Op: op, Err: fmt.Errorf("%w: a downstream key is required", providers.ErrInvalidRequest)}
	}
	md := slack.SlackMetadata{EventType: c.cfg.EventType, EventPayload: map[string]any{PayloadKey: downstreamKey}}
	all := append([]slack.MsgOption{slack.MsgOptionText(text, false)}, opts...)
	all = append(all, slack.MsgOptionMetadata(md)) // last: it wins
	st := &call{write: true}
	ch, ts, err := c.api.PostMessageContext(context.WithValue(ctx, callKey{}, st), c.cfg.Channel, all...)
	if err != nil {
		return nil, classify(op, st, err)
	}
	if ts == "" {
		return nil, &providers.ProviderError{Op: op, Status: st.status, Attempts: st.attempts, Retryable: true, Ambiguous: true,
			Err: fmt.Errorf("%w: an answer without a ts", providers.ErrBadResponse)}
	}
	return &Posted{Channel: ch, TS: ts, Text: text}, nil
}

// Capabilities: no deduplication; the history lags by up to HistoryLag.
func (c *Client) Capabilities() providers.Capabilities {
	return providers.Capabilities{Lookup: providers.Eventual, IndexLag: c.cfg.HistoryLag}
}

// Lookup reads the channel's history for the message carrying
// downstreamKey, from Config.Skew before the attempt began
// (providers.AttemptFrom) or over the last Config.Lookback: Found, or
// Inconclusive.
func (c *Client) Lookup(ctx context.Context, downstreamKey string) (providers.LookupResult, error) {
	oldest := c.clock.Now().Add(-c.cfg.Lookback)
	if began, ok := providers.AttemptFrom(ctx); ok {
		oldest = began.Add(-c.cfg.Skew)
	}
	return c.find(ctx, downstreamKey, oldest)
}

func slackTS(t time.Time) string {
	us := t.UnixMicro()
	if us < 0 {
		us = 0
	}
	return fmt.Sprintf("%d.%06d", us/1e6, us%1e6)
}

// find reads history from oldest to now, newest first.
func (c *Client) find(ctx context.Context, key string, oldest time.Time) (providers.LookupResult, error) {
	const op = "POST conversations.history"
	params := &slack.GetConversationHistoryParameters{
		ChannelID: c.cfg.Channel, Oldest: slackTS(oldest), Limit: c.cfg.PageSize, IncludeAllMetadata: true,
	}
	for range c.cfg.MaxPages {
		st := &call{}
		res, err := c.api.GetConversationHistoryContext(context.WithValue(ctx, callKey{}, st), params)
		if err != nil {
			return providers.LookupResult{}, classify(op, st, err)
		}
		for _, m := range res.Messages {
			if m.Metadata.EventType == c.cfg.EventType && m.Metadata.EventPayload[PayloadKey] == key {
				return providers.LookupResult{
					Status: providers.Found, Ref: c.cfg.Channel + "/" + m.Timestamp,
					Summary: fmt.Sprintf("message %s in %s (%s)", m.Timestamp, c.cfg.Channel, truncate(m.Text, 60)),
				}, nil
			}
		}
		if !res.HasMore || res.ResponseMetaData.NextCursor == "" {
			return providers.LookupResult{Status: providers.Inconclusive}, nil
		}
		params.Cursor = res.ResponseMetaData.NextCursor
	}
	return providers.LookupResult{}, &providers.ProviderError{Op: op, Retryable: true, Err: ErrHistoryTruncated}
}

func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}

var _ providers.Adapter = (*Client)(nil)
