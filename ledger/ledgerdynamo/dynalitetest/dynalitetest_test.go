package dynalitetest_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/oncely/oncely/ledger/ledgerdynamo"
	"github.com/oncely/oncely/ledger/ledgerdynamo/dynalitetest"
)

func TestMain(m *testing.M) { os.Exit(dynalitetest.Main(m)) }

// describe returns the status of a table, or the error of DescribeTable.
func describe(client *dynamodb.Client, table string) (types.TableStatus, error) {
	out, err := client.DescribeTable(context.Background(), &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	if err != nil {
		return "", err
	}
	return out.Table.TableStatus, nil
}

// NewTable makes an active ledger table that is gone after the test.
func TestNewTable(t *testing.T) {
	t.Parallel()
	client := dynalitetest.NewClient(dynalitetest.Endpoint(t))
	var table, other string
	t.Run("create", func(t *testing.T) {
		table = dynalitetest.NewTable(t, client)
		other = dynalitetest.NewTable(t, client)
		if table == other {
			t.Fatalf("two tables named %s", table)
		}
		if st, err := describe(client, table); err != nil || st != types.TableStatusActive {
			t.Fatalf("table %s: status %q, %v; want ACTIVE", table, st, err)
		}
		// It is a ledger table: CreateTable accepts it as it is.
		if err := ledgerdynamo.CreateTable(context.Background(), client, table, nil); err != nil {
			t.Errorf("CreateTable over the new table: %v", err)
		}
	})
	for _, name := range []string{table, other} {
		var missing *types.ResourceNotFoundException
		if _, err := describe(client, name); !errors.As(err, &missing) {
			t.Errorf("table %s after its test: %v, want ResourceNotFoundException", name, err)
		}
	}
}

// countingTransport counts the requests it carries.
type countingTransport struct{ n int }

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n++
	return http.DefaultTransport.RoundTrip(r)
}

// NewClient's options run last: they may replace the HTTP client.
func TestNewClientOptions(t *testing.T) {
	t.Parallel()
	rt := &countingTransport{}
	client := dynalitetest.NewClient(dynalitetest.Endpoint(t), func(o *dynamodb.Options) {
		o.HTTPClient = &http.Client{Transport: rt}
	})
	if _, err := client.ListTables(context.Background(), &dynamodb.ListTablesInput{}); err != nil {
		t.Fatal(err)
	}
	if rt.n != 1 {
		t.Errorf("requests through the replaced HTTP client = %d, want 1", rt.n)
	}
}

// Start runs a server of its own beside Main's, on another port; Close
// ends it.
func TestStart(t *testing.T) {
	t.Parallel()
	shared := dynalitetest.Endpoint(t)
	ctx := context.Background()
	srv, err := dynalitetest.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if ep := os.Getenv(dynalitetest.EnvEndpoint); ep != "" {
		if srv.Endpoint != ep {
			t.Errorf("Start with %s=%s: endpoint %s", dynalitetest.EnvEndpoint, ep, srv.Endpoint)
		}
		return
	}
	if srv.Endpoint == shared || !strings.HasPrefix(srv.Endpoint, "http://127.0.0.1:") {
		t.Fatalf("own server at %s (Main's at %s), want another loopback port", srv.Endpoint, shared)
	}
	own, main := dynalitetest.NewClient(srv.Endpoint), dynalitetest.NewClient(shared)
	table := "oncely-own-server"
	if err := ledgerdynamo.CreateTable(ctx, own, table, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := describe(main, table); err == nil {
		t.Errorf("table %s of the own server is on Main's server too", table)
	}
	srv.Close()
	srv.Close() // twice is fine
	if _, err := own.ListTables(ctx, &dynamodb.ListTablesInput{}); err == nil {
		t.Errorf("server at %s still answers after Close", srv.Endpoint)
	}
	if _, err := main.ListTables(ctx, &dynamodb.ListTablesInput{}); err != nil {
		t.Errorf("Main's server after the own one closed: %v", err)
	}
}

// Start a server of one's own, use it, and stop it.
func ExampleStart() {
	ctx := context.Background()
	srv, err := dynalitetest.Start(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()

	client := dynalitetest.NewClient(srv.Endpoint)
	_, err = client.ListTables(ctx, &dynamodb.ListTablesInput{})
	fmt.Println("answers:", err == nil)
	// Output:
	// answers: true
}

// An example creates its ledger table on Main's server; Main deletes it
// after the tests.
func ExampleForExamples() {
	ctx := context.Background()
	client, table := dynalitetest.ForExamples()
	if err := ledgerdynamo.CreateTable(ctx, client, table, nil); err != nil {
		log.Fatal(err)
	}
	out, err := client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(out.Table.TableStatus, aws.ToString(out.Table.GlobalSecondaryIndexes[0].IndexName))
	// Output:
	// ACTIVE state_shard-lease_until
}
