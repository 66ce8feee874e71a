package ledgerdynamo

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	"github.com/cenkalti/backoff/v4"
)

// TableAPI is the part of the DynamoDB client CreateTable uses;
// *dynamodb.Client implements it.
type TableAPI interface {
	CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, opts ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
	DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, opts ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
	DescribeTimeToLive(ctx context.Context, in *dynamodb.DescribeTimeToLiveInput, opts ...func(*dynamodb.Options)) (*dynamodb.DescribeTimeToLiveOutput, error)
	UpdateTimeToLive(ctx context.Context, in *dynamodb.UpdateTimeToLiveInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateTimeToLiveOutput, error)
}

// TableOptions tune CreateTable. The zero value (or nil) gives the defaults.
type TableOptions struct {
	// Timeout bounds the wait for the table and its index to become
	// ACTIVE (default 5 minutes); the context may end it sooner.
	Timeout time.Duration
	// PollInterval is the first pause between DescribeTable calls while
	// waiting; it doubles up to 5s (default 200ms).
	PollInterval time.Duration
	// Layout is the layout of the Stores that will use the table
	// (Config.Layout): it gives the key schema (with the sort key when it
	// sets one), the index's name and key, and the TTL attribute.
	Layout Layout
}

// ErrSchema is returned by CreateTable when a table of that name exists
// with another key, without the index, or with TTL on another attribute.
var ErrSchema = errors.New("ledgerdynamo: table exists with another schema")

// CreateTable creates the ledger table (on-demand capacity) with its
// index (state-lease_until; with opts.Layout.Shards the sharded one),
// waits until both are ACTIVE, and enables TTL on expires_at; with
// opts.Layout, the key, index and TTL attribute are the layout's. It is
// idempotent: an existing table with the right key and index is accepted
// (ErrSchema otherwise), and TTL already enabled on the expiry attribute
// is left alone. It never changes an existing table's key or indexes:
// InitTable adds the sharded index to a table made without it. An
// invalid layout is an error matching ErrLayout, before any request. A
// server without the TTL API (dynalite answers UnknownOperationException)
// is tolerated: expired records are then never deleted, but they still
// read as absent.
func CreateTable(ctx context.Context, api TableAPI, table string, opts *TableOptions) error {
	o, l, err := opts.resolve()
	if err != nil {
		return err
	}
	if _, err := l.create(ctx, api, table); err != nil {
		return err
	}
	if err := l.waitActive(ctx, api, table, o); err != nil {
		return err
	}
	_, err = enableTTL(ctx, api, table, l.attr[phExpiresAt])
	return err
}

// resolve applies the defaults of the options and resolves the layout.
func (opts *TableOptions) resolve() (TableOptions, layout, error) {
	o := TableOptions{}
	if opts != nil {
		o = *opts
	}
	if o.Timeout <= 0 {
		o.Timeout = 5 * time.Minute
	}
	if o.PollInterval <= 0 {
		o.PollInterval = 200 * time.Millisecond
	}
	l, err := o.Layout.resolve()
	return o, l, err
}

// create creates the table unless it exists, and reports whether it did.
func (l layout) create(ctx context.Context, api TableAPI, table string) (bool, error) {
	_, err := api.CreateTable(ctx, l.createTableInput(table))
	var inUse *types.ResourceInUseException
	switch {
	case errors.As(err, &inUse):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("ledgerdynamo: create table %s: %w", table, err)
	}
	return true, nil
}

// tableKey is the table's key schema: the partition key, and the sort
// key when the layout has one.
func (l layout) tableKey() (hash, rng string) {
	if l.pkv != "" {
		return l.attr[phKey], l.attr[phSortKey]
	}
	return l.attr[phKey], ""
}

func (l layout) createTableInput(table string) *dynamodb.CreateTableInput {
	hash, rng := l.tableKey()
	defs := append([]types.AttributeDefinition{{AttributeName: aws.String(hash), AttributeType: types.ScalarAttributeTypeS}},
		l.indexAttributes()...)
	key := []types.KeySchemaElement{{AttributeName: aws.String(hash), KeyType: types.KeyTypeHash}}
	if rng != "" {
		defs = append(defs, types.AttributeDefinition{AttributeName: aws.String(rng), AttributeType: types.ScalarAttributeTypeS})
		key = append(key, types.KeySchemaElement{AttributeName: aws.String(rng), KeyType: types.KeyTypeRange})
	}
	return &dynamodb.CreateTableInput{
		TableName:              aws.String(table),
		BillingMode:            types.BillingModePayPerRequest,
		AttributeDefinitions:   defs,
		KeySchema:              key,
		GlobalSecondaryIndexes: []types.GlobalSecondaryIndex{l.globalIndex()},
	}
}

// indexAttributes defines the attributes of the index's key.
func (l layout) indexAttributes() []types.AttributeDefinition {
	return []types.AttributeDefinition{
		{AttributeName: aws.String(l.attr[l.indexPH()]), AttributeType: types.ScalarAttributeTypeS},
		{AttributeName: aws.String(l.attr[phLeaseUntil]), AttributeType: types.ScalarAttributeTypeN},
	}
}

// globalIndex is the index List queries: on (state, lease_until)
// projecting ALL attributes, or with shards on (state_shard, lease_until)
// projecting the keys, the run and the expiry.
//
// The unsharded index projects ALL: List returns whole records from it,
// result included (the ledger contract). The sharded one projects what
// List filters and orders on (the keys, run_id and expires_at: under a
// hundred bytes beside the action key), and List fetches the records of
// the page it returns (BatchGetItem): with ALL, a completion would write
// its whole record, result included (up to ledger.MaxResultBytes), to
// one index partition key of the done state, a write unit per KB, so
// that no number of shards would bound a key's write rate; this way every
// index write is one unit. Listing is rare (the sweeper, the CLI); the
// writes are every action's. Projecting more (summaries and reasons, up
// to 4 KB each) would make index writes several units, and List would
// still fetch done records for their results.
func (l layout) globalIndex() types.GlobalSecondaryIndex {
	proj := &types.Projection{ProjectionType: types.ProjectionTypeAll}
	if l.shards > 0 {
		proj = &types.Projection{ProjectionType: types.ProjectionTypeInclude, NonKeyAttributes: l.projected()}
	}
	return types.GlobalSecondaryIndex{
		IndexName: aws.String(l.index),
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String(l.attr[l.indexPH()]), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String(l.attr[phLeaseUntil]), KeyType: types.KeyTypeRange},
		},
		Projection: proj,
	}
}

// projected lists the attributes, besides the keys, that the sharded
// index projects: those List's queries filter on.
func (l layout) projected() []string {
	return []string{l.attr[phRunID], l.attr[phExpiresAt]}
}

// projects reports whether the index projection p holds the attributes
// List's queries read from the sharded index.
func (l layout) projects(p *types.Projection) bool {
	if p == nil {
		return false
	}
	if p.ProjectionType == types.ProjectionTypeAll {
		return true
	}
	for _, a := range l.projected() {
		if !slices.Contains(p.NonKeyAttributes, a) {
			return false
		}
	}
	return p.ProjectionType == types.ProjectionTypeInclude
}

// waitActive polls DescribeTable until the table and every index are
// ACTIVE, and checks the schema on the way.
func (l layout) waitActive(ctx context.Context, api TableAPI, table string, o TableOptions) error {
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	b := backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(o.PollInterval),
		backoff.WithMaxInterval(5*time.Second),
		backoff.WithMaxElapsedTime(0),
	)
	for {
		out, err := api.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
		if err != nil {
			return fmt.Errorf("ledgerdynamo: describe table %s: %w", table, err)
		}
		d := out.Table
		if err := l.checkSchema(d); err != nil {
			return fmt.Errorf("%w: %s: %w", ErrSchema, table, err)
		}
		active := d.TableStatus == types.TableStatusActive
		for _, g := range d.GlobalSecondaryIndexes {
			active = active && g.IndexStatus == types.IndexStatusActive
		}
		if active {
			return nil
		}
		t := time.NewTimer(b.NextBackOff())
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("ledgerdynamo: table %s not active (status %s): %w", table, d.TableStatus, ctx.Err())
		case <-t.C:
		}
	}
}

func (l layout) checkSchema(d *types.TableDescription) error {
	if d == nil {
		return errors.New("no description")
	}
	switch hash, rng := l.tableKey(); {
	case !keyed(d.KeySchema, hash, rng) && rng == "":
		return fmt.Errorf("the key must be %s (hash) alone", hash)
	case !keyed(d.KeySchema, hash, rng):
		return fmt.Errorf("the key must be %s (hash) and %s (range)", hash, rng)
	}
	part, lease := l.attr[l.indexPH()], l.attr[phLeaseUntil]
	for _, g := range d.GlobalSecondaryIndexes {
		if aws.ToString(g.IndexName) == l.index {
			if !keyed(g.KeySchema, part, lease) {
				return fmt.Errorf("index %s must be keyed on (%s, %s)", l.index, part, lease)
			}
			if l.shards > 0 && !l.projects(g.Projection) {
				// A keys-only index of a development build: DynamoDB
				// cannot change an index's projection.
				return fmt.Errorf("index %s must project %s (INCLUDE or ALL); delete it and run InitTable (oncely ledger init) to add it again",
					l.index, strings.Join(l.projected(), " and "))
			}
			return nil
		}
	}
	if l.shards > 0 {
		return fmt.Errorf("index %s is missing (InitTable, or oncely ledger init, adds it)", l.index)
	}
	return fmt.Errorf("index %s is missing", l.index)
}

// keyed reports whether the key schema ks is hash, and rng when set.
func keyed(ks []types.KeySchemaElement, hash, rng string) bool {
	want := []string{hash, string(types.KeyTypeHash)}
	if rng != "" {
		want = append(want, rng, string(types.KeyTypeRange))
	}
	var got []string
	for _, k := range ks {
		got = append(got, aws.ToString(k.AttributeName), string(k.KeyType))
	}
	return slices.Equal(got, want)
}

// What enableTTL found or did.
const (
	ttlEnabled     = "enabled"
	ttlWasEnabled  = "already enabled"
	ttlUnsupported = "not supported by the server"
)

// enableTTL turns TTL on for the attribute expiry unless it already is,
// and says which (ttlEnabled, ttlWasEnabled, ttlUnsupported).
func enableTTL(ctx context.Context, api TableAPI, table, expiry string) (string, error) {
	desc, err := api.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(table)})
	if err != nil && !unsupported(err) {
		return "", fmt.Errorf("ledgerdynamo: describe TTL of %s: %w", table, err)
	}
	if err == nil && desc.TimeToLiveDescription != nil {
		ttl := desc.TimeToLiveDescription
		switch ttl.TimeToLiveStatus {
		case types.TimeToLiveStatusEnabled, types.TimeToLiveStatusEnabling:
			if attr := aws.ToString(ttl.AttributeName); attr != expiry {
				return "", fmt.Errorf("%w: %s: TTL is on attribute %q, not %s", ErrSchema, table, attr, expiry)
			}
			return ttlWasEnabled, nil
		}
	}
	_, err = api.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
		TableName: aws.String(table),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{
			AttributeName: aws.String(expiry),
			Enabled:       aws.Bool(true),
		},
	})
	switch {
	case err != nil && unsupported(err):
		return ttlUnsupported, nil
	case err != nil:
		return "", fmt.Errorf("ledgerdynamo: enable TTL on %s: %w", table, err)
	}
	return ttlEnabled, nil
}

// unsupported reports whether the server does not implement the operation
// (dynalite has no UpdateTimeToLive).
func unsupported(err error) bool {
	var api smithy.APIError
	return errors.As(err, &api) && api.ErrorCode() == "UnknownOperationException"
}
