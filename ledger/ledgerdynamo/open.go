package ledgerdynamo

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/oncely/oncely/ledger"
)

// OpenAPI is what Open needs: the Store's API and DescribeTable;
// *dynamodb.Client implements it.
type OpenAPI interface {
	API
	DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, opts ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
}

// ErrNoTable is matched by the error of Open when the table does not
// exist (with ledger.ErrConfig).
var ErrNoTable = errors.New("no such table")

// legacyGlobalTables is the GlobalTableVersion of the first global tables,
// which replicate with eventual consistency only.
const legacyGlobalTables = "2017.11.29"

// Open returns a Store on the table, as New does, after one DescribeTable
// that checks the table can keep the ledger's promise:
//
//   - The table must exist; a missing one is an error matching
//     ledger.ErrConfig and ErrNoTable.
//   - A global table whose replicas are eventually consistent across
//     Regions (MultiRegionConsistency EVENTUAL, the default, or a legacy
//     global table) is refused with an error matching ledger.ErrConfig,
//     unless Config.AllowEventualReplicas is set. On such a table each
//     Region checks a claim's condition against its own replica and
//     settles concurrent writes by last writer wins, silently: two
//     agents claiming one action in two Regions both succeed, and both
//     run it. Multi-Region strong consistency (STRONG) is accepted.
//
// An invalid cfg.Layout is the error of Layout.Validate (matching
// ErrLayout), before any request; a DescribeTable that fails otherwise
// wraps ledger.ErrUnavailable. The principal needs dynamodb:DescribeTable
// on the table besides what New's Store needs.
func Open(ctx context.Context, api OpenAPI, table string, cfg *Config) (*Store, error) {
	s := New(api, table, cfg)
	if s.err != nil {
		return nil, s.err
	}
	var out *dynamodb.DescribeTableOutput
	err := s.do(ctx, "describe table", func(ctx context.Context) (err error) {
		out, err = api.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)}, noSDKRetry)
		return err
	})
	var missing *types.ResourceNotFoundException
	switch {
	case errors.As(err, &missing):
		return nil, fmt.Errorf("%w: ledgerdynamo: table %s does not exist (%w; CreateTable or oncely ledger init creates it)", ledger.ErrConfig, table, ErrNoTable)
	case err != nil:
		return nil, err
	}
	if err := checkReplicas(table, out.Table, s.cfg.AllowEventualReplicas); err != nil {
		return nil, err
	}
	return s, nil
}

// checkReplicas refuses a table whose replicas in other Regions are
// eventually consistent, unless allowed.
func checkReplicas(table string, d *types.TableDescription, allow bool) error {
	if d == nil || allow {
		return nil
	}
	legacy := aws.ToString(d.GlobalTableVersion) == legacyGlobalTables
	if !legacy && (len(d.Replicas) == 0 || d.MultiRegionConsistency == types.MultiRegionConsistencyStrong) {
		return nil
	}
	var regions []string
	for _, r := range d.Replicas {
		regions = append(regions, aws.ToString(r.RegionName))
	}
	where := "in other Regions"
	if len(regions) > 0 {
		where = "in " + strings.Join(regions, ", ")
	}
	return fmt.Errorf("%w: ledgerdynamo: table %s has replicas %s with eventual multi-Region consistency: "+
		"each Region checks a claim against its own replica and keeps the last write, so two Regions can both claim "+
		"one action and both run it; send every ledger write to one Region and set Config.AllowEventualReplicas, "+
		"or use a table with multi-Region strong consistency", ledger.ErrConfig, table, where)
}
