package ledgerdynamo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	lru "github.com/hashicorp/golang-lru/v2"
	"golang.org/x/sync/errgroup"

	"github.com/oncely/oncely/clock"
	"github.com/oncely/oncely/internal/listmerge"
	"github.com/oncely/oncely/ledger"
)

// API is the part of the DynamoDB client the Store uses; *dynamodb.Client
// implements it. The Store passes an option to every call that turns the
// SDK's own retries off (it retries itself, see Config), so an
// implementation must apply the option functions it is given.
type API interface {
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
	// BatchGetItem fetches the records List finds in a sharded index
	// (Layout.Shards), which holds keys only.
	BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
}

// Config tunes a Store. The zero value (or nil) gives the defaults.
type Config struct {
	// Clock tells the time used in conditions and expiry checks
	// (default the system clock).
	Clock clock.Clock
	// MaxAttempts bounds the attempts of one request when the service
	// throttles it or its outcome is unknown (5xx, broken connection);
	// default 5. A failed condition is never retried.
	MaxAttempts int
	// InitialBackoff and MaxBackoff pace those attempts: exponential with
	// jitter, from InitialBackoff (default 25ms) up to MaxBackoff
	// (default 1s).
	InitialBackoff time.Duration
	MaxBackoff     time.Duration
	// RetryQuota bounds the retries of all the Store's requests together,
	// so that a throttled table receives at most a little more than its
	// first attempts rather than MaxAttempts times them. Default: a token
	// bucket per Store with the SDK standard retryer's quota
	// (ratelimit.NewTokenRateLimit(retry.DefaultRetryRateTokens), 500
	// tokens): a throttled retry takes 5 tokens, any other retry 14, a
	// retry the service answers gives its tokens back, and a first
	// attempt it answers adds 1. A request whose retry finds too few
	// tokens fails at once with an error matching ErrRetryQuota and
	// ledger.ErrUnavailable. Share one RateLimiter between Stores to give
	// them one budget; ratelimit.None turns the quota off.
	RetryQuota retry.RateLimiter
	// ListLimit is the number of records List returns when its filter sets
	// no Limit (default ledger.DefaultListLimit).
	ListLimit int
	// Layout is how records sit in the table: attribute names, a static
	// partition key value with the action key as sort key, a key prefix.
	// The zero value is the default layout. Every process on the table
	// (the sweeper too) and CreateTable must use the same one.
	Layout Layout
	// AllowEventualReplicas lets Open accept a global table whose
	// replicas are eventually consistent across Regions. It is safe only
	// when every ledger write (every Store, the sweeper, oncely) goes to
	// one Region: a claim is checked against the replica of the Region it
	// is sent to, and DynamoDB settles concurrent writes in two Regions
	// by last writer wins, silently, so two agents in two Regions can
	// both claim one action and both run it. With multi-Region strong
	// consistency, Open needs no such permission.
	AllowEventualReplicas bool
	// ReadFirst says when a Claim reads the record before its
	// conditional write, so that a replay is billed as a read rather than
	// as a write of the stored record (see ReadFirst); default
	// ReadFirstSeen.
	ReadFirst ReadFirst
}

func (c *Config) withDefaults() Config {
	var d Config
	if c != nil {
		d = *c
	}
	if d.Clock == nil {
		d.Clock = clock.System{}
	}
	if d.MaxAttempts <= 0 {
		d.MaxAttempts = 5
	}
	if d.InitialBackoff <= 0 {
		d.InitialBackoff = 25 * time.Millisecond
	}
	if d.MaxBackoff <= 0 {
		d.MaxBackoff = time.Second
	}
	d.MaxBackoff = max(d.MaxBackoff, d.InitialBackoff)
	if d.RetryQuota == nil {
		d.RetryQuota = ratelimit.NewTokenRateLimit(retry.DefaultRetryRateTokens)
	}
	if d.ListLimit <= 0 {
		d.ListLimit = ledger.DefaultListLimit
	}
	return d
}

// Store is a ledger.Store on one DynamoDB table (see CreateTable for its
// schema). It is safe for concurrent use, by any number of processes.
type Store struct {
	api   API
	table string
	cfg   Config
	lay   layout
	err   error                        // the layout is invalid: every method returns it
	seen  *lru.Cache[string, struct{}] // keys seen done (ReadFirstSeen), else nil
	// acting are the runs that claimed a new key in this Store
	// (ReadFirstSeen), else nil.
	acting *lru.Cache[string, struct{}]
}

var (
	_ ledger.Store = (*Store)(nil)
	_ io.Closer    = (*Store)(nil)
)

// New returns a Store on the table, which must exist (see CreateTable).
// It sends no request: Open also checks, with one DescribeTable, that the
// table exists and is not a global table with eventually consistent
// replicas, on which two Regions can both claim one action.
// When cfg.Layout is not valid, every method of the Store returns the
// error of Layout.Validate (matching ErrLayout) and sends no request.
func New(api API, table string, cfg *Config) *Store {
	s := &Store{api: api, table: table, cfg: cfg.withDefaults()}
	s.seen = newSeen(s.cfg.ReadFirst)
	s.acting = newSeen(s.cfg.ReadFirst)
	s.lay, s.err = s.cfg.Layout.resolve()
	return s
}

// Close releases nothing: the API client is the caller's. It is there so
// that every backend's Store closes the same way.
func (s *Store) Close() error { return nil }

// claimRounds bounds how often Claim re-evaluates a key whose record
// changed between its write and its read (a race with other claimers).
const claimRounds = 4

// claimMode is the condition of one claim request.
type claimMode int

const (
	// claimAbsent claims a key without a record: the usual case, with the
	// smallest request (on dynalite an expression's size is most of a
	// request's cost).
	claimAbsent claimMode = iota
	// claimOver takes over an uncertain or abandoned record.
	claimOver
	// claimFailed takes over a failed record: its attempt begins now.
	claimFailed
	// claimExpired replaces a record whose retention has run out.
	claimExpired
)

// Claim claims the key with one conditional UpdateItem that expects no
// record. When Config.ReadFirst says so (by default, for a key this Store
// has seen done, and for a run that has claimed no new key in it), an
// eventually consistent GetItem comes first, and a
// done, unexpired record it finds answers the claim: a replay is then a
// read, not a write billed at the record's size. When the condition fails, the blocking record comes from the
// error (ALL_OLD) or, if the server did not return it, from one consistent
// GetItem; a record that may be claimed (failed, uncertain, abandoned) is
// then taken over by a second write conditional on its state, and a
// record that has expired but not yet been deleted by TTL is replaced by
// a second write that also restarts the attempt number.
func (s *Store) Claim(ctx context.Context, p ledger.ClaimParams) (ledger.ClaimResult, error) {
	if s.err != nil {
		return ledger.ClaimResult{}, s.err
	}
	if err := p.Validate(); err != nil {
		return ledger.ClaimResult{}, err
	}
	if s.readsFirst(p) {
		if res, ok := s.replay(ctx, p); ok {
			return res, nil
		}
	}
	mode := claimAbsent
	for range claimRounds {
		now := s.cfg.Clock.Now()
		var out *dynamodb.UpdateItemOutput
		err := s.do(ctx, "claim", func(ctx context.Context) (err error) {
			out, err = s.api.UpdateItem(ctx, s.claimInput(p, now, mode), noSDKRetry)
			return err
		})
		var cf *conditionFailed
		if errors.As(err, &cf) {
			rec, err := s.blocking(ctx, p.Key, cf)
			switch {
			case err != nil:
				return ledger.ClaimResult{}, err
			case rec == nil: // deleted meanwhile
				mode = claimAbsent
			case rec.State == ledger.StatePending && rec.Owner == p.Owner:
				// The claim's own write: an attempt of this request whose
				// answer was lost (cf.maybeApplied), or the caller's repeat
				// of a claim whose answer it lost. It is judged before the
				// lease: a record whose lease is already past on this
				// Store's clock is still ours, not one to take over (that
				// would report the claim itself as the previous attempt).
				res := ledger.Reclaimed(rec)
				if res.Previous == nil {
					s.actedAnew(p.RunID)
				}
				return res, nil
			case rec.Expired(now):
				mode = claimExpired
			case rec.State == ledger.StateFailed:
				mode = claimFailed
			case claimable(rec, &p, now):
				mode = claimOver
			default:
				// Also an attempt whose answer was lost, found holding the key.
				if rec.State == ledger.StateDone {
					s.sawDone(p.Key)
				}
				return ledger.Refused(rec, p.Owner), nil
			}
			continue
		}
		if err != nil {
			return ledger.ClaimResult{}, err
		}
		res := ledger.ClaimResult{Claimed: true, Attempt: 1}
		if mode == claimAbsent || mode == claimExpired {
			s.actedAnew(p.RunID)
		}
		if (mode == claimOver || mode == claimFailed) && len(out.Attributes) > 0 {
			prev, err := s.lay.decode(out.Attributes)
			if err != nil {
				return ledger.ClaimResult{}, unavailable("claim", err)
			}
			res.Attempt = max(prev.Attempt, 1)
			res.Previous = prev
		}
		return res, nil
	}
	return ledger.ClaimResult{}, unavailable("claim", fmt.Errorf("key %q changed under %d claim rounds", p.Key, claimRounds))
}

// claimInput builds the claim's UpdateItem for mode. Over a record, the
// update keeps the attempt number and its time (an UpdateItem, not a
// PutItem, for that reason) and clears what a settled record held; a new
// or replaced record starts at attempt 1, now.
func (s *Store) claimInput(p ledger.ClaimParams, now time.Time, mode claimMode) *dynamodb.UpdateItemInput {
	values := item{
		":pending": sv(string(ledger.StatePending)), ":owner": sv(p.Owner), ":lease": nv(millis(p.LeaseUntil)),
		":exp": nv(seconds(p.ExpiresAt)), ":fp": sv(p.Fingerprint), ":tool": sv(p.Tool), ":run": sv(p.RunID),
		":now_ms": nv(millis(now)), ":one": nv(1),
	}
	update := "SET #state = :pending" + s.lay.shardSet(p.Key, ledger.StatePending, values) +
		", #owner = :owner, #lease_until = :lease, #expires_at = :exp, " +
		"#fingerprint = :fp, #tool = :tool, #run_id = :run, #updated_at = :now_ms, "
	var cond string
	switch mode {
	case claimAbsent:
		cond = "attribute_not_exists(#pk)"
		update += "#attempts = :one, #attempt_at = :now_ms"
	case claimOver:
		// In disjunctive form, without parentheses (AND binds tighter than
		// OR): dynalite's parser takes tens of milliseconds over nested
		// ones. A pending record never expires: an abandoned one is taken
		// over (and returned, so that the caller reconciles) whatever its
		// expires_at.
		cond = "attribute_not_exists(#pk)" +
			" OR #state = :uncertain AND #fingerprint = :fp" +
			" OR #state = :pending AND #lease_until <= :now_ms AND #fingerprint = :fp"
		if p.Abandoned != "" {
			cond += " OR #state = :pending AND #owner = :abandoned AND #fingerprint = :fp"
			values[":abandoned"] = sv(p.Abandoned)
		}
		update += "#attempts = if_not_exists(#attempts, :one), #attempt_at = if_not_exists(#attempt_at, :now_ms)" +
			" REMOVE #summary, #ref, #result, #truncated, #reason"
		values[":uncertain"] = sv(string(ledger.StateUncertain))
	case claimFailed:
		// A failed record's attempt begins with the claim that takes it
		// over (ledger.Reclaimed).
		cond = "#state = :failed AND #expires_at > :now_s"
		update += "#attempts = if_not_exists(#attempts, :one), #attempt_at = :now_ms" +
			" REMOVE #summary, #ref, #result, #truncated, #reason"
		values[":now_s"] = nv(seconds(now))
		values[":failed"] = sv(string(ledger.StateFailed))
	case claimExpired:
		cond = "attribute_not_exists(#pk) OR #expires_at <= :now_s AND #state IN (:done, :failed)"
		values[":done"] = sv(string(ledger.StateDone))
		values[":failed"] = sv(string(ledger.StateFailed))
		update += "#attempts = :one, #attempt_at = :now_ms REMOVE #summary, #ref, #result, #truncated, #reason"
		values[":now_s"] = nv(seconds(now))
	}
	return &dynamodb.UpdateItemInput{
		TableName:                           aws.String(s.table),
		Key:                                 s.lay.keyOf(p.Key),
		UpdateExpression:                    aws.String(update),
		ConditionExpression:                 aws.String(cond),
		ExpressionAttributeNames:            s.lay.names(update, cond),
		ExpressionAttributeValues:           values,
		ReturnValues:                        types.ReturnValueAllOld,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
}

// blocking returns the record a failed condition was evaluated against:
// the one the server returned, or else the current one (nil if absent).
func (s *Store) blocking(ctx context.Context, key string, cf *conditionFailed) (*ledger.Record, error) {
	if cf.item == nil {
		return s.read(ctx, key, true)
	}
	rec, err := s.lay.decode(cf.item)
	if err != nil {
		return nil, unavailable("decode", err)
	}
	return rec, nil
}

// read reads the item, with a consistent read when consistent: nil when
// absent; an expired record is returned as it is.
func (s *Store) read(ctx context.Context, key string, consistent bool) (*ledger.Record, error) {
	var out *dynamodb.GetItemOutput
	err := s.do(ctx, "get", func(ctx context.Context) (err error) {
		out, err = s.api.GetItem(ctx, &dynamodb.GetItemInput{
			TableName:      aws.String(s.table),
			Key:            s.lay.keyOf(key),
			ConsistentRead: aws.Bool(consistent),
		}, noSDKRetry)
		return err
	})
	if err != nil {
		return nil, err
	}
	if len(out.Item) == 0 {
		return nil, nil
	}
	rec, err := s.lay.decode(out.Item)
	if err != nil {
		return nil, unavailable("get", err)
	}
	return rec, nil
}

// Complete records success: state done with the completion's fields, lease
// released.
func (s *Store) Complete(ctx context.Context, key, owner string, c ledger.Completion) error {
	if s.err != nil {
		return s.err
	}
	if err := c.Validate(); err != nil {
		return err
	}
	set := "SET #state = :done, #lease_until = :now_ms, #updated_at = :now_ms, #truncated = :truncated"
	values := item{":done": sv(string(ledger.StateDone)), ":truncated": &types.AttributeValueMemberBOOL{Value: c.Truncated}}
	set += s.lay.shardSet(key, ledger.StateDone, values)
	if c.Summary != "" {
		set += ", #summary = :summary"
		values[":summary"] = sv(c.Summary)
	}
	if c.Ref != "" {
		set += ", #ref = :ref"
		values[":ref"] = sv(c.Ref)
	}
	if len(c.Result) > 0 {
		set += ", #result = :result"
		values[":result"] = &types.AttributeValueMemberB{Value: c.Result}
	}
	if c.Retention > 0 {
		set += ", #expires_at = :exp"
		values[":exp"] = nv(seconds(s.cfg.Clock.Now().Add(c.Retention)))
	}
	err := s.settle(ctx, "complete", key, owner, set, "", values, func(r *ledger.Record) bool {
		return r.State == ledger.StateDone
	})
	if err == nil {
		s.sawDone(key)
	}
	return err
}

// Fail records a failure: failed (definite: the attempt number advances and
// AttemptAt becomes now) or uncertain, lease released.
func (s *Store) Fail(ctx context.Context, key, owner string, f ledger.Failure) error {
	if s.err != nil {
		return s.err
	}
	if err := f.Validate(); err != nil {
		return err
	}
	state := ledger.StateUncertain
	set := "SET #state = :state, #lease_until = :now_ms, #updated_at = :now_ms"
	values := item{}
	if f.Definite {
		state = ledger.StateFailed
		set += ", #attempts = #attempts + :one, #attempt_at = :now_ms"
		values[":one"] = nv(1)
		if f.Retention > 0 {
			set += ", #expires_at = :exp"
			values[":exp"] = nv(seconds(s.cfg.Clock.Now().Add(f.Retention)))
		}
	}
	values[":state"] = sv(string(state))
	set += s.lay.shardSet(key, state, values)
	if f.Reason != "" {
		set += ", #reason = :reason"
		values[":reason"] = sv(f.Reason)
	}
	if !f.Definite {
		// An uncertain record never expires (ledger.Record.Expired): without
		// its TTL attribute, TTL never deletes it. The claim that settles it
		// sets a new one.
		set += " REMOVE #expires_at"
	}
	return s.settle(ctx, "fail", key, owner, set, "", values, func(r *ledger.Record) bool {
		return r.State == state
	})
}

// Extend moves the lease of a pending record the owner holds, and raises
// expires_at to the new lease end (in whole seconds, rounded up) so that
// TTL never deletes a live claim. An expression cannot take a maximum, so
// the first request moves the lease where the expiry is already beyond it
// (the usual case); where it is not, a second one raises both.
func (s *Store) Extend(ctx context.Context, key, owner string, leaseUntil time.Time) error {
	if s.err != nil {
		return s.err
	}
	if leaseUntil.IsZero() {
		return fmt.Errorf("%w: lease is required", ledger.ErrInvalid)
	}
	lease, exp := millis(leaseUntil), ceilSeconds(leaseUntil)
	landed := func(r *ledger.Record) bool {
		return r.State == ledger.StatePending && millis(r.LeaseUntil) == lease && seconds(r.ExpiresAt) >= exp
	}
	err := s.settle(ctx, "extend", key, owner, "SET #lease_until = :lease, #updated_at = :now_ms",
		" AND #expires_at >= :exp", item{":lease": nv(lease), ":exp": nv(exp)}, landed)
	if !errors.Is(err, ledger.ErrNotOwner) {
		return err
	}
	return s.settle(ctx, "extend", key, owner, "SET #lease_until = :lease, #expires_at = :exp, #updated_at = :now_ms",
		" AND #expires_at < :exp", item{":lease": nv(lease), ":exp": nv(exp)}, landed)
}

// settle runs an update conditional on the owner holding the pending
// record (and on extra, when set). A false condition is ErrNotOwner, except
// when an attempt whose answer was lost had already written it: landed
// tells from the record.
func (s *Store) settle(ctx context.Context, op, key, owner, set, extra string, values item, landed func(*ledger.Record) bool) error {
	if key == "" || owner == "" {
		return fmt.Errorf("%w: key and owner are required", ledger.ErrInvalid)
	}
	now := s.cfg.Clock.Now()
	cond := "#owner = :owner AND #state = :pending" + extra
	values[":owner"] = sv(owner)
	values[":pending"] = sv(string(ledger.StatePending))
	values[":now_ms"] = nv(millis(now))
	in := &dynamodb.UpdateItemInput{
		TableName:                           aws.String(s.table),
		Key:                                 s.lay.keyOf(key),
		UpdateExpression:                    aws.String(set),
		ConditionExpression:                 aws.String(cond),
		ExpressionAttributeNames:            s.lay.names(set, cond),
		ExpressionAttributeValues:           values,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
	err := s.do(ctx, op, func(ctx context.Context) error {
		_, err := s.api.UpdateItem(ctx, in, noSDKRetry)
		return err
	})
	var cf *conditionFailed
	if !errors.As(err, &cf) {
		return err
	}
	if cf.maybeApplied {
		rec, err := s.blocking(ctx, key, cf)
		if err != nil {
			return err
		}
		if rec != nil && rec.Owner == owner && landed(rec) {
			return nil
		}
	}
	return ledger.ErrNotOwner
}

// Get returns the live record of the key (consistent read), or
// ledger.ErrNotFound when it is absent or expired.
func (s *Store) Get(ctx context.Context, key string) (*ledger.Record, error) {
	if s.err != nil {
		return nil, s.err
	}
	if key == "" {
		return nil, fmt.Errorf("%w: key is required", ledger.ErrInvalid)
	}
	rec, err := s.read(ctx, key, true)
	if err != nil {
		return nil, err
	}
	if rec == nil || rec.Expired(s.cfg.Clock.Now()) {
		return nil, ledger.ErrNotFound
	}
	return rec, nil
}

// List queries the index, one index partition key at a time (a state, or
// each shard of a state with the sharded index; all four states when the
// filter sets none), each from the filter's cursor in ascending
// LeaseUntil, concurrently, and merges them in cursor order; records of
// equal LeaseUntil are ordered by key in the store. Index reads are
// eventually consistent: on DynamoDB a write may take a moment to show.
//
// The sharded index holds keys, the run and the expiry: List merges its
// entries up to the page's size, reading each shard once unless it holds
// more than its share of the page, then fetches the page's records with
// consistent BatchGetItem reads (one per 100) and leaves out a record
// that has moved since its entry was written (another state or lease),
// merging on to fill the page. Records that share one LeaseUntil take one
// more Query per 1,000 of them, not one each.
func (s *Store) List(ctx context.Context, f ledger.Filter) ([]ledger.Record, error) {
	if s.err != nil {
		return nil, s.err
	}
	states := []ledger.State{ledger.StatePending, ledger.StateUncertain, ledger.StateFailed, ledger.StateDone}
	if f.State != "" {
		if !f.State.Valid() {
			return nil, fmt.Errorf("%w: unknown state %q", ledger.ErrInvalid, f.State)
		}
		states = []ledger.State{f.State}
	}
	limit := f.Limit
	if limit <= 0 {
		limit = s.cfg.ListLimit
	}
	var parts []indexPart
	for _, st := range states {
		for _, key := range s.lay.indexKeys(st) {
			parts = append(parts, indexPart{state: st, key: key})
		}
	}
	fetch := func(ctx context.Context, reqs []listmerge.Request) ([]listmerge.Reply, error) {
		replies := make([]listmerge.Reply, len(reqs))
		g, ctx := errgroup.WithContext(ctx)
		g.SetLimit(listQueries)
		for i, r := range reqs {
			g.Go(func() (err error) {
				replies[i], err = s.listPart(ctx, parts[r.Source], f, r.After, r.N)
				return err
			})
		}
		return replies, g.Wait()
	}
	if s.lay.shards == 0 {
		return listmerge.Merge(ctx, len(parts), f.After, limit, fetch)
	}
	// Entries are small (keys, run, expiry): each shard is asked for four
	// times its share of the page, so that the first round nearly always
	// fills it.
	var out []ledger.Record
	after := f.After
	for len(out) < limit {
		want := limit - len(out)
		entries, err := listmerge.MergeChunk(ctx, len(parts), after, want, min(want, 4*want/len(parts)+8), fetch)
		if err != nil {
			return nil, err
		}
		if len(entries) == 0 {
			break
		}
		recs, err := s.fetchRecords(ctx, entries, f, s.cfg.Clock.Now())
		if err != nil {
			return nil, err
		}
		out = append(out, recs...)
		if len(entries) < want {
			break // the index holds no more
		}
		after = ledger.CursorOf(&entries[len(entries)-1])
	}
	return out, nil
}

// listQueries bounds the queries one List runs at once (a sharded index
// has Shards partition keys per state).
const listQueries = 16

// tieQuery is how many entries one Query reads among records that share
// the LeaseUntil of the last one a page needs.
const tieQuery = 1000

// indexPart is one partition key of the index: the records of state
// under key (the state, or one of its shards).
type indexPart struct {
	state ledger.State
	key   string
}

// listPart reads up to n records of one index partition key after the
// cursor: whole records from the unsharded index, entries (key, state,
// lease, run) from the sharded one. The index orders records of equal
// LeaseUntil arbitrarily, so it reads them all where a page begins or
// ends among them, with a key condition on that LeaseUntil (up to
// tieQuery entries a Query): first the cursor's LeaseUntil, then later
// ones, n+1 entries at a time (the one more tells whether the n-th
// record's LeaseUntil goes on), and sorts.
func (s *Store) listPart(ctx context.Context, part indexPart, f ledger.Filter, after ledger.Cursor, n int) (listmerge.Reply, error) {
	now := s.cfg.Clock.Now()
	state := part.state
	base := s.lay.indexPH() + " = :state"
	filters, values := []string{}, item{}
	if layoutFilter, v := s.lay.filter(); layoutFilter != "" {
		filters, values = append(filters, layoutFilter), v
	}
	values[":state"] = sv(part.key)
	// Both indexes hold the run and the expiry, which the query filters.
	if f.RunID != "" {
		filters = append(filters, "#run_id = :run")
		values[":run"] = sv(f.RunID)
	}
	// Only done and failed records expire (an uncertain one has no
	// expires_at at all, so that TTL never deletes it).
	if ledger.Expires(state) {
		filters = append(filters, "#expires_at > :now_s")
		values[":now_s"] = nv(seconds(now))
	}
	filter := strings.Join(filters, " AND ")
	// The LeaseUntil range, in milliseconds: lease_until < LeaseBefore at
	// millisecond precision (a stored millisecond m is before t exactly
	// when m < ceil_ms(t)), and at or after the cursor's.
	first, last := int64(-1), int64(-1)
	if !f.LeaseBefore.IsZero() {
		last = millis(f.LeaseBefore)
		if f.LeaseBefore.After(time.UnixMilli(last)) {
			last++
		}
		last--
	}
	if !after.IsZero() {
		first = millis(after.LeaseUntil)
	}
	var recs []ledger.Record
	lastRead := int64(-1) // the LeaseUntil of the last entry read
	// query reads the entries of the range cond, limit at a time, from
	// start, until more than n records are held (or to the range's end
	// when all is set), and reports whether it read to its end, and where
	// it stopped.
	query := func(cond string, vals item, start item, limit func() int, all bool) (end bool, next item, err error) {
		for {
			in := &dynamodb.QueryInput{
				TableName:                 aws.String(s.table),
				IndexName:                 aws.String(s.lay.index),
				KeyConditionExpression:    aws.String(cond),
				FilterExpression:          optional(filter),
				ExpressionAttributeNames:  s.lay.names(cond, filter),
				ExpressionAttributeValues: vals,
				ExclusiveStartKey:         start,
				Limit:                     aws.Int32(int32(min(limit(), tieQuery))),
			}
			var out *dynamodb.QueryOutput
			err := s.do(ctx, "list", func(ctx context.Context) (err error) {
				out, err = s.api.Query(ctx, in, noSDKRetry)
				return err
			})
			if err != nil {
				return false, nil, err
			}
			page, err := s.records(out.Items, state)
			if err != nil {
				return false, nil, err
			}
			for _, rec := range page {
				lastRead = millis(rec.LeaseUntil)
				if after.Before(&rec) { // else a tie of the cursor's LeaseUntil, up to its key
					recs = append(recs, rec)
				}
			}
			if start = out.LastEvaluatedKey; len(start) == 0 {
				return true, nil, nil
			}
			if !all && len(recs) > n {
				return false, start, nil
			}
		}
	}
	// with is values with the LeaseUntil bounds named in kv.
	with := func(kv map[string]int64) item {
		v := maps.Clone(values)
		for name, ms := range kv {
			v[name] = nv(ms)
		}
		return v
	}
	// From the cursor's LeaseUntil: the page's records and one more,
	// tieQuery entries a Query while among the cursor's ties.
	var cond string
	vals := values
	switch {
	case first >= 0 && last >= 0 && first > last:
		// Nothing is both after the cursor and before LeaseBefore.
		return listmerge.Reply{Next: after, Done: true}, nil
	case first >= 0 && last >= 0:
		cond, vals = base+" AND #lease_until BETWEEN :first AND :last", with(map[string]int64{":first": first, ":last": last})
	case first >= 0:
		cond, vals = base+" AND #lease_until >= :first", with(map[string]int64{":first": first})
	case last >= 0:
		cond, vals = base+" AND #lease_until <= :last", with(map[string]int64{":last": last})
	default:
		cond = base
	}
	limit := func() int {
		if first >= 0 && lastRead == first {
			return tieQuery
		}
		return n + 1 - len(recs)
	}
	end, next, err := query(cond, vals, nil, limit, false)
	if err != nil {
		return listmerge.Reply{}, err
	}
	// Read in ascending LeaseUntil: when the one more shares the n-th
	// record's, read the rest of its ties from there, tieQuery a Query.
	if !end && len(recs) > n && millis(recs[n-1].LeaseUntil) == millis(recs[len(recs)-1].LeaseUntil) {
		tie, nth := base+" AND #lease_until = :tie", millis(recs[n-1].LeaseUntil)
		if _, _, err := query(tie, with(map[string]int64{":tie": nth}), next, func() int { return tieQuery }, true); err != nil {
			return listmerge.Reply{}, err
		}
	}
	slices.SortFunc(recs, func(a, b ledger.Record) int { return ledger.CursorOf(&a).Compare(ledger.CursorOf(&b)) })
	// Records beyond the n-th (ties of its LeaseUntil that sort after it
	// by key, and the one more) are left to the next request, which finds
	// them from its cursor.
	rep := listmerge.Reply{Records: recs[:min(n, len(recs))], Next: after, Done: end && len(recs) <= n}
	if len(rep.Records) > 0 {
		rep.Next = ledger.CursorOf(&rep.Records[len(rep.Records)-1])
	}
	return rep, nil
}

// records returns the records of a page of index entries, in the page's
// order: the entries themselves on the unsharded index, which holds whole
// records; on the sharded one, which holds keys, run and expiry, records
// with the key, state, LeaseUntil and run only, which List completes
// (fetchRecords). Another layout's items in a shared table are left out.
func (s *Store) records(entries []item, state ledger.State) ([]ledger.Record, error) {
	recs := make([]ledger.Record, 0, len(entries))
	for _, it := range entries {
		if s.lay.shards > 0 {
			key, err := s.lay.actionKey(it)
			if err != nil {
				continue // another layout's item in a shared table
			}
			rec := ledger.Record{Key: key, State: state, LeaseUntil: time.UnixMilli(entryLease(s.lay, it))}
			if v, ok := it[s.lay.attr[phRunID]].(*types.AttributeValueMemberS); ok {
				rec.RunID = v.Value
			}
			recs = append(recs, rec)
			continue
		}
		rec, err := s.lay.decode(it)
		if err != nil {
			return nil, unavailable("list", err)
		}
		recs = append(recs, *rec)
	}
	return recs, nil
}

// optional returns nil for an empty expression, which DynamoDB refuses.
func optional(expr string) *string {
	if expr == "" {
		return nil
	}
	return aws.String(expr)
}
