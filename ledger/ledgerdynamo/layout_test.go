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

	"github.com/idemkit/idemkit/client"
	"github.com/idemkit/idemkit/ledger"
	"github.com/idemkit/idemkit/ledger/ledgerdynamo"
	"github.com/idemkit/idemkit/ledger/ledgerdynamo/dynalitetest"
	"github.com/idemkit/idemkit/ledger/ledgertest"
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
	{"attributes", ledgerdynamo.Layout{Attributes: powertools, Index: "status-in_progress_expiration"}},
	{"partition value", ledgerdynamo.Layout{
		Attributes:        ledgerdynamo.Attributes{Key: "PK"},
		PartitionKeyValue: "IDEMKIT", SortKey: "SK",
	}},
	{"key prefix", ledgerdynamo.Layout{KeyPrefix: "idem#"}},
	{"all", ledgerdynamo.Layout{
		Attributes:        ledgerdynamo.Attributes{Key: "PK", State: "status", ExpiresAt: "ttl", Owner: "name"},
		PartitionKeyValue: "TENANT#7", SortKey: "SK", KeyPrefix: "LEDGER#", Index: "GSI1",
	}},
}

// The conformance suite on each layout.
func TestConformanceLayouts(t *testing.T) {
	t.Parallel()
	api := newClient(dynalitetest.Endpoint(t), nil)
	for _, l := range layouts {
		t.Run(l.name, func(t *testing.T) {
			t.Parallel()
			ledgertest.Run(t, func(t *testing.T, clock ledger.Clock) ledger.Store {
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
		{"prefix in one partition", tenant("IDEM", "a#"), tenant("IDEM", "b#")},
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
// layout on every layout: fresh 2, replay 2 on dynalite (1 where the
// server returns the blocking item, see TestExecutorRequests).
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
				{reply(42, "first reply"), client.Executed, map[string]int{"UpdateItem": 2}},
				{reply("42", "reworded reply"), client.AlreadyDone, map[string]int{"UpdateItem": 1, "GetItem": 1}},
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

// Every attribute of every expression goes through a #placeholder, so
// that any name, a reserved word included, works; and the claim's
// condition has no nested parentheses (dynalite parses those slowly).
func TestExpressionsUsePlaceholders(t *testing.T) {
	t.Parallel()
	// Upper-case names: a placeholder is lower-case, so an upper-case
	// letter in an expression would be a name written out.
	attrs := ledgerdynamo.Attributes{Key: "K", State: "S", Owner: "O", LeaseUntil: "L", ExpiresAt: "E",
		Fingerprint: "F", Summary: "SU", Ref: "R", Result: "RE", Truncated: "T", Reason: "REA",
		Attempts: "A", AttemptAt: "AA", RunID: "RU", Tool: "TO", UpdatedAt: "U"}
	layout := ledgerdynamo.Layout{Attributes: attrs, PartitionKeyValue: "P", SortKey: "SK", KeyPrefix: "X#"}
	rec := &recorder{}
	s := ledgerdynamo.New(rec, "t", &ledgerdynamo.Config{Layout: layout})
	ctx := context.Background()
	now := time.Now()
	if _, err := s.Claim(ctx, ledger.ClaimParams{Key: "k", Owner: "o", LeaseUntil: now.Add(time.Minute), ExpiresAt: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	steps := []error{
		s.Complete(ctx, "k", "o", ledger.Completion{Summary: "s", Ref: "r", Result: []byte("{}")}),
		s.Fail(ctx, "k", "o", ledger.Failure{Definite: true, Reason: "r"}),
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
		case *dynamodb.GetItemInput:
			key = in.Key
		case *dynamodb.QueryInput:
			exprs, names = []*string{in.KeyConditionExpression, in.FilterExpression}, in.ExpressionAttributeNames
			if aws.ToString(in.IndexName) != ledgerdynamo.IndexName {
				t.Errorf("Query on index %q", aws.ToString(in.IndexName))
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
	if len(rec.in) != 9 { // claim, complete, fail, extend, get, a query per state
		t.Errorf("%d requests recorded, want 9", len(rec.in))
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
	if got, want := keys(d.GlobalSecondaryIndexes[0].KeySchema), []string{"status HASH", "lease_until RANGE"}; !slices.Equal(got, want) {
		t.Errorf("index key %v, want %v", got, want)
	}
	// Again with the same layout: accepted.
	if err := ledgerdynamo.CreateTable(ctx, api, table, &ledgerdynamo.TableOptions{Layout: l}); err != nil {
		t.Errorf("CreateTable again = %v", err)
	}
	for _, other := range []ledgerdynamo.Layout{
		{},
		{Attributes: l.Attributes, PartitionKeyValue: "P", SortKey: "other", Index: l.Index},
		{Attributes: l.Attributes, PartitionKeyValue: "P", SortKey: "SK"},
	} {
		if err := ledgerdynamo.CreateTable(ctx, api, table, &ledgerdynamo.TableOptions{Layout: other}); !errors.Is(err, ledgerdynamo.ErrSchema) {
			t.Errorf("CreateTable with layout %+v over the table = %v; want ErrSchema", other, err)
		}
	}
}
