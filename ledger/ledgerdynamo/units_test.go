package ledgerdynamo_test

import (
	"context"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/oncely/oncely/clock"
	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/ledger/ledgerdynamo"
	"github.com/oncely/oncely/ledger/ledgerdynamo/dynalitetest"
)

// unitRecorder passes the Store's item requests to a real server and
// counts the table's capacity units as DynamoDB bills them (the index's
// are TestIndexWritesPerAction's): an UpdateItem is a write unit per KB of
// the larger of the item before and after, a failed condition included
// (then the item as it stands: DynamoDB bills a conditional write that
// fails as a write of the existing item); a GetItem is a read unit per
// 4 KB of the item, at least one, and half that when eventually
// consistent. It reads each item before and after an UpdateItem through
// the server directly; those reads are not counted.
type unitRecorder struct {
	ledgerdynamo.API
	table string

	mu     sync.Mutex
	writes int
	reads  float64
	ops    map[string]int
}

func newUnitRecorder(api ledgerdynamo.API, table string) *unitRecorder {
	return &unitRecorder{API: api, table: table, ops: map[string]int{}}
}

func (r *unitRecorder) image(ctx context.Context, key map[string]types.AttributeValue) map[string]types.AttributeValue {
	out, err := r.API.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(r.table), Key: key, ConsistentRead: aws.Bool(true)})
	if err != nil {
		panic(err)
	}
	return out.Item
}

func (r *unitRecorder) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	before := r.image(ctx, in.Key)
	out, err := r.API.UpdateItem(ctx, in, opts...)
	after := before
	if err == nil {
		after = r.image(ctx, in.Key)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ops["UpdateItem"]++
	r.writes += units(max(size(before), size(after)))
	return out, err
}

func (r *unitRecorder) GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	out, err := r.API.GetItem(ctx, in, opts...)
	if err != nil {
		return out, err
	}
	ru := max(1, math.Ceil(float64(size(out.Item))/4096))
	if !aws.ToBool(in.ConsistentRead) {
		ru /= 2
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ops["GetItem"]++
	r.reads += ru
	return out, err
}

// take returns the write and read units and the requests by operation
// since the last take.
func (r *unitRecorder) take() (wu int, ru float64, ops map[string]int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	wu, ru, ops = r.writes, r.reads, r.ops
	r.writes, r.reads, r.ops = 0, 0, map[string]int{}
	return wu, ru, ops
}

// A replay of a done DynamoDB record consumes no write unit. The
// acceptance test of the replay read (Config.ReadFirst), on dynalite
// through a recording API: for results of 1, 64 and 256 KiB, a replay in
// the Store that completed the action (ReadFirstSeen, the default), in
// another Store with the default that resumes the run (another process),
// and in a Store set to ReadFirstAlways is one eventually consistent GetItem
// (0.5, 8.5 and 32.5 read units), and no UpdateItem; a Store set to
// ReadFirstNever pays the failed conditional write at the record's size
// (2, 65 and 257 write units), as every replay did before. A done record
// whose retention has run out is not answered from the read: the claim
// takes the key.
func TestReplayConsumesNoWriteUnit(t *testing.T) {
	t.Parallel()
	endpoint := dynalitetest.Endpoint(t)
	for _, tc := range []struct {
		result int     // bytes
		never  int     // write units of a replay with ReadFirstNever
		read   float64 // read units of a replay read
	}{
		{1 << 10, 2, 0.5},
		{64 << 10, 65, 8.5},
		{256 << 10, 257, 32.5},
	} {
		t.Run(fmt.Sprintf("%dKiB", tc.result>>10), func(t *testing.T) {
			t.Parallel()
			api := dynalitetest.NewClient(endpoint)
			table := dynalitetest.NewTable(t, api)
			rec := newUnitRecorder(api, table)
			clk := clock.NewFake(t0)
			store := ledgerdynamo.New(rec, table, &ledgerdynamo.Config{Clock: clk})
			ctx := context.Background()
			key := actionKeys(1)[0]
			p := params(key, "owner-a")
			if res, err := store.Claim(ctx, p); err != nil || !res.Claimed {
				t.Fatalf("Claim = %+v, %v", res, err)
			}
			if err := store.Complete(ctx, key, p.Owner, ledger.Completion{Summary: "report built", Result: make([]byte, tc.result)}); err != nil {
				t.Fatal(err)
			}
			wu, ru, ops := rec.take()
			t.Logf("fresh: %d WU, %.1f RU, %v", wu, ru, ops)

			for _, st := range []struct {
				name  string
				store *ledgerdynamo.Store
				wu    int
				ru    float64
			}{
				{"seen (default)", store, 0, tc.read},
				// A Store that never saw the key, nor acted in its run: a
				// process that resumes the run (before: the conditional
				// write, 2, 65 or 257 write units).
				{"another process (default)", ledgerdynamo.New(rec, table, &ledgerdynamo.Config{Clock: clk}), 0, tc.read},
				{"always", ledgerdynamo.New(rec, table, &ledgerdynamo.Config{Clock: clk, ReadFirst: ledgerdynamo.ReadFirstAlways}), 0, tc.read},
				// dynalite returns no item with the failed condition: the
				// consistent GetItem after it is 1 RU per 4 KB.
				{"never", ledgerdynamo.New(rec, table, &ledgerdynamo.Config{Clock: clk, ReadFirst: ledgerdynamo.ReadFirstNever}), tc.never, 2 * tc.read},
			} {
				res, err := st.store.Claim(ctx, params(key, "owner-b"))
				if err != nil || res.Claimed || res.Previous == nil || res.Previous.State != ledger.StateDone || len(res.Previous.Result) != tc.result {
					t.Fatalf("%s: Claim = %+v, %v; want refused by the done record", st.name, res, err)
				}
				wu, ru, ops := rec.take()
				t.Logf("replay, %s: %d WU, %.1f RU, %v", st.name, wu, ru, ops)
				if wu != st.wu || ru != st.ru {
					t.Errorf("replay, %s: %d write units, %.1f read units; want %d, %.1f", st.name, wu, ru, st.wu, st.ru)
				}
			}

			// Past its retention the done record answers no claim: the
			// claim replaces it.
			clk.Advance(25 * time.Hour)
			res, err := store.Claim(ctx, params(key, "owner-c"))
			if err != nil || !res.Claimed || res.Previous != nil {
				t.Fatalf("Claim after expiry = %+v, %v; want claimed afresh", res, err)
			}
		})
	}
}
