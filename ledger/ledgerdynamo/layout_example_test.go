package ledgerdynamo_test

import (
	"context"
	"fmt"
	"log"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/ledger/ledgerdynamo"
	"github.com/oncely/oncely/ledger/ledgerdynamo/dynalitetest"
)

// claimAndComplete claims key and records it done, as the Executor does.
func claimAndComplete(ctx context.Context, store *ledgerdynamo.Store, key string) {
	now := time.Now()
	_, err := store.Claim(ctx, ledger.ClaimParams{Key: key, Owner: "owner-1",
		LeaseUntil: now.Add(30 * time.Second), ExpiresAt: now.Add(7 * 24 * time.Hour)})
	if err != nil {
		log.Fatal(err)
	}
	if err := store.Complete(ctx, key, "owner-1", ledger.Completion{Summary: "refunded"}); err != nil {
		log.Fatal(err)
	}
}

// printItem prints the attributes of the table's one item, as the
// DynamoDB console would list them.
func printItem(ctx context.Context, client *dynamodb.Client, table string, names ...string) {
	out, err := client.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(table)})
	if err != nil {
		log.Fatal(err)
	}
	if len(out.Items) != 1 {
		log.Fatalf("%d items, want 1", len(out.Items))
	}
	var attrs []string
	for _, name := range names {
		switch v := out.Items[0][name].(type) {
		case *types.AttributeValueMemberS:
			attrs = append(attrs, name+"="+v.Value)
		case *types.AttributeValueMemberN:
			attrs = append(attrs, name+"=N")
		}
	}
	fmt.Println(strings.Join(attrs, " "))
}

// Use a table that exists with other attribute names, here one made for
// Powertools for AWS Lambda. The table needs the index on (status,
// in_progress_expiration) for the sweeper; CreateTable adds nothing to an
// existing table, so create the index with the table or add it (UpdateTable).
func ExampleAttributes() {
	ctx := context.Background()
	client, table := dynalitetest.ForExamples() // the application: dynamodb.NewFromConfig(cfg), "IdempotencyTable"
	layout := ledgerdynamo.Layout{
		Attributes: ledgerdynamo.Attributes{
			Key:         "id",
			State:       "status",
			ExpiresAt:   "expiration", // the table's TTL attribute
			LeaseUntil:  "in_progress_expiration",
			Result:      "data",
			Fingerprint: "validation",
		},
		Index: "status-in_progress_expiration",
	}
	// Setup, and a Store with the same layout (the sweeper's too).
	if err := ledgerdynamo.CreateTable(ctx, client, table, &ledgerdynamo.TableOptions{Layout: layout}); err != nil {
		log.Fatal(err)
	}
	store := ledgerdynamo.New(client, table, &ledgerdynamo.Config{Layout: layout})

	claimAndComplete(ctx, store, "refund-7f3a")
	printItem(ctx, client, table, "id", "status", "expiration", "summary")
	// Output:
	// id=refund-7f3a status=done expiration=N summary=refunded
}

// A single-table design: the ledger's records share a partition ("ONCELY"
// here, or one per tenant) and the action key is the sort key. The table's
// other items live in other partitions.
func ExampleLayout_partitionKeyValue() {
	ctx := context.Background()
	client, table := dynalitetest.ForExamples() // the application: dynamodb.NewFromConfig(cfg), "app"
	layout := ledgerdynamo.Layout{
		Attributes:        ledgerdynamo.Attributes{Key: "PK"},
		PartitionKeyValue: "ONCELY",
		SortKey:           "SK",
	}
	if err := ledgerdynamo.CreateTable(ctx, client, table, &ledgerdynamo.TableOptions{Layout: layout}); err != nil {
		log.Fatal(err)
	}
	store := ledgerdynamo.New(client, table, &ledgerdynamo.Config{Layout: layout})

	claimAndComplete(ctx, store, "refund-7f3a")
	printItem(ctx, client, table, "PK", "SK", "state")
	rec, err := store.Get(ctx, "refund-7f3a")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("Get:", rec.Key, rec.State)
	// Output:
	// PK=ONCELY SK=refund-7f3a state=done
	// Get: refund-7f3a done
}

// A key prefix marks the ledger's items in a table shared with others; the
// Store strips it when it reads. Stores with different prefixes on one
// table never see each other's records.
func ExampleLayout_keyPrefix() {
	ctx := context.Background()
	client, table := dynalitetest.ForExamples() // the application: dynamodb.NewFromConfig(cfg), "app"
	layout := ledgerdynamo.Layout{KeyPrefix: "oncely#"}
	if err := ledgerdynamo.CreateTable(ctx, client, table, &ledgerdynamo.TableOptions{Layout: layout}); err != nil {
		log.Fatal(err)
	}
	store := ledgerdynamo.New(client, table, &ledgerdynamo.Config{Layout: layout})

	claimAndComplete(ctx, store, "refund-7f3a")
	printItem(ctx, client, table, "pk", "state")
	recs, err := store.List(ctx, ledger.Filter{State: ledger.StateDone})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("List:", recs[0].Key)
	// Output:
	// pk=oncely#refund-7f3a state=done
	// List: refund-7f3a
}

// Write-shard the index, for more than a few hundred actions a second on
// one table: a record's index entries go to one of Shards partition keys
// per state (state_shard), and List queries them all and merges them.
// Every process on the table, the sweeper included, uses the same layout.
func ExampleLayout_shards() {
	ctx := context.Background()
	client, table := dynalitetest.ForExamples() // the application: dynamodb.NewFromConfig(cfg), "oncely-ledger"
	layout := ledgerdynamo.Layout{Shards: ledgerdynamo.DefaultShards}
	if err := ledgerdynamo.CreateTable(ctx, client, table, &ledgerdynamo.TableOptions{Layout: layout}); err != nil {
		log.Fatal(err)
	}
	store := ledgerdynamo.New(client, table, &ledgerdynamo.Config{Layout: layout})

	claimAndComplete(ctx, store, "refund-7f3a")
	printItem(ctx, client, table, "pk", "state", "state_shard")
	recs, err := store.List(ctx, ledger.Filter{State: ledger.StateDone})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("List:", recs[0].Key, recs[0].Summary)
	// Output:
	// pk=refund-7f3a state=done state_shard=done#47
	// List: refund-7f3a refunded
}

// InitTable prepares the table for a layout and says what it did. Here it
// creates the table; on a table made without the sharded index it adds
// the index and files the records under it, as
// oncely ledger init --ledger 'dynamodb://TABLE?region=REGION&shards=64' does.
func ExampleInitTable() {
	ctx := context.Background()
	client, table := dynalitetest.ForExamples() // the setup: dynamodb.NewFromConfig(cfg), "oncely-ledger"
	opts := &ledgerdynamo.TableOptions{Layout: ledgerdynamo.Layout{Shards: ledgerdynamo.DefaultShards}}
	rep, err := ledgerdynamo.InitTable(ctx, client, table, opts)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("created %v, index %s, %d shards, %d records filed\n", rep.Created, rep.Index, rep.Shards, rep.Filed)
	// Output:
	// created true, index state_shard-lease_until, 64 shards, 0 records filed
}
