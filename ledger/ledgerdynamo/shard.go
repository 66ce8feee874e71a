package ledgerdynamo

import (
	"context"
	"slices"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/oncely/oncely/ledger"
)

// batchGetKeys is the most keys one BatchGetItem takes.
const batchGetKeys = 100

// fetchRecords returns the records that a page of entries of the
// sharded index stands for (key, state, LeaseUntil), read with
// consistent BatchGetItem requests (batchGetKeys keys each), in the
// page's order. An entry whose record has gone, moved (another state or
// lease than the entry's: the index lags the table, or a process on the
// unsharded layout wrote the record) or does not pass the filter is left
// out; the record is listed where the index holds it now.
func (s *Store) fetchRecords(ctx context.Context, entries []ledger.Record, f ledger.Filter, now time.Time) ([]ledger.Record, error) {
	keys := make([]item, len(entries))
	for i, e := range entries {
		keys[i] = s.lay.keyOf(e.Key)
	}
	got := map[string]*ledger.Record{}
	for chunk := range slices.Chunk(keys, batchGetKeys) {
		if err := s.batchGet(ctx, chunk, got); err != nil {
			return nil, err
		}
	}
	f.After = ledger.Cursor{}
	recs := make([]ledger.Record, 0, len(entries))
	for _, e := range entries {
		rec := got[e.Key]
		if rec == nil || rec.State != e.State || !f.Matches(rec, now) || millis(rec.LeaseUntil) != millis(e.LeaseUntil) {
			continue
		}
		recs = append(recs, *rec)
	}
	return recs, nil
}

// batchGet reads the items of keys (at most batchGetKeys) into got, by
// action key. Keys the server leaves unprocessed (throttling) are asked
// for again with the Store's backoff, as a throttled request would be.
func (s *Store) batchGet(ctx context.Context, keys []item, got map[string]*ledger.Record) error {
	var items []item
	err := s.do(ctx, "list", func(ctx context.Context) error {
		out, err := s.api.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{
			RequestItems: map[string]types.KeysAndAttributes{s.table: {Keys: keys, ConsistentRead: aws.Bool(true)}},
		}, noSDKRetry)
		if err != nil {
			return err
		}
		items = append(items, out.Responses[s.table]...)
		if keys = out.UnprocessedKeys[s.table].Keys; len(keys) > 0 {
			return &smithy.GenericAPIError{Code: "ProvisionedThroughputExceededException", Message: "unprocessed keys"}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, it := range items {
		rec, err := s.lay.decode(it)
		if err != nil {
			return unavailable("list", err)
		}
		got[rec.Key] = rec
	}
	return nil
}

// entryLease is the lease_until of an index entry, in milliseconds (-1
// when it has none).
func entryLease(l layout, e item) int64 {
	v, _ := e[l.attr[phLeaseUntil]].(*types.AttributeValueMemberN)
	if v == nil {
		return -1
	}
	ms, err := strconv.ParseInt(v.Value, 10, 64)
	if err != nil {
		return -1
	}
	return ms
}
