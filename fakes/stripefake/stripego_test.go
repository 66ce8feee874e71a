package stripefake_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v82"

	"github.com/oncely/oncely/fakes"
	"github.com/oncely/oncely/fakes/fault"
	"github.com/oncely/oncely/fakes/internal/testutil"
	"github.com/oncely/oncely/fakes/stripefake"
)

// stripeClient is the official client pointed at the fake, with its own
// retries on (as shipped) or off.
func stripeClient(s *stripefake.Server, retries int64, httpClient *http.Client) *stripe.Client {
	if httpClient == nil {
		httpClient = s.Client()
	}
	backend := stripe.GetBackendWithConfig(stripe.APIBackend, &stripe.BackendConfig{
		URL:               stripe.String(s.URL),
		HTTPClient:        httpClient,
		MaxNetworkRetries: stripe.Int64(retries),
		LeveledLogger:     &stripe.LeveledLogger{Level: stripe.LevelNull},
		EnableTelemetry:   stripe.Bool(false),
	})
	return stripe.NewClient(testKey, stripe.WithBackends(&stripe.Backends{API: backend, Connect: backend, Uploads: backend, MeterEvents: backend}))
}

func createParams(key string, amount int64) *stripe.PaymentIntentCreateParams {
	p := &stripe.PaymentIntentCreateParams{
		Amount:             stripe.Int64(amount),
		Currency:           stripe.String(string(stripe.CurrencyUSD)),
		PaymentMethodTypes: stripe.StringSlice([]string{"card"}),
	}
	p.AddMetadata("oncely_key", key)
	p.SetIdempotencyKey(key)
	return p
}

// stripe-go does not retry an error answer such as a 5xx: the caller sees
// it, although the effect was committed.
func TestStripeGoSurfacesErrorAfterCommit(t *testing.T) {
	t.Parallel()
	s := start(t, nil)
	s.Faults.Add(fault.Rule{Route: piRoute, Attempt: 1, Action: fault.CommitThenError, Status: 502})
	_, err := stripeClient(s, 2, nil).V1PaymentIntents.Create(context.Background(), createParams("err-1", 700))
	var apiErr *stripe.APIError
	if !errors.As(err, &apiErr) {
		t.Fatalf("err = %v, want a *stripe.APIError", err)
	}
	if n := len(s.Journal()); n != 1 {
		t.Fatalf("journal has %d effects, want the committed one", n)
	}
}

func TestStripeGoIdempotency(t *testing.T) {
	t.Parallel()
	s := start(t, nil)
	sc := stripeClient(s, 0, nil)
	ctx := context.Background()

	first, err := sc.V1PaymentIntents.Create(ctx, createParams("act-1", 2000))
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	second, err := sc.V1PaymentIntents.Create(ctx, createParams("act-1", 2000))
	if err != nil {
		t.Fatalf("repeat: %v", err)
	}
	if second.ID != first.ID || first.Metadata["oncely_key"] != "act-1" || first.Amount != 2000 || first.Status != stripe.PaymentIntentStatusRequiresPaymentMethod {
		t.Fatalf("first %+v, second %+v", first, second)
	}
	if h := second.LastResponse.Header; h.Get("Idempotent-Replayed") != "true" || second.LastResponse.IdempotencyKey != "act-1" {
		t.Fatalf("second response headers: %v", h)
	}
	if first.LastResponse.Header.Get("Idempotent-Replayed") != "" {
		t.Fatal("first response marked as a replay")
	}

	_, err = sc.V1PaymentIntents.Create(ctx, createParams("act-1", 3000))
	var serr *stripe.Error
	if !errors.As(err, &serr) || serr.Type != stripe.ErrorTypeIdempotency || serr.HTTPStatusCode != http.StatusBadRequest {
		t.Fatalf("reuse with another amount: %v", err)
	}
	var oncelyErr *stripe.IdempotencyError
	if !errors.As(err, &oncelyErr) {
		t.Fatalf("reuse error is not a *stripe.IdempotencyError: %T", serr.Err)
	}
	if got := fakes.Filter(s.Journal(), fakes.KindPaymentIntent, ""); len(got) != 1 || got[0].ID != first.ID {
		t.Fatalf("journal = %+v", got)
	}

	got, err := sc.V1PaymentIntents.Retrieve(ctx, first.ID, nil)
	if err != nil || got.ID != first.ID || got.Created != first.Created {
		t.Fatalf("retrieve: %v %+v", err, got)
	}
}

func TestStripeGoObjectsAndErrors(t *testing.T) {
	t.Parallel()
	clock := testutil.NewClock()
	s := start(t, &stripefake.Config{Clock: clock, SearchLag: time.Minute})
	sc := stripeClient(s, 0, nil)
	ctx := context.Background()

	confirmed := createParams("pay-1", 5000)
	confirmed.PaymentMethod = stripe.String("pm_card_visa")
	confirmed.Confirm = stripe.Bool(true)
	confirmed.AddExpand("latest_charge")
	pi, err := sc.V1PaymentIntents.Create(ctx, confirmed)
	if err != nil {
		t.Fatalf("confirm: %v", err)
	}
	if pi.Status != stripe.PaymentIntentStatusSucceeded || pi.LatestCharge == nil || pi.LatestCharge.AmountCaptured != 5000 || pi.PaymentMethod == nil || pi.PaymentMethod.ID != "pm_card_visa" {
		t.Fatalf("confirmed PaymentIntent: %+v", pi)
	}

	declined := createParams("pay-2", 5000)
	declined.PaymentMethod = stripe.String("pm_card_chargeDeclined")
	declined.Confirm = stripe.Bool(true)
	_, err = sc.V1PaymentIntents.Create(ctx, declined)
	var serr *stripe.Error
	if !errors.As(err, &serr) || serr.Type != stripe.ErrorTypeCard || serr.Code != stripe.ErrorCodeCardDeclined || serr.HTTPStatusCode != http.StatusPaymentRequired ||
		serr.DeclineCode != stripe.DeclineCodeGenericDecline || serr.PaymentIntent == nil || serr.PaymentIntent.Status != stripe.PaymentIntentStatusRequiresPaymentMethod {
		t.Fatalf("decline: %#v", err)
	}

	_, err = sc.V1PaymentIntents.Create(ctx, &stripe.PaymentIntentCreateParams{Currency: stripe.String("usd")})
	if !errors.As(err, &serr) || serr.Code != stripe.ErrorCodeParameterMissing || serr.Param != "amount" {
		t.Fatalf("missing amount: %v", err)
	}

	refundParams := &stripe.RefundCreateParams{PaymentIntent: stripe.String(pi.ID), Amount: stripe.Int64(1200)}
	refundParams.AddMetadata("oncely_key", "ref-1")
	refundParams.SetIdempotencyKey("ref-1")
	re, err := sc.V1Refunds.Create(ctx, refundParams)
	if err != nil || re.Amount != 1200 || re.PaymentIntent == nil || re.PaymentIntent.ID != pi.ID || re.Status != stripe.RefundStatusSucceeded {
		t.Fatalf("refund: %v %+v", err, re)
	}
	listParams := &stripe.RefundListParams{PaymentIntent: stripe.String(pi.ID)}
	var refunds []string
	for r, err := range sc.V1Refunds.List(ctx, listParams) {
		if err != nil {
			t.Fatalf("list refunds: %v", err)
		}
		refunds = append(refunds, r.ID)
	}
	if len(refunds) != 1 || refunds[0] != re.ID {
		t.Fatalf("refunds = %v", refunds)
	}

	for i := range 3 {
		if _, err := sc.V1PaymentIntents.Create(ctx, createParams("bulk-"+string(rune('a'+i)), 100)); err != nil {
			t.Fatal(err)
		}
	}
	lp := &stripe.PaymentIntentListParams{}
	lp.Limit = stripe.Int64(2) // auto-pagination walks every page
	n := 0
	for _, err := range sc.V1PaymentIntents.List(ctx, lp) {
		if err != nil {
			t.Fatalf("list: %v", err)
		}
		n++
	}
	if n != 5 {
		t.Fatalf("listed %d PaymentIntents, want 5", n)
	}

	search := func() []string {
		var found []string
		sp := &stripe.PaymentIntentSearchParams{SearchParams: stripe.SearchParams{Query: "metadata['oncely_key']:'pay-1'"}}
		for pi, err := range sc.V1PaymentIntents.Search(ctx, sp) {
			if err != nil {
				t.Fatalf("search: %v", err)
			}
			found = append(found, pi.ID)
		}
		return found
	}
	if found := search(); len(found) != 0 {
		t.Fatalf("search found %v before the index lag", found)
	}
	clock.Advance(time.Minute)
	if found := search(); len(found) != 1 || found[0] != pi.ID {
		t.Fatalf("search = %v", found)
	}
	sp := &stripe.PaymentIntentSearchParams{SearchParams: stripe.SearchParams{Query: "amount:100"}}
	sp.Limit = stripe.Int64(1)
	n = 0
	for _, err := range sc.V1PaymentIntents.Search(ctx, sp) {
		if err != nil {
			t.Fatalf("search pages: %v", err)
		}
		n++
	}
	if n != 3 {
		t.Fatalf("search pages yielded %d, want 3", n)
	}
}

// stripe-go retries network errors on its own (not Stripe error answers),
// with the same key: after a commit whose answer was lost, its retry is
// answered by the replay, and the journal holds one effect.
func TestStripeGoRetriesThroughFaults(t *testing.T) {
	t.Parallel()
	s := start(t, nil)
	s.Faults.Add(fault.Rule{Route: piRoute, Attempt: 1, Action: fault.CommitThenDrop})
	sc := stripeClient(s, 2, testutil.FreshClient(5*time.Second))
	pi, err := sc.V1PaymentIntents.Create(context.Background(), createParams("retry-1", 700))
	if err != nil {
		t.Fatalf("create through faults: %v (faults %v)", err, s.Faults.Log())
	}
	if pi.LastResponse.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatal("final answer is not a replay")
	}
	journal := s.Journal()
	if len(journal) != 1 || journal[0].ID != pi.ID || len(s.Faults.Log()) != 1 {
		t.Fatalf("journal %+v, faults %v", journal, s.Faults.Log())
	}
}

// The official client confirms, updates, captures and cancels
// PaymentIntents and lists charges against the fake, and reads Stripe's
// errors for a state that forbids the call.
func TestStripeGoPaymentIntentRoutes(t *testing.T) {
	t.Parallel()
	s := start(t, nil)
	sc := stripeClient(s, 0, nil)
	ctx := context.Background()

	p := createParams("route-1", 3000)
	p.CaptureMethod = stripe.String(string(stripe.PaymentIntentCaptureMethodManual))
	pi, err := sc.V1PaymentIntents.Create(ctx, p)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	up := &stripe.PaymentIntentUpdateParams{Amount: stripe.Int64(2500), Description: stripe.String("order 9"), PaymentMethod: stripe.String("pm_card_visa")}
	up.AddMetadata("step", "updated")
	if pi, err = sc.V1PaymentIntents.Update(ctx, pi.ID, up); err != nil || pi.Amount != 2500 || pi.Status != stripe.PaymentIntentStatusRequiresConfirmation || pi.Metadata["step"] != "updated" {
		t.Fatalf("update: %+v, %v", pi, err)
	}
	conf := &stripe.PaymentIntentConfirmParams{ReturnURL: stripe.String("https://example.com/back")}
	conf.SetIdempotencyKey("route-1-confirm")
	if pi, err = sc.V1PaymentIntents.Confirm(ctx, pi.ID, conf); err != nil || pi.Status != stripe.PaymentIntentStatusRequiresCapture || pi.AmountCapturable != 2500 {
		t.Fatalf("confirm: %+v, %v", pi, err)
	}
	capt := &stripe.PaymentIntentCaptureParams{AmountToCapture: stripe.Int64(2000)}
	capt.AddExpand("latest_charge.balance_transaction")
	if pi, err = sc.V1PaymentIntents.Capture(ctx, pi.ID, capt); err != nil || pi.Status != stripe.PaymentIntentStatusSucceeded || pi.AmountReceived != 2000 ||
		pi.LatestCharge == nil || pi.LatestCharge.AmountCaptured != 2000 || pi.LatestCharge.BalanceTransaction == nil || pi.LatestCharge.BalanceTransaction.Net != 2000 {
		t.Fatalf("capture: %+v, %v", pi, err)
	}
	_, err = sc.V1PaymentIntents.Cancel(ctx, pi.ID, nil)
	var apiErr *stripe.Error
	if !errors.As(err, &apiErr) || apiErr.Code != stripe.ErrorCodePaymentIntentUnexpectedState || apiErr.DocURL == "" || apiErr.RequestLogURL == "" {
		t.Fatalf("cancel of a succeeded intent: %v", err)
	}

	other, err := sc.V1PaymentIntents.Create(ctx, createParams("route-2", 800))
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	cancel := &stripe.PaymentIntentCancelParams{CancellationReason: stripe.String(string(stripe.PaymentIntentCancellationReasonAbandoned))}
	if other, err = sc.V1PaymentIntents.Cancel(ctx, other.ID, cancel); err != nil || other.Status != stripe.PaymentIntentStatusCanceled || other.CanceledAt == 0 {
		t.Fatalf("cancel: %+v, %v", other, err)
	}

	var charges []string
	for ch, err := range sc.V1Charges.List(ctx, &stripe.ChargeListParams{PaymentIntent: stripe.String(pi.ID)}) {
		if err != nil {
			t.Fatalf("list charges: %v", err)
		}
		charges = append(charges, ch.ID)
	}
	if len(charges) != 1 || charges[0] != pi.LatestCharge.ID {
		t.Fatalf("charges of %s = %v, want [%s]", pi.ID, charges, pi.LatestCharge.ID)
	}
	n := 0
	for _, err := range sc.V1Charges.List(ctx, &stripe.ChargeListParams{ListParams: stripe.ListParams{Limit: stripe.Int64(1)}}) {
		if err != nil {
			t.Fatalf("list all charges: %v", err)
		}
		n++
	}
	if n != 1 {
		t.Fatalf("listed %d charges, want 1", n)
	}
}
