package stripe

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/oncely/oncely/providers"
)

// PaymentIntentParams are the parameters of a PaymentIntent create.
type PaymentIntentParams struct {
	// Amount in the currency's smallest unit (cents). Required.
	Amount int64
	// Currency, a lowercase ISO code ("eur"). Required.
	Currency string
	// PaymentMethod is the id of the payment method to charge ("pm_...").
	PaymentMethod string
	// Confirm confirms the PaymentIntent on creation, charging
	// PaymentMethod. Without PaymentMethodTypes, a confirmed create
	// enables automatic payment methods without redirects, since a tool
	// has no customer to redirect.
	Confirm bool
	// PaymentMethodTypes restricts the payment method types ("card").
	PaymentMethodTypes []string
	// Description and ReceiptEmail are optional.
	Description  string
	ReceiptEmail string
	// Metadata is added to the object; MetadataKey is reserved.
	Metadata map[string]string
}

// PaymentIntent is a PaymentIntent as Stripe returns it (the fields the
// adapter uses).
type PaymentIntent struct {
	ID       string            `json:"id"`
	Object   string            `json:"object"`
	Amount   int64             `json:"amount"`
	Currency string            `json:"currency"`
	Status   string            `json:"status"`
	Created  int64             `json:"created"`
	Metadata map[string]string `json:"metadata"`
	// Replayed: Stripe answered from its idempotency store
	// (Idempotent-Replayed): an earlier attempt created the object.
	Replayed bool `json:"-"`
}

// Validate implements providers.Validator.
func (p *PaymentIntent) Validate() error {
	if p.Object != "payment_intent" || !strings.HasPrefix(p.ID, "pi_") {
		return fmt.Errorf("not a payment_intent: object %q, id %q", p.Object, p.ID)
	}
	return nil
}

// Summary describes the PaymentIntent in one line.
func (p PaymentIntent) Summary() string {
	return fmt.Sprintf("payment %s of %s (%s)", p.ID, money(p.Amount, p.Currency), p.Status)
}

func (p PaymentIntent) id() string  { return p.ID }
func (p PaymentIntent) key() string { return p.Metadata[MetadataKey] }

// PaymentIntents creates PaymentIntents and finds them by downstream key.
// It implements providers.Adapter.
type PaymentIntents struct{ a *api }

// Link implements providers.Linker: the PaymentIntent's page in Stripe's
// Dashboard (under test/ for a test-mode key), when ref names one and the
// adapter talks to Stripe's API; "" otherwise.
func (s *PaymentIntents) Link(ref, _ string) string { return s.a.link(ref, "payments", "pi_") }

// Create creates a PaymentIntent with downstreamKey as its Idempotency-Key
// and metadata[oncely_key]. A repeat with the same key and parameters within
// DedupWindow returns the first PaymentIntent (Replayed set). Failures are
// *providers.ProviderError; a decline wraps ErrCardDeclined.
func (s *PaymentIntents) Create(ctx context.Context, downstreamKey string, p PaymentIntentParams) (*PaymentIntent, error) {
	form := url.Values{}
	form.Set("amount", strconv.FormatInt(p.Amount, 10))
	form.Set("currency", p.Currency)
	if p.PaymentMethod != "" {
		form.Set("payment_method", p.PaymentMethod)
	}
	if p.Confirm {
		form.Set("confirm", "true")
		if len(p.PaymentMethodTypes) == 0 {
			form.Set("automatic_payment_methods[enabled]", "true")
			form.Set("automatic_payment_methods[allow_redirects]", "never")
		}
	}
	for i, t := range p.PaymentMethodTypes {
		form.Set("payment_method_types["+strconv.Itoa(i)+"]", t)
	}
	if p.Description != "" {
		form.Set("description", p.Description)
	}
	if p.ReceiptEmail != "" {
		form.Set("receipt_email", p.ReceiptEmail)
	}
	if err := setMetadata(form, p.Metadata); err != nil {
		return nil, invalid("POST /v1/payment_intents", err)
	}
	var pi PaymentIntent
	res, err := s.a.create(ctx, "/v1/payment_intents", downstreamKey, form, &pi)
	if err != nil {
		return nil, err
	}
	pi.Replayed = res.Header.Get("Idempotent-Replayed") == "true"
	return &pi, nil
}

// Capabilities: Stripe replays by key for DedupWindow; the lookup reads a
// search index that lags by up to SearchLag, completed by a list of the
// PaymentIntents younger than that.
func (s *PaymentIntents) Capabilities() providers.Capabilities {
	return providers.Capabilities{DedupWindow: DedupWindow, Lookup: providers.Eventual, IndexLag: s.a.cfg.SearchLag}
}

// Lookup finds the PaymentIntent created with downstreamKey. It searches
// metadata['oncely_key'], which covers objects older than SearchLag, page
// by page up to MaxSearchPages, then lists the PaymentIntents created in
// the last SearchLag + ClockSkew, which the index may not show yet. It
// answers NotFound only when the search and the list both ended within
// their bounds, and Inconclusive when either was cut: then only the
// search, once SearchLag has passed since the last request with the key,
// can tell (see providers.Eventual).
func (s *PaymentIntents) Lookup(ctx context.Context, downstreamKey string) (providers.LookupResult, error) {
	// The window is reckoned before the search, so that an object the
	// index has not shown yet is within it.
	since := s.a.cfg.HTTP.Clock.Now().Add(-s.a.cfg.SearchLag - s.a.cfg.ClockSkew).Unix()
	res, searched, err := s.search(ctx, downstreamKey)
	if err != nil || res.Status == providers.Found {
		return res, err
	}
	res, err = scan[PaymentIntent](ctx, s.a, "/v1/payment_intents", url.Values{"created[gte]": {strconv.FormatInt(since, 10)}}, downstreamKey)
	if err == nil && res.Status == providers.NotFound && !searched {
		res.Status = providers.Inconclusive
	}
	return res, err
}

// search reads the search results for downstreamKey, following next_page
// up to MaxSearchPages. complete is false when the bound cut the results.
func (s *PaymentIntents) search(ctx context.Context, downstreamKey string) (res providers.LookupResult, complete bool, err error) {
	q := url.Values{"query": {"metadata['" + MetadataKey + "']:'" + quote(downstreamKey) + "'"}, "limit": {strconv.Itoa(listPageSize)}}
	for range s.a.cfg.MaxSearchPages {
		var page list[PaymentIntent]
		if err := s.a.get(ctx, "/v1/payment_intents/search", q, &page); err != nil {
			return providers.LookupResult{}, false, err
		}
		for _, pi := range page.Data {
			if pi.key() == downstreamKey {
				return found(pi), true, nil
			}
		}
		if !page.HasMore {
			return providers.LookupResult{Status: providers.NotFound}, true, nil
		}
		q.Set("page", *page.NextPage)
	}
	return providers.LookupResult{Status: providers.Inconclusive}, false, nil
}

// quote escapes a value for a single-quoted search string.
func quote(s string) string {
	return strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s)
}

var _ providers.Adapter = (*PaymentIntents)(nil)
