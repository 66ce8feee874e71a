package ledgerdynamo_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"strconv"
	"strings"
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

// indexWrite is one write DynamoDB makes to the index for a write of the
// table, with the write units it costs.
type indexWrite struct {
	op, partition string // "put" or "delete"; the index partition key (state or state#NN)
	units         int
}

// indexRecorder passes the Store's requests to a real server and, around
// each UpdateItem, reads the item (consistently) before and after, to
// derive the writes DynamoDB makes to the index (a GSI is updated from the
// item's old and new images: an entry is put, deleted, or, when its key
// changes, deleted and put) and the write units of the table and the
// index: an item's size rounded up to 1 KB; an index entry's size is the
// projected attributes' (the whole item for ALL; the table's and the
// index's keys, run_id and expires_at for the sharded index's INCLUDE)
// plus 100 bytes of overhead.
type indexRecorder struct {
	ledgerdynamo.API
	table    string
	part     string // the index's partition key attribute
	keysOnly bool   // the index projects the keys, run_id and expires_at

	mu          sync.Mutex
	maxEntry    int // the largest index entry written, in bytes
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
	oldPK, oldSK := r.indexKey(before)
	newPK, newSK := r.indexKey(after)
	put := indexWrite{"put", newPK, r.entryUnits(after)}
	del := indexWrite{"delete", oldPK, r.entryUnits(before)}
	switch {
	case oldPK == newPK && oldSK == newSK && oldPK != "":
		if fmt.Sprint(r.entry(before)) != fmt.Sprint(r.entry(after)) {
			r.indexWrites = append(r.indexWrites, put) // projected attributes changed in place
		}
	case oldPK != "" && newPK != "":
		r.indexWrites = append(r.indexWrites, del, put)
	case newPK != "":
		r.indexWrites = append(r.indexWrites, put)
	case oldPK != "":
		r.indexWrites = append(r.indexWrites, del)
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

// indexKey is the item's index key: partition and sort key.
func (r *indexRecorder) indexKey(it map[string]types.AttributeValue) (string, string) {
	s, _ := it[r.part].(*types.AttributeValueMemberS)
	l, _ := it["lease_until"].(*types.AttributeValueMemberN)
	if s == nil || l == nil {
		return "", ""
	}
	return s.Value, l.Value
}

// entry is the item's index entry: the attributes the index projects.
func (r *indexRecorder) entry(it map[string]types.AttributeValue) map[string]types.AttributeValue {
	if !r.keysOnly {
		return it
	}
	e := map[string]types.AttributeValue{}
	for _, a := range []string{"pk", r.part, "lease_until", "run_id", "expires_at"} {
		if v, ok := it[a]; ok {
			e[a] = v
		}
	}
	return e
}

// entryUnits is the write units of the item's index entry (the caller
// holds r.mu).
func (r *indexRecorder) entryUnits(it map[string]types.AttributeValue) int {
	n := size(r.entry(it)) + 100
	r.maxEntry = max(r.maxEntry, n)
	return units(n)
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

// family is the state an index partition key holds: "pending#07" and
// "pending" are both pending.
func family(partition string) ledger.State {
	s, _, _ := strings.Cut(partition, "#")
	return ledger.State(s)
}

// actionKeys returns n action keys shaped like the executor's (sha256,
// hex).
func actionKeys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		sum := sha256.Sum256([]byte("action-" + strconv.Itoa(i)))
		keys[i] = hex.EncodeToString(sum[:])
	}
	return keys
}

// busiest returns the write units per second of the busiest index
// partition key when every key of keys is one action in a second, each
// costing perAction[state] units on the partition key of its state.
func busiest(l ledgerdynamo.Layout, keys []string, perAction map[ledger.State]int) int {
	perKey := map[string]int{}
	most := 0
	for _, k := range keys {
		for state, wu := range perAction {
			p := l.IndexKey(k, state)
			perKey[p] += wu
			most = max(most, perKey[p])
		}
	}
	return most
}

// The model of the index's write load, before (the unsharded index, the
// state as partition key, projection ALL) and after (DefaultShards
// shards, KEYS_ONLY), measured on dynalite through a recording API: the
// index partition keys and write units of each write of an action
// (claim, renewal, completion; a completion with a 64 KiB result), then
// the write units per second of the busiest index partition key when
// 1,000, 10,000 and 100,000 actions a second (each renewed once) spread
// over action keys. Before, every action writes 4 units to the one key
// "pending"; after, its renewals and completion land on the shards of its
// key, and at 10,000 actions a second no key takes more than the 1,000
// units per second DynamoDB gives one partition key. A completion's
// result is copied into an ALL index (a unit per KB on the done key),
// not into a KEYS_ONLY one.
func TestIndexWritesPerAction(t *testing.T) {
	t.Parallel()
	endpoint := dynalitetest.Endpoint(t)
	keys := map[int][]string{1_000: actionKeys(1_000), 10_000: actionKeys(10_000), 100_000: actionKeys(100_000)}
	for _, tc := range []struct {
		name     string
		layout   ledgerdynamo.Layout
		part     string
		keysOnly bool
		bigIndex int // the index units of the put of a done record with a 64 KiB result
	}{
		{"unsharded", ledgerdynamo.Layout{Shards: ledgerdynamo.Unsharded}, "state", false, 65},
		{"sharded (the default)", ledgerdynamo.Layout{}, "state_shard", true, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			api := dynalitetest.NewClient(endpoint)
			table := dynalitetest.NewTableWith(t, api, &ledgerdynamo.TableOptions{Layout: tc.layout})
			rec := &indexRecorder{API: api, table: table, part: tc.part, keysOnly: tc.keysOnly}
			clock := clock.NewFake(time.Now())
			s := ledgerdynamo.New(rec, table, &ledgerdynamo.Config{Clock: clock, Layout: tc.layout})
			ctx := context.Background()
			now := clock.Now()
			claim := func(key string) ledger.ClaimParams {
				return ledger.ClaimParams{Key: key, Tool: "send_reply", RunID: "run-1", Owner: "o", Fingerprint: "fp-0123456789abcdef",
					LeaseUntil: now.Add(time.Minute), ExpiresAt: now.Add(24 * time.Hour)}
			}
			small, big := actionKeys(2)[0], actionKeys(2)[1]
			pending := func(k string) string { return tc.layout.IndexKey(k, ledger.StatePending) }
			done := func(k string) string { return tc.layout.IndexKey(k, ledger.StateDone) }
			steps := []struct {
				name  string
				do    func() error
				table int
				index []indexWrite
			}{
				{"claim", func() error { _, err := s.Claim(ctx, claim(small)); return err }, 1,
					[]indexWrite{{"put", pending(small), 1}}},
				{"renew", func() error { return s.Extend(ctx, small, "o", now.Add(2*time.Minute)) }, 1,
					[]indexWrite{{"delete", pending(small), 1}, {"put", pending(small), 1}}},
				{"complete", func() error {
					return s.Complete(ctx, small, "o", ledger.Completion{Summary: "message msg_1 sent", Ref: "msg_1"})
				}, 1,
					[]indexWrite{{"delete", pending(small), 1}, {"put", done(small), 1}}},
				{"claim (result)", func() error { _, err := s.Claim(ctx, claim(big)); return err }, 1,
					[]indexWrite{{"put", pending(big), 1}}},
				{"complete with a 64 KiB result", func() error {
					return s.Complete(ctx, big, "o", ledger.Completion{Summary: "report built", Result: make([]byte, 64<<10)})
				}, 65,
					[]indexWrite{{"delete", pending(big), 1}, {"put", done(big), tc.bigIndex}}},
			}
			// Write units of one action, on the table and on the index
			// keys of each state: without and with one renewal.
			var tableWU, tableRenew int
			index, renew := map[ledger.State]int{}, map[ledger.State]int{}
			for _, st := range steps {
				if err := st.do(); err != nil {
					t.Fatalf("%s: %v", st.name, err)
				}
				tu, writes := rec.take()
				if tu != st.table || fmt.Sprint(writes) != fmt.Sprint(st.index) {
					t.Errorf("%s: %d table units, index writes %v; want %d, %v", st.name, tu, writes, st.table, st.index)
				}
				t.Logf("%s: table %d WU, index %v", st.name, tu, writes)
				if st.name == "renew" {
					tableRenew = tu
				}
				for _, w := range writes {
					switch st.name {
					case "renew":
						renew[family(w.partition)] += w.units
					case "claim", "complete":
						index[family(w.partition)] += w.units
					}
				}
				if st.name == "claim" || st.name == "complete" {
					tableWU += tu
				}
			}
			if fmt.Sprint(index) != "map[done:1 pending:2]" || fmt.Sprint(renew) != "map[pending:2]" {
				t.Errorf("index write units per action by state %v, per renewal %v; want done 1, pending 2; pending 2", index, renew)
			}
			rec.mu.Lock()
			t.Logf("largest index entry written: %d bytes, 100 of them DynamoDB's overhead", rec.maxEntry)
			rec.mu.Unlock()
			renewed := map[ledger.State]int{}
			var indexWU, indexRenewed int
			for st, wu := range index {
				renewed[st] = wu + renew[st]
				indexWU, indexRenewed = indexWU+wu, indexRenewed+renewed[st]
			}
			for _, rate := range []int{1_000, 10_000, 100_000} {
				bare, once := busiest(tc.layout, keys[rate], index), busiest(tc.layout, keys[rate], renewed)
				t.Logf("%d actions/s: busiest index key %d WU/s (%d with a renewal each; limit 1,000); table %d WU/s (%d), index %d WU/s (%d)",
					rate, bare, once, rate*tableWU, rate*(tableWU+tableRenew), rate*indexWU, rate*indexRenewed)
				switch {
				case rate == 10_000 && tc.layout.Shards >= 0 && once > 1000:
					t.Errorf("the default shards at %d actions/s: an index key takes %d WU/s, above 1,000", rate, once)
				case rate == 10_000 && tc.layout.Shards < 0 && once != 40_000:
					t.Errorf("unsharded at %d actions/s: the pending key takes %d WU/s, want 40,000", rate, once)
				}
			}
			if tc.layout.Shards >= 0 {
				// The shards that 100,000 actions a second need.
				for _, n := range []int{128, 256, 512, ledgerdynamo.MaxShards} {
					t.Logf("%d shards at 100000 actions/s: busiest index key %d WU/s with a renewal each",
						n, busiest(ledgerdynamo.Layout{Shards: n}, keys[100_000], renewed))
				}
			}
		})
	}
}
