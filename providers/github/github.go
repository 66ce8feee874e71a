// Package github is oncely's adapter for GitHub issues and issue
// comments, built on go-github: the mechanism of a reference search (see
// package providers), on an API that offers no idempotency at all.
//
// GitHub opens a second issue for a repeated request, whatever it
// carries. So every issue or comment the adapter creates carries a marker
// in its body, a hidden HTML comment "<!-- oncely-key: KEY -->" (Marker)
// with the downstream key, which GitHub keeps and renders invisibly. A
// label would do too, but GitHub caps label names at 50 characters (a
// downstream key is 64 or more) and every label stays in the repository's
// label list. A create that may have reached GitHub is never resent by
// the adapter; its failure is ambiguous and left to reconciliation.
//
// # Lookups, and the search index's lag
//
// Lookup finds the object by its marker in two places, because GitHub's
// search index lags behind writes (GitHub documents no bound; usually
// seconds, minutes during incidents):
//
//   - the search API (GET /search/issues, the quoted key, repo:, in:body or
//     in:comments), which covers every object older than Config.SearchLag;
//   - the repository's list of issues (or of issue comments), newest
//     first, since SearchLag + ClockSkew ago: lists are consistent, so it
//     covers what the index may not show yet.
//
// Each candidate is matched by the exact marker, never by the search's
// word matching. Lookup answers NotFound only when the search and the list
// both ended within their bounds (MaxSearchPages, MaxListPages, and a
// search GitHub did not flag incomplete_results), and Inconclusive
// otherwise. Capabilities declares the lookup Eventual with IndexLag
// SearchLag, so package reconcile keeps an empty answer Inconclusive until
// the bound has passed.
//
// What stays uncertain, and why: NotFound rests on SearchLag bounding the
// index's lag. An object older than the bound that the index still does
// not show (an incident longer than SearchLag), an object moved to
// another repository, deleted, or whose marker someone edited away, is
// not found, and a resend would create it again. A search or a list cut
// by its bound, and a search GitHub flags incomplete, leave the answer
// Inconclusive: the record stays uncertain rather than guessed.
//
// # Errors
//
// Every failure is a *providers.ProviderError. No request left (a dial or
// DNS failure, go-github's own rate-limit check): definite. A connection
// was made and then the request failed, a 5xx (503 with Retry-After
// excepted), or a 2xx that cannot be read: ambiguous. GitHub's primary
// rate limit (403 or 429 with X-RateLimit-Remaining 0, ErrRateLimited) and
// its secondary rate limit (ErrSecondaryRateLimit) refuse before acting:
// definite and retryable, with RetryAfter read from Retry-After or
// X-RateLimit-Reset against Config.Clock. A 422 validation failure, 404
// (no such repository, or no access), 401, 403 and 410 are permanent.
// Lookups (GETs) are retried within Config.MaxRetries whatever the
// failure; a create only while no attempt may have reached GitHub.
package github

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	gh "github.com/google/go-github/v93/github"

	"github.com/oncely/oncely/clock"
	"github.com/oncely/oncely/providers"
)

// Defaults of Config.
const (
	// DefaultSearchLag bounds the search index's lag. GitHub documents no
	// bound; an hour is generous, and costs only list pages: the list
	// covers what the search may not show yet.
	DefaultSearchLag      = time.Hour
	DefaultClockSkew      = 5 * time.Minute
	DefaultMaxListPages   = 10
	DefaultMaxSearchPages = 10
	pageSize              = 100
)

// MaxBody is GitHub's limit on an issue or comment body, in characters;
// the marker counts.
const MaxBody = 65536

// Sentinel errors in a failed request's chain (errors.Is); the error itself
// is a *providers.ProviderError.
var (
	// ErrRateLimited: GitHub's primary rate limit is spent until
	// X-RateLimit-Reset. Definite and retryable.
	ErrRateLimited = errors.New("github: rate limit exceeded")
	// ErrSecondaryRateLimit: GitHub's secondary rate limit (too many
	// requests at once or too fast, or too much content created). Definite
	// and retryable after RetryAfter.
	ErrSecondaryRateLimit = errors.New("github: secondary rate limit exceeded")
	// ErrValidation: GitHub refused the request as invalid (422).
	// Permanent.
	ErrValidation = errors.New("github: validation failed")
)

// Marker returns the hidden marker that carries downstreamKey in a body.
func Marker(downstreamKey string) string { return "<!-- oncely-key: " + downstreamKey + " -->" }

const markerPrefix = "<!-- oncely-key:"

// Config configures the adapter. A nil *Config, or a zero field, means the
// default.
type Config struct {
	// Clock is what lookup windows and rate-limit resets are reckoned
	// against (default: the system clock).
	Clock clock.Clock
	// Timeout bounds one attempt (default providers.DefaultTimeout).
	Timeout time.Duration
	// MaxRetries is how many times a failed attempt is retried, when it
	// may be (see the package documentation). 0: providers.DefaultMaxRetries;
	// negative: never.
	MaxRetries int
	// RetryWaitMin and RetryWaitMax bound the backoff between attempts
	// (defaults providers.DefaultRetryWaitMin and DefaultRetryWaitMax).
	RetryWaitMin, RetryWaitMax time.Duration
	// MaxRetryAfter caps a rate limit's wait that is honoured; a longer
	// one ends the retries at once, the error carrying its RetryAfter
	// (default providers.DefaultMaxRetryAfter).
	MaxRetryAfter time.Duration
	// SearchLag bounds how far GitHub's search index lags behind writes.
	// Default DefaultSearchLag.
	SearchLag time.Duration
	// ClockSkew bounds the difference between Clock and GitHub's clock; it
	// widens the window lookups list. Default DefaultClockSkew.
	ClockSkew time.Duration
	// MaxListPages bounds a lookup's list scan, in pages of 100. Default
	// DefaultMaxListPages.
	MaxListPages int
	// MaxSearchPages bounds a lookup's search, in pages of 100. Default
	// DefaultMaxSearchPages.
	MaxSearchPages int
}

// Client holds the adapters of one repository.
type Client struct {
	// Issues opens and finds issues.
	Issues *Issues
	// Comments adds and finds issue comments.
	Comments *Comments
}

// New returns adapters for the repository owner/repo, sending through
// client (go-github, configured with its token and base URL; nil: an
// unauthenticated client for api.github.com). The adapter relies on its
// own handling of rate limits, read against Config.Clock; go-github's
// check before sending, if the client has it, only refuses earlier.
func New(client *gh.Client, owner, repo string, cfg *Config) *Client {
	var c Config
	if cfg != nil {
		c = *cfg
	}
	if c.Clock == nil {
		c.Clock = clock.System{}
	}
	if c.Timeout <= 0 {
		c.Timeout = providers.DefaultTimeout
	}
	switch {
	case c.MaxRetries == 0:
		c.MaxRetries = providers.DefaultMaxRetries
	case c.MaxRetries < 0:
		c.MaxRetries = 0
	}
	if c.RetryWaitMin <= 0 {
		c.RetryWaitMin = providers.DefaultRetryWaitMin
	}
	if c.RetryWaitMax < c.RetryWaitMin {
		c.RetryWaitMax = max(providers.DefaultRetryWaitMax, c.RetryWaitMin)
	}
	if c.MaxRetryAfter <= 0 {
		c.MaxRetryAfter = providers.DefaultMaxRetryAfter
	}
	if c.SearchLag <= 0 {
		c.SearchLag = DefaultSearchLag
	}
	if c.ClockSkew <= 0 {
		c.ClockSkew = DefaultClockSkew
	}
	if c.MaxListPages <= 0 {
		c.MaxListPages = DefaultMaxListPages
	}
	if c.MaxSearchPages <= 0 {
		c.MaxSearchPages = DefaultMaxSearchPages
	}
	if client == nil {
		client, _ = gh.NewClient()
	}
	a := &api{gh: client, owner: owner, repo: repo, cfg: c}
	return &Client{Issues: &Issues{a}, Comments: &Comments{a}}
}

type api struct {
	gh          *gh.Client
	owner, repo string
	cfg         Config
}

func (a *api) fullName() string { return a.owner + "/" + a.repo }

// check refuses, before anything is sent, what cannot be sent.
func (a *api) check(op, downstreamKey, body string) error {
	switch {
	case a.owner == "" || a.repo == "" || strings.Contains(a.owner+a.repo, "/"):
		return invalid(op, fmt.Errorf("%w: the repository %q is not owner/name", providers.ErrInvalidRequest, a.fullName()))
	case downstreamKey == "" || strings.ContainsAny(downstreamKey, " \t\r\n"):
		return invalid(op, fmt.Errorf("%w: a downstream key without spaces is required", providers.ErrInvalidRequest))
	case strings.Contains(body, markerPrefix):
		return invalid(op, fmt.Errorf("%w: the body already carries an oncely-key marker", providers.ErrInvalidRequest))
	}
	if n := len([]rune(withMarker(body, downstreamKey))); n > MaxBody {
		return invalid(op, fmt.Errorf("%w: the body with its marker is %d characters, GitHub takes at most %d", providers.ErrInvalidRequest, n, MaxBody))
	}
	return nil
}

// withMarker appends the marker to body.
func withMarker(body, downstreamKey string) string {
	if body == "" {
		return Marker(downstreamKey)
	}
	return strings.TrimRight(body, "\n") + "\n\n" + Marker(downstreamKey)
}

func invalid(op string, err error) error { return &providers.ProviderError{Op: op, Err: err} }

// do runs one go-github call with the adapter's retries and classifies its
// failure. safe: the call may be repeated even once it may have reached
// GitHub (a GET).
func (a *api) do(ctx context.Context, op string, safe bool, call func(ctx context.Context) (*gh.Response, error)) error {
	ambiguous := false
	for attempt := 1; ; attempt++ {
		var connected atomic.Bool
		actx := httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
			GotConn: func(httptrace.GotConnInfo) { connected.Store(true) },
		})
		actx, cancel := context.WithTimeout(actx, a.cfg.Timeout)
		resp, err := call(actx)
		cancel()
		if err == nil {
			return nil
		}
		pe := a.classify(op, resp, err, connected.Load())
		pe.Attempts = attempt
		ambiguous = ambiguous || pe.Ambiguous
		pe.Ambiguous = ambiguous
		if !pe.Retryable || attempt > a.cfg.MaxRetries || ctx.Err() != nil ||
			pe.RetryAfter > a.cfg.MaxRetryAfter || (ambiguous && !safe) {
			return pe
		}
		wait := pe.RetryAfter
		if wait <= 0 {
			wait = a.backoff(attempt)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return pe
		case <-t.C:
		}
	}
}

// backoff is exponential from RetryWaitMin, capped at RetryWaitMax, with
// jitter in [d/2, d].
func (a *api) backoff(attempt int) time.Duration {
	d := a.cfg.RetryWaitMax
	if attempt < 30 {
		d = min(a.cfg.RetryWaitMin<<(attempt-1), a.cfg.RetryWaitMax)
	}
	if half := int64(d / 2); half > 0 {
		d = time.Duration(half + rand.Int64N(half+1))
	}
	return d
}

// classify turns a go-github error into a ProviderError. connected: the
// attempt got a connection, so its request may have been processed.
func (a *api) classify(op string, resp *gh.Response, err error, connected bool) *providers.ProviderError {
	pe := &providers.ProviderError{Op: op, Err: err}
	var hr *http.Response
	if resp != nil {
		hr = resp.Response
	}
	var (
		rle *gh.RateLimitError
		are *gh.AbuseRateLimitError
		er  *gh.ErrorResponse
		acc *gh.AcceptedError
	)
	switch {
	case errors.As(err, &rle):
		pe.Err, pe.Retryable, pe.Message = ErrRateLimited, true, rle.Message
		pe.Status = statusOf(rle.Response)
		if !rle.Rate.Reset.IsZero() {
			pe.RetryAfter = max(rle.Rate.Reset.Sub(a.cfg.Clock.Now()), 0)
		}
		if ra, ok := a.retryAfter(rle.Response); ok {
			pe.RetryAfter = ra
		}
		pe.Body = bodyOf(rle.Response)
	case errors.As(err, &are):
		pe.Err, pe.Retryable, pe.Message = ErrSecondaryRateLimit, true, are.Message
		pe.Status = statusOf(are.Response)
		if ra, ok := a.retryAfter(are.Response); ok {
			pe.RetryAfter = ra
		} else if are.RetryAfter != nil {
			pe.RetryAfter = max(*are.RetryAfter, 0)
		}
		pe.Body = bodyOf(are.Response)
	case errors.As(err, &er):
		pe.Status, pe.Message = statusOf(er.Response), er.Message
		if len(er.Errors) > 0 {
			pe.Code, pe.Param = er.Errors[0].Code, er.Errors[0].Field
			if m := er.Errors[0].Message; m != "" {
				pe.Message += ": " + m
			}
		}
		ra, hasRA := a.retryAfter(er.Response)
		pe.RetryAfter = ra
		pe.Retryable, pe.Ambiguous = classifyStatus(pe.Status, hasRA)
		pe.Body = bodyOf(er.Response)
		pe.Err = nil
		if pe.Status == http.StatusUnprocessableEntity {
			pe.Err = ErrValidation
		}
	case errors.As(err, &acc):
		// 202: GitHub scheduled work instead of answering; a create may
		// have happened.
		pe.Status, pe.Retryable, pe.Ambiguous = http.StatusAccepted, true, true
		pe.Err = fmt.Errorf("%w: %w", providers.ErrBadResponse, err)
	case hr != nil && hr.StatusCode >= 200 && hr.StatusCode < 300:
		// A 2xx whose body go-github could not decode or read.
		pe.Status, pe.Retryable, pe.Ambiguous = hr.StatusCode, true, true
		pe.Message = "cannot read the answer"
		pe.Err = fmt.Errorf("%w: %w", providers.ErrBadResponse, err)
	default:
		// No answer: a transport failure, a timeout, a cancellation.
		pe.Retryable, pe.Ambiguous = true, connected
	}
	return pe
}

// classifyStatus reads an error status as package providers does.
func classifyStatus(status int, retryAfter bool) (retryable, ambiguous bool) {
	switch {
	case status == http.StatusRequestTimeout, status == http.StatusTooEarly, status == http.StatusTooManyRequests:
		return true, false
	case status == http.StatusServiceUnavailable:
		return true, !retryAfter
	case status == http.StatusNotImplemented, status == http.StatusHTTPVersionNotSupported:
		return false, false
	case status >= 500:
		return true, true
	}
	return false, false
}

func statusOf(r *http.Response) int {
	if r == nil {
		return 0
	}
	return r.StatusCode
}

func bodyOf(r *http.Response) []byte {
	if r == nil || r.Body == nil {
		return nil
	}
	b, _ := io.ReadAll(io.LimitReader(r.Body, providers.MaxErrorBody))
	return b
}

// retryAfter reads Retry-After (seconds), else X-RateLimit-Reset (epoch
// seconds) when the limit is spent, against the adapter's clock.
func (a *api) retryAfter(r *http.Response) (time.Duration, bool) {
	if r == nil {
		return 0, false
	}
	if v := strings.TrimSpace(r.Header.Get("Retry-After")); v != "" {
		if s, err := strconv.ParseInt(v, 10, 64); err == nil && s >= 0 {
			return time.Duration(min(s, int64(24*time.Hour/time.Second))) * time.Second, true
		}
		if t, err := http.ParseTime(v); err == nil {
			return max(t.Sub(a.cfg.Clock.Now()), 0), true
		}
	}
	if r.Header.Get("X-RateLimit-Remaining") == "0" {
		if s, err := strconv.ParseInt(r.Header.Get("X-RateLimit-Reset"), 10, 64); err == nil {
			return max(time.Unix(s, 0).Sub(a.cfg.Clock.Now()), 0), true
		}
	}
	return 0, false
}

// badAnswer is the ambiguous error of a 2xx whose object is not what a
// create answers.
func badAnswer(op string, what string) error {
	return &providers.ProviderError{
		Op: op, Status: http.StatusCreated, Message: "cannot read the answer",
		Retryable: true, Ambiguous: true, Err: fmt.Errorf("%w: %s", providers.ErrBadResponse, what),
	}
}

// found is a Found result.
func found(ref, summary string) providers.LookupResult {
	return providers.LookupResult{Status: providers.Found, Ref: ref, Summary: summary}
}

// search reads the search results of q page by page, up to
// MaxSearchPages, and returns the first issue match accepts. complete is
// false when the bound cut the results or GitHub flagged them incomplete.
func (a *api) search(ctx context.Context, q string, match func(*gh.Issue) (bool, error)) (hit *gh.Issue, complete bool, err error) {
	opts := &gh.SearchOptions{Sort: "created", Order: "desc", ListOptions: gh.ListOptions{PerPage: pageSize}}
	complete = true
	for range a.cfg.MaxSearchPages {
		var res *gh.IssuesSearchResult
		var resp *gh.Response
		if err := a.do(ctx, "GET /search/issues", true, func(ctx context.Context) (*gh.Response, error) {
			var err error
			res, resp, err = a.gh.Search.Issues(ctx, q, opts)
			return resp, err
		}); err != nil {
			return nil, false, err
		}
		if res.GetIncompleteResults() {
			complete = false
		}
		for _, is := range res.Issues {
			ok, err := match(is)
			if err != nil {
				return nil, false, err
			}
			if ok {
				return is, true, nil
			}
		}
		if resp.NextPage == 0 {
			return nil, complete, nil
		}
		opts.Page = resp.NextPage
	}
	return nil, false, nil
}

// quoteTerm is the downstream key as a quoted search phrase.
func quoteTerm(key string) string { return `"` + strings.ReplaceAll(key, `"`, "") + `"` }
