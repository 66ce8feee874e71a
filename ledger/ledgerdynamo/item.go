package ledgerdynamo

import (
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/oncely/oncely/ledger"
)

// IndexName is the default name (Layout.Index) of the unsharded global
// secondary index on (state, lease_until) that List queries with
// Layout.Shards Unsharded.
const IndexName = "state-lease_until"

// ShardedIndexName is the default name (Layout.Index) of the index on
// (state_shard, lease_until) that List queries: the default layout's.
const ShardedIndexName = "state_shard-lease_until"

// item is one DynamoDB item.
type item = map[string]types.AttributeValue

func sv(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }

func nv(v int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(v, 10)}
}

// Times are stored as integers: lease_until, attempt_at and updated_at in
// milliseconds,
// expires_at in whole seconds (the unit DynamoDB TTL reads), truncated.
func millis(t time.Time) int64  { return t.UnixMilli() }
func seconds(t time.Time) int64 { return t.Unix() }

// ceilSeconds is t in whole seconds, rounded up.
func ceilSeconds(t time.Time) int64 {
	if s := t.Unix(); t.After(time.Unix(s, 0)) {
		return s + 1
	}
	return t.Unix()
}

// decode turns an item into a record. A malformed item (written by
// something else) is an error rather than a zero field.
func (l layout) decode(it item) (*ledger.Record, error) {
	r := &ledger.Record{}
	var err error
	str := func(ph string) string {
		name := l.attr[ph]
		if v, ok := it[name].(*types.AttributeValueMemberS); ok {
			return v.Value
		}
		if _, present := it[name]; present && err == nil {
			err = fmt.Errorf("attribute %s is not a string", name)
		}
		return ""
	}
	num := func(ph string) int64 {
		name := l.attr[ph]
		v, ok := it[name].(*types.AttributeValueMemberN)
		if !ok {
			if _, present := it[name]; present && err == nil {
				err = fmt.Errorf("attribute %s is not a number", name)
			}
			return 0
		}
		i, perr := strconv.ParseInt(v.Value, 10, 64)
		if perr != nil && err == nil {
			err = fmt.Errorf("attribute %s: %w", name, perr)
		}
		return i
	}
	r.Key, err = l.actionKey(it)
	r.State = ledger.State(str(phState))
	r.Owner = str(phOwner)
	r.LeaseUntil = time.UnixMilli(num(phLeaseUntil)).UTC()
	if _, ok := it[l.attr[phExpiresAt]]; ok { // an uncertain record has none
		r.ExpiresAt = time.Unix(num(phExpiresAt), 0).UTC()
	}
	r.Fingerprint = str(phFingerprint)
	r.Summary = str(phSummary)
	r.Ref = str(phRef)
	if v, ok := it[l.attr[phResult]].(*types.AttributeValueMemberB); ok {
		r.Result = v.Value
	}
	if v, ok := it[l.attr[phTruncated]].(*types.AttributeValueMemberBOOL); ok {
		r.Truncated = v.Value
	}
	r.Reason = str(phReason)
	r.Attempt = int(num(phAttempts))
	if _, ok := it[l.attr[phAttemptAt]]; ok {
		r.AttemptAt = time.UnixMilli(num(phAttemptAt)).UTC()
	}
	r.RunID = str(phRunID)
	r.Tool = str(phTool)
	r.UpdatedAt = time.UnixMilli(num(phUpdatedAt)).UTC()
	if err == nil && (r.Key == "" || !r.State.Valid()) {
		err = fmt.Errorf("item has no key or an unknown state %q", r.State)
	}
	if err != nil {
		return nil, fmt.Errorf("ledgerdynamo: malformed item %q: %w", r.Key, err)
	}
	return r, nil
}

// claimable reports whether a claim with fingerprint fp would take over the
// live record r at now. It mirrors the claim's condition expression.
func claimable(r *ledger.Record, p *ledger.ClaimParams, now time.Time) bool {
	switch r.State {
	case ledger.StateFailed:
		return true
	case ledger.StateUncertain:
		return r.Fingerprint == p.Fingerprint
	case ledger.StatePending:
		return (r.LeaseExpired(now) || r.Owner == p.Abandoned) && r.Fingerprint == p.Fingerprint
	}
	return false
}
