package ledgerdynamo_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/oncely/oncely/internal/ledgerbench"
	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/ledger/ledgerdynamo"
	"github.com/oncely/oncely/ledger/ledgerdynamo/dynalitetest"
)

// benchStore is a Store on a new table whose requests c counts.
func benchStore(b *testing.B) (*ledgerdynamo.Store, *counter) {
	c := newCounter(nil)
	api := newClient(dynalitetest.Endpoint(b), c)
	return ledgerdynamo.New(api, dynalitetest.NewTable(b, api), nil), c
}

// 16 callers of fresh actions at once through one executor; see
// ledgerbench.ParallelFresh. requests/op is per action.
func BenchmarkParallelFresh(b *testing.B) {
	s, c := benchStore(b)
	c.take()
	ledgerbench.ParallelFresh(b, s, 16)
	b.ReportMetric(float64(total(c.take()))/float64(b.N), "requests/op")
}

// 64 callers, each with its own executor on one table, make the same call
// at once; the tool takes 50 ms. See ledgerbench.Contention. requests/op
// is per contended action, all callers' requests together.
func BenchmarkContention(b *testing.B) {
	s, c := benchStore(b)
	c.take()
	ledgerbench.Contention(b, func() ledger.Store { return s }, 64, 50*time.Millisecond)
	b.ReportMetric(float64(total(c.take()))/float64(b.N), "requests/op")
}

// scaleTables holds one store per size, on a table filled once per test
// binary run and shared by the -count runs; dynalitetest.Main deletes the
// tables.
var scaleTables struct {
	sync.Mutex
	stores map[int]*ledgerdynamo.Store
}

// scaleKey is the key of the i-th record of a scale table.
func scaleKey(i int) string { return fmt.Sprintf("scale-%08d", i) }

// scaleStore returns a store on a table holding n done records, keyed
// scaleKey(0..n-1). The records are copies of one the store wrote, written
// with BatchWriteItem, so that they have the store's layout, whatever it is.
func scaleStore(b *testing.B, n int) *ledgerdynamo.Store {
	scaleTables.Lock()
	defer scaleTables.Unlock()
	if s, ok := scaleTables.stores[n]; ok {
		return s
	}
	ctx := context.Background()
	api, table := dynalitetest.ForExamples()
	if err := ledgerdynamo.CreateTable(ctx, api, table, nil); err != nil {
		b.Fatal(err)
	}
	s := ledgerdynamo.New(api, table, nil)
	now := time.Now()
	p := ledger.ClaimParams{Key: scaleKey(0), Tool: "send_reply", RunID: "run-1", Owner: "owner",
		LeaseUntil: now.Add(time.Minute), Fingerprint: "fp", ExpiresAt: now.Add(24 * time.Hour)}
	if _, err := s.Claim(ctx, p); err != nil {
		b.Fatal(err)
	}
	if err := s.Complete(ctx, p.Key, p.Owner, ledger.Completion{Summary: "sent", Ref: "msg_1"}); err != nil {
		b.Fatal(err)
	}
	desc, err := api.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	if err != nil {
		b.Fatal(err)
	}
	pk := *desc.Table.KeySchema[0].AttributeName
	scan, err := api.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(table)})
	if err != nil || len(scan.Items) != 1 {
		b.Fatalf("Scan = %d items, %v", len(scan.Items), err)
	}
	proto := scan.Items[0]
	key, ok := proto[pk].(*types.AttributeValueMemberS)
	if !ok {
		b.Fatalf("partition key %s is %T", pk, proto[pk])
	}
	for start := 1; start < n; start += 25 {
		var reqs []types.WriteRequest
		for i := start; i < min(start+25, n); i++ {
			item := make(map[string]types.AttributeValue, len(proto))
			for k, v := range proto {
				item[k] = v
			}
			// The stored key is the action key, perhaps with a prefix.
			item[pk] = &types.AttributeValueMemberS{Value: key.Value[:len(key.Value)-len(scaleKey(0))] + scaleKey(i)}
			reqs = append(reqs, types.WriteRequest{PutRequest: &types.PutRequest{Item: item}})
		}
		for len(reqs) > 0 {
			out, err := api.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{table: reqs}})
			if err != nil {
				b.Fatal(err)
			}
			reqs = out.UnprocessedItems[table]
		}
	}
	if scaleTables.stores == nil {
		scaleTables.stores = map[int]*ledgerdynamo.Store{}
	}
	scaleTables.stores[n] = s
	return s
}

// scaleFresh numbers the fresh keys of BenchmarkScale across its runs.
var scaleFresh atomic.Int64

// Claim latency with 10^3 and 10^5 records in the table, paired: every
// iteration makes the same claim on both tables, so that drift of the
// machine cancels out of the ratio. replay claims a done key (drawn from
// 1000 spread over the table); fresh claims and completes a new key. The
// two sizes should cost the same (large/small near 1).
func BenchmarkScale(b *testing.B) {
	sizes := [2]int{1_000, 100_000}
	stores := [2]*ledgerdynamo.Store{scaleStore(b, sizes[0]), scaleStore(b, sizes[1])}
	ledgerbench.Scale(b, sizes, [2]ledger.Store{stores[0], stores[1]},
		func(n, i int) string { return scaleKey((i % 1000) * (n / 1000)) },
		func(int) string { return "scale-fresh-" + strconv.FormatInt(scaleFresh.Add(1), 10) })
}
