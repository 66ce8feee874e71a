// Package crm is oncely's adapter for CRM contacts written by an upsert
// on an external id: the mechanism (see package providers) where repeats are
// naturally idempotent.
//
// Upsert sends PUT /v1/contacts/by-external-id/{downstream key}: the key is
// the contact's external id, so a repeat converges on the same contact
// instead of creating another, and the HTTP layer may resend it after any
// failure. Lookup reads GET /v1/contacts/by-external-id/{key}, which is
// consistent: 404 is NotFound.
package crm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"github.com/oncely/oncely/providers"
)

// Config configures the adapter.
type Config struct {
	// APIKey, when set, is sent as a Bearer token.
	APIKey string
	// HTTP configures the HTTP layer (timeouts, retries).
	HTTP providers.Config
}

// ContactInput is what an upsert writes: it replaces the contact's email,
// name and fields.
type ContactInput struct {
	Email  string            `json:"email"`
	Name   string            `json:"name,omitempty"`
	Fields map[string]string `json:"fields,omitempty"`
}

// Contact is a contact as the CRM returns it.
type Contact struct {
	ID         string            `json:"id"`
	ExternalID string            `json:"external_id"`
	Email      string            `json:"email"`
	Name       string            `json:"name"`
	Fields     map[string]string `json:"fields"`
	Version    int               `json:"version"`
	// Created: the upsert created the contact (201) rather than updating
	// or confirming it (200).
	Created bool `json:"-"`
}

// Validate implements providers.Validator.
func (c *Contact) Validate() error {
	if c.ID == "" {
		return errors.New("a contact without an id")
	}
	return nil
}

// Summary describes the contact in one line.
func (c *Contact) Summary() string {
	return fmt.Sprintf("contact %s (%s, external id %s)", c.ID, c.Email, c.ExternalID)
}

// Client upserts contacts and finds them by external id. It implements
// providers.Adapter.
type Client struct {
	hc     *providers.Client
	header http.Header
}

// New returns an adapter for the CRM at baseURL.
func New(baseURL string, cfg *Config) *Client {
	var c Config
	if cfg != nil {
		c = *cfg
	}
	header := http.Header{}
	if c.APIKey != "" {
		header.Set("Authorization", "Bearer "+c.APIKey)
	}
	return &Client{hc: providers.NewClient(baseURL, &c.HTTP), header: header}
}

func path(key string) string { return "/v1/contacts/by-external-id/" + url.PathEscape(key) }

// Upsert creates or replaces the contact whose external id is
// downstreamKey. Failures are *providers.ProviderError.
func (c *Client) Upsert(ctx context.Context, downstreamKey string, in ContactInput) (*Contact, error) {
	op := "PUT /v1/contacts/by-external-id/{key}"
	if downstreamKey == "" {
		return nil, &providers.ProviderError{Op: op, Err: fmt.Errorf("%w: a downstream key is required", providers.ErrInvalidRequest)}
	}
	body, err := json.Marshal(in)
	if err != nil {
		return nil, &providers.ProviderError{Op: op, Err: fmt.Errorf("%w: %v", providers.ErrInvalidRequest, err)}
	}
	var ct Contact
	res, err := c.hc.Do(ctx, &providers.Request{
		Method: http.MethodPut, Path: path(downstreamKey), Header: c.header,
		Body: body, ContentType: "application/json", Key: downstreamKey,
		Replay: providers.ReplayUpsert,
	}, &ct)
	if err != nil {
		return nil, err
	}
	if ct.ExternalID != downstreamKey {
		return nil, &providers.ProviderError{
			Op: op, Status: res.Status, Message: "the answer names another contact", Retryable: true, Ambiguous: true,
			Attempts: res.Attempts, Err: fmt.Errorf("%w: external id %q, want %q", providers.ErrBadResponse, ct.ExternalID, downstreamKey),
		}
	}
	ct.Created = res.Status == http.StatusCreated
	return &ct, nil
}

// Capabilities: the create is an upsert; the lookup is consistent.
func (c *Client) Capabilities() providers.Capabilities {
	return providers.Capabilities{Lookup: providers.Consistent, Upsert: true}
}

// Lookup reads the contact whose external id is downstreamKey: Found, or
// NotFound on 404.
func (c *Client) Lookup(ctx context.Context, downstreamKey string) (providers.LookupResult, error) {
	var ct Contact
	_, err := c.hc.Do(ctx, &providers.Request{Method: http.MethodGet, Path: path(downstreamKey), Header: c.header}, &ct)
	var pe *providers.ProviderError
	switch {
	case errors.As(err, &pe) && pe.Status == http.StatusNotFound:
		return providers.LookupResult{Status: providers.NotFound}, nil
	case err != nil:
		return providers.LookupResult{}, err
	}
	return providers.LookupResult{Status: providers.Found, Ref: ct.ID, Summary: ct.Summary()}, nil
}

var _ providers.Adapter = (*Client)(nil)
