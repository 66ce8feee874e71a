// Package mail is oncely's adapter for email (or SMS) APIs that offer no
// idempotency: the mechanism of a reference search (see package providers).
//
// Send carries the downstream key as the message's reference and in its
// metadata, and searches for that reference before sending: a message the
// search finds is returned instead of being sent again. Since the provider
// does not deduplicate, a send that may have reached it is never resent by
// the HTTP layer; its failure is ambiguous and left to reconciliation.
//
// The search reads an index that lags behind sends by up to
// Config.IndexLag, so an empty search proves nothing while a message could
// be younger than that: Lookup then answers Inconclusive, never NotFound
// (see providers.Eventual).
//
// The API shape is: POST /v1/messages with a JSON body {"from", "to",
// "subject", "text", "reference", "metadata"} answering the message, and
// GET /v1/messages?reference=X answering {"data": [messages]}.
package mail

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/oncely/oncely/providers"
)

// MetadataKey is the metadata entry that carries the downstream key, next
// to the reference.
const MetadataKey = "oncely_key"

// DefaultIndexLag is Config.IndexLag's default. Set the provider's own.
const DefaultIndexLag = 5 * time.Minute

// ErrSearchFailed is in the chain of a Send whose search before sending
// failed: nothing was sent, whatever the search's own failure was.
var ErrSearchFailed = errors.New("mail: the search before sending failed; nothing was sent")

// Config configures the adapter.
type Config struct {
	// APIKey, when set, is sent as a Bearer token.
	APIKey string
	// HTTP configures the HTTP layer (timeouts, retries).
	HTTP providers.Config
	// IndexLag bounds how far the reference search lags behind sends.
	// Default DefaultIndexLag.
	IndexLag time.Duration
}

// Message is what to send.
type Message struct {
	From, To      string
	Subject, Text string
	// Metadata is sent with the message; MetadataKey is reserved.
	Metadata map[string]string
}

// Sent is a message as the provider returns it.
type Sent struct {
	ID        string            `json:"id"`
	From      string            `json:"from"`
	To        string            `json:"to"`
	Subject   string            `json:"subject"`
	Reference string            `json:"reference"`
	Metadata  map[string]string `json:"metadata"`
	Status    string            `json:"status"`
	CreatedAt string            `json:"created_at"`
	// Existing: the search found the message, sent by an earlier
	// attempt; Send did not send it again.
	Existing bool `json:"-"`
}

// Validate implements providers.Validator.
func (m *Sent) Validate() error {
	if m.ID == "" {
		return errors.New("a message without an id")
	}
	return nil
}

// Summary describes the message in one line.
func (m *Sent) Summary() string {
	return fmt.Sprintf("message %s to %s (%s)", m.ID, m.To, m.Subject)
}

type searchResult struct {
	Data []Sent `json:"data"`
}

func (r *searchResult) Validate() error {
	if r.Data == nil {
		return errors.New(`no "data" list`)
	}
	for i := range r.Data {
		if err := r.Data[i].Validate(); err != nil {
			return err
		}
	}
	return nil
}

// Client sends messages and finds them by downstream key. It implements
// providers.Adapter.
type Client struct {
	hc       *providers.Client
	header   http.Header
	indexLag time.Duration
}

// New returns an adapter for the API at baseURL.
func New(baseURL string, cfg *Config) *Client {
	var c Config
	if cfg != nil {
		c = *cfg
	}
	if c.IndexLag <= 0 {
		c.IndexLag = DefaultIndexLag
	}
	header := http.Header{}
	if c.APIKey != "" {
		header.Set("Authorization", "Bearer "+c.APIKey)
	}
	return &Client{hc: providers.NewClient(baseURL, &c.HTTP), header: header, indexLag: c.IndexLag}
}

// Send sends m once per downstream key, as far as the search can tell: it
// first searches for the reference, and returns the message found
// (Existing set) instead of sending another. A message sent by an earlier
// attempt within IndexLag is not yet searchable; keeping the executor's
// record is what prevents that repeat.
//
// Failures are *providers.ProviderError. A failed search is definite (it
// wraps ErrSearchFailed); a send that may have reached the provider is
// ambiguous and is not resent.
func (c *Client) Send(ctx context.Context, downstreamKey string, m Message) (*Sent, error) {
	if downstreamKey == "" {
		return nil, &providers.ProviderError{Op: "POST /v1/messages", Err: fmt.Errorf("%w: a downstream key is required", providers.ErrInvalidRequest)}
	}
	if _, ok := m.Metadata[MetadataKey]; ok {
		return nil, &providers.ProviderError{Op: "POST /v1/messages", Err: fmt.Errorf("%w: metadata %q is reserved for the downstream key", providers.ErrInvalidRequest, MetadataKey)}
	}
	found, err := c.search(ctx, downstreamKey)
	if err != nil {
		return nil, searchFailed(err)
	}
	if found != nil {
		found.Existing = true
		return found, nil
	}
	md := map[string]string{MetadataKey: downstreamKey}
	for k, v := range m.Metadata {
		md[k] = v
	}
	body, err := json.Marshal(map[string]any{
		"from": m.From, "to": m.To, "subject": m.Subject, "text": m.Text,
		"reference": downstreamKey, "metadata": md,
	})
	if err != nil {
		return nil, &providers.ProviderError{Op: "POST /v1/messages", Err: fmt.Errorf("%w: %v", providers.ErrInvalidRequest, err)}
	}
	var sent Sent
	if _, err := c.hc.Do(ctx, &providers.Request{
		Method: http.MethodPost, Path: "/v1/messages", Header: c.header,
		Body: body, ContentType: "application/json", Replay: providers.ReplayUnsafe,
	}, &sent); err != nil {
		return nil, err
	}
	return &sent, nil
}

// searchFailed turns a failed search into a definite failure of the send:
// whatever the search met, no message was sent.
func searchFailed(err error) error {
	var pe *providers.ProviderError
	if !errors.As(err, &pe) {
		return &providers.ProviderError{Retryable: true, Err: fmt.Errorf("%w: %w", ErrSearchFailed, err)}
	}
	cp := *pe
	if cp.Ambiguous {
		cp.Ambiguous, cp.Retryable = false, true
	}
	if pe.Err != nil {
		cp.Err = fmt.Errorf("%w: %w", ErrSearchFailed, pe.Err)
	} else {
		cp.Err = ErrSearchFailed
	}
	return &cp
}

// search returns the first message whose reference is key, or nil.
func (c *Client) search(ctx context.Context, key string) (*Sent, error) {
	var res searchResult
	if _, err := c.hc.Do(ctx, &providers.Request{
		Method: http.MethodGet, Path: "/v1/messages", Header: c.header,
		Query: url.Values{"reference": {key}},
	}, &res); err != nil {
		return nil, err
	}
	for i := range res.Data {
		if res.Data[i].Reference == key {
			return &res.Data[i], nil
		}
	}
	return nil, nil
}

// Capabilities: no deduplication; an eventually consistent search.
func (c *Client) Capabilities() providers.Capabilities {
	return providers.Capabilities{Lookup: providers.Eventual, IndexLag: c.indexLag}
}

// Lookup searches for the message sent with downstreamKey: Found, or
// Inconclusive when the search shows none (it may lag).
func (c *Client) Lookup(ctx context.Context, downstreamKey string) (providers.LookupResult, error) {
	m, err := c.search(ctx, downstreamKey)
	switch {
	case err != nil:
		return providers.LookupResult{}, err
	case m == nil:
		return providers.LookupResult{Status: providers.Inconclusive}, nil
	}
	return providers.LookupResult{Status: providers.Found, Ref: m.ID, Summary: m.Summary()}, nil
}

var _ providers.Adapter = (*Client)(nil)
