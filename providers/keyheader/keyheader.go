// Package keyheader is oncely's adapter for any HTTP API that honours the
// IETF Idempotency-Key header (draft-ietf-httpapi-idempotency-key-header):
// the mechanism of an idempotency header (see package providers), without
// a provider of its own.
//
// Post sends the downstream key in the header, as the draft's Structured
// Field string ("\"key\"") unless Config.BareKey is set. The API answers a
// repeat with the stored first response, so the HTTP layer resends after
// any failure that may have reached it. The draft's error answers become
// typed errors: 400 for a missing key (ErrKeyMissing, permanent), 409 while
// a request with the key is outstanding (ErrKeyInUse, definite and
// retryable), 422 for a key reused with another payload (ErrKeyReused,
// permanent).
//
// The draft defines no way to find a resource by its key, so the adapter
// looks up only when the API offers a path for it (Config.LookupPath);
// otherwise it declares providers.NoLookup and a reconciliation relies on
// the deduplication window.
package keyheader

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/oncely/oncely/providers"
)

// DefaultDedupWindow is Config.DedupWindow's default.
const DefaultDedupWindow = 24 * time.Hour

// Sentinel errors in a failed request's chain (errors.Is); the error itself
// is a *providers.ProviderError.
var (
	// ErrKeyMissing: the API did not see the key (400). Permanent: a
	// proxy dropping the header or a wrong Config.KeyHeader will drop it
	// again.
	ErrKeyMissing = errors.New("keyheader: idempotency key missing")
	// ErrKeyInUse: a request with the same key is still being processed
	// (409). Definite and retryable, unless an earlier attempt of the same
	// call may have been processed.
	ErrKeyInUse = errors.New("keyheader: a request with this idempotency key is outstanding")
	// ErrKeyReused: the key was used before with another payload (422).
	// Permanent.
	ErrKeyReused = errors.New("keyheader: idempotency key reused with another payload")
)

// Config configures the adapter.
type Config struct {
	// HTTP configures the HTTP layer (timeouts, retries).
	HTTP providers.Config
	// Header is sent with every request (authorization, versions).
	Header http.Header
	// KeyHeader names the key's header; default "Idempotency-Key".
	KeyHeader string
	// BareKey sends the key as it is instead of as a Structured Field
	// string, for APIs that predate the draft's syntax.
	BareKey bool
	// DedupWindow is how long the API keeps keys and replays; default
	// DefaultDedupWindow. A negative value declares no window.
	DedupWindow time.Duration
	// LookupPath, when set, is a path the API answers with the resource
	// a key created (200) or 404, with "{key}" standing for the escaped
	// key ("/v1/orders/by-key/{key}"). It makes Lookup consistent, and
	// must answer 404 only for a key that created nothing.
	LookupPath string
}

// Client sends keyed requests to one API. It implements providers.Adapter.
type Client struct {
	hc  *providers.Client
	cfg Config
}

// New returns an adapter for the API at baseURL.
func New(baseURL string, cfg *Config) *Client {
	var c Config
	if cfg != nil {
		c = *cfg
	}
	if c.KeyHeader == "" {
		c.KeyHeader = "Idempotency-Key"
	}
	switch {
	case c.DedupWindow == 0:
		c.DedupWindow = DefaultDedupWindow
	case c.DedupWindow < 0:
		c.DedupWindow = 0
	}
	hc := c.HTTP
	if theirs := hc.Classify; theirs != nil {
		hc.Classify = func(e *providers.ProviderError) { classify(e); theirs(e) }
	} else {
		hc.Classify = classify
	}
	return &Client{hc: providers.NewClient(baseURL, &hc), cfg: c}
}

// classify maps the draft's error answers to the sentinels. A 400 or 422
// counts as the draft's only when its body speaks of idempotency: both are
// also ordinary validation answers.
func classify(e *providers.ProviderError) {
	aboutKey := bytes.Contains(bytes.ToLower(e.Body), []byte("idempotency"))
	switch {
	case e.Status == http.StatusConflict:
		e.Err, e.Retryable = ErrKeyInUse, true
	case e.Status == http.StatusBadRequest && aboutKey:
		e.Err = ErrKeyMissing
	case e.Status == http.StatusUnprocessableEntity && aboutKey:
		e.Err = ErrKeyReused
	}
}

// Post sends body (JSON-encoded; []byte and json.RawMessage are sent as
// they are) to path with downstreamKey in the key header, and decodes the
// 2xx answer into out when out is not nil. Failures are
// *providers.ProviderError.
func (c *Client) Post(ctx context.Context, downstreamKey, path string, body, out any) (*providers.Response, error) {
	op := "POST " + path
	header, err := c.keyValue(downstreamKey)
	if err != nil {
		return nil, &providers.ProviderError{Op: op, Err: err}
	}
	var raw []byte
	switch b := body.(type) {
	case []byte:
		raw = b
	case json.RawMessage:
		raw = b
	default:
		if raw, err = json.Marshal(body); err != nil {
			return nil, &providers.ProviderError{Op: op, Err: fmt.Errorf("%w: %v", providers.ErrInvalidRequest, err)}
		}
	}
	return c.hc.Do(ctx, &providers.Request{
		Method: http.MethodPost, Path: path, Header: c.cfg.Header,
		Body: raw, ContentType: "application/json",
		Key: header, KeyHeader: c.cfg.KeyHeader, Replay: providers.ReplayKeyed,
	}, out)
}

// keyValue renders the key for its header: an RFC 8941 string unless
// BareKey.
func (c *Client) keyValue(key string) (string, error) {
	if key == "" {
		return "", fmt.Errorf("%w: a downstream key is required", providers.ErrInvalidRequest)
	}
	for i := 0; i < len(key); i++ {
		if key[i] < 0x20 || key[i] > 0x7e {
			return "", fmt.Errorf("%w: the key must be printable ASCII", providers.ErrInvalidRequest)
		}
	}
	if c.cfg.BareKey {
		return key, nil
	}
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(key) + `"`, nil
}

// Capabilities: the API replays by key for DedupWindow; the lookup is
// consistent when LookupPath is set, absent otherwise.
func (c *Client) Capabilities() providers.Capabilities {
	caps := providers.Capabilities{DedupWindow: c.cfg.DedupWindow}
	if c.cfg.LookupPath != "" {
		caps.Lookup = providers.Consistent
	}
	return caps
}

// Lookup reads LookupPath for downstreamKey: Found with the resource's
// "id", or NotFound on 404. Without LookupPath it returns
// providers.ErrNoLookup.
func (c *Client) Lookup(ctx context.Context, downstreamKey string) (providers.LookupResult, error) {
	if c.cfg.LookupPath == "" {
		return providers.LookupResult{}, providers.ErrNoLookup
	}
	var res resource
	_, err := c.hc.Do(ctx, &providers.Request{
		Method: http.MethodGet, Header: c.cfg.Header,
		Path: strings.ReplaceAll(c.cfg.LookupPath, "{key}", url.PathEscape(downstreamKey)),
	}, &res)
	var pe *providers.ProviderError
	switch {
	case errors.As(err, &pe) && pe.Status == http.StatusNotFound:
		return providers.LookupResult{Status: providers.NotFound}, nil
	case err != nil:
		return providers.LookupResult{}, err
	}
	summary := res.ID
	if res.Object != "" {
		summary = res.Object + " " + res.ID
	}
	return providers.LookupResult{Status: providers.Found, Ref: res.ID, Summary: summary}, nil
}

// resource is what a lookup reads of the resource a key created.
type resource struct {
	ID     string `json:"id"`
	Object string `json:"object"`
}

func (r *resource) Validate() error {
	if r.ID == "" {
		return errors.New(`the resource has no "id"`)
	}
	return nil
}

var _ providers.Adapter = (*Client)(nil)
