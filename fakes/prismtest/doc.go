// Package prismtest runs Stoplight Prism (pinned in the repository's
// tools/prism, installed with npm ci from its lockfile) as a validating
// proxy in front of a server, so that a test can check traffic against the
// provider's own OpenAPI description: no request the provider would refuse,
// no response outside the description.
//
//	proxy := prismtest.Start(t, "testdata/openapi/resend.yaml", fake.URL)
//	client := &http.Client{Transport: proxy.Transport(nil)}
//	// ... send requests to proxy.URL through client ...
//	proxy.Check(t) // fails t with every violation Prism reported
//
// Prism runs as `prism proxy <spec> <upstream> --errors` on 127.0.0.1, on a
// free port, in its own process group; Start waits, with a deadline, until
// it answers, and the test's cleanup stops it. With --errors Prism answers a
// request that violates the description with a problem (422, type
// .../prism/errors#UNPROCESSABLE_ENTITY) instead of forwarding it, and a
// response that violates it with a problem (500, #VIOLATIONS); without a
// violation of severity error it forwards the upstream answer unchanged, and
// lists lesser findings (warnings) in its sl-violations header. Transport
// records all of these as Violations; Check fails on those of severity
// error, and Warnings returns the rest.
//
// Prism's proxy answers an upstream 501 Not Implemented with a mocked
// answer from the description instead of forwarding it: send requests to
// what a fake does not model (which the fakes answer 501) around the proxy.
//
// Without node (or npm, when an install is needed) the tests that need Prism
// are skipped with the reason, unless CI=true, where that is a failure. If
// the test binary dies without stopping Prism, the launcher notices that
// its standard input closed and kills it.
package prismtest
