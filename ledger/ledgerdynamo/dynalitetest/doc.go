// Package dynalitetest gives tests a DynamoDB-compatible endpoint: the
// server named by DYNAMODB_ENDPOINT when it is set, else a dynalite (a
// DynamoDB-compatible server from npm, pinned in the repository's
// tools/dynalite) that it starts on a loopback port.
//
// Use it from TestMain, which starts one server for the test binary and
// stops it at the end:
//
//	func TestMain(m *testing.M) { os.Exit(dynalitetest.Main(m)) }
//
//	func TestSomething(t *testing.T) {
//		t.Parallel()
//		client := dynalitetest.NewClient(dynalitetest.Endpoint(t))
//		table := dynalitetest.NewTable(t, client) // deleted when t ends; NewTableWith for a layout
//		store := ledgerdynamo.New(client, table, nil)
//		...
//	}
//
// Runnable examples, which have no testing.TB, take a client and a table
// name from ForExamples. Start gives a server whose life the caller
// manages instead.
//
// dynalite cannot add an index to an existing table; IndexProxy puts a
// proxy in front of the server that does, by copying the table, for
// tests of a migration (ledgerdynamo.InitTable).
//
// # Starting dynalite
//
// The repository root is found by walking up from the working directory
// to go.mod. When tools/dynalite/node_modules is missing it is installed
// with npm ci from the committed lockfile. The install is safe when several
// test binaries start at once (go test ./... runs packages in parallel): it
// is serialised by an flock(2) on a lock file in the temporary directory,
// and it runs in a staging directory whose node_modules is renamed into
// place when complete, so nobody ever sees a half-installed tree.
//
// Every test binary runs its own dynalite, in its own process group, on a
// port the kernel picks (it listens on 127.0.0.1:0 and reports the port),
// so binaries never race for a port. Start waits, with a deadline, until
// the server answers. Close ends the process group. If the test binary dies
// without closing it, dynalite notices that its standard input closed and
// exits too.
//
// Without node (or npm, when an install is needed) Start returns an error
// matching ErrUnavailable; Main then runs the tests anyway, and Endpoint
// skips the tests that need a server, with the reason. With CI=true in the
// environment a missing tool is a failure instead. Set DYNAMODB_ENDPOINT to
// use another server; for real DynamoDB also put AWS credentials (and
// AWS_REGION) in the environment, and NewClient uses them.
package dynalitetest
