package ledgerdynamo_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/oncely/oncely/clock"
	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/ledger/ledgerdynamo"
	"github.com/oncely/oncely/ledger/ledgerdynamo/dynalitetest"
)

// meddler is a client on which another process writes a record just
// before InitTable files it: before runs ahead of the first UpdateItem
// of that record's key.
type meddler struct {
	*dynamodb.Client
	key    string
	before func()
}

func (m *meddler) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if k, _ := in.Key["pk"].(*types.AttributeValueMemberS); k != nil && k.Value == m.key && m.before != nil {
		m.before()
		m.before = nil
	}
	return m.Client.UpdateItem(ctx, in, opts...)
}

// InitTable moves a table made for the unsharded layout to a sharded
// one: it adds the sharded index, files the records under their shards
// (each write conditional on the state it read: a record another process
// changed meanwhile is left and counted), and says so. A sharded Store
// then lists them; a record that a process still on the unsharded layout
// settles leaves its shard's listing, and the next InitTable files it
// where it belongs. On a table made sharded, InitTable reads no record.
func TestInitTableShardsExistingTable(t *testing.T) {
	t.Parallel()
	c := newCounter(nil)
	api := newClient(dynalitetest.IndexProxy(t, dynalitetest.Endpoint(t)), c)
	unsharded := ledgerdynamo.Layout{Shards: ledgerdynamo.Unsharded}
	table := dynalitetest.NewTableWith(t, api, &ledgerdynamo.TableOptions{Layout: unsharded})
	ctx := context.Background()
	clock := clock.NewFake(t0)
	old := ledgerdynamo.New(api, table, &ledgerdynamo.Config{Clock: clock, Layout: unsharded})
	check := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range []string{"k-pending", "k-done", "k-failed", "k-uncertain"} {
		_, err := old.Claim(ctx, params(k, "owner-"+k))
		check(err)
	}
	check(old.Complete(ctx, "k-done", "owner-k-done", ledger.Completion{Summary: "sent"}))
	check(old.Fail(ctx, "k-failed", "owner-k-failed", ledger.Failure{Definite: true, Reason: "400"}))
	check(old.Fail(ctx, "k-uncertain", "owner-k-uncertain", ledger.Failure{Reason: "timeout"}))

	layout := ledgerdynamo.Layout{Shards: 4}
	opts := &ledgerdynamo.TableOptions{Layout: layout}
	// While InitTable runs, a process on the unsharded layout takes the
	// uncertain record over: it is pending when InitTable writes to it.
	m := &meddler{Client: api, key: "k-uncertain", before: func() {
		_, err := old.Claim(ctx, params("k-uncertain", "owner-2"))
		check(err)
	}}
	rep, err := ledgerdynamo.InitTable(ctx, m, table, opts)
	check(err)
	want := ledgerdynamo.InitReport{Table: table, Index: ledgerdynamo.ShardedIndexName, Shards: 4, IndexCreated: true,
		Unsharded: ledgerdynamo.IndexName, Scanned: 4, Filed: 3, Changed: 1, TTL: "not supported by the server"}
	if *rep != want {
		t.Errorf("InitTable = %+v\nwant %+v", *rep, want)
	}
	for _, line := range []string{
		"table " + table + ": exists\n",
		"index state_shard-lease_until (4 shards, projecting the keys, run and expiry): created",
		"records: 4 read, 3 filed under their index shard, 1 changed meanwhile and left as they were (run init again)\n",
		"index state-lease_until (unsharded): still on the table",
		`--global-secondary-index-updates '[{"Delete":{"IndexName":"state-lease_until"}}]'`,
	} {
		if !strings.Contains(rep.String(), line) {
			t.Errorf("report lacks %q:\n%s", line, rep)
		}
	}
	s := ledgerdynamo.New(api, table, &ledgerdynamo.Config{Clock: clock, Layout: layout})
	if got, want := listed(t, s, ledger.Filter{}), []string{"k-done/done", "k-failed/failed", "k-pending/pending"}; !slices.Equal(got, want) {
		t.Errorf("sharded List = %v, want %v (the record taken over meanwhile is not filed yet)", got, want)
	}

	// A process on the unsharded layout completes a record: its entry
	// stays under the pending shard, and List leaves it out there.
	check(old.Complete(ctx, "k-pending", "owner-k-pending", ledger.Completion{Summary: "sent"}))
	if got := listed(t, s, ledger.Filter{State: ledger.StatePending}); len(got) != 0 {
		t.Errorf("sharded List(pending) = %v after an unsharded Complete, want none", got)
	}
	rep, err = ledgerdynamo.InitTable(ctx, api, table, opts)
	check(err)
	if rep.IndexCreated || rep.Scanned != 4 || rep.Filed != 2 || rep.Changed != 0 {
		t.Errorf("InitTable again = %+v; want 4 read, 2 filed", *rep)
	}
	if !strings.Contains(rep.String(), "table "+table+": exists, with index state_shard-lease_until (4 shards, projecting the keys, run and expiry)\n") {
		t.Errorf("report:\n%s", rep)
	}
	if got, want := listed(t, s, ledger.Filter{}), []string{"k-done/done", "k-failed/failed", "k-pending/done", "k-uncertain/pending"}; !slices.Equal(got, want) {
		t.Errorf("sharded List after filing = %v, want %v", got, want)
	}

	// A table made sharded has no unsharded index: nothing to read.
	fresh := dynalitetest.NewTableWith(t, api, opts)
	c.take()
	rep, err = ledgerdynamo.InitTable(ctx, api, fresh, opts)
	check(err)
	if want := (ledgerdynamo.InitReport{Table: fresh, Index: ledgerdynamo.ShardedIndexName, Shards: 4,
		TTL: "not supported by the server"}); *rep != want {
		t.Errorf("InitTable on a sharded table = %+v\nwant %+v", *rep, want)
	}
	if n := c.take()["Scan"]; n != 0 {
		t.Errorf("InitTable on a sharded table scanned %d times", n)
	}
	if strings.Contains(rep.String(), "records:") {
		t.Errorf("report on a sharded table:\n%s", rep)
	}
}

// InitTable creates a missing table as CreateTable does, and says so.
func TestInitTableCreates(t *testing.T) {
	t.Parallel()
	api := newClient(dynalitetest.Endpoint(t), nil)
	for _, shards := range []int{ledgerdynamo.Unsharded, 0} {
		_, table := dynalitetest.ForExamples()
		opts := &ledgerdynamo.TableOptions{Layout: ledgerdynamo.Layout{Shards: shards}}
		rep, err := ledgerdynamo.InitTable(context.Background(), api, table, opts)
		if err != nil {
			t.Fatal(err)
		}
		kind := "unsharded, projecting all attributes"
		if shards == 0 {
			kind = fmt.Sprintf("%d shards, projecting the keys, run and expiry", ledgerdynamo.DefaultShards)
		}
		if want := fmt.Sprintf("table %s: created, with index %s (%s)\nTTL: not supported by the server", table, rep.Index, kind); rep.String() != want {
			t.Errorf("report:\n%s\nwant:\n%s", rep, want)
		}
		if err := ledgerdynamo.CreateTable(context.Background(), api, table, opts); err != nil {
			t.Errorf("CreateTable over the table InitTable made = %v", err)
		}
	}
}
