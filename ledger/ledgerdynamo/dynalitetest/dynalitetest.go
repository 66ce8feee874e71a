package dynalitetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/oncely/oncely/internal/tooling"
	"github.com/oncely/oncely/ledger/ledgerdynamo"
)

// EnvEndpoint is the environment variable that names an existing
// DynamoDB-compatible endpoint to use instead of starting dynalite.
const EnvEndpoint = "DYNAMODB_ENDPOINT"

// ErrUnavailable is matched by the error of Start when this machine cannot
// run dynalite (no node, no npm for the install, no tools/dynalite, not a
// unix system).
var ErrUnavailable = errors.New("dynalitetest: no DynamoDB-compatible server")

// MissingError says what the machine lacks to run dynalite. It matches
// ErrUnavailable.
type MissingError struct {
	What string // "node", "npm", ...
	Why  string
}

// Error says what is missing and how to provide it.
func (e *MissingError) Error() string {
	return fmt.Sprintf("dynalitetest: %s not found (%s); or set %s", e.What, e.Why, EnvEndpoint)
}

// Unwrap returns ErrUnavailable.
func (e *MissingError) Unwrap() error { return ErrUnavailable }

// shared is the server Main started for the test binary. It is written
// before m.Run and only read afterwards.
var shared struct {
	started     bool
	endpoint    string
	unavailable string // why there is no server (Main ran without one)
}

// Main starts the server for the test binary (Start), runs the tests and
// the examples, deletes the tables named by ForExamples, and stops
// the server. Call it from TestMain: os.Exit(dynalitetest.Main(m)).
//
// When the machine lacks node (ErrUnavailable) and CI is not "true", Main
// says so on stderr and runs the tests without a server: Endpoint skips
// those that need one, and the runnable examples are skipped (through
// -test.skip) because an example cannot skip itself. With CI=true, or on
// any other error, Main reports it and returns 1 without running the tests.
func Main(m *testing.M) int {
	if !flag.Parsed() {
		flag.Parse()
	}
	srv, err := Start(context.Background())
	switch {
	case errors.Is(err, ErrUnavailable) && os.Getenv("CI") != "true":
		shared.unavailable = err.Error()
		fmt.Fprintf(os.Stderr, "%v: the tests that need a DynamoDB server are skipped, and so are the examples\n", err)
		if err := tooling.SkipExamples(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	case err != nil:
		fmt.Fprintf(os.Stderr, "dynalitetest: FAIL: %v\n", err)
		return 1
	default:
		shared.endpoint = srv.Endpoint
		defer srv.Close()
		defer dropTables(srv.Endpoint)
	}
	shared.started = true
	return m.Run()
}

// Endpoint returns the endpoint of the server Main started. It skips tb,
// with the reason, when Main found no way to run one, and fails tb when
// TestMain did not call Main.
func Endpoint(tb testing.TB) string {
	tb.Helper()
	switch {
	case !shared.started:
		tb.Fatal("dynalitetest: Endpoint needs the server of dynalitetest.Main; call it from TestMain")
	case shared.unavailable != "":
		tb.Skip(shared.unavailable)
	}
	return shared.endpoint
}

// transport is shared by the clients NewClient makes, with enough idle
// connections for tests that run many requests at once.
var transport = func() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 128
	return t
}()

// NewClient returns a DynamoDB client for endpoint with static credentials
// and region us-east-1, which any local server accepts; or, when
// DYNAMODB_ENDPOINT is set and AWS credentials are in the environment
// (AWS_ACCESS_KEY_ID or AWS_PROFILE), with the default AWS configuration,
// for real DynamoDB. Its HTTP client keeps up to 128 idle connections.
// optFns run last and may replace anything, the HTTP client included.
func NewClient(endpoint string, optFns ...func(*dynamodb.Options)) *dynamodb.Client {
	cfg := aws.Config{
		Region:      "us-east-1",
		Credentials: credentials.NewStaticCredentialsProvider("local", "local", ""),
	}
	if os.Getenv(EnvEndpoint) != "" && (os.Getenv("AWS_ACCESS_KEY_ID") != "" || os.Getenv("AWS_PROFILE") != "") {
		if def, err := config.LoadDefaultConfig(context.Background()); err == nil {
			if def.Region == "" {
				def.Region = cfg.Region
			}
			cfg = def
		}
	}
	opts := append([]func(*dynamodb.Options){func(o *dynamodb.Options) {
		o.BaseEndpoint = aws.String(endpoint)
		o.HTTPClient = &http.Client{Transport: transport}
	}}, optFns...)
	return dynamodb.NewFromConfig(cfg, opts...)
}

var tableSeq atomic.Int64

// uniqueName is a table name that no other test, in this or another test
// binary on the same server, uses.
func uniqueName(prefix string) string {
	b := make([]byte, 4)
	rand.Read(b)
	return fmt.Sprintf("%s-%d-%d-%s", prefix, os.Getpid(), tableSeq.Add(1), hex.EncodeToString(b))
}

// NewTable creates a ledger table with a unique name (ledgerdynamo.CreateTable)
// and deletes it when tb ends.
func NewTable(tb testing.TB, client *dynamodb.Client) string {
	tb.Helper()
	return NewTableWith(tb, client, nil)
}

// NewTableWith is NewTable with CreateTable's options, for example the
// layout of the Stores that will use the table.
func NewTableWith(tb testing.TB, client *dynamodb.Client, opts *ledgerdynamo.TableOptions) string {
	tb.Helper()
	table := uniqueName("oncely-test")
	// A busy server (many tests creating tables at once, each its own
	// stream of requests) may drop a connection: CreateTable is safe to
	// repeat (an existing table is no error), so it is repeated, with
	// backoff, for up to two minutes.
	deadline := time.Now().Add(2 * time.Minute)
	for wait := 100 * time.Millisecond; ; wait = min(2*wait, 2*time.Second) {
		err := ledgerdynamo.CreateTable(context.Background(), client, table, opts)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			tb.Fatalf("dynalitetest: CreateTable %s: %v", table, err)
		}
		time.Sleep(wait)
	}
	tb.Cleanup(func() {
		if err := deleteTable(client, table); err != nil {
			tb.Errorf("dynalitetest: %v", err)
		}
	})
	return table
}

// exampleTables are the names ForExamples gave out; Main deletes them.
var exampleTables struct {
	sync.Mutex
	names []string
}

// ForExamples returns, for a runnable example (which has no testing.TB to
// skip or clean up with), a client for the server Main started and a
// unique table name. The example creates the table itself
// (ledgerdynamo.CreateTable); Main deletes it after the tests. It panics
// when TestMain did not call Main; when Main found no server, the examples
// do not run.
func ForExamples() (*dynamodb.Client, string) {
	if !shared.started || shared.endpoint == "" {
		panic("dynalitetest: ForExamples needs the server of dynalitetest.Main; call it from TestMain")
	}
	name := uniqueName("oncely-example")
	exampleTables.Lock()
	defer exampleTables.Unlock()
	exampleTables.names = append(exampleTables.names, name)
	return NewClient(shared.endpoint), name
}

// dropTables deletes the tables ForExamples named, where they exist.
func dropTables(endpoint string) {
	exampleTables.Lock()
	defer exampleTables.Unlock()
	client := NewClient(endpoint)
	for _, table := range exampleTables.names {
		if err := deleteTable(client, table); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}
}

// deleteTable deletes a table; one that does not exist is no error.
func deleteTable(client *dynamodb.Client, table string) error {
	_, err := client.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(table)})
	var missing *types.ResourceNotFoundException
	if err != nil && !errors.As(err, &missing) {
		return fmt.Errorf("delete table %s: %w", table, err)
	}
	// Deletion is asynchronous (DELETING first), on dynalite as on DynamoDB.
	w := dynamodb.NewTableNotExistsWaiter(client, func(o *dynamodb.TableNotExistsWaiterOptions) {
		o.MinDelay, o.MaxDelay = 10*time.Millisecond, 200*time.Millisecond
	})
	if err := w.Wait(context.Background(), &dynamodb.DescribeTableInput{TableName: aws.String(table)}, time.Minute); err != nil {
		return fmt.Errorf("delete table %s: %w", table, err)
	}
	return nil
}
