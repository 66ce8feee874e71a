package client

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// Scope decides which calls share an action key.
type Scope int

const (
	// ScopeRun: the same action within one run (the default). A new run may
	// do it again.
	ScopeRun Scope = iota
	// ScopeTenant: the same action for one tenant, across runs (Call.Tenant).
	ScopeTenant
	// ScopeGlobal: the same action, whoever asks.
	ScopeGlobal
)

// Field names an input field by its dotted JSON path ("customer.id"), in
// which a segment is an object member or the index of an array element
// ("observations.0.entityName": decimal, no leading zeros), as the MCP
// gateway reads it; and it says how its value is normalized before
// hashing. A nil Norm compares the value as exact canonical JSON.
type Field struct {
	Path string
	Norm Normalizer
}

// Tool declares a side-effecting tool: which input fields define "the same
// action", and the function that performs it.
type Tool struct {
	// Name is the tool name the model calls.
	Name string
	// Identity fields define the action: same values, same key. Each must be
	// present, a scalar, and not empty once normalized (an empty string or
	// nil is a missing value). Never include free text the model may
	// rephrase.
	Identity []Field
	// Validated fields must not change between repeats of the action: a
	// repeat whose validated fields differ from the first call's is a
	// conflict, not a replay. A missing validated field hashes as null.
	Validated []Field
	// Scope of the key; ScopeRun by default.
	Scope Scope
	// Retention of the record; Config.Retention when zero.
	Retention time.Duration
	// Run performs the effect. It must pass inv.DownstreamKey to the
	// provider, and build the provider's request from the identity and
	// validated fields only: a provider that compares the parameters of a
	// repeated key (Stripe, the IETF Idempotency-Key draft) rejects a
	// resend whose free text the model rephrased. A returned error is
	// classified with errclass.Of: unmarked errors count as ambiguous (the
	// record becomes uncertain).
	Run func(ctx context.Context, inv Invocation) (Effect, error)
	// Reconciler is asked before acting over a record whose effect may
	// exist. Nil: such records stay uncertain and the tool is not run again.
	Reconciler Reconciler
}

// Invocation is what a tool's Run receives.
type Invocation struct {
	Tool   string
	RunID  string
	CallID string
	Input  json.RawMessage // the call's input, as the model sent it; read it with Bind
	// Key is the action key: hex sha256 of the canonical identity.
	Key string
	// Attempt numbers the tries of this action; it advances only after a
	// definite failure.
	Attempt int
	// AttemptAt is the earliest time this attempt's downstream key may have
	// been sent (zero: unknown, assume long ago). Reconcilers compare it with
	// a provider's deduplication window.
	AttemptAt time.Time
	// SentBy is the latest time a request of this attempt by an earlier
	// owner, or by this call before it reconciles, could have left (zero:
	// unknown). On a takeover it is the earlier record's lease end (an
	// owner sends nothing after its lease ended) or, for an uncertain
	// record, when that record was settled; after an ambiguous error, when
	// the failed request returned. Reconcilers wait for requests sent up
	// to then to commit before they trust an empty lookup.
	SentBy time.Time
	// DownstreamKey is the key to hand to the provider (an Idempotency-Key
	// header, a metadata reference, an external id): Key for the first
	// attempt, Key + "-" + Attempt for later ones.
	DownstreamKey string
	args          boundInput // the parse Key was derived from; see Bind
}

// DownstreamKey returns the key a provider sees for the given attempt of an
// action. A provider that replays failures (Stripe replays a card decline
// for the same key) needs a new key after a definite failure; an ambiguous
// outcome is retried with the same attempt and so the same key.
func DownstreamKey(key string, attempt int) string {
	if attempt <= 1 {
		return key
	}
	return fmt.Sprintf("%s-%d", key, attempt)
}

// Effect is what a successful run produced.
type Effect struct {
	// Summary is one line the model is told ("refund re_123 of 10.00 EUR").
	Summary string
	// Ref is the provider's object reference.
	Ref string
	// Result is an optional JSON payload, stored up to Config.MaxResultBytes.
	Result json.RawMessage
}

// Call is one tool invocation from the model.
type Call struct {
	Tool  string
	Input json.RawMessage
	// ID is the model's call id (tool_use id); it is not part of the key.
	ID string
	// Tenant scopes tools declared with ScopeTenant. The host application
	// sets it, never the model.
	Tenant string
}
