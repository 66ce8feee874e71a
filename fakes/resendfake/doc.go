// Package resendfake is a fake of the Resend email API where it matters for
// retries: sending an email with an Idempotency-Key, retrieving it and
// listing emails, with Resend's validation, error bodies and rate limit.
// The official clients work against it unchanged: resend-go (v3) and the
// Node client resend, both run scripted sessions against it in the tests,
// and every answer the tests see is checked by Stoplight Prism against
// Resend's own OpenAPI description (testdata/openapi, MIT licence beside
// it).
//
// # Routes
//
//	POST /emails             JSON SendEmailRequest, optional Idempotency-Key
//	                         → 200 {"id"}
//	GET  /emails             ?limit=1..100 (default 20) &after=ID | &before=ID
//	                         → {"object": "list", "has_more", "data": [emails]},
//	                         newest first
//	GET  /emails/{email_id}  → the email, or 404 not_found
//
// An email is {"object": "email", "id", "to", "from", "created_at",
// "subject", "html", "text", "cc", "bcc", "reply_to" (those six only when
// sent), "last_event": "sent",
// "tags": [{"name", "value"}]}. Requests need "Authorization: Bearer re_...":
// none answers 401 missing_api_key, another scheme or a key without the re_
// prefix 403 invalid_api_key.
//
// Errors are Resend's {"statusCode", "name", "message"}: 422
// missing_required_field (from, to, subject), 422 validation_error
// (addresses, more than 50 recipients, a tag name or value outside
// [A-Za-z0-9_-] or longer than 256), 400 validation_error for a body that
// is not a JSON object, 404 not_found.
//
// # Idempotency
//
// As Resend documents: a key has 1 to 256 characters (else 400
// invalid_idempotency_key); the same key with another payload answers 409
// invalid_idempotent_request; a request arriving while the first one with
// its key still executes answers 409 concurrent_idempotent_requests; a
// repeat gets the first answer again, without sending, for Config.KeyWindow
// (24 hours) by the fake's clock. Payloads are compared as JSON values.
// Requests refused before executing (authentication, validation, rate
// limit, an injected FailBeforeCommit or DropBeforeCommit) store nothing.
// CommitThenDrop and CommitThenError keep the real answer under the key
// (the injected error with Rule.SaveError).
//
// # Rate limit
//
// With Config.RateLimit set, each API key may make that many requests per
// second of the fake's clock (Resend's default is 2); every answer then
// carries ratelimit-limit, ratelimit-remaining and ratelimit-reset, as
// Resend's do, and past the limit the answer is 429 rate_limit_exceeded
// with those and retry-after, and nothing happens. It is off by default,
// so that tests on the system clock are not throttled.
//
// # What the fake does not model
//
// Every other route (batch sends, cancel and update of scheduled emails,
// attachments, receiving, domains, API keys, contacts, broadcasts,
// templates, webhooks, ...) and the send fields attachments, template,
// scheduled_at, topic_id and any field Resend's description does not list
// answer 501 not_modeled, with a message saying the fake does not model
// it: such an answer is not evidence of what Resend would do. Not modeled
// either: delivery (every email's last_event is "sent"; no bounce,
// complaint or webhook), verified domains (any sender domain is accepted),
// the daily quota, the test-mode restriction to one's own address, and the
// list's retention (every email stays listed).
//
// Resend's published description does not list "tags" in the Email object;
// the fake returns them in the list and the retrieve answers (an additional
// property the description allows). A client that relies on them must cope
// with an answer without them (providers/resend does: its lookup is then
// inconclusive).
//
// The journal records one effect per email sent, of kind KindEmail, whose
// Key is the Idempotency-Key ("" if none).
package resendfake
