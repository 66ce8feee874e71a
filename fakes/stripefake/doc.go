// Package stripefake is a fake of the Stripe API where it matters for
// retries: PaymentIntents (create, update, confirm, capture, cancel,
// retrieve, list, search), Refunds and Charges, with Stripe's idempotency
// semantics, list pagination, a lagging search, Stripe-shaped objects and
// errors. The official Go client (stripe-go) works against it unchanged.
//
// # Routes
//
//	POST /v1/payment_intents              amount, currency, confirm, payment_method, payment_method_types[],
//	                                      automatic_payment_methods[enabled|allow_redirects], capture_method,
//	                                      setup_future_usage, off_session, return_url, statement_descriptor_suffix,
//	                                      description, receipt_email, metadata[...], expand[]
//	POST /v1/payment_intents/{id}         amount, currency, payment_method, payment_method_types[], capture_method,
//	                                      setup_future_usage, statement_descriptor_suffix, description,
//	                                      receipt_email, metadata[...], expand[]
//	POST /v1/payment_intents/{id}/confirm payment_method, payment_method_types[], return_url, off_session,
//	                                      setup_future_usage, capture_method, receipt_email, expand[]
//	POST /v1/payment_intents/{id}/capture amount_to_capture, statement_descriptor_suffix, metadata[...], expand[]
//	POST /v1/payment_intents/{id}/cancel  cancellation_reason, expand[]
//	GET  /v1/payment_intents/{id}         expand[], client_secret
//	GET  /v1/payment_intents              limit, starting_after, ending_before, created[gt|gte|lt|lte], customer, expand[]
//	GET  /v1/payment_intents/search       query, limit, page, expand[]
//	POST /v1/refunds                      payment_intent | charge, amount, reason, instructions_email, metadata[...], expand[]
//	GET  /v1/refunds/{id}                 expand[]
//	GET  /v1/refunds                      payment_intent, charge, limit, starting_after, ending_before, created, expand[]
//	POST /v1/charges                      amount, currency, source (tok_...), description, receipt_email, metadata[...], expand[]
//	GET  /v1/charges/{id}                 expand[]
//	GET  /v1/charges                      payment_intent, customer, transfer_group, limit, starting_after,
//	                                      ending_before, created, expand[]
//
// Bodies are form-encoded (metadata[k]=v, list[]=v or list[0]=v). Requests
// need a secret (sk_test_) or restricted (rk_test_) test key, as a Bearer
// token or the basic-auth user. Unknown parameters are rejected (400
// parameter_unknown), missing ones too (parameter_missing). A confirmed
// PaymentIntent with payment_method pm_card_chargeDeclined (or
// pm_card_chargeDeclinedInsufficientFunds, pm_card_chargeDeclinedExpiredCard;
// tok_... for charges) is declined with a 402 card_error; any other pm_ or
// tok_ value succeeds.
//
// # What it models, and what it does not
//
// Differential tests send a table of requests to the fake and to
// stripe-mock (Stripe's mock that validates requests against its OpenAPI
// specification) and require the same verdict, error type and parameter;
// the rules the specification does not carry are checked against Stripe's
// documentation instead. Where the table below says "not modeled", the
// fake's answer is not evidence of what Stripe would do.
//
//	area                    modeled                                             not modeled
//	----------------------  --------------------------------------------------  ------------------------------------------------
//	parameters              the routes above; unknown, missing, malformed and    every other route and parameter (customers,
//	                        out-of-enum values refused on the right param        payment_method_options, shipping, transfers,
//	                                                                            Connect headers); other routes answer 404
//	amounts                 integer minor units; Stripe's minimum charge for     minimums of other currencies (a rate-dependent
//	                        USD, EUR, GBP, JPY and 20 more settlement            0.50 USD equivalent: the fake asks for 1);
//	                        currencies (USD 0.50, GBP 0.30, JPY 50: zero-        three-decimal rounding (BHD, JOD, KWD, OMR, TND)
//	                        decimal amounts are whole yen); at most 8 digits
//	currencies              Stripe's list (stripe-go v82's and the three-        per-account or per-payment-method availability
//	                        decimal ones); case-insensitive, answered lowercase
//	payment methods         automatic_payment_methods or payment_method_types    real cards, 3-D Secure, requires_action,
//	                        (not both); automatic by default, with redirects;    processing, wallets, redirects; a card's brand
//	                        return_url required to confirm a redirect-capable    and last4 are always visa/4242
//	                        intent; test pm_/tok_ values decline or succeed
//	PaymentIntent states    requires_payment_method → requires_confirmation →   requires_action, processing, partial
//	                        succeeded, or requires_capture (manual capture) →    authorisations, incremental authorisation,
//	                        succeeded; canceled; transitions a state forbids     multicapture, automatic cancellation of stale
//	                        answer payment_intent_unexpected_state              authorisations
//	charges and refunds     one charge per confirmation; partial capture         disputes, fees (balance transactions have fee 0
//	                        releases the rest (shown as refunded); refunds up    and are available at once), asynchronous or
//	                        to the captured amount; balance transactions         failed refunds, payouts
//	expansions              customer (always null), payment_method,              any other field (refused
//	                        latest_charge, payment_intent, charge,               as "cannot be expanded"); expansion of list
//	                        balance_transaction, nested to 4 levels, data.       properties such as refunds on a charge
//	                        on lists and search
//	search                  amount, created, currency, status, customer,         other fields and objects; substring (~), which
//	                        metadata['k'] (exact, case-insensitive, :null);      Stripe allows only on string fields (none on a
//	                        numeric comparisons; -negation; AND/OR in any        PaymentIntent); relevance order (results are
//	                        case, a space as AND, not mixed; index lag           newest first)
//	                        (Config.SearchLag); next_page
//	idempotency             replay of status and body (Idempotent-Replayed,      the exact 24 h pruning schedule (keys expire
//	                        Original-Request), key echoed, idempotency_error     after Config.KeyWindow by the fake's clock)
//	                        on other params or endpoint, 409 in flight
//	API versions            Stripe-Version checked against known versions        behaviour that differs by version: every
//	                        (Config.APIVersions adds more) and echoed            version gets today's shapes
//	errors                  type, code, decline_code, param, message, doc_url,   exact message wording, which may differ from
//	                        request_log_url; 401, 402, 404, 409, 400             Stripe's; rate limits unless injected
//	keys and accounts       any sk_test_ or rk_test_ key; restricted keys have   live mode, key permissions, Stripe-Account,
//	                        every permission                                    Stripe-Context
//	webhooks and events     —                                                   none are sent; no /v1/events
//
// # Idempotency
//
// A POST with an Idempotency-Key header is executed once: the first
// response's status and body are stored and replayed to later requests with
// the same key, endpoint and parameters, with Idempotent-Replayed: true and
// Original-Request headers. Every response to a keyed request echoes the
// key. Reusing a key with other parameters or on another endpoint answers
// 400 idempotency_error; a request arriving while the first one with its key
// is still executing answers 409 idempotency_key_in_use. Keys expire after
// Config.KeyWindow by the fake's clock.
//
// As Stripe documents, a response is saved only once the endpoint began
// executing: requests rejected by authentication, by parameter validation
// (400 parameter_*, 404 resource_missing) or by the idempotency layer itself
// are not saved and may be retried with the same key. Errors decided while
// executing (402 card declines, refund amount too large, already refunded,
// a state that forbids a confirmation, capture, cancellation or update) are
// saved and replayed, request_log_url included. Injected faults follow the
// same line: FailBeforeCommit and DropBeforeCommit happen before execution
// and save nothing; CommitThenDrop and CommitThenError happen after it, so
// the key replays the real result (or the injected error with
// Rule.SaveError); a Delay holds the key in flight, so concurrent retries
// get 409.
//
// # Effects
//
// The journal records one effect per PaymentIntent created (declined ones
// excepted: nothing was paid), per confirmation, capture, cancellation and
// update through a PaymentIntent's routes (KindPaymentIntentConfirm, ...),
// per refund, and per successful charge created through POST /v1/charges.
// Effect.Key is the Idempotency-Key ("" if none).
//
// Search sees an object only Config.SearchLag after its creation, like
// Stripe's search index; retrieval and list are immediately consistent.
package stripefake
