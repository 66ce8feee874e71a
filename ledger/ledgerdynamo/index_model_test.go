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

	"github.com/idemkit/idemkit/ledger"
	"github.com/idemkit/idemkit/ledger/ledgerdynamo"
	"github.com/idemkit/idemkit/ledger/ledgerdynamo/dynalitetest"
	"github.com/idemkit/idemkit/ledger/ledgertest"
)

// indexWrite is one write DynamoDB makes to the state-lease_until index
// for a write of the table, with the write units it costs.
type indexWrite struct {
	op, partition string // "put" or "delete"; the index partition key (state)
	units         int
}

// indexRecorder passes the Store's requests to a real server and, around
// each UpdateItem, reads the item (consistently) before and after, to
// derive the writes DynamoDB makes to the index (a GSI is updated from the
// item's old and new images: an entry is put, deleted, or, when its key
// changes, deleted and put) and the write units of the table and the
// index (an item's size rounded up to 1 KB; an index with projection ALL
// holds the whole item).
type indexRecorder struct {
	ledgerdynamo.API
	table string

	mu          sync.Mutex
	tableUnits  int
	indexWrites []indexWrite
}

func (r *indexRecorder) image(ctx context.Context, key map[string]types.AttributeValue) map[string]types.AttributeValue {
	out, err := r.API.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(r.table), Key: key, ConsistentRead: aws.Bool(true)})
	if err != nil {
		panic(err)
	}
	return out.Item
}

func (r *indexRecorder) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	before := r.image(ctx, in.Key)
	out, err := r.API.UpdateItem(ctx, in, opts...)
	if err != nil {
		return out, err
	}
	after := r.image(ctx, in.Key)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.tableUnits += units(max(size(before), size(after)))
	oldPK, oldSK := indexKey(before)
	newPK, newSK := indexKey(after)
	switch {
	case oldPK == newPK && oldSK == newSK && oldPK != "":
		r.indexWrites = append(r.indexWrites, indexWrite{"put", newPK, units(size(after))}) // attributes changed in place
	case oldPK != "" && newPK != "":
		r.indexWrites = append(r.indexWrites, indexWrite{"delete", oldPK, units(size(before))},
			indexWrite{"put", newPK, units(size(after))})
	case newPK != "":
		r.indexWrites = append(r.indexWrites, indexWrite{"put", newPK, units(size(after))})
	case oldPK != "":
		r.indexWrites = append(r.indexWrites, indexWrite{"delete", oldPK, units(size(before))})
	}
	return out, nil
}

func (r *indexRecorder) take() (int, []indexWrite) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t, w := r.tableUnits, r.indexWrites
	r.tableUnits, r.indexWrites = 0, nil
	return t, w
}

func indexKey(it map[string]types.AttributeValue) (string, string) {
	s, _ := it["state"].(*types.AttributeValueMemberS)
	l, _ := it["lease_until"].(*types.AttributeValueMemberN)
	if s == nil || l == nil {
		return "", ""
	}
	return s.Value, l.Value
}

// size is an item's size as DynamoDB counts it: names and values.
func size(it map[string]types.AttributeValue) int {
	n := 0
	for name, v := range it {
		n += len(name)
		switch v := v.(type) {
		case *types.AttributeValueMemberS:
			n += len(v.Value)
		case *types.AttributeValueMemberN:
			n += len(v.Value)/2 + 1
		case *types.AttributeValueMemberB:
			n += len(v.Value)
		default:
			n++
		}
	}
	return n
}

func units(bytes int) int { return max(1, int(math.Ceil(float64(bytes)/1024))) }

// The model of the index's write load: the index partition keys an action
// writes (claim, renewal, completion) and the write units of the table
// and of the index, measured on dynalite through a recording API. With the
// state as the index's partition key, every action writes its pending
// entry twice (put at the claim, delete at the completion; a renewal
// deletes and puts it again), all under the one key "pending": at 500
// actions per second it takes the 1,000 write units per second one
// partition key is given, whatever the table's capacity.
func TestIndexWritesPerAction(t *testing.T) {
	t.Parallel()
	api := dynalitetest.NewClient(dynalitetest.Endpoint(t))
	table := dynalitetest.NewTable(t, api)
	rec := &indexRecorder{API: api, table: table}
	clock := ledgertest.NewClock(time.Now())
	s := ledgerdynamo.New(rec, table, &ledgerdynamo.Config{Clock: clock})
	ctx := context.Background()
	now := clock.Now()
	p := ledger.ClaimParams{Key: "k-model", Tool: "send_reply", RunID: "run-1", Owner: "o", Fingerprint: "fp-0123456789abcdef",
		LeaseUntil: now.Add(time.Minute), ExpiresAt: now.Add(24 * time.Hour)}
	steps := []struct {
		name  string
		do    func() error
		table int
		index []indexWrite
	}{
		{"claim", func() error { _, err := s.Claim(ctx, p); return err }, 1,
			[]indexWrite{{"put", "pending", 1}}},
		{"renew", func() error { return s.Extend(ctx, p.Key, p.Owner, now.Add(2*time.Minute)) }, 1,
			[]indexWrite{{"delete", "pending", 1}, {"put", "pending", 1}}},
		{"complete", func() error {
			return s.Complete(ctx, p.Key, p.Owner, ledger.Completion{Summary: "message msg_1 sent", Ref: "msg_1"})
		}, 1,
			[]indexWrite{{"delete", "pending", 1}, {"put", "done", 1}}},
	}
	perKey := map[string]int{}
	for _, st := range steps {
		if err := st.do(); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		tu, writes := rec.take()
		if tu != st.table || fmt.Sprint(writes) != fmt.Sprint(st.index) {
			t.Errorf("%s: %d table units, index writes %v; want %d, %v", st.name, tu, writes, st.table, st.index)
		}
		for _, w := range writes {
			if st.name != "renew" {
				perKey[w.partition] += w.units
			}
		}
		t.Logf("%s: table %d WU, index %v", st.name, tu, writes)
	}
	// An action without renewals: the busiest index key and its write
	// units per second at 1k, 10k and 100k actions per second.
	for _, rate := range []int{1_000, 10_000, 100_000} {
		t.Logf("%d actions/s: %d WU/s on index key pending, %d on done (limit 1,000 per key)",
			rate, rate*perKey["pending"], rate*perKey["done"])
	}
	if perKey["pending"] != 2 || perKey["done"] != 1 {
		t.Errorf("index write units per action by key %v, want pending 2, done 1", perKey)
	}
}
