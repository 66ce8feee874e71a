package stripe

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/oncely/oncely/providers"
)

// RefundParams are the parameters of a refund create: one of
// PaymentIntent and Charge.
type RefundParams struct {
	PaymentIntent string
	Charge        string
	// Amount in the smallest currency unit; 0 refunds what remains.
	Amount int64
	// Reason: "duplicate", "fraudulent" or "requested_by_customer".
	Reason string
	// Metadata is added to the refund; MetadataKey is reserved.
	Metadata map[string]string
}

// Refund is a refund as Stripe returns it (the fields the adapter uses).
type Refund struct {
	ID            string            `json:"id"`
	Object        string            `json:"object"`
	Amount        int64             `json:"amount"`
	Currency      string            `json:"currency"`
	Charge        string            `json:"charge"`
	PaymentIntent string            `json:"payment_intent"`
	Status        string            `json:"status"`
	Created       int64             `json:"created"`
	Metadata      map[string]string `json:"metadata"`
	// Replayed: Stripe answered from its idempotency store.
	Replayed bool `json:"-"`
}

// Validate implements providers.Validator.
func (r *Refund) Validate() error {
	if r.Object != "refund" || !strings.HasPrefix(r.ID, "re_") {
		return fmt.Errorf("not a refund: object %q, id %q", r.Object, r.ID)
	}
	return nil
}

// Summary describes the refund in one line.
func (r Refund) Summary() string {
	of := r.PaymentIntent
	if of == "" {
		of = r.Charge
	}
	return fmt.Sprintf("refund %s of %s for %s (%s)", r.ID, money(r.Amount, r.Currency), of, r.Status)
}

func (r Refund) id() string  { return r.ID }
func (r Refund) key() string { return r.Metadata[MetadataKey] }

// Refunds creates refunds and finds them by downstream key. It implements
// providers.Adapter.
type Refunds struct{ a *api }

// Link implements providers.Linker: the refund's page in Stripe's
// Dashboard (under test/ for a test-mode key), when ref names one and the
// adapter talks to Stripe's API; "" otherwise.
func (s *Refunds) Link(ref, _ string) string { return s.a.link(ref, "refunds", "re_") }

// Create creates a refund with downstreamKey as its Idempotency-Key and
// metadata[oncely_key]. Failures are *providers.ProviderError.
func (s *Refunds) Create(ctx context.Context, downstreamKey string, p RefundParams) (*Refund, error) {
	form := url.Values{}
	if p.PaymentIntent != "" {
		form.Set("payment_intent", p.PaymentIntent)
	}
	if p.Charge != "" {
		form.Set("charge", p.Charge)
	}
	if p.Amount != 0 {
		form.Set("amount", strconv.FormatInt(p.Amount, 10))
	}
	if p.Reason != "" {
		form.Set("reason", p.Reason)
	}
	if err := setMetadata(form, p.Metadata); err != nil {
		return nil, invalid("POST /v1/refunds", err)
	}
	var re Refund
	res, err := s.a.create(ctx, "/v1/refunds", downstreamKey, form, &re)
	if err != nil {
		return nil, err
	}
	re.Replayed = res.Header.Get("Idempotent-Replayed") == "true"
	return &re, nil
}

// Capabilities: Stripe replays by key for DedupWindow; refunds cannot be
// searched, and the list the lookup scans is consistent.
func (s *Refunds) Capabilities() providers.Capabilities {
	return providers.Capabilities{DedupWindow: DedupWindow, Lookup: providers.Consistent}
}

// Lookup finds the refund created with downstreamKey by scanning the
// refunds newest first, 100 a page, up to MaxListPages pages. It answers
// NotFound when the list ended within the bound, Inconclusive when it was
// cut: more refunds were made since than the bound covers.
func (s *Refunds) Lookup(ctx context.Context, downstreamKey string) (providers.LookupResult, error) {
	return scan[Refund](ctx, s.a, "/v1/refunds", url.Values{}, downstreamKey)
}

var _ providers.Adapter = (*Refunds)(nil)
