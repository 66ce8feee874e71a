package ledgerdynamo

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"golang.org/x/sync/errgroup"

	"github.com/oncely/oncely/ledger"
)

// InitAPI is the part of the DynamoDB client InitTable uses;
// *dynamodb.Client implements it.
type InitAPI interface {
	TableAPI
	UpdateTable(ctx context.Context, in *dynamodb.UpdateTableInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateTableOutput, error)
	Scan(ctx context.Context, in *dynamodb.ScanInput, opts ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
}

// InitReport says what InitTable found and did.
type InitReport struct {
	Table string
	// Created: the table did not exist, and InitTable created it.
	Created bool
	// Index is the layout's index (Layout.Index), Shards its number of
	// shards (0: unsharded).
	Index  string
	Shards int
	// IndexCreated: InitTable added the sharded index to the existing
	// table. DynamoDB fills it from the records that carry its key; on a
	// provisioned table it takes the table's throughput, IndexReadUnits
	// and IndexWriteUnits (0 on an on-demand table).
	IndexCreated                    bool
	IndexReadUnits, IndexWriteUnits int64
	// Unsharded names the table's index on (state, lease_until), the one
	// processes on the unsharded layout use, when the layout is sharded
	// and the table still has it; "" otherwise.
	Unsharded string
	// Scanned is the number of records read to file them under their
	// index shard, Filed the number whose shard attribute InitTable set,
	// and Changed the number written by another process meanwhile, left
	// as they were (run InitTable again). It reads the records when it
	// added the sharded index, or while the unsharded one remains.
	Scanned, Filed, Changed int
	// TTL is what became of TTL on the expiry attribute: "enabled",
	// "already enabled" or "not supported by the server".
	TTL string
}

// String says what InitTable did, a line per step.
func (r *InitReport) String() string {
	var b strings.Builder
	kind := "unsharded, projecting all attributes"
	if r.Shards > 0 {
		kind = fmt.Sprintf("%d shards, projecting the keys, run and expiry", r.Shards)
	}
	switch {
	case r.Created:
		fmt.Fprintf(&b, "table %s: created, with index %s (%s)\n", r.Table, r.Index, kind)
	case r.IndexCreated:
		fmt.Fprintf(&b, "table %s: exists\nindex %s (%s): created; DynamoDB fills it from the records that carry its key", r.Table, r.Index, kind)
		if r.IndexWriteUnits > 0 {
			fmt.Fprintf(&b, "; provisioned like the table: %d read and %d write units", r.IndexReadUnits, r.IndexWriteUnits)
		}
		b.WriteString("\n")
	default:
		fmt.Fprintf(&b, "table %s: exists, with index %s (%s)\n", r.Table, r.Index, kind)
	}
	if r.IndexCreated || r.Unsharded != "" {
		fmt.Fprintf(&b, "records: %d read, %d filed under their index shard", r.Scanned, r.Filed)
		if r.Changed > 0 {
			fmt.Fprintf(&b, ", %d changed meanwhile and left as they were (run init again)", r.Changed)
		}
		b.WriteString("\n")
	}
	if r.Unsharded != "" {
		fmt.Fprintf(&b, "index %s (unsharded): still on the table, for the processes on the unsharded layout\n"+
			"  once every process uses %d shards, run init again (it files what they wrote meanwhile), then delete it:\n"+
			"  aws dynamodb update-table --table-name %s --global-secondary-index-updates '[{\"Delete\":{\"IndexName\":\"%s\"}}]'\n",
			r.Unsharded, r.Shards, r.Table, r.Unsharded)
	}
	fmt.Fprintf(&b, "TTL: %s", r.TTL)
	return b.String()
}

// InitTable prepares the table for the layout of opts and reports what
// it did. It creates the table as CreateTable does; on an existing table
// with a sharded layout (Layout.Shards) it also adds the sharded index
// when the table lacks it (UpdateTable; the table's other indexes stay),
// and files every record under its index shard: it scans the table and
// sets the shard attribute where it is missing or stale, each write
// conditional on the record's state being the one read. It scans when it
// added the index, and on every run while the table still has the
// unsharded index: processes on the unsharded layout keep writing records
// without the shard attribute until they switch, and a run after the
// switch files those. It then waits until the table and its indexes are
// ACTIVE (opts.Timeout; run it again if DynamoDB is still filling the
// index) and enables TTL. A server that accepts UpdateTable but does not
// add the index (dynalite) makes it fail with ErrSchema.
func InitTable(ctx context.Context, api InitAPI, table string, opts *TableOptions) (*InitReport, error) {
	o, l, err := opts.resolve()
	if err != nil {
		return nil, err
	}
	rep := &InitReport{Table: table, Index: l.index, Shards: l.shards}
	if rep.Created, err = l.create(ctx, api, table); err != nil {
		return nil, err
	}
	if !rep.Created && l.shards > 0 {
		out, err := api.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
		if err != nil {
			return nil, fmt.Errorf("ledgerdynamo: describe table %s: %w", table, err)
		}
		d := out.Table
		has := false
		for _, g := range d.GlobalSecondaryIndexes {
			has = has || aws.ToString(g.IndexName) == l.index
			if keyed(g.KeySchema, l.attr[phState], l.attr[phLeaseUntil]) {
				rep.Unsharded = aws.ToString(g.IndexName)
			}
		}
		if !has {
			if err := l.addIndex(ctx, api, table, d, rep); err != nil {
				return nil, err
			}
		}
		if rep.IndexCreated || rep.Unsharded != "" {
			if err := l.fileRecords(ctx, api, table, rep); err != nil {
				return nil, err
			}
		}
	}
	if err := l.waitActive(ctx, api, table, o); err != nil {
		return nil, err
	}
	if rep.TTL, err = enableTTL(ctx, api, table, l.attr[phExpiresAt]); err != nil {
		return nil, err
	}
	return rep, nil
}

// addIndex adds the layout's index to the table described by d. On a
// provisioned table the index needs its own throughput: it takes the
// table's.
func (l layout) addIndex(ctx context.Context, api InitAPI, table string, d *types.TableDescription, rep *InitReport) error {
	g := l.globalIndex()
	create := &types.CreateGlobalSecondaryIndexAction{IndexName: g.IndexName, KeySchema: g.KeySchema, Projection: g.Projection}
	onDemand := d.BillingModeSummary != nil && d.BillingModeSummary.BillingMode == types.BillingModePayPerRequest
	if pt := d.ProvisionedThroughput; !onDemand && pt != nil && aws.ToInt64(pt.WriteCapacityUnits) > 0 {
		create.ProvisionedThroughput = &types.ProvisionedThroughput{
			ReadCapacityUnits: pt.ReadCapacityUnits, WriteCapacityUnits: pt.WriteCapacityUnits,
		}
		rep.IndexReadUnits, rep.IndexWriteUnits = aws.ToInt64(pt.ReadCapacityUnits), aws.ToInt64(pt.WriteCapacityUnits)
	}
	_, err := api.UpdateTable(ctx, &dynamodb.UpdateTableInput{
		TableName:                   aws.String(table),
		AttributeDefinitions:        l.indexAttributes(),
		GlobalSecondaryIndexUpdates: []types.GlobalSecondaryIndexUpdate{{Create: create}},
	})
	if err != nil {
		return fmt.Errorf("ledgerdynamo: add index %s to %s: %w", l.index, table, err)
	}
	rep.IndexCreated = true
	return nil
}

// fileWrites bounds the shard attribute writes fileRecords runs at once.
const fileWrites = 16

// fileRecords scans the table's records (eventually consistent: each
// write checks the state it read) and sets the shard attribute of those
// where it is missing or is not the one of their state.
func (l layout) fileRecords(ctx context.Context, api InitAPI, table string, rep *InitReport) error {
	proj := phKey + ", " + phState + ", " + phShard
	if l.pkv != "" {
		proj += ", " + phSortKey
	}
	filter, values := l.filter()
	if len(values) == 0 {
		values = nil
	}
	var mu sync.Mutex
	count := func(n *int) {
		mu.Lock()
		defer mu.Unlock()
		*n++
	}
	var start item
	for {
		out, err := api.Scan(ctx, &dynamodb.ScanInput{
			TableName:                 aws.String(table),
			ProjectionExpression:      aws.String(proj),
			FilterExpression:          optional(filter),
			ExpressionAttributeNames:  l.names(proj, filter),
			ExpressionAttributeValues: values,
			ExclusiveStartKey:         start,
		})
		if err != nil {
			return fmt.Errorf("ledgerdynamo: scan %s: %w", table, err)
		}
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(fileWrites)
		for _, it := range out.Items {
			key, err := l.actionKey(it)
			state, _ := it[l.attr[phState]].(*types.AttributeValueMemberS)
			if err != nil || state == nil || !ledger.State(state.Value).Valid() {
				continue // not a record of this layout
			}
			rep.Scanned++
			want := l.indexKey(key, ledger.State(state.Value))
			cond, vals := "#state = :state AND attribute_not_exists(#state_shard)", item{":state": state, ":state_shard": sv(want)}
			switch cur, _ := it[l.attr[phShard]].(*types.AttributeValueMemberS); {
			case cur != nil && cur.Value == want:
				continue
			case cur != nil:
				cond, vals[":old"] = "#state = :state AND #state_shard = :old", cur
			}
			set := "SET #state_shard = :state_shard"
			g.Go(func() error {
				_, err := api.UpdateItem(gctx, &dynamodb.UpdateItemInput{
					TableName:                 aws.String(table),
					Key:                       l.keyOf(key),
					UpdateExpression:          aws.String(set),
					ConditionExpression:       aws.String(cond),
					ExpressionAttributeNames:  l.names(set, cond),
					ExpressionAttributeValues: vals,
				})
				var changed *types.ConditionalCheckFailedException
				switch {
				case errors.As(err, &changed):
					count(&rep.Changed)
				case err != nil:
					return fmt.Errorf("ledgerdynamo: file %q under its index shard: %w", key, err)
				default:
					count(&rep.Filed)
				}
				return nil
			})
		}
		if err := g.Wait(); err != nil {
			return err
		}
		if start = out.LastEvaluatedKey; len(start) == 0 {
			return nil
		}
	}
}
