// Package providers is the HTTP layer oncely's provider adapters share, and
// the small contract (Adapter, Capabilities) through which the reconcile
// policy asks a provider whether an effect exists.
//
// Client sends a request through one retry layer (go-retryablehttp) that
// carries the downstream key, retries only what cannot make a second effect,
// and classifies every failure as a *ProviderError: definite (nothing
// happened), permanent (nothing happened and the same request will fail
// again) or ambiguous (the effect may exist). The classification follows
// the request on the wire: a DNS, dial or TLS failure happens before the
// request can be written and is definite; once a connection was made, a
// timeout, a reset, a 5xx or a 2xx that cannot be read is ambiguous, and
// stays so across retries.
//
// The adapters live in subpackages, one per mechanism of passing the key
// downstream (docs/providers.md, "Providers: passing the key downstream"):
// stripe (idempotency header, search and list lookups), mail (reference
// search), crm (upsert by external id), keyheader (any API that honours
// the IETF Idempotency-Key header), resend (email through Resend's
// Idempotency-Key, found later by a tag) and github (issues and comments
// found by a marker in their body, on go-github).
package providers
