package ledgerdynamo

import (
	"context"
	"errors"
	"fmt"
	"slices"
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
}

// ErrSchema is returned by CreateTable when a table of that name exists
// with another key or without the state-lease_until index.
var ErrSchema = errors.New("ledgerdynamo: table exists with another schema")

// CreateTable creates the ledger table (on-demand capacity) with its
// state-lease_until index, waits until both are ACTIVE, and enables TTL on
// expires_at. It is idempotent: an existing table with the right key and
// index is accepted (ErrSchema otherwise), and TTL already enabled on
// expires_at is left alone. A server without the TTL API (dynalite answers
// UnknownOperationException) is tolerated: expired records are then never
// deleted, but they still read as absent.
func CreateTable(ctx context.Context, api TableAPI, table string, opts *TableOptions) error {
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
	_, err := api.CreateTable(ctx, createTableInput(table))
	var inUse *types.ResourceInUseException
	if err != nil && !errors.As(err, &inUse) {
		return fmt.Errorf("ledgerdynamo: create table %s: %w", table, err)
	}
	if err := waitActive(ctx, api, table, o); err != nil {
		return err
	}
	return enableTTL(ctx, api, table)
}

func createTableInput(table string) *dynamodb.CreateTableInput {
	return &dynamodb.CreateTableInput{
		TableName:   aws.String(table),
		BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String(attrKey), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String(attrState), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String(attrLeaseUntil), AttributeType: types.ScalarAttributeTypeN},
		},
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String(attrKey), KeyType: types.KeyTypeHash},
		},
		GlobalSecondaryIndexes: []types.GlobalSecondaryIndex{{
			IndexName: aws.String(IndexName),
			KeySchema: []types.KeySchemaElement{
				{AttributeName: aws.String(attrState), KeyType: types.KeyTypeHash},
				{AttributeName: aws.String(attrLeaseUntil), KeyType: types.KeyTypeRange},
			},
			// ALL: List returns whole records, result included (the
			// ledger contract); an INCLUDE list would name every attribute
			// anyway and silently miss any added later.
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeAll},
		}},
	}
}

// waitActive polls DescribeTable until the table and every index are
// ACTIVE, and checks the schema on the way.
func waitActive(ctx context.Context, api TableAPI, table string, o TableOptions) error {
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
		if err := checkSchema(d); err != nil {
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

func checkSchema(d *types.TableDescription) error {
	if d == nil {
		return errors.New("no description")
	}
	hashOnly := func(ks []types.KeySchemaElement, hash, rng string) bool {
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
	if !hashOnly(d.KeySchema, attrKey, "") {
		return fmt.Errorf("the key must be %s (hash) alone", attrKey)
	}
	for _, g := range d.GlobalSecondaryIndexes {
		if aws.ToString(g.IndexName) == IndexName {
			if !hashOnly(g.KeySchema, attrState, attrLeaseUntil) {
				return fmt.Errorf("index %s must be keyed on (%s, %s)", IndexName, attrState, attrLeaseUntil)
			}
			return nil
		}
	}
	return fmt.Errorf("index %s is missing", IndexName)
}

// enableTTL turns TTL on for expires_at unless it already is.
func enableTTL(ctx context.Context, api TableAPI, table string) error {
	desc, err := api.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(table)})
	if err != nil && !unsupported(err) {
		return fmt.Errorf("ledgerdynamo: describe TTL of %s: %w", table, err)
	}
	if err == nil && desc.TimeToLiveDescription != nil {
		ttl := desc.TimeToLiveDescription
		switch ttl.TimeToLiveStatus {
		case types.TimeToLiveStatusEnabled, types.TimeToLiveStatusEnabling:
			if attr := aws.ToString(ttl.AttributeName); attr != attrExpiresAt {
				return fmt.Errorf("%w: %s: TTL is on attribute %q, not %s", ErrSchema, table, attr, attrExpiresAt)
			}
			return nil
		}
	}
	_, err = api.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
		TableName: aws.String(table),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{
			AttributeName: aws.String(attrExpiresAt),
			Enabled:       aws.Bool(true),
		},
	})
	if err != nil && !unsupported(err) {
		return fmt.Errorf("ledgerdynamo: enable TTL on %s: %w", table, err)
	}
	return nil
}

// unsupported reports whether the server does not implement the operation
// (dynalite has no UpdateTimeToLive).
func unsupported(err error) bool {
	var api smithy.APIError
	return errors.As(err, &api) && api.ErrorCode() == "UnknownOperationException"
}
