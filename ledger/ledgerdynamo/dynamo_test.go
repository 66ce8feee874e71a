package ledgerdynamo_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/oncely/oncely/clock"
	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/ledger/ledgerdynamo"
	"github.com/oncely/oncely/ledger/ledgerdynamo/dynalitetest"
)

// newDynamo returns a Store on a fresh table of the test server whose
// requests c counts, and the clock it reads.
func newDynamo(t *testing.T) (*ledgerdynamo.Store, *counter, *clock.Fake) {
	t.Helper()
	c := newCounter(nil)
	client := newClient(dynalitetest.Endpoint(t), c)
	table := dynalitetest.NewTable(t, client)
	clock := clock.NewFake(t0)
	c.take()
	return ledgerdynamo.New(client, table, &ledgerdynamo.Config{Clock: clock}), c, clock
}

// Requests on the wire, counted by operation: what a Claim and a
// Complete cost.
func TestRequestsOnTheWire(t *testing.T) {
	t.Parallel()
	c := newCounter(nil)
	api := newClient(dynalitetest.Endpoint(t), c)
	table := dynalitetest.NewTable(t, api)
	clock := clock.NewFake(t0)
	store := ledgerdynamo.New(api, table, &ledgerdynamo.Config{Clock: clock})
	c.take()
	ctx := context.Background()
	want := func(what string, counts map[string]int) {
		t.Helper()
		if got := c.take(); fmt.Sprint(got) != fmt.Sprint(counts) {
			t.Errorf("%s: requests %v, want %v", what, got, counts)
		}
	}

	p := params("k-fresh", "owner-a")
	if res, err := store.Claim(ctx, p); err != nil || !res.Claimed {
		t.Fatalf("Claim = %+v, %v", res, err)
	}
	if err := store.Complete(ctx, p.Key, p.Owner, ledger.Completion{Summary: "ok"}); err != nil {
		t.Fatal(err)
	}
	want("Claim+Complete of a fresh key, the first of its run", map[string]int{"GetItem": 1, "UpdateItem": 2})

	// The Store has seen the key done (ReadFirstSeen): its replay is one
	// eventually consistent read.
	if res, err := store.Claim(ctx, params(p.Key, "owner-b")); err != nil || res.Claimed || res.Previous.State != ledger.StateDone {
		t.Fatalf("Claim of a done key = %+v, %v", res, err)
	}
	want("Claim of a done key seen done", map[string]int{"GetItem": 1})

	// A Store that has not seen it, nor acted in its run (another process
	// that resumes the run), reads first too.
	other := ledgerdynamo.New(api, table, &ledgerdynamo.Config{Clock: clock})
	if res, err := other.Claim(ctx, params(p.Key, "owner-c")); err != nil || res.Claimed || res.Previous.State != ledger.StateDone {
		t.Fatalf("Claim of a done key = %+v, %v", res, err)
	}
	want("Claim of a done key in another process", map[string]int{"GetItem": 1})

	// One that acted anew in the run claims; dynalite does not return the
	// old item with a failed condition: one GetItem more
	// (TestClaimBlockedByReturnedItem: 1 request where it does).
	if res, err := other.Claim(ctx, params("k-new-in-other", "owner-c")); err != nil || !res.Claimed {
		t.Fatalf("Claim of a new key = %+v, %v", res, err)
	}
	c.take()
	if res, err := other.Claim(ctx, params(p.Key, "owner-d")); err != nil || res.Claimed || res.Previous.State != ledger.StateDone {
		t.Fatalf("Claim of a done key = %+v, %v", res, err)
	}
	want("Claim of a done key in another process that acted anew", map[string]int{"UpdateItem": 1, "GetItem": 1})

	// A failed record: the claim expecting no record fails, the record is
	// read, and a second write takes it over (one request less where the
	// server returns the old item).
	fp := params("k-failed", "owner-a")
	if _, err := store.Claim(ctx, fp); err != nil {
		t.Fatal(err)
	}
	if err := store.Fail(ctx, fp.Key, fp.Owner, ledger.Failure{Definite: true, Reason: "declined"}); err != nil {
		t.Fatal(err)
	}
	c.take()
	if res, err := store.Claim(ctx, params(fp.Key, "owner-b")); err != nil || !res.Claimed || res.Attempt != 2 || res.Previous == nil || res.Previous.State != ledger.StateFailed {
		t.Fatalf("Claim over a failed record = %+v, %v; want claimed, attempt 2, previous failed", res, err)
	}
	want("Claim over a failed record", map[string]int{"GetItem": 1, "UpdateItem": 2})

	// A record expired but not yet deleted by TTL: the claim replaces it
	// with a second write, attempt back to 1.
	q := params("k-expired", "owner-a")
	q.ExpiresAt = t0.Add(time.Minute)
	if _, err := store.Claim(ctx, q); err != nil {
		t.Fatal(err)
	}
	if err := store.Fail(ctx, q.Key, q.Owner, ledger.Failure{Definite: true}); err != nil {
		t.Fatal(err)
	}
	c.take()
	clock.Set(q.ExpiresAt)
	r := params(q.Key, "owner-b")
	r.LeaseUntil, r.ExpiresAt = clock.Now().Add(time.Minute), clock.Now().Add(time.Hour)
	res, err := store.Claim(ctx, r)
	if err != nil || !res.Claimed || res.Previous != nil || res.Attempt != 1 {
		t.Fatalf("Claim over an expired record = %+v, %v; want claimed, attempt 1, no previous", res, err)
	}
	want("Claim over an expired record", map[string]int{"UpdateItem": 2, "GetItem": 1})
	if rec, err := store.Get(ctx, r.Key); err != nil || rec.Attempt != 1 || !rec.AttemptAt.Equal(clock.Now()) || rec.Owner != r.Owner {
		t.Errorf("record after the claim over an expired one = %+v, %v", rec, err)
	}

	// A heartbeat is one request while expires_at is beyond the new lease,
	// two when the lease outruns it: the second raises expires_at (the TTL
	// attribute) to the lease end, rounded up to the second.
	e := params("k-extend", "owner-a")
	e.LeaseUntil, e.ExpiresAt = clock.Now().Add(time.Minute), clock.Now().Add(time.Hour)
	if _, err := store.Claim(ctx, e); err != nil {
		t.Fatal(err)
	}
	c.take()
	if err := store.Extend(ctx, e.Key, e.Owner, clock.Now().Add(30*time.Minute)); err != nil {
		t.Fatal(err)
	}
	want("Extend within the expiry", map[string]int{"UpdateItem": 1})
	lease := clock.Now().Add(2*time.Hour + 500*time.Millisecond)
	if err := store.Extend(ctx, e.Key, e.Owner, lease); err != nil {
		t.Fatal(err)
	}
	want("Extend beyond the expiry", map[string]int{"UpdateItem": 2})
	if rec, err := store.Get(ctx, e.Key); err != nil || !rec.LeaseUntil.Equal(lease) || !rec.ExpiresAt.Equal(lease.Truncate(time.Second).Add(time.Second)) {
		t.Errorf("record after Extend beyond the expiry = %+v, %v; want lease %v and expires_at rounded up", rec, err, lease)
	}
}

// The largest record the ledger limits allow fits a DynamoDB item.
func TestLargestRecord(t *testing.T) {
	t.Parallel()
	store, _, _ := newDynamo(t)
	ctx := context.Background()
	long := strings.Repeat("k", ledger.MaxKeyBytes)
	p := ledger.ClaimParams{Key: long, Tool: long, RunID: long, Owner: long, Fingerprint: long,
		LeaseUntil: t0.Add(time.Minute), ExpiresAt: t0.Add(time.Hour)}
	if res, err := store.Claim(ctx, p); err != nil || !res.Claimed {
		t.Fatalf("Claim = %+v, %v", res, err)
	}
	c := ledger.Completion{
		Summary:   strings.Repeat("s", ledger.MaxSummaryBytes),
		Ref:       strings.Repeat("r", ledger.MaxRefBytes),
		Result:    bytes.Repeat([]byte{0xff}, ledger.MaxResultBytes),
		Truncated: true,
	}
	if err := store.Complete(ctx, p.Key, p.Owner, c); err != nil {
		t.Fatalf("Complete with every field at its limit: %v", err)
	}
	rec, err := store.Get(ctx, p.Key)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Summary != c.Summary || rec.Ref != c.Ref || !bytes.Equal(rec.Result, c.Result) || rec.Tool != long || rec.Fingerprint != long {
		t.Errorf("largest record did not round-trip")
	}
	if recs, err := store.List(ctx, ledger.Filter{State: ledger.StateDone}); err != nil || len(recs) != 1 || !bytes.Equal(recs[0].Result, c.Result) {
		t.Errorf("List of the largest record = %d records, %v", len(recs), err)
	}
}

// List follows the query's pages when the filter drops most of a page.
func TestListPages(t *testing.T) {
	t.Parallel()
	store, c, _ := newDynamo(t)
	ctx := context.Background()
	for i := range 60 {
		p := params(fmt.Sprintf("k-%02d", i), "owner")
		p.RunID = []string{"run-a", "run-b", "run-b"}[i%3]
		if _, err := store.Claim(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	c.take()
	got, err := store.List(ctx, ledger.Filter{State: ledger.StatePending, RunID: "run-a", Limit: 15})
	if err != nil || len(got) != 15 {
		t.Fatalf("List(run-a, Limit 15) = %d records, %v; want 15", len(got), err)
	}
	for _, r := range got {
		if r.RunID != "run-a" {
			t.Errorf("List(run-a) returned %s of %s", r.Key, r.RunID)
		}
	}
	if n := c.take()["Query"]; n < 2 {
		t.Errorf("List(run-a, Limit 15) took %d queries; a page of 15 holds only 5 of run-a", n)
	}
	if got, err := store.List(ctx, ledger.Filter{RunID: "run-a"}); err != nil || len(got) != 20 {
		t.Errorf("List(run-a) = %d records, %v; want 20", len(got), err)
	}
}

func TestCreateTable(t *testing.T) {
	t.Parallel()
	client := newClient(dynalitetest.Endpoint(t), nil)
	ctx := context.Background()
	table := dynalitetest.NewTable(t, client)

	// Idempotent: a second call accepts the table.
	if err := ledgerdynamo.CreateTable(ctx, client, table, nil); err != nil {
		t.Fatalf("CreateTable on an existing ledger table: %v", err)
	}
	out, err := client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	if err != nil {
		t.Fatal(err)
	}
	if d := out.Table; d.TableStatus != types.TableStatusActive || len(d.GlobalSecondaryIndexes) != 1 ||
		aws.ToString(d.GlobalSecondaryIndexes[0].IndexName) != ledgerdynamo.ShardedIndexName ||
		d.GlobalSecondaryIndexes[0].Projection.ProjectionType != types.ProjectionTypeInclude {
		t.Errorf("table %s: status %s, indexes %+v", table, d.TableStatus, d.GlobalSecondaryIndexes)
	}

	// A table of that name with another schema is refused.
	other := table + "-other"
	_, err = client.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(other),
		BillingMode:          types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("id"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("id"), KeyType: types.KeyTypeHash}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		client.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(other)})
	})
	if err := ledgerdynamo.CreateTable(ctx, client, other, nil); !errors.Is(err, ledgerdynamo.ErrSchema) {
		t.Errorf("CreateTable over a table with another key = %v, want ErrSchema", err)
	}
}

// ttlDenied is a client whose UpdateTimeToLive is refused.
type ttlDenied struct{ *dynamodb.Client }

func (ttlDenied) UpdateTimeToLive(context.Context, *dynamodb.UpdateTimeToLiveInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateTimeToLiveOutput, error) {
	return nil, &smithy.GenericAPIError{Code: "AccessDeniedException", Message: "not allowed"}
}

// Only a server that lacks the TTL API is tolerated; other TTL errors are
// reported.
func TestCreateTableTTLError(t *testing.T) {
	t.Parallel()
	client := newClient(dynalitetest.Endpoint(t), nil)
	table := dynalitetest.NewTable(t, client)
	err := ledgerdynamo.CreateTable(context.Background(), ttlDenied{client}, table, nil)
	var api smithy.APIError
	if !errors.As(err, &api) || api.ErrorCode() != "AccessDeniedException" {
		t.Errorf("CreateTable with TTL denied = %v, want the AccessDeniedException", err)
	}
}
