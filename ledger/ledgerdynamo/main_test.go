package ledgerdynamo_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/idemkit/idemkit/ledger/ledgerdynamo"
)

// server is the DynamoDB-compatible endpoint the tests use: DYNAMODB_ENDPOINT
// when set, else a dynalite that TestMain starts. unavailable says why there
// is none (a machine without node; never in CI).
var server struct {
	endpoint    string
	unavailable string
}

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	if ep := os.Getenv("DYNAMODB_ENDPOINT"); ep != "" {
		server.endpoint = ep
		defer dropExampleTables()
		return m.Run()
	}
	d, err := startDynalite(context.Background())
	var missing *missingTool
	switch {
	case errors.As(err, &missing) && os.Getenv("CI") != "true":
		server.unavailable = err.Error()
		fmt.Fprintf(os.Stderr, "ledgerdynamo: %v: the tests that need a DynamoDB server are skipped, and so are the examples\n", err)
		skip := "^Example"
		if s := flag.Lookup("test.skip").Value.String(); s != "" {
			skip = s + "|" + skip
		}
		if err := flag.Set("test.skip", skip); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	case err != nil:
		fmt.Fprintf(os.Stderr, "ledgerdynamo: FAIL: %v\n", err)
		return 1
	default:
		defer d.stop()
		server.endpoint = d.endpoint
		defer dropExampleTables()
	}
	return m.Run()
}

// needServer skips t when there is no DynamoDB-compatible server.
func needServer(t testing.TB) {
	t.Helper()
	if server.unavailable != "" {
		t.Skip(server.unavailable)
	}
}

// awsConfig is static credentials and a region for a local server; with
// DYNAMODB_ENDPOINT and AWS credentials in the environment, the default
// configuration (real DynamoDB).
func awsConfig() aws.Config {
	if os.Getenv("DYNAMODB_ENDPOINT") != "" && (os.Getenv("AWS_ACCESS_KEY_ID") != "" || os.Getenv("AWS_PROFILE") != "") {
		cfg, err := config.LoadDefaultConfig(context.Background())
		if err == nil {
			return cfg
		}
	}
	return aws.Config{
		Region:      "us-east-1",
		Credentials: credentials.NewStaticCredentialsProvider("local", "local", ""),
	}
}

// transport is shared by the tests' clients, with enough idle connections
// for the concurrent claims of the conformance suite.
var transport = func() http.RoundTripper {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 128
	return t
}()

// newClient returns a client for endpoint whose requests go through rt
// (nil: the shared transport).
func newClient(endpoint string, rt http.RoundTripper) *dynamodb.Client {
	if rt == nil {
		rt = transport
	}
	return dynamodb.NewFromConfig(awsConfig(), func(o *dynamodb.Options) {
		o.BaseEndpoint = aws.String(endpoint)
		o.HTTPClient = &http.Client{Transport: rt}
	})
}

var tableSeq atomic.Int64

// newTable creates a fresh ledger table on the test server and deletes it
// when t ends.
func newTable(t testing.TB, client *dynamodb.Client) string {
	t.Helper()
	needServer(t)
	b := make([]byte, 4)
	rand.Read(b)
	table := fmt.Sprintf("idemkit-test-%d-%s", tableSeq.Add(1), hex.EncodeToString(b))
	if err := ledgerdynamo.CreateTable(context.Background(), client, table, nil); err != nil {
		t.Fatalf("CreateTable: %v", err)
	}
	t.Cleanup(func() {
		if _, err := client.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(table)}); err != nil {
			t.Errorf("DeleteTable %s: %v", table, err)
		}
	})
	return table
}

// counter is an http.RoundTripper that counts DynamoDB requests on the
// wire by operation (the X-Amz-Target header). Copy it freely.
type counter struct {
	next http.RoundTripper
	mu   sync.Mutex
	n    map[string]int
}

func newCounter(next http.RoundTripper) *counter {
	if next == nil {
		next = transport
	}
	return &counter{next: next, n: map[string]int{}}
}

func (c *counter) RoundTrip(r *http.Request) (*http.Response, error) {
	op := r.Header.Get("X-Amz-Target")
	op = op[strings.LastIndexByte(op, '.')+1:]
	c.mu.Lock()
	c.n[op]++
	c.mu.Unlock()
	return c.next.RoundTrip(r)
}

// take returns the counts since the last take and starts again from zero.
func (c *counter) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.n
	c.n = map[string]int{}
	return n
}

// total is the number of requests in counts.
func total(counts map[string]int) int {
	sum := 0
	for _, v := range counts {
		sum += v
	}
	return sum
}
