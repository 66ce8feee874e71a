// Package fakes holds what the fake provider servers share: the effect
// journal that records what each fake really committed.
//
// The fakes themselves live in sub-packages, one per provider style:
//
//   - stripefake: a Stripe-like payments API with real idempotency-key
//     semantics (replay, key echo, idempotency_error, 409 while in flight),
//     list and lagging search.
//   - mailfake: an email API with no idempotency at all; a reference can be
//     searched, with a configurable index lag.
//   - crmfake: a CRM with a non-idempotent create and an upsert by external id.
//   - keyheaderfake: a generic API following the IETF Idempotency-Key header draft.
//   - hubspotfake: HubSpot's CRM records, upserted and read by a unique property.
//   - slackfake: Slack's chat.postMessage with metadata and a lagging conversations.history.
//   - resendfake: Resend's email API (send with Idempotency-Key, retrieve,
//     list), checked against Resend's OpenAPI description.
//   - githubfake: GitHub's issues and comments, no idempotency, a lagging search.
//
// Every fake is an http.Handler, started like httptest.Server, and takes a
// fault.Injector that fails, drops or delays requests around the commit step.
// A test compares a fake's Journal with the actions it meant to perform: the
// journal holds what happened on the provider side, whatever the client saw.
package fakes

import (
	"maps"
	"sync"
	"time"
)

// Effect kinds recorded by the fakes.
const (
	// KindPaymentIntent is a PaymentIntent created by stripefake (declined
	// confirmations are not effects: nothing was paid).
	KindPaymentIntent = "payment_intent"
	// KindPaymentIntentConfirm is a PaymentIntent confirmed through
	// POST /v1/payment_intents/{id}/confirm (a payment or an authorisation).
	KindPaymentIntentConfirm = "payment_intent.confirm"
	// KindPaymentIntentCapture is a capture of an authorised PaymentIntent.
	KindPaymentIntentCapture = "payment_intent.capture"
	// KindPaymentIntentCancel is a PaymentIntent canceled by stripefake.
	KindPaymentIntentCancel = "payment_intent.cancel"
	// KindPaymentIntentUpdate is an update of a PaymentIntent.
	KindPaymentIntentUpdate = "payment_intent.update"
	// KindRefund is a refund created by stripefake.
	KindRefund = "refund"
	// KindCharge is a successful charge created through POST /v1/charges.
	KindCharge = "charge"
	// KindMessage is a message accepted by mailfake.
	KindMessage = "message"
	// KindContactCreate is a contact created by crmfake's plain create.
	KindContactCreate = "contact.create"
	// KindContactUpsert is an upsert that created or changed a contact; an
	// upsert with identical fields is not an effect.
	KindContactUpsert = "contact.upsert"
	// KindOrder is an order created by keyheaderfake.
	KindOrder = "order"
)

// Effect is one committed side effect of a fake provider.
type Effect struct {
	// Seq is the 1-based position of the effect in its journal.
	Seq int
	// Kind is one of the Kind constants.
	Kind string
	// ID is the provider's id of the object created or changed.
	ID string
	// Key is the idempotency key, client reference or external id that came
	// with the request ("" if none).
	Key string
	// Params are the effect's salient parameters (amount, currency, to,
	// email, ...); metadata entries appear as "metadata.<name>".
	Params map[string]string
	// At is the fake's clock when the effect was committed.
	At time.Time
}

// Journal is an append-only, concurrency-safe list of effects.
// The zero value is ready to use.
type Journal struct {
	mu      sync.Mutex
	effects []Effect
}

// Append records e, numbering it with the next Seq, and returns it.
// The journal keeps its own copy of e.Params.
func (j *Journal) Append(e Effect) Effect {
	j.mu.Lock()
	defer j.mu.Unlock()
	e.Seq = len(j.effects) + 1
	e.Params = maps.Clone(e.Params)
	j.effects = append(j.effects, e)
	return e
}

// Snapshot returns a copy of the effects recorded so far, in commit order.
func (j *Journal) Snapshot() []Effect {
	j.mu.Lock()
	defer j.mu.Unlock()
	out := make([]Effect, len(j.effects))
	for i, e := range j.effects {
		e.Params = maps.Clone(e.Params)
		out[i] = e
	}
	return out
}

// Len returns the number of effects recorded so far.
func (j *Journal) Len() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return len(j.effects)
}

// Reset forgets every effect; the next one gets Seq 1 again.
func (j *Journal) Reset() {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.effects = nil
}

// Filter returns the effects of the given kind (every kind when kind is "")
// whose Key equals key (any key when key is "").
func Filter(effects []Effect, kind, key string) []Effect {
	var out []Effect
	for _, e := range effects {
		if (kind == "" || e.Kind == kind) && (key == "" || e.Key == key) {
			out = append(out, e)
		}
	}
	return out
}
