package ledgerdynamo_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/ledger/ledgerdynamo"
	"github.com/oncely/oncely/ledger/ledgerdynamo/dynalitetest"
)

// rawClaimComplete is the least a claim and a completion cost on the wire:
// one conditional UpdateItem each, written by hand with the SDK.
func rawClaimComplete(ctx context.Context, api *dynamodb.Client, table, key string) error {
	sv := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	nv := func(v int64) types.AttributeValue {
		return &types.AttributeValueMemberN{Value: strconv.FormatInt(v, 10)}
	}
	pk := map[string]types.AttributeValue{"pk": sv(key)}
	now := time.Now()
	_, err := api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                aws.String(table),
		Key:                      pk,
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
		return err
	}
	_, err = api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(table),
		Key:                       pk,
		UpdateExpression:          aws.String("SET #s = :done, summary = :sum, lease_until = :now"),
		ConditionExpression:       aws.String("#o = :o AND #s = :pending"),
		ExpressionAttributeNames:  map[string]string{"#s": "state", "#o": "owner"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":done": sv("done"), ":pending": sv("pending"), ":o": sv("o"), ":sum": sv("ok"), ":now": nv(now.UnixMilli())},
	})
	return err
}

// BenchmarkRawFloor is the least a claim and a completion cost on the wire,
// through the same client as BenchmarkStore and BenchmarkExecute.
func BenchmarkRawFloor(b *testing.B) {
	api := newClient(dynalitetest.Endpoint(b), nil)
	table := dynalitetest.NewTable(b, api)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if err := rawClaimComplete(ctx, api, table, strconv.Itoa(i)); err != nil {
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
	api := newClient(dynalitetest.Endpoint(b), nil)
	store := ledgerdynamo.New(api, dynalitetest.NewTable(b, api), nil)
	ctx := context.Background()
	var run string
	params := func(key string) ledger.ClaimParams {
		key = run + "-" + key
		now := time.Now()
		return ledger.ClaimParams{Key: key, Tool: "send_reply", RunID: "run", Owner: "o-" + key,
			LeaseUntil: now.Add(time.Minute), Fingerprint: "fp", ExpiresAt: now.Add(time.Hour)}
	}
	b.Run("fresh", func(b *testing.B) {
		run = strconv.FormatInt(benchRuns.Add(1), 10)
		b.ReportAllocs()
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
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			if res, err := store.Claim(ctx, params("replay")); err != nil || res.Claimed || res.Previous.State != ledger.StateDone {
				b.Fatalf("Claim = %+v, %v", res, err)
			}
		}
	})
}

// replyCall is a send_reply call (the tool of newExecutor) for a ticket.
func replyCall(ticket string) client.Call {
	return client.Call{Tool: "send_reply", ID: "toolu_1",
		Input: json.RawMessage(`{"ticketId": "` + ticket + `", "text": "Your refund is on its way."}`)}
}

// BenchmarkExecute measures a call through client.Executor on the Store:
// fresh is a new action (claim, run a no-op tool, record: 2 requests, as
// the raw floor); replay repeats a done action (1 request where the server
// returns the old item, 2 on dynalite).
func BenchmarkExecute(b *testing.B) {
	api := newClient(dynalitetest.Endpoint(b), nil)
	exec, _ := newExecutor(b, ledgerdynamo.New(api, dynalitetest.NewTable(b, api), nil))
	ctx := context.Background()
	b.Run("fresh", func(b *testing.B) {
		run := "run-" + strconv.FormatInt(benchRuns.Add(1), 10)
		b.ReportAllocs()
		for i := range b.N {
			res, err := exec.Execute(ctx, run, replyCall(strconv.Itoa(i)))
			if err != nil || res.Outcome != client.Executed {
				b.Fatalf("Execute = %v, %v", res.Outcome, err)
			}
		}
	})
	b.Run("replay", func(b *testing.B) {
		run := "run-" + strconv.FormatInt(benchRuns.Add(1), 10)
		if _, err := exec.Execute(ctx, run, replyCall("42")); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			res, err := exec.Execute(ctx, run, replyCall("42"))
			if err != nil || res.Outcome != client.AlreadyDone {
				b.Fatalf("Execute = %v, %v", res.Outcome, err)
			}
		}
	})
}

// BenchmarkFreshPaired runs the raw floor, a Store Claim+Complete and a
// fresh Execute in turn in every iteration, on one table, and reports
// each one's time per op and their ratios to the floor. On a shared
// machine, where separate benchmarks drift apart with the load, the
// paired ratios are the stable figures. The Store's keys and fingerprint
// have the executor's sizes (64 hex characters), so execute/store is the
// executor's own share.
func BenchmarkFreshPaired(b *testing.B) {
	api := newClient(dynalitetest.Endpoint(b), nil)
	table := dynalitetest.NewTable(b, api)
	store := ledgerdynamo.New(api, table, nil)
	exec, _ := newExecutor(b, store)
	ctx := context.Background()
	run := strconv.FormatInt(benchRuns.Add(1), 10)
	hex64 := func(prefix string, i int) string { // the size of an action key
		sum := sha256.Sum256([]byte(prefix + run + "-" + strconv.Itoa(i)))
		return hex.EncodeToString(sum[:])
	}
	var raw, st, ex time.Duration
	for i := range b.N {
		t0 := time.Now()
		if err := rawClaimComplete(ctx, api, table, "raw-"+run+"-"+strconv.Itoa(i)); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		p := ledger.ClaimParams{Key: hex64("s", i), Tool: "send_reply", RunID: "run-" + run, Owner: hex64("o", i)[:32],
			LeaseUntil: t1.Add(time.Minute), Fingerprint: hex64("f", 0), ExpiresAt: t1.Add(time.Hour)}
		if res, err := store.Claim(ctx, p); err != nil || !res.Claimed {
			b.Fatalf("Claim = %+v, %v", res, err)
		}
		if err := store.Complete(ctx, p.Key, p.Owner, ledger.Completion{Summary: "replied to ticket 42", Ref: "msg_1"}); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		if res, err := exec.Execute(ctx, "run-"+run, replyCall(strconv.Itoa(i))); err != nil || res.Outcome != client.Executed {
			b.Fatalf("Execute = %v, %v", res.Outcome, err)
		}
		t3 := time.Now()
		raw, st, ex = raw+t1.Sub(t0), st+t2.Sub(t1), ex+t3.Sub(t2)
	}
	n := float64(b.N)
	b.ReportMetric(float64(raw)/n, "raw-ns/op")
	b.ReportMetric(float64(st)/n, "store-ns/op")
	b.ReportMetric(float64(ex)/n, "execute-ns/op")
	b.ReportMetric(float64(st)/float64(raw), "store/raw")
	b.ReportMetric(float64(ex)/float64(raw), "execute/raw")
}

// rawReplay is the cheapest replay a user would write by hand: one
// eventually consistent GetItem of the done item (a hand-written claim
// that also takes new keys would send a conditional UpdateItem, a write).
func rawReplay(ctx context.Context, api *dynamodb.Client, table, key string) error {
	pk := map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: key}}
	out, err := api.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: pk})
	if err == nil && len(out.Item) == 0 {
		err = fmt.Errorf("raw replay: no item %s", key)
	}
	return err
}

// BenchmarkReplayPaired is BenchmarkFreshPaired for a replay: the raw
// floor (rawReplay), a Store Claim of a done key and an Execute of a done
// action, in turn in every iteration, with their ratios to the floor.
func BenchmarkReplayPaired(b *testing.B) {
	api := newClient(dynalitetest.Endpoint(b), nil)
	table := dynalitetest.NewTable(b, api)
	store := ledgerdynamo.New(api, table, nil)
	exec, _ := newExecutor(b, store)
	ctx := context.Background()
	run := "run-" + strconv.FormatInt(benchRuns.Add(1), 10)
	if err := rawClaimComplete(ctx, api, table, "raw-"+run); err != nil {
		b.Fatal(err)
	}
	now := time.Now()
	sum := sha256.Sum256([]byte(run))
	p := ledger.ClaimParams{Key: hex.EncodeToString(sum[:]), Tool: "send_reply", RunID: run, Owner: "o1",
		LeaseUntil: now.Add(time.Minute), Fingerprint: hex.EncodeToString(sum[:]), ExpiresAt: now.Add(time.Hour)}
	if _, err := store.Claim(ctx, p); err != nil {
		b.Fatal(err)
	}
	if err := store.Complete(ctx, p.Key, p.Owner, ledger.Completion{Summary: "replied to ticket 42", Ref: "msg_1"}); err != nil {
		b.Fatal(err)
	}
	if _, err := exec.Execute(ctx, run, replyCall("42")); err != nil {
		b.Fatal(err)
	}
	p.Owner = "o2"
	var raw, st, ex time.Duration
	for range b.N {
		t0 := time.Now()
		if err := rawReplay(ctx, api, table, "raw-"+run); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if res, err := store.Claim(ctx, p); err != nil || res.Claimed || res.Previous.State != ledger.StateDone {
			b.Fatalf("Claim = %+v, %v", res, err)
		}
		t2 := time.Now()
		if res, err := exec.Execute(ctx, run, replyCall("42")); err != nil || res.Outcome != client.AlreadyDone {
			b.Fatalf("Execute = %v, %v", res.Outcome, err)
		}
		t3 := time.Now()
		raw, st, ex = raw+t1.Sub(t0), st+t2.Sub(t1), ex+t3.Sub(t2)
	}
	n := float64(b.N)
	b.ReportMetric(float64(raw)/n, "raw-ns/op")
	b.ReportMetric(float64(st)/n, "store-ns/op")
	b.ReportMetric(float64(ex)/n, "execute-ns/op")
	b.ReportMetric(float64(st)/float64(raw), "store/raw")
	b.ReportMetric(float64(ex)/float64(raw), "execute/raw")
}

// BenchmarkReadFirstPaired prices the replay read (Config.ReadFirst) for
// fresh actions: the raw floor, a Claim+Complete of a new key on a Store
// with the default ReadFirstSeen in a run that has acted in it (no read:
// the key was never seen), the same as the first action of a new run (a
// GetItem first: the run may be resumed), and one on a Store with
// ReadFirstAlways (a GetItem first), in turn in every iteration, with
// their ratios to the floor.
func BenchmarkReadFirstPaired(b *testing.B) {
	api := newClient(dynalitetest.Endpoint(b), nil)
	table := dynalitetest.NewTable(b, api)
	seen := ledgerdynamo.New(api, table, nil)
	always := ledgerdynamo.New(api, table, &ledgerdynamo.Config{ReadFirst: ledgerdynamo.ReadFirstAlways})
	ctx := context.Background()
	run := strconv.FormatInt(benchRuns.Add(1), 10)
	hex64 := func(prefix string, i int) string {
		sum := sha256.Sum256([]byte(prefix + run + "-" + strconv.Itoa(i)))
		return hex.EncodeToString(sum[:])
	}
	fresh := func(store *ledgerdynamo.Store, prefix string, i int) {
		now := time.Now()
		runID := "run-" + run
		if prefix == "n" {
			runID += "-" + strconv.Itoa(i) // a new run each time
		}
		p := ledger.ClaimParams{Key: hex64(prefix, i), Tool: "send_reply", RunID: runID, Owner: hex64("o"+prefix, i)[:32],
			LeaseUntil: now.Add(time.Minute), Fingerprint: hex64("f", 0), ExpiresAt: now.Add(time.Hour)}
		if res, err := store.Claim(ctx, p); err != nil || !res.Claimed {
			b.Fatalf("Claim = %+v, %v", res, err)
		}
		if err := store.Complete(ctx, p.Key, p.Owner, ledger.Completion{Summary: "replied to ticket 42", Ref: "msg_1"}); err != nil {
			b.Fatal(err)
		}
	}
	fresh(seen, "s", -1) // the run acts in the Store
	var raw, se, nr, al time.Duration
	for i := range b.N {
		t0 := time.Now()
		if err := rawClaimComplete(ctx, api, table, "raw-"+run+"-"+strconv.Itoa(i)); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		fresh(seen, "s", i)
		t2 := time.Now()
		fresh(seen, "n", i)
		t3 := time.Now()
		fresh(always, "a", i)
		t4 := time.Now()
		raw, se, nr, al = raw+t1.Sub(t0), se+t2.Sub(t1), nr+t3.Sub(t2), al+t4.Sub(t3)
	}
	n := float64(b.N)
	b.ReportMetric(float64(raw)/n, "raw-ns/op")
	b.ReportMetric(float64(se)/n, "seen-ns/op")
	b.ReportMetric(float64(nr)/n, "seen-new-run-ns/op")
	b.ReportMetric(float64(al)/n, "always-ns/op")
	b.ReportMetric(float64(se)/float64(raw), "seen/raw")
	b.ReportMetric(float64(nr)/float64(raw), "seen-new-run/raw")
	b.ReportMetric(float64(al)/float64(raw), "always/raw")
}

// BenchmarkUnits reports the table's capacity units per action through a
// recording API (unitRecorder: a write unit per KB written, a failed
// condition billed at the stored item's size; a read unit per 4 KB read,
// half when eventually consistent), for results of 1, 64 and 256 KiB:
// fresh (Claim+Complete), replay in the Store that completed the action
// (ReadFirstSeen: an eventually consistent GetItem), a replay that claims
// (ReadFirstNever; on dynalite the failed condition is followed by a
// consistent GetItem, which real DynamoDB saves by returning the item),
// and a replay by another process on the default, a new Store each:
// one that has not acted anew in the run (other: it reads first) and one
// that has (acted: it claims). Its times include the recorder's
// own reads: read the units, not the times.
func BenchmarkUnits(b *testing.B) {
	api := newClient(dynalitetest.Endpoint(b), nil)
	table := dynalitetest.NewTable(b, api)
	rec := newUnitRecorder(api, table)
	seen := ledgerdynamo.New(rec, table, nil)
	never := ledgerdynamo.New(rec, table, &ledgerdynamo.Config{ReadFirst: ledgerdynamo.ReadFirstNever})
	ctx := context.Background()
	params := func(key, owner string) ledger.ClaimParams {
		now := time.Now()
		return ledger.ClaimParams{Key: key, Tool: "send_reply", RunID: "run", Owner: owner,
			LeaseUntil: now.Add(time.Minute), Fingerprint: "fp", ExpiresAt: now.Add(time.Hour)}
	}
	report := func(b *testing.B) {
		wu, ru, _ := rec.take()
		b.ReportMetric(float64(wu)/float64(b.N), "WU/op")
		b.ReportMetric(ru/float64(b.N), "RU/op")
	}
	for _, size := range []int{1 << 10, 64 << 10, 256 << 10} {
		result := make([]byte, size)
		kib := strconv.Itoa(size>>10) + "KiB"
		run := strconv.FormatInt(benchRuns.Add(1), 10)
		b.Run("fresh-"+kib, func(b *testing.B) {
			rec.take()
			for i := range b.N {
				p := params(run+"-fresh-"+strconv.Itoa(i)+"-"+strconv.Itoa(b.N), "o")
				if res, err := seen.Claim(ctx, p); err != nil || !res.Claimed {
					b.Fatalf("Claim = %+v, %v", res, err)
				}
				if err := seen.Complete(ctx, p.Key, p.Owner, ledger.Completion{Summary: "ok", Result: result}); err != nil {
					b.Fatal(err)
				}
			}
			report(b)
		})
		done := params(run+"-replay", "o")
		if _, err := seen.Claim(ctx, done); err != nil {
			b.Fatal(err)
		}
		if err := seen.Complete(ctx, done.Key, done.Owner, ledger.Completion{Summary: "ok", Result: result}); err != nil {
			b.Fatal(err)
		}
		// Another process on the default (ReadFirstSeen): one that has
		// not acted anew in the run reads first; one that has (two
		// processes serving one run at once) claims.
		other := func() *ledgerdynamo.Store { return ledgerdynamo.New(rec, table, nil) }
		acted := func() *ledgerdynamo.Store {
			s := ledgerdynamo.New(rec, table, nil)
			p := params(run+"-acted-"+strconv.FormatInt(benchRuns.Add(1), 10), "o")
			if res, err := s.Claim(ctx, p); err != nil || !res.Claimed {
				b.Fatalf("Claim = %+v, %v", res, err)
			}
			if res, err := s.Claim(ctx, params(run+"-new-"+strconv.FormatInt(benchRuns.Add(1), 10), "o")); err != nil || !res.Claimed {
				b.Fatalf("Claim = %+v, %v", res, err)
			}
			return s
		}
		for _, st := range []struct {
			name  string
			store func() *ledgerdynamo.Store
		}{
			{"replay-", func() *ledgerdynamo.Store { return seen }},
			{"replay-claim-", func() *ledgerdynamo.Store { return never }},
			{"replay-other-", other},
			{"replay-acted-", acted},
		} {
			b.Run(st.name+kib, func(b *testing.B) {
				stores := make([]*ledgerdynamo.Store, b.N)
				for i := range stores {
					stores[i] = st.store()
				}
				rec.take()
				b.ResetTimer()
				for i := range b.N {
					if res, err := stores[i].Claim(ctx, params(done.Key, "o2")); err != nil || res.Claimed {
						b.Fatalf("Claim = %+v, %v", res, err)
					}
				}
				report(b)
			})
		}
	}
}
