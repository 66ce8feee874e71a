// Package hubspot is oncely's adapter for HubSpot CRM records (contacts,
// deals): the mechanism of an upsert by external id (see package
// providers), on HubSpot's upsert by a unique property.
//
// Upsert sends POST /crm/v3/objects/{type}/batch/upsert with one input
// whose idProperty is a property with unique values (Config.IDProperty,
// "oncely_key" by default, which must exist in the portal with "unique
// values" set) and whose id is the downstream key: the key names the
// record, so a repeat converges on the same record instead of creating
// another, and the HTTP layer may resend it after any failure. Lookup
// reads GET /crm/v3/objects/{type}/{key}?idProperty=..., a read of the
// object store, not of the search index: it is consistent, and 404 is
// NotFound.
//
// HubSpot has no official Go client; the adapter speaks plain HTTP
// through package providers (go-retryablehttp, one retry layer).
//
// The adapter never uses HubSpot's CRM search (POST
// /crm/v3/objects/{type}/search), the lookup users often reach for: the
// search reads an index that HubSpot updates seconds after a write, so a
// record just created may be missing from it, and a "not found" from it
// would have a reconciler create the record again. The upsert by a
// unique property converges without any lookup, and the read by
// idProperty above is consistent, so the adapter needs neither the
// search nor its lag (fakes/hubspotfake does not model the search).
//
// # Errors
//
// Failures are *providers.ProviderError, classified from HubSpot's status
// and error body ({"status": "error", "category", "message", "errors"}):
//
//   - 400 (VALIDATION_ERROR, PROPERTY_DOESNT_EXIST, INVALID_EMAIL ...),
//     401, 403 (MISSING_SCOPES), 404, 409 CONFLICT (another record holds
//     a unique value), 413, 415: permanent, nothing was written.
//   - 429 (RATE_LIMIT, TEN_SECONDLY_ROLLING, the daily limit): definite
//     and retryable, with the Retry-After HubSpot sends; the layer waits
//     it out up to providers.Config.MaxRetryAfter.
//   - 5xx, a timeout or a reset after the request may have left:
//     ambiguous; the upsert is resent by the layer (a repeat converges),
//     and once retries are spent, reconciliation resends it again.
//   - 207 multi-status with the input's error: permanent, with HubSpot's
//     message; nothing was written for it.
//
// The category is in ProviderError.Type, the first error's code in Code.
package hubspot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"github.com/oncely/oncely/providers"
)

// DefaultBaseURL is HubSpot's API.
const DefaultBaseURL = "https://api.hubapi.com"

// DefaultIDProperty is Config.IDProperty's default.
const DefaultIDProperty = "oncely_key"

// Object types.
const (
	Contacts = "contacts"
	Deals    = "deals"
)

// Config configures the adapter.
type Config struct {
	// BaseURL is the API's base (default DefaultBaseURL).
	BaseURL string
	// AccessToken is the private app's (or OAuth) access token, sent as a
	// Bearer token.
	AccessToken string
	// ObjectType is the CRM object the adapter writes (Contacts, Deals,
	// or another type name or id); default Contacts.
	ObjectType string
	// IDProperty is the unique property that holds the downstream key
	// (default DefaultIDProperty). Create it in HubSpot as a single-line
	// text property with unique values.
	IDProperty string
	// HTTP configures the HTTP layer (timeouts, retries, Retry-After cap).
	HTTP providers.Config
}

// Record is a CRM record as HubSpot returns it.
type Record struct {
	ID         string            `json:"id"`
	Properties map[string]string `json:"properties"`
	CreatedAt  string            `json:"createdAt"`
	UpdatedAt  string            `json:"updatedAt"`
	Archived   bool              `json:"archived"`
	// New: the upsert created the record rather than updating it.
	New bool `json:"new"`
}

// Validate implements providers.Validator.
func (r *Record) Validate() error {
	if r.ID == "" {
		return errors.New("a record without an id")
	}
	return nil
}

type batchResult struct {
	Status  string   `json:"status"`
	Results []Record `json:"results"`
	Errors  []struct {
		Status   string `json:"status"`
		Category string `json:"category"`
		Message  string `json:"message"`
	} `json:"errors"`
}

func (b *batchResult) Validate() error {
	if len(b.Results) == 0 && len(b.Errors) == 0 {
		return errors.New("a batch answer with neither results nor errors")
	}
	return nil
}

// Client upserts one object type's records by a unique property and reads
// them back. It implements providers.Adapter.
type Client struct {
	hc         *providers.Client
	header     http.Header
	objectType string
	idProperty string
}

// New returns the adapter. cfg may be nil for the defaults (then every
// request lacks a token and HubSpot answers 401).
func New(cfg *Config) *Client {
	var c Config
	if cfg != nil {
		c = *cfg
	}
	if c.BaseURL == "" {
		c.BaseURL = DefaultBaseURL
	}
	if c.ObjectType == "" {
		c.ObjectType = Contacts
	}
	if c.IDProperty == "" {
		c.IDProperty = DefaultIDProperty
	}
	c.HTTP.Classify = chain(Classify, c.HTTP.Classify)
	header := http.Header{}
	if c.AccessToken != "" {
		header.Set("Authorization", "Bearer "+c.AccessToken)
	}
	return &Client{hc: providers.NewClient(c.BaseURL, &c.HTTP), header: header, objectType: c.ObjectType, idProperty: c.IDProperty}
}

func chain(a, b func(*providers.ProviderError)) func(*providers.ProviderError) {
	if b == nil {
		return a
	}
	return func(e *providers.ProviderError) { a(e); b(e) }
}

// Classify refines the HTTP layer's reading of a HubSpot error: 409 is a
// unique-value conflict (permanent), not a request in flight; the error
// body's category goes to Type and its first error code to Code. It is
// installed by New; exported for adapters of other HubSpot endpoints.
func Classify(e *providers.ProviderError) {
	var body struct {
		Category  string `json:"category"`
		ErrorType string `json:"errorType"`
		Message   string `json:"message"`
		Errors    []struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"errors"`
	}
	if json.Unmarshal(e.Body, &body) == nil {
		e.Type = body.Category
		if e.Type == "" {
			e.Type = body.ErrorType
		}
		if body.Message != "" {
			e.Message = body.Message
		}
		e.Code = ""
		if len(body.Errors) > 0 {
			e.Code = body.Errors[0].Code
			if body.Errors[0].Message != "" {
				e.Message += ": " + body.Errors[0].Message
			}
		}
	}
	if e.Status == http.StatusConflict {
		e.Retryable = false
	}
}

// Upsert creates or updates the record whose IDProperty is downstreamKey,
// writing props (which must not set IDProperty to another value).
// Failures are *providers.ProviderError.
func (c *Client) Upsert(ctx context.Context, downstreamKey string, props map[string]string) (*Record, error) {
	op := "POST /crm/v3/objects/" + c.objectType + "/batch/upsert"
	if downstreamKey == "" {
		return nil, &providers.ProviderError{Op: op, Err: fmt.Errorf("%w: a downstream key is required", providers.ErrInvalidRequest)}
	}
	if v, ok := props[c.idProperty]; ok && v != downstreamKey {
		return nil, &providers.ProviderError{Op: op, Err: fmt.Errorf("%w: property %q is reserved for the downstream key", providers.ErrInvalidRequest, c.idProperty)}
	}
	all := map[string]string{c.idProperty: downstreamKey}
	for k, v := range props {
		all[k] = v
	}
	body, err := json.Marshal(map[string]any{"inputs": []any{map[string]any{
		"idProperty": c.idProperty, "id": downstreamKey, "properties": all,
	}}})
	if err != nil {
		return nil, &providers.ProviderError{Op: op, Err: fmt.Errorf("%w: %v", providers.ErrInvalidRequest, err)}
	}
	var out batchResult
	res, err := c.hc.Do(ctx, &providers.Request{
		Method: http.MethodPost, Path: "/crm/v3/objects/" + url.PathEscape(c.objectType) + "/batch/upsert", Header: c.header,
		Body: body, ContentType: "application/json", Key: downstreamKey, Replay: providers.ReplayUpsert,
	}, &out)
	if err != nil {
		return nil, err
	}
	if len(out.Results) == 0 {
		e := out.Errors[0]
		return nil, &providers.ProviderError{Op: op, Status: res.Status, Type: e.Category, Message: e.Message, Attempts: res.Attempts}
	}
	rec := out.Results[0]
	if rec.Properties[c.idProperty] != "" && rec.Properties[c.idProperty] != downstreamKey {
		return nil, &providers.ProviderError{
			Op: op, Status: res.Status, Message: "the answer names another record", Retryable: true, Ambiguous: true, Attempts: res.Attempts,
			Err: fmt.Errorf("%w: %s %q, want %q", providers.ErrBadResponse, c.idProperty, rec.Properties[c.idProperty], downstreamKey),
		}
	}
	return &rec, nil
}

// Capabilities: the create is an upsert; the lookup is consistent.
func (c *Client) Capabilities() providers.Capabilities {
	return providers.Capabilities{Lookup: providers.Consistent, Upsert: true}
}

// Get reads the record whose IDProperty is downstreamKey, with the
// properties named (HubSpot's defaults for the type when none). A missing
// record is a *providers.ProviderError with Status 404.
func (c *Client) Get(ctx context.Context, downstreamKey string, properties ...string) (*Record, error) {
	q := url.Values{"idProperty": {c.idProperty}}
	for _, p := range properties {
		q.Add("properties", p)
	}
	var rec Record
	if _, err := c.hc.Do(ctx, &providers.Request{
		Method: http.MethodGet, Path: "/crm/v3/objects/" + url.PathEscape(c.objectType) + "/" + url.PathEscape(downstreamKey),
		Query: q, Header: c.header,
	}, &rec); err != nil {
		return nil, err
	}
	return &rec, nil
}

// Lookup reads the record whose IDProperty is downstreamKey: Found, or
// NotFound on 404.
func (c *Client) Lookup(ctx context.Context, downstreamKey string) (providers.LookupResult, error) {
	rec, err := c.Get(ctx, downstreamKey, c.idProperty)
	var pe *providers.ProviderError
	switch {
	case errors.As(err, &pe) && pe.Status == http.StatusNotFound:
		return providers.LookupResult{Status: providers.NotFound}, nil
	case err != nil:
		return providers.LookupResult{}, err
	}
	return providers.LookupResult{Status: providers.Found, Ref: rec.ID, Summary: c.Summary(rec)}, nil
}

// Summary describes a record in one line.
func (c *Client) Summary(rec *Record) string {
	return fmt.Sprintf("%s record %s (%s %s)", c.objectType, rec.ID, c.idProperty, rec.Properties[c.idProperty])
}

var _ providers.Adapter = (*Client)(nil)
