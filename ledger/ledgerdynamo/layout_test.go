package ledgerdynamo_test

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/clock"
	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/ledger/ledgerdynamo"
	"github.com/oncely/oncely/ledger/ledgerdynamo/dynalitetest"
	"github.com/oncely/oncely/ledger/ledgertest"
)

// powertools names the attributes as a table made for Powertools for AWS
// Lambda does (several of them DynamoDB reserved words: status, data).
var powertools = ledgerdynamo.Attributes{
	Key:         "id",
	State:       "status",
	ExpiresAt:   "expiration",
	LeaseUntil:  "in_progress_expiration",
	Result:      "data",
	Fingerprint: "validation",
}

// layouts are the non-default layouts every test here runs on.
var layouts = []struct {
	name   string
	layout ledgerdynamo.Layout
}{
	// Few shards: the suite's walks list one record a page, a Query per
	// shard (see TestConformance).
	{"attributes", ledgerdynamo.Layout{Attributes: powertools, Index: "status-in_progress_expiration", Shards: 2}},
	{"partition value", ledgerdynamo.Layout{
		Attributes:        ledgerdynamo.Attributes{Key: "PK"},
		PartitionKeyValue: "ONCELY", SortKey: "SK", Shards: 2,
	}},
	{"key prefix", ledgerdynamo.Layout{KeyPrefix: "oncely#", Shards: 2}},
	{"sharded", ledgerdynamo.Layout{Shards: 4}},
	{"unsharded", ledgerdynamo.Layout{Shards: ledgerdynamo.Unsharded}},
	{"all", ledgerdynamo.Layout{
		Attributes:        ledgerdynamo.Attributes{Key: "PK", State: "status", ExpiresAt: "ttl", Owner: "name", Shard: "status_shard"},
		PartitionKeyValue: "TENANT#7", SortKey: "SK", KeyPrefix: "LEDGER#", Index: "GSI1", Shards: 3,
	}},
}

// The conformance suite on each layout.
func TestConformanceLayouts(t *testing.T) {
	t.Parallel()
	api := newClient(dynalitetest.Endpoint(t), nil)
	for _, l := range layouts {
		t.Run(l.name, func(t *testing.T) {
			t.Parallel()
			ledgertest.Run(t, func(t *testing.T, clock clock.Clock) ledger.Store {
				table := dynalitetest.NewTableWith(t, api, &ledgerdynamo.TableOptions{Layout: l.layout})
				return ledgerdynamo.New(api, table, &ledgerdynamo.Config{Clock: clock, Layout: l.layout})
			})
		})
	}
}

// Layouts that share a table, apart by partition value or key prefix,
// never see each other's records: the same action key is claimed once in
// each, Get finds only its own, List lists only its own.
func TestLayoutsShareTable(t *testing.T) {
	t.Parallel()
	api := newClient(dynalitetest.Endpoint(t), nil)
	ctx := context.Background()
	tenant := func(pkv, prefix string) ledgerdynamo.Layout {
		return ledgerdynamo.Layout{Attributes: ledgerdynamo.Attributes{Key: "PK"}, PartitionKeyValue: pkv, SortKey: "SK", KeyPrefix: prefix}
	}
	for _, tc := range []struct {
		name string
		a, b ledgerdynamo.Layout
	}{
		{"key prefix", ledgerdynamo.Layout{KeyPrefix: "a#"}, ledgerdynamo.Layout{KeyPrefix: "b#"}},
		{"partition value", tenant("TENANT#a", ""), tenant("TENANT#b", "")},
		{"prefix in one partition", tenant("ONCELY", "a#"), tenant("ONCELY", "b#")},
		{"sharded", ledgerdynamo.Layout{KeyPrefix: "a#", Shards: 4}, ledgerdynamo.Layout{KeyPrefix: "b#", Shards: 4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			table := dynalitetest.NewTableWith(t, api, &ledgerdynamo.TableOptions{Layout: tc.a})
			a := ledgerdynamo.New(api, table, &ledgerdynamo.Config{Layout: tc.a})
			b := ledgerdynamo.New(api, table, &ledgerdynamo.Config{Layout: tc.b})
			now := time.Now()
			claim := func(s *ledgerdynamo.Store, key, owner string) ledger.ClaimResult {
				t.Helper()
				res, err := s.Claim(ctx, ledger.ClaimParams{Key: key, Owner: owner, Fingerprint: "fp",
					LeaseUntil: now.Add(time.Hour), ExpiresAt: now.Add(24 * time.Hour)})
				if err != nil {
					t.Fatal(err)
				}
				return res
			}
			if res := claim(a, "shared", "owner-a"); !res.Claimed || res.Previous != nil {
				t.Fatalf("a: Claim = %+v", res)
			}
			if err := a.Complete(ctx, "shared", "owner-a", ledger.Completion{Summary: "a's"}); err != nil {
				t.Fatal(err)
			}
			if res := claim(b, "shared", "owner-b"); !res.Claimed || res.Previous != nil {
				t.Fatalf("b: Claim of a key a completed = %+v; want a fresh claim", res)
			}
			claim(a, "only-a", "owner-a")
			if err := b.Complete(ctx, "only-a", "owner-a", ledger.Completion{}); !errors.Is(err, ledger.ErrNotOwner) {
				t.Errorf("b: Complete of a's claim = %v; want ErrNotOwner", err)
			}
			if _, err := b.Get(ctx, "only-a"); !errors.Is(err, ledger.ErrNotFound) {
				t.Errorf("b: Get of a's key = %v; want ErrNotFound", err)
			}
			for s, want := range map[*ledgerdynamo.Store][]string{a: {"only-a", "shared/done"}, b: {"shared/pending"}} {
				if rec, err := s.Get(ctx, "shared"); err != nil || rec.Key != "shared" {
					t.Errorf("Get = %+v, %v", rec, err)
				}
				// The index is eventually consistent on DynamoDB; poll.
				var got []string
				deadline := time.Now().Add(10 * time.Second)
				for {
					recs, err := s.List(ctx, ledger.Filter{})
					if err != nil {
						t.Fatal(err)
					}
					got = got[:0]
					for _, r := range recs {
						if r.Key == "only-a" {
							got = append(got, r.Key)
						} else {
							got = append(got, r.Key+"/"+string(r.State))
						}
					}
					slices.Sort(got)
					if slices.Equal(got, want) || time.Now().After(deadline) {
						break
					}
					time.Sleep(50 * time.Millisecond)
				}
				if !slices.Equal(got, want) {
					t.Errorf("List = %v, want %v", got, want)
				}
			}
		})
	}
}

// The requests of a call through the Executor are those of the default
// layout on every layout: fresh 2, plus an eventually consistent GetItem
// for the first claim of a run in the Store (ReadFirstSeen), a replay in
// the process that completed the action 1 (that GetItem; see
// TestExecutorRequests for other processes).
func TestExecutorRequestsLayouts(t *testing.T) {
	t.Parallel()
	for _, l := range layouts {
		t.Run(l.name, func(t *testing.T) {
			t.Parallel()
			c := newCounter(nil)
			api := newClient(dynalitetest.Endpoint(t), c)
			table := dynalitetest.NewTableWith(t, api, &ledgerdynamo.TableOptions{Layout: l.layout})
			exec, runs := newExecutor(t, ledgerdynamo.New(api, table, &ledgerdynamo.Config{Layout: l.layout}))
			c.take()
			for _, step := range []struct {
				call client.Call
				out  client.Outcome
				want map[string]int
			}{
				{reply(42, "first reply"), client.Executed, map[string]int{"GetItem": 1, "UpdateItem": 2}},
				{reply("42", "reworded reply"), client.AlreadyDone, map[string]int{"GetItem": 1}},
			} {
				execute(t, exec, step.call, step.out)
				if got := c.take(); fmt.Sprint(got) != fmt.Sprint(step.want) {
					t.Errorf("%v: requests %v, want %v", step.out, got, step.want)
				}
			}
			if n := runs.Load(); n != 1 {
				t.Errorf("tool ran %d times, want 1", n)
			}
		})
	}
}

// recorder is an API that records the inputs it is given and answers
// with empty outputs (nothing found, every condition true). It is safe for
// concurrent use (List queries the states at once).
type recorder struct {
	mu sync.Mutex
	in []any
}

func (r *recorder) record(in any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.in = append(r.in, in)
}

func (r *recorder) UpdateItem(_ context.Context, in *dynamodb.UpdateItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	r.record(in)
	return &dynamodb.UpdateItemOutput{}, nil
}

func (r *recorder) GetItem(_ context.Context, in *dynamodb.GetItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	r.record(in)
	return &dynamodb.GetItemOutput{}, nil
}

func (r *recorder) Query(_ context.Context, in *dynamodb.QueryInput, _ ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	r.record(in)
	return &dynamodb.QueryOutput{}, nil
}

func (r *recorder) BatchGetItem(_ context.Context, in *dynamodb.BatchGetItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	r.record(in)
	return &dynamodb.BatchGetItemOutput{}, nil
}

// Every attribute of every expression goes through a #placeholder, so
// that any name, a reserved word included, works; the claim's condition
// has no nested parentheses (dynalite parses those slowly); and, with
// shards, every write that sets the state files the record under that
// state's shard.
func TestExpressionsUsePlaceholders(t *testing.T) {
	t.Parallel()
	// Upper-case names: a placeholder is lower-case, so an upper-case
	// letter in an expression would be a name written out.
	attrs := ledgerdynamo.Attributes{Key: "K", State: "S", Owner: "O", LeaseUntil: "L", ExpiresAt: "E",
		Fingerprint: "F", Summary: "SU", Ref: "R", Result: "RE", Truncated: "T", Reason: "REA",
		Attempts: "A", AttemptAt: "AA", RunID: "RU", Tool: "TO", UpdatedAt: "U", Shard: "SH"}
	for _, tc := range []struct {
		shards  int
		index   string
		queries int
	}{
		{ledgerdynamo.Unsharded, ledgerdynamo.IndexName, 4},
		{2, ledgerdynamo.ShardedIndexName, 8},
	} {
		t.Run(fmt.Sprintf("shards=%d", tc.shards), func(t *testing.T) {
			t.Parallel()
			layout := ledgerdynamo.Layout{Attributes: attrs, PartitionKeyValue: "P", SortKey: "SK", KeyPrefix: "X#", Shards: tc.shards}
			rec := &recorder{}
			s := ledgerdynamo.New(rec, "t", &ledgerdynamo.Config{Layout: layout, ReadFirst: ledgerdynamo.ReadFirstNever})
			ctx := context.Background()
			now := time.Now()
			if _, err := s.Claim(ctx, ledger.ClaimParams{Key: "k", Owner: "o", LeaseUntil: now.Add(time.Minute), ExpiresAt: now.Add(time.Hour)}); err != nil {
				t.Fatal(err)
			}
			steps := []error{
				s.Complete(ctx, "k", "o", ledger.Completion{Summary: "s", Ref: "r", Result: []byte("{}")}),
				s.Fail(ctx, "k", "o", ledger.Failure{Definite: true, Reason: "r"}),
				s.Fail(ctx, "k", "o", ledger.Failure{Reason: "timeout"}),
				s.Extend(ctx, "k", "o", now.Add(time.Minute)),
			}
			_, err := s.Get(ctx, "k")
			steps = append(steps, ignore(err, ledger.ErrNotFound))
			_, err = s.List(ctx, ledger.Filter{RunID: "run", LeaseBefore: now})
			steps = append(steps, err)
			if err := errors.Join(steps...); err != nil {
				t.Fatal(err)
			}
			for i, in := range rec.in {
				var exprs []*string
				var names map[string]string
				var key map[string]types.AttributeValue
				switch in := in.(type) {
				case *dynamodb.UpdateItemInput:
					exprs, names, key = []*string{in.UpdateExpression, in.ConditionExpression}, in.ExpressionAttributeNames, in.Key
					if i == 0 {
						cond := aws.ToString(in.ConditionExpression)
						if depth := maxDepth(cond); depth > 1 {
							t.Errorf("claim condition nests parentheses %d deep: %s", depth, cond)
						}
					}
					checkShardSet(t, layout, "k", in)
				case *dynamodb.GetItemInput:
					key = in.Key
				case *dynamodb.QueryInput:
					exprs, names = []*string{in.KeyConditionExpression, in.FilterExpression}, in.ExpressionAttributeNames
					if aws.ToString(in.IndexName) != tc.index {
						t.Errorf("Query on index %q, want %q", aws.ToString(in.IndexName), tc.index)
					}
				}
				for _, e := range exprs {
					for _, m := range identRE.FindAllStringSubmatch(aws.ToString(e), -1) {
						if !slices.Contains(keywords, m[2]) {
							t.Errorf("request %d (%T): attribute name %s written out in %q", i, in, m[2], aws.ToString(e))
						}
					}
				}
				for ph, name := range names {
					if strings.ToLower(name) == name {
						t.Errorf("request %d: placeholder %s stands for %q, not a name of the layout", i, ph, name)
					}
				}
				if key != nil {
					got := map[string]string{}
					for name, v := range key {
						got[name] = v.(*types.AttributeValueMemberS).Value
					}
					if fmt.Sprint(got) != "map[K:P SK:X#k]" {
						t.Errorf("request %d: key %v, want K=P, SK=X#k", i, got)
					}
				}
			}
			// claim, complete, fail twice, extend, get, a query per index
			// partition key (the recorder finds nothing to fetch)
			if want := 6 + tc.queries; len(rec.in) != want {
				t.Errorf("%d requests recorded, want %d", len(rec.in), want)
			}
		})
	}
}

// stateSetRE finds the value an update expression assigns to the state.
var stateSetRE = regexp.MustCompile(`#state = (:\w+)`)

// checkShardSet checks that an update that sets the state of key's record
// also sets, on a sharded layout, the shard attribute to that state's
// index key, and never sets it on an unsharded one.
func checkShardSet(t *testing.T, l ledgerdynamo.Layout, key string, in *dynamodb.UpdateItemInput) {
	t.Helper()
	update := aws.ToString(in.UpdateExpression)
	m := stateSetRE.FindStringSubmatch(update)
	shard, sets := in.ExpressionAttributeValues[":state_shard"].(*types.AttributeValueMemberS)
	switch {
	case m == nil && sets:
		t.Errorf("%q sets the shard but not the state", update)
	case m == nil:
	case l.Shards == ledgerdynamo.Unsharded && strings.Contains(update, "#state_shard"):
		t.Errorf("%q sets the shard on an unsharded layout", update)
	case l.Shards == ledgerdynamo.Unsharded:
	case !sets || !strings.Contains(update, "#state_shard = :state_shard"):
		t.Errorf("%q sets the state but not the shard", update)
	default:
		state := in.ExpressionAttributeValues[m[1]].(*types.AttributeValueMemberS).Value
		if want := l.IndexKey(key, ledger.State(state)); shard.Value != want {
			t.Errorf("%q files state %s under %s, want %s", update, state, shard.Value, want)
		}
	}
}

// identRE finds the words of an expression that are neither #placeholders
// nor :values (submatch 2).
var identRE = regexp.MustCompile(`(^|[^#:\w])([A-Za-z_]\w*)`)

// keywords are the words an expression may hold besides placeholders and
// values.
var keywords = []string{"SET", "REMOVE", "AND", "OR", "NOT", "IN", "attribute_not_exists", "if_not_exists", "begins_with"}

func ignore(err, target error) error {
	if errors.Is(err, target) {
		return nil
	}
	return err
}

// maxDepth is how deeply the parentheses of expr nest.
func maxDepth(expr string) int {
	depth, most := 0, 0
	for _, r := range expr {
		switch r {
		case '(':
			depth++
			most = max(most, depth)
		case ')':
			depth--
		}
	}
	return most
}

// An invalid layout is a clear error matching ErrLayout, from Validate,
// from CreateTable and from every Store method, and no request is sent.
func TestLayoutInvalid(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		layout ledgerdynamo.Layout
		says   string
	}{
		{"partition value without sort key", ledgerdynamo.Layout{PartitionKeyValue: "P"}, "needs a SortKey"},
		{"sort key without partition value", ledgerdynamo.Layout{SortKey: "sk"}, "needs a PartitionKeyValue"},
		{"two attributes one name", ledgerdynamo.Layout{Attributes: ledgerdynamo.Attributes{Owner: "state"}}, `"state" is used for both state and owner`},
		{"a default name taken", ledgerdynamo.Layout{Attributes: ledgerdynamo.Attributes{Tool: "pk"}}, `"pk" is used for both pk and tool`},
		{"sort key is another attribute", ledgerdynamo.Layout{PartitionKeyValue: "P", SortKey: "expires_at"}, `"expires_at" is used for both`},
		{"sort key is the partition key", ledgerdynamo.Layout{PartitionKeyValue: "P", SortKey: "pk"}, `"pk" is used for both pk and sk`},
		{"index name", ledgerdynamo.Layout{Index: "a b"}, "index name"},
		{"long name", ledgerdynamo.Layout{Attributes: ledgerdynamo.Attributes{Ref: strings.Repeat("r", 256)}}, "1 to 255 bytes"},
		{"prefix not UTF-8", ledgerdynamo.Layout{KeyPrefix: "\xff"}, "KeyPrefix is not valid UTF-8"},
		{"negative shards", ledgerdynamo.Layout{Shards: -2}, "Shards -2: want 1 to 1000, 0 for 64, or -1 (Unsharded)"},
		{"too many shards", ledgerdynamo.Layout{Shards: ledgerdynamo.MaxShards + 1}, "Shards 1001"},
		{"shard attribute is the state", ledgerdynamo.Layout{Shards: 2, Attributes: ledgerdynamo.Attributes{Shard: "state"}}, `"state" is used for both state and state_shard`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			check := func(what string, err error) {
				t.Helper()
				if !errors.Is(err, ledgerdynamo.ErrLayout) || !strings.Contains(err.Error(), tc.says) {
					t.Errorf("%s = %v; want ErrLayout saying %q", what, err, tc.says)
				}
			}
			check("Validate", tc.layout.Validate())
			rec := &recorder{}
			s := ledgerdynamo.New(rec, "t", &ledgerdynamo.Config{Layout: tc.layout})
			ctx := context.Background()
			now := time.Now()
			_, err := s.Claim(ctx, ledger.ClaimParams{Key: "k", Owner: "o", LeaseUntil: now.Add(time.Minute), ExpiresAt: now.Add(time.Hour)})
			check("Claim", err)
			check("Complete", s.Complete(ctx, "k", "o", ledger.Completion{}))
			check("Fail", s.Fail(ctx, "k", "o", ledger.Failure{}))
			check("Extend", s.Extend(ctx, "k", "o", now))
			_, err = s.Get(ctx, "k")
			check("Get", err)
			_, err = s.List(ctx, ledger.Filter{})
			check("List", err)
			if len(rec.in) != 0 {
				t.Errorf("%d requests sent", len(rec.in))
			}
			check("CreateTable", ledgerdynamo.CreateTable(ctx, nil, "t", &ledgerdynamo.TableOptions{Layout: tc.layout}))
		})
	}
	for _, ok := range layouts {
		if err := ok.layout.Validate(); err != nil {
			t.Errorf("%s: Validate = %v", ok.name, err)
		}
	}
}

// The index partition key of a record: the state, or the state and the
// key's shard. The values are pinned: a record stays under the key it
// was written with, so the function may never change.
func TestIndexKey(t *testing.T) {
	t.Parallel()
	sha := "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
	for _, tc := range []struct {
		shards int
		key    string
		state  ledger.State
		want   string
	}{
		{ledgerdynamo.Unsharded, "k", ledger.StatePending, "pending"},
		{ledgerdynamo.Unsharded, sha, ledger.StateUncertain, "uncertain"},
		{0, "k", ledger.StatePending, "pending#42"}, // DefaultShards
		{0, sha, ledger.StateUncertain, "uncertain#39"},
		{1, sha, ledger.StateDone, "done#00"},
		{3, "", ledger.StateFailed, "failed#01"},
		{64, "k", ledger.StateDone, "done#42"},
		{64, sha, ledger.StatePending, "pending#39"},
		{ledgerdynamo.MaxShards, "k", ledger.StateDone, "done#410"},
	} {
		if got := (ledgerdynamo.Layout{Shards: tc.shards}).IndexKey(tc.key, tc.state); got != tc.want {
			t.Errorf("Shards %d: IndexKey(%q, %s) = %q, want %q", tc.shards, tc.key, tc.state, got, tc.want)
		}
	}
}

// CreateTable follows the layout: the key schema with the sort key, the
// index on the layout's names; a table of another layout is ErrSchema.
func TestCreateTableLayout(t *testing.T) {
	t.Parallel()
	api := newClient(dynalitetest.Endpoint(t), nil)
	ctx := context.Background()
	l := layouts[len(layouts)-1].layout
	table := dynalitetest.NewTableWith(t, api, &ledgerdynamo.TableOptions{Layout: l})
	out, err := api.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	if err != nil {
		t.Fatal(err)
	}
	keys := func(ks []types.KeySchemaElement) (s []string) {
		for _, k := range ks {
			s = append(s, aws.ToString(k.AttributeName)+" "+string(k.KeyType))
		}
		return s
	}
	d := out.Table
	if got, want := keys(d.KeySchema), []string{"PK HASH", "SK RANGE"}; !slices.Equal(got, want) {
		t.Errorf("key %v, want %v", got, want)
	}
	if len(d.GlobalSecondaryIndexes) != 1 || aws.ToString(d.GlobalSecondaryIndexes[0].IndexName) != "GSI1" {
		t.Fatalf("indexes %+v, want GSI1", d.GlobalSecondaryIndexes)
	}
	if got, want := keys(d.GlobalSecondaryIndexes[0].KeySchema), []string{"status_shard HASH", "lease_until RANGE"}; !slices.Equal(got, want) {
		t.Errorf("index key %v, want %v", got, want)
	}
	if p := d.GlobalSecondaryIndexes[0].Projection; p == nil || p.ProjectionType != types.ProjectionTypeInclude ||
		!slices.Equal(p.NonKeyAttributes, []string{"run_id", "ttl"}) {
		t.Errorf("index projection %+v, want INCLUDE run_id, ttl", p)
	}
	// Again with the same layout: accepted.
	if err := ledgerdynamo.CreateTable(ctx, api, table, &ledgerdynamo.TableOptions{Layout: l}); err != nil {
		t.Errorf("CreateTable again = %v", err)
	}
	for _, other := range []ledgerdynamo.Layout{
		{},
		{Attributes: l.Attributes, PartitionKeyValue: "P", SortKey: "other", Index: l.Index},
		{Attributes: l.Attributes, PartitionKeyValue: "P", SortKey: "SK"},
		{Attributes: l.Attributes, PartitionKeyValue: "P", SortKey: "SK", Index: l.Index, Shards: ledgerdynamo.Unsharded}, // GSI1 unsharded
	} {
		if err := ledgerdynamo.CreateTable(ctx, api, table, &ledgerdynamo.TableOptions{Layout: other}); !errors.Is(err, ledgerdynamo.ErrSchema) {
			t.Errorf("CreateTable with layout %+v over the table = %v; want ErrSchema", other, err)
		}
	}
}
