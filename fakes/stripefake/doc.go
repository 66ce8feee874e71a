// Package stripefake is a fake of the Stripe API where it matters for
// retries: PaymentIntents (create, update, confirm, capture, cancel,
// retrieve, list, search), Refunds and Charges, with Stripe's idempotency
// semantics, list pagination, a lagging search, Stripe-shaped objects and
// errors. The official Go client (stripe-go) works against it unchanged.
// README.md beside this file lists the routes and parameters, and what is
// modeled and what is not: where it says "not modeled", the fake's answer
// is not evidence of what Stripe would do. Parameters and routes Stripe has
// that the fake does not model (shipping, payment_method_data,
// payment_method_options, GET /v1/charges/search) answer 501 with the code
// stripefake_not_modeled and a message saying the fake does not model them,
// never an answer that looks like Stripe refusing them.
//
// Bodies are form-encoded; requests need a test key (sk_test_ or
// rk_test_). A confirmation with payment_method pm_card_chargeDeclined,
// pm_card_chargeDeclinedInsufficientFunds or
// pm_card_chargeDeclinedExpiredCard (tok_... for charges) is declined with
// a 402 card_error; any other pm_ or tok_ value succeeds.
//
// A POST with an Idempotency-Key header is executed once: the first
// response's status and body are replayed to later requests with the same
// key, endpoint and parameters (Idempotent-Replayed: true), and every
// response to a keyed request echoes the key. The key reused with other
// parameters or on another endpoint answers 400 idempotency_error; a
// request arriving while the first one with its key still executes
// answers 409 idempotency_key_in_use. As Stripe documents, only a request
// that began executing is saved: one refused by authentication, parameter
// validation or the idempotency layer may be retried with its key, while
// errors decided while executing (a card decline) are replayed. Injected
// faults follow the same line: FailBeforeCommit and DropBeforeCommit save
// nothing, CommitThenDrop and CommitThenError replay the real result (or
// the injected error with Rule.SaveError), and a Delay holds the key in
// flight. Keys expire after Config.KeyWindow by the fake's clock.
//
// The journal records one effect per PaymentIntent created (declined ones
// excepted), per confirmation, capture, cancellation and update through a
// PaymentIntent's routes, per refund, and per successful charge; its Key is
// the Idempotency-Key ("" if none). Search sees an object only
// Config.SearchLag after its creation, like Stripe's search index;
// retrieval and list are immediately consistent.
package stripefake
