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

	"github.com/idemkit/idemkit/ledger"
	"github.com/idemkit/idemkit/ledger/ledgerdynamo"
	"github.com/idemkit/idemkit/ledger/ledgerdynamo/dynalitetest"
	"github.com/idemkit/idemkit/ledger/ledgertest"
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
	cfg := &ledgerdynamo.Config{Clock: ledgertest.NewClock(t0), Layout: layout, MaxAttempts: 5, InitialBackoff: time.Millisecond}
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
// shard of each state it lists, and a BatchGetItem per shard whose page
// holds records (the index holds keys only).
func TestListRequestsSharded(t *testing.T) {
	t.Parallel()
	c := newCounter(nil)
	client := newClient(dynalitetest.Endpoint(t), c)
	layout := ledgerdynamo.Layout{Shards: 4}
	table := dynalitetest.NewTableWith(t, client, &ledgerdynamo.TableOptions{Layout: layout})
	s := ledgerdynamo.New(client, table, &ledgerdynamo.Config{Clock: ledgertest.NewClock(t0), Layout: layout})
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
		want := map[string]int{"Query": tc.queries, "BatchGetItem": len(shards)}
		if got := c.take(); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("List(%+v): requests %v, want %v", tc.f, got, want)
		}
	}
}
