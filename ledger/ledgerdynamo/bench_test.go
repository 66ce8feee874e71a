package ledgerdynamo_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/idemkit/idemkit/ledger"
	"github.com/idemkit/idemkit/ledger/ledgerdynamo"
	"github.com/idemkit/idemkit/ledger/ledgerdynamo/dynalitetest"
)

// BenchmarkRawFloor is the least a claim and a completion cost on the wire:
// one conditional UpdateItem each, written by hand with the SDK, through the
// same client as BenchmarkStore.
func BenchmarkRawFloor(b *testing.B) {
	client := newClient(dynalitetest.Endpoint(b), nil)
	table := dynalitetest.NewTable(b, client)
	ctx := context.Background()
	sv := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	nv := func(v int64) types.AttributeValue {
		return &types.AttributeValueMemberN{Value: strconv.FormatInt(v, 10)}
	}
	b.ResetTimer()
	for i := range b.N {
		key := map[string]types.AttributeValue{"pk": sv(strconv.Itoa(i))}
		now := time.Now()
		_, err := client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName:                aws.String(table),
			Key:                      key,
			UpdateExpression:         aws.String("SET #s = :pending, #o = :o, lease_until = :l, expires_at = :e, attempts = if_not_exists(attempts, :one)"),
			ConditionExpression:      aws.String("attribute_not_exists(pk)"),
			ExpressionAttributeNames: map[string]string{"#s": "state", "#o": "owner"},
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":pending": sv("pending"), ":o": sv("o"), ":one": nv(1),
				":l": nv(now.Add(time.Minute).UnixMilli()), ":e": nv(now.Add(time.Hour).Unix()),
			},
			ReturnValues: types.ReturnValueAllOld,
		})
		if err != nil {
			b.Fatal(err)
		}
		_, err = client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName:                 aws.String(table),
			Key:                       key,
			UpdateExpression:          aws.String("SET #s = :done, summary = :sum, lease_until = :now"),
			ConditionExpression:       aws.String("#o = :o AND #s = :pending"),
			ExpressionAttributeNames:  map[string]string{"#s": "state", "#o": "owner"},
			ExpressionAttributeValues: map[string]types.AttributeValue{":done": sv("done"), ":pending": sv("pending"), ":o": sv("o"), ":sum": sv("ok"), ":now": nv(now.UnixMilli())},
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}

// benchRuns numbers the runs of a sub-benchmark, which runs several times
// on one table: each run uses new keys.
var benchRuns atomic.Int64

// BenchmarkStore measures the Store: fresh is Claim+Complete of a new key
// (2 requests, as the raw floor); replay is a Claim of a done key (1
// request where the server returns the old item, 2 on dynalite).
func BenchmarkStore(b *testing.B) {
	client := newClient(dynalitetest.Endpoint(b), nil)
	store := ledgerdynamo.New(client, dynalitetest.NewTable(b, client), nil)
	ctx := context.Background()
	var run string // a sub-benchmark runs several times on the table: new keys each time
	params := func(key string) ledger.ClaimParams {
		key = run + "-" + key
		now := time.Now()
		return ledger.ClaimParams{Key: key, Tool: "send_reply", RunID: "run", Owner: "o-" + key,
			LeaseUntil: now.Add(time.Minute), Fingerprint: "fp", ExpiresAt: now.Add(time.Hour)}
	}
	b.Run("fresh", func(b *testing.B) {
		run = strconv.FormatInt(benchRuns.Add(1), 10)
		for i := range b.N {
			p := params("fresh-" + strconv.Itoa(i))
			if res, err := store.Claim(ctx, p); err != nil || !res.Claimed {
				b.Fatalf("Claim = %+v, %v", res, err)
			}
			if err := store.Complete(ctx, p.Key, p.Owner, ledger.Completion{Summary: "ok"}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("replay", func(b *testing.B) {
		run = strconv.FormatInt(benchRuns.Add(1), 10)
		p := params("replay")
		if _, err := store.Claim(ctx, p); err != nil {
			b.Fatal(err)
		}
		if err := store.Complete(ctx, p.Key, p.Owner, ledger.Completion{Summary: "ok"}); err != nil {
			b.Fatal(err)
		}
		b.ResetTimer()
		for range b.N {
			if res, err := store.Claim(ctx, params("replay")); err != nil || res.Claimed || res.Previous.State != ledger.StateDone {
				b.Fatalf("Claim = %+v, %v", res, err)
			}
		}
	})
}
