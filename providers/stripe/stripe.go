// Package stripe is oncely's adapter for Stripe PaymentIntents and
// Refunds: the mechanism of an idempotency header (see package providers).
//
// Every create carries the downstream key twice: as the Idempotency-Key
// header, so that Stripe answers a repeat within its 24-hour window with the
// first response instead of acting again, and as metadata[oncely_key], so
// that the object can be found later without the key window. Requests are
// form-encoded, authenticated with a Bearer secret key and pinned to
// APIVersion.
//
// Lookups cannot rely on Stripe's search alone: the search index lags
// behind (under a minute normally, up to an hour during incidents), while
// list endpoints are consistent. PaymentIntents.Lookup therefore searches
// the metadata for objects older than the lag, following next_page up to
// MaxSearchPages, and lists, newest first, the PaymentIntents created
// within the lag; Refunds, which cannot be searched, are found by a
// bounded list scan. A lookup says NotFound only when both leave no place
// unseen, and Inconclusive when a search or a scan hit its bound. Every request carries oncely.UserAgent (the HTTP layer's).
package stripe

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/oncely/oncely/clock"
	"github.com/oncely/oncely/providers"
)

// APIVersion is the Stripe API version every request pins with the
// Stripe-Version header (the version of stripe-go v82).
const APIVersion = "2025-08-27.basil"

// MetadataKey is the metadata entry that carries the downstream key.
const MetadataKey = "oncely_key"

// DedupWindow is how long Stripe replays a response by its idempotency key:
// keys may be pruned once they are at least 24 hours old.
const DedupWindow = 24 * time.Hour

// Defaults of Config.
const (
	DefaultSearchLag      = time.Hour
	DefaultClockSkew      = 5 * time.Minute
	DefaultMaxListPages   = 10
	DefaultMaxSearchPages = 10
	listPageSize          = 100
)

// Sentinel errors in a failed request's chain (errors.Is); the error
// itself is a *providers.ProviderError.
var (
	// ErrKeyReused: the idempotency key was used before with other
	// parameters or on another endpoint (400 idempotency_error). Permanent.
	ErrKeyReused = errors.New("stripe: idempotency key reused with other parameters")
	// ErrKeyInUse: a request with the same key is still executing (409
	// idempotency_key_in_use). Definite and retryable, unless an earlier
	// attempt of the same call may have been processed.
	ErrKeyInUse = errors.New("stripe: idempotency key in use")
	// ErrCardDeclined: the payment was declined (402 card_error).
	// Permanent: Stripe replays the decline for the same key.
	ErrCardDeclined = errors.New("stripe: card declined")
)

// Config configures the adapter. APIKey is required.
type Config struct {
	// APIKey is the secret key (sk_...), sent as a Bearer token.
	APIKey string
	// HTTP configures the HTTP layer (timeouts, retries). Its Clock is the
	// adapter's: lookups reckon the search lag from it.
	HTTP providers.Config
	// SearchLag bounds how far Stripe's search index lags behind commits.
	// Default DefaultSearchLag: Stripe documents under a minute normally
	// and up to an hour during outages.
	SearchLag time.Duration
	// ClockSkew bounds the difference between HTTP.Clock and Stripe's
	// clock; it widens the window lookups list. Default DefaultClockSkew.
	ClockSkew time.Duration
	// MaxListPages bounds a lookup's list scan, in pages of 100 objects.
	// Default DefaultMaxListPages.
	MaxListPages int
	// MaxSearchPages bounds how many pages of 100 search results a
	// PaymentIntents lookup reads. Default DefaultMaxSearchPages.
	MaxSearchPages int
}

// Client holds the adapters of one Stripe account.
type Client struct {
	// PaymentIntents creates and finds PaymentIntents.
	PaymentIntents *PaymentIntents
	// Refunds creates and finds refunds.
	Refunds *Refunds
}

// New returns adapters for the Stripe API at baseURL
// ("https://api.stripe.com", or a fake's URL).
func New(baseURL string, cfg *Config) *Client {
	var c Config
	if cfg != nil {
		c = *cfg
	}
	if c.HTTP.Clock == nil {
		c.HTTP.Clock = clock.System{}
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
	hc := c.HTTP
	hc.Classify = chain(classify, hc.Classify)
	a := &api{
		hc:     providers.NewClient(baseURL, &hc),
		header: http.Header{"Authorization": {"Bearer " + c.APIKey}, "Stripe-Version": {APIVersion}},
		cfg:    c,
	}
	if u, err := url.Parse(baseURL); err == nil && u.Scheme == "https" && u.Host == "api.stripe.com" {
		a.dashboard = "https://dashboard.stripe.com"
	}
	return &Client{PaymentIntents: &PaymentIntents{a}, Refunds: &Refunds{a}}
}

// chain runs ours, then the caller's own hook.
func chain(ours, theirs func(*providers.ProviderError)) func(*providers.ProviderError) {
	if theirs == nil {
		return ours
	}
	return func(e *providers.ProviderError) { ours(e); theirs(e) }
}

// classify maps Stripe's error types to the sentinels.
func classify(e *providers.ProviderError) {
	switch {
	case e.Type == "idempotency_error":
		e.Err, e.Retryable = ErrKeyReused, false
	case e.Code == "idempotency_key_in_use":
		e.Err, e.Retryable = ErrKeyInUse, true
	case e.Type == "card_error":
		e.Err, e.Retryable = ErrCardDeclined, false
	}
}

type api struct {
	hc        *providers.Client
	header    http.Header
	cfg       Config
	dashboard string // the Dashboard's base URL, "" when baseURL is not Stripe's API
}

// link is the Dashboard's page of the object ref: "payments/pi_..." or
// "refunds/re_...", under "test/" for a test-mode key.
func (a *api) link(ref, section, prefix string) string {
	if a.dashboard == "" || !strings.HasPrefix(ref, prefix) || strings.ContainsAny(ref, "/?#") {
		return ""
	}
	mode := ""
	if strings.HasPrefix(a.cfg.APIKey, "sk_test_") || strings.HasPrefix(a.cfg.APIKey, "rk_test_") {
		mode = "test/"
	}
	return a.dashboard + "/" + mode + section + "/" + url.PathEscape(ref)
}

func (a *api) create(ctx context.Context, path, key string, form url.Values, out any) (*providers.Response, error) {
	form.Set("metadata["+MetadataKey+"]", key)
	return a.hc.Do(ctx, &providers.Request{
		Method: http.MethodPost, Path: path, Header: a.header,
		Body: []byte(form.Encode()), ContentType: "application/x-www-form-urlencoded",
		Key: key, KeyHeader: "Idempotency-Key", Replay: providers.ReplayKeyed,
	}, out)
}

func (a *api) get(ctx context.Context, path string, query url.Values, out any) error {
	_, err := a.hc.Do(ctx, &providers.Request{Method: http.MethodGet, Path: path, Query: query, Header: a.header}, out)
	return err
}

// setMetadata adds the caller's metadata; MetadataKey is the adapter's,
// and keys with square brackets, which Stripe refuses, are refused here
// before anything is sent.
func setMetadata(form url.Values, md map[string]string) error {
	for k, v := range md {
		if k == MetadataKey {
			return fmt.Errorf("%w: metadata[%s] is reserved for the downstream key", providers.ErrInvalidRequest, MetadataKey)
		}
		if strings.ContainsAny(k, "[]") {
			return fmt.Errorf("%w: metadata key %q contains [ or ], which Stripe refuses", providers.ErrInvalidRequest, k)
		}
		form.Set("metadata["+k+"]", v)
	}
	return nil
}

func invalid(op string, err error) error {
	return &providers.ProviderError{Op: op, Err: err}
}

// list is a page of a list or search endpoint.
type list[T any] struct {
	Object   string  `json:"object"`
	Data     []T     `json:"data"`
	HasMore  bool    `json:"has_more"`
	NextPage *string `json:"next_page"`
}

// Validate implements providers.Validator.
func (l *list[T]) Validate() error {
	if l.Object != "list" && l.Object != "search_result" {
		return fmt.Errorf("object %q, want a list", l.Object)
	}
	if l.HasMore && len(l.Data) == 0 {
		return errors.New("an empty page that has more")
	}
	if l.Object == "search_result" && l.HasMore && (l.NextPage == nil || *l.NextPage == "") {
		return errors.New("a search page that has more without next_page")
	}
	return nil
}

// object is what lookups need of a PaymentIntent or a refund.
type object interface {
	id() string
	key() string
	Summary() string
}

// scan walks a list endpoint newest first, up to MaxListPages pages, for
// the object carrying key: Found, NotFound when the list ended within the
// bound, Inconclusive when the bound cut it.
func scan[T object](ctx context.Context, a *api, path string, query url.Values, key string) (providers.LookupResult, error) {
	query.Set("limit", strconv.Itoa(listPageSize))
	for range a.cfg.MaxListPages {
		var page list[T]
		if err := a.get(ctx, path, query, &page); err != nil {
			return providers.LookupResult{}, err
		}
		for _, o := range page.Data {
			if o.key() == key {
				return found(o), nil
			}
		}
		if !page.HasMore {
			return providers.LookupResult{Status: providers.NotFound}, nil
		}
		query.Set("starting_after", page.Data[len(page.Data)-1].id())
	}
	return providers.LookupResult{Status: providers.Inconclusive}, nil
}

func found(o object) providers.LookupResult {
	return providers.LookupResult{Status: providers.Found, Ref: o.id(), Summary: o.Summary()}
}

// zeroDecimal are the currencies whose amounts have no minor unit.
var zeroDecimal = map[string]bool{
	"bif": true, "clp": true, "djf": true, "gnf": true, "jpy": true, "kmf": true, "krw": true, "mga": true,
	"pyg": true, "rwf": true, "ugx": true, "vnd": true, "vuv": true, "xaf": true, "xof": true, "xpf": true,
}

// money formats an amount in the currency's smallest unit: "EUR 10.00".
func money(amount int64, currency string) string {
	cur := strings.ToUpper(currency)
	if zeroDecimal[strings.ToLower(currency)] {
		return fmt.Sprintf("%s %d", cur, amount)
	}
	sign := ""
	if amount < 0 {
		sign, amount = "-", -amount
	}
	return fmt.Sprintf("%s %s%d.%02d", cur, sign, amount/100, amount%100)
}
