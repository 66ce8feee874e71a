package ledgerdynamo_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/oncely/oncely/clock"
	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/ledger/ledgerdynamo"
	"github.com/oncely/oncely/ledger/ledgerdynamo/dynalitetest"
)

// listed returns "key/state" for every record s lists with f, sorted.
func listed(t *testing.T, s *ledgerdynamo.Store, f ledger.Filter) []string {
	t.Helper()
	recs, err := s.List(context.Background(), f)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range recs {
		got = append(got, r.Key+"/"+string(r.State))
	}
	slices.Sort(got)
	return got
}

// stingy is a client whose BatchGetItem answers at most one item and
// returns the other keys unprocessed, as DynamoDB does under throttling;
// every answer leaves some when always is set.
type stingy struct {
	*dynamodb.Client
	always bool
	calls  int
}

func (s *stingy) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	s.calls++
	out := &dynamodb.BatchGetItemOutput{
		Responses:       map[string][]map[string]types.AttributeValue{},
		UnprocessedKeys: map[string]types.KeysAndAttributes{},
	}
	for table, ka := range in.RequestItems {
		first := ka
		first.Keys = ka.Keys[:1]
		got, err := s.Client.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{table: first}}, opts...)
		if err != nil {
			return nil, err
		}
		out.Responses[table] = got.Responses[table]
		rest := ka
		if !s.always {
			rest.Keys = ka.Keys[1:]
		}
		if len(rest.Keys) > 0 {
			out.UnprocessedKeys[table] = rest
		}
	}
	return out, nil
}

// List on a sharded index asks again for the keys BatchGetItem leaves
// unprocessed, with the Store's backoff, and gives up with
// ErrUnavailable after MaxAttempts.
func TestListUnprocessedKeys(t *testing.T) {
	t.Parallel()
	client := newClient(dynalitetest.Endpoint(t), nil)
	layout := ledgerdynamo.Layout{Shards: 1}
	table := dynalitetest.NewTableWith(t, client, &ledgerdynamo.TableOptions{Layout: layout})
	api := &stingy{Client: client}
	cfg := &ledgerdynamo.Config{Clock: clock.NewFake(t0), Layout: layout, MaxAttempts: 5, InitialBackoff: time.Millisecond}
	s := ledgerdynamo.New(api, table, cfg)
	var want []string
	for i := range 3 {
		k := fmt.Sprintf("k-%d", i)
		if _, err := s.Claim(context.Background(), params(k, "o")); err != nil {
			t.Fatal(err)
		}
		want = append(want, k+"/pending")
	}
	if got := listed(t, s, ledger.Filter{}); !slices.Equal(got, want) || api.calls != 3 {
		t.Errorf("List = %v in %d BatchGetItem calls; want %v in 3", got, api.calls, want)
	}
	api.always, api.calls = true, 0
	if _, err := s.List(context.Background(), ledger.Filter{State: ledger.StatePending}); !errors.Is(err, ledger.ErrUnavailable) || api.calls != 5 {
		t.Errorf("List with keys never processed = %v after %d calls; want ErrUnavailable after 5", err, api.calls)
	}
}

// What a List costs on a sharded index, counted on the wire: a Query per
// shard of each state it lists, and one BatchGetItem for the page (the
// index holds keys, run and expiry).
func TestListRequestsSharded(t *testing.T) {
	t.Parallel()
	c := newCounter(nil)
	client := newClient(dynalitetest.Endpoint(t), c)
	layout := ledgerdynamo.Layout{Shards: 4}
	table := dynalitetest.NewTableWith(t, client, &ledgerdynamo.TableOptions{Layout: layout})
	s := ledgerdynamo.New(client, table, &ledgerdynamo.Config{Clock: clock.NewFake(t0), Layout: layout})
	shards := map[string]bool{}
	for i := range 10 {
		k := fmt.Sprintf("k-%d", i)
		if _, err := s.Claim(context.Background(), params(k, "o")); err != nil {
			t.Fatal(err)
		}
		shards[layout.IndexKey(k, ledger.StatePending)] = true
	}
	c.take()
	for _, tc := range []struct {
		f       ledger.Filter
		queries int
	}{
		{ledger.Filter{State: ledger.StatePending}, 4},
		{ledger.Filter{}, 16},
	} {
		if got := listed(t, s, tc.f); len(got) != 10 {
			t.Errorf("List(%+v) = %v, want the 10 records", tc.f, got)
		}
		want := map[string]int{"Query": tc.queries, "BatchGetItem": 1}
		if got := c.take(); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("List(%+v): requests %v, want %v", tc.f, got, want)
		}
	}
}

// Every write that sets a record's state files it under that state's
// shard, on every path: a claim of a new key, over a failed, uncertain or
// abandoned record, over an expired one; Complete; Fail, definite or not;
// an operator's Resolve. The table is read after each step.
func TestShardFollowsState(t *testing.T) {
	t.Parallel()
	client := newClient(dynalitetest.Endpoint(t), nil)
	layout := ledgerdynamo.Layout{Shards: 8}
	table := dynalitetest.NewTableWith(t, client, &ledgerdynamo.TableOptions{Layout: layout})
	clock := clock.NewFake(t0)
	s := ledgerdynamo.New(client, table, &ledgerdynamo.Config{Clock: clock, Layout: layout})
	ctx := context.Background()
	claim := func(key, owner string) error {
		p := params(key, owner)
		p.LeaseUntil, p.ExpiresAt = clock.Now().Add(30*time.Second), clock.Now().Add(time.Hour)
		res, err := s.Claim(ctx, p)
		if err == nil && !res.Claimed {
			err = fmt.Errorf("claim of %s not taken: %+v", key, res.Previous)
		}
		return err
	}
	failed := ledger.Failure{Definite: true, Reason: "400"}
	uncertain := ledger.Failure{Reason: "timeout"}
	for _, st := range []struct {
		name string
		do   func() error
	}{
		{"claim", func() error { return claim("k-1", "o1") }},
		{"complete", func() error { return s.Complete(ctx, "k-1", "o1", ledger.Completion{Summary: "sent"}) }},
		{"claim k-2", func() error { return claim("k-2", "o1") }},
		{"fail definite", func() error { return s.Fail(ctx, "k-2", "o1", failed) }},
		{"claim over failed", func() error { return claim("k-2", "o2") }},
		{"fail uncertain", func() error { return s.Fail(ctx, "k-2", "o2", uncertain) }},
		{"claim over uncertain", func() error { return claim("k-2", "o3") }},
		{"claim k-3", func() error { return claim("k-3", "o1") }},
		{"claim over abandoned", func() error { clock.Advance(time.Minute); return claim("k-3", "o2") }},
		{"claim over expired", func() error { clock.Advance(2 * time.Hour); return claim("k-1", "o2") }},
		{"fail k-1 uncertain", func() error { return s.Fail(ctx, "k-1", "o2", uncertain) }},
		{"resolve", func() error {
			_, err := ledger.Resolve(ctx, s, "k-1", ledger.Resolution{Done: true, Ref: "msg_1", Summary: "sent", By: "alice"}, clock.Now())
			return err
		}},
	} {
		if err := st.do(); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		out, err := client.Scan(ctx, &dynamodb.ScanInput{TableName: &table})
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range out.Items {
			key := it["pk"].(*types.AttributeValueMemberS).Value
			state := it["state"].(*types.AttributeValueMemberS).Value
			var shard string
			if v, ok := it["state_shard"].(*types.AttributeValueMemberS); ok {
				shard = v.Value
			}
			if want := layout.IndexKey(key, ledger.State(state)); shard != want {
				t.Errorf("after %s: %s is %s under shard %q, want %q", st.name, key, state, shard, want)
			}
		}
	}
}
