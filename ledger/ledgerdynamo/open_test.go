package ledgerdynamo_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/oncely/oncely/clock"
	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/ledger/ledgerdynamo"
	"github.com/oncely/oncely/ledger/ledgerdynamo/dynalitetest"
)

// describer is a dynalite client whose DescribeTable answers are stubs
// when desc is set: dynalite has no global tables, and no replica can
// run on this machine, so the answers DynamoDB gives for them are
// written by hand.
type describer struct {
	*dynamodb.Client
	desc  *types.TableDescription // nil: ask the server
	err   error
	calls atomic.Int32
}

func (d *describer) DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, opts ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error) {
	d.calls.Add(1)
	if d.err != nil {
		return nil, d.err
	}
	if d.desc == nil {
		return d.Client.DescribeTable(ctx, in, opts...)
	}
	return &dynamodb.DescribeTableOutput{Table: d.desc}, nil
}

// Open refuses, with one DescribeTable and an error matching
// ledger.ErrConfig that names the risk, a global table whose replicas are
// eventually consistent across Regions (the default, and the legacy
// global tables), unless Config.AllowEventualReplicas opts in; it
// accepts a table without replicas and one with multi-Region strong
// consistency, and refuses a missing table.
func TestOpenReplicas(t *testing.T) {
	t.Parallel()
	endpoint := dynalitetest.Endpoint(t)
	api := dynalitetest.NewClient(endpoint)
	table := dynalitetest.NewTable(t, api)
	replicas := []types.ReplicaDescription{
		{RegionName: aws.String("eu-west-1"), ReplicaStatus: types.ReplicaStatusActive},
		{RegionName: aws.String("us-east-1"), ReplicaStatus: types.ReplicaStatusActive},
	}
	global := func(c types.MultiRegionConsistency) *types.TableDescription {
		return &types.TableDescription{TableName: aws.String(table), TableStatus: types.TableStatusActive,
			GlobalTableVersion: aws.String("2019.11.21"), Replicas: replicas, MultiRegionConsistency: c}
	}
	for _, tc := range []struct {
		name  string
		table string
		desc  *types.TableDescription
		allow bool
		err   error  // nil: Open succeeds
		says  string // in the error
	}{
		{"no replicas (dynalite's own answer)", table, nil, false, nil, ""},
		{"replicas, consistency not stated", table, global(""), false, ledger.ErrConfig, "eu-west-1, us-east-1"},
		{"replicas, eventual", table, global(types.MultiRegionConsistencyEventual), false, ledger.ErrConfig, "both run it"},
		{"replicas, eventual, allowed", table, global(types.MultiRegionConsistencyEventual), true, nil, ""},
		{"replicas, strong", table, global(types.MultiRegionConsistencyStrong), false, nil, ""},
		{"legacy global table", table, &types.TableDescription{TableName: aws.String(table),
			GlobalTableVersion: aws.String("2017.11.29")}, false, ledger.ErrConfig, "AllowEventualReplicas"},
		{"missing table", table + "-missing", nil, false, ledger.ErrConfig, "does not exist"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d := &describer{Client: api, desc: tc.desc}
			store, err := ledgerdynamo.Open(context.Background(), d, tc.table,
				&ledgerdynamo.Config{AllowEventualReplicas: tc.allow, Clock: clock.NewFake(t0)})
			if n := d.calls.Load(); n != 1 {
				t.Errorf("%d DescribeTable calls, want 1", n)
			}
			if tc.err != nil {
				if !errors.Is(err, tc.err) || !strings.Contains(err.Error(), tc.says) || store != nil {
					t.Fatalf("Open = %v, %v; want an error matching %v that says %q", store, err, tc.err, tc.says)
				}
				if missing := tc.says == "does not exist"; errors.Is(err, ledgerdynamo.ErrNoTable) != missing {
					t.Errorf("Open = %v: matches ErrNoTable %v, want %v", err, !missing, missing)
				}
				return
			}
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			// The Store works.
			p := params("open-"+strings.ReplaceAll(tc.name, " ", "-"), "o1")
			if res, err := store.Claim(context.Background(), p); err != nil || !res.Claimed {
				t.Errorf("Claim = %+v, %v; want claimed", res, err)
			}
		})
	}
}

// Open reports a DescribeTable that fails as ErrUnavailable, and an
// invalid layout before any request.
func TestOpenErrors(t *testing.T) {
	t.Parallel()
	d := &describer{err: errors.New("connection refused")}
	if _, err := ledgerdynamo.Open(context.Background(), d, "t", nil); !errors.Is(err, ledger.ErrUnavailable) {
		t.Errorf("Open = %v, want ErrUnavailable", err)
	}
	d = &describer{}
	_, err := ledgerdynamo.Open(context.Background(), d, "t", &ledgerdynamo.Config{Layout: ledgerdynamo.Layout{SortKey: "sk"}})
	if !errors.Is(err, ledgerdynamo.ErrLayout) || d.calls.Load() != 0 {
		t.Errorf("Open = %v after %d DescribeTable calls, want ErrLayout and none", err, d.calls.Load())
	}
}
