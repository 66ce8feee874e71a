// Package stripemocktest gives tests a stripe-mock server: Stripe's official
// mock of its API, which validates every request against Stripe's OpenAPI
// specification and answers with fixture objects. It is stateless: it
// checks parameters, not what they refer to.
//
// Use it from TestMain, which starts one server for the test binary and
// stops it at the end:
//
//	func TestMain(m *testing.M) { os.Exit(stripemocktest.Main(m)) }
//
//	func TestSomething(t *testing.T) {
//		t.Parallel()
//		base := stripemocktest.URL(t) // "http://127.0.0.1:port"
//		...
//	}
//
// Start gives a server whose life the caller manages instead.
//
// # Installing and starting stripe-mock
//
// When STRIPE_MOCK_URL is set, that server is used and nothing is started.
// Otherwise stripe-mock Version is installed with go install (GOBIN set to
// .tmp/stripe-mock/<Version> under the repository root, the first directory
// above the working directory that holds go.mod, or to the user cache
// directory outside a module) when its binary is missing. The install is
// serialised by an flock(2) beside that directory and builds into a staging
// directory whose binary is renamed into place, so test binaries starting
// at once (go test ./... runs packages in parallel) install it once and
// never run a half-written binary.
//
// The server listens on 127.0.0.1 only, with both -http-addr and
// -https-addr on ports the kernel picks; Start reads them from its output
// and polls the HTTP address until it answers (StartTimeout). Close stops
// it by its process id and waits for it; on Linux it is also killed if the
// test binary dies first.
//
// When the machine cannot install or run it (no go command, not a unix
// system) and CI is not "true", Main says so and URL skips the tests that
// need it. With CI=true that is a failure: the differential tests are never
// skipped there.
package stripemocktest
