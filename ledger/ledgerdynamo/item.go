package ledgerdynamo

import (
	"fmt"
	"regexp"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/idemkit/idemkit/ledger"
)

// Attribute names of the table (see the package documentation).
const (
	attrKey         = "pk"
	attrState       = "state"
	attrOwner       = "owner"
	attrLeaseUntil  = "lease_until"
	attrExpiresAt   = "expires_at"
	attrFingerprint = "fingerprint"
	attrSummary     = "summary"
	attrRef         = "ref"
	attrResult      = "result"
	attrTruncated   = "truncated"
	attrReason      = "reason"
	attrAttempts    = "attempts"
	attrAttemptAt   = "attempt_at"
	attrRunID       = "run_id"
	attrTool        = "tool"
	attrUpdatedAt   = "updated_at"
)

// IndexName is the global secondary index on (state, lease_until) that
// List queries.
const IndexName = "state-lease_until"

// item is one DynamoDB item.
type item = map[string]types.AttributeValue

func sv(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }

func nv(v int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(v, 10)}
}

func keyOf(key string) item { return item{attrKey: sv(key)} }

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

// nameRE finds the #name placeholders of an expression; every placeholder
// is the attribute name it stands for, prefixed with '#'.
var nameRE = regexp.MustCompile(`#[a-z_]+`)

// names returns the ExpressionAttributeNames that the expressions use
// (DynamoDB rejects unused ones, and several attribute names are reserved
// words, so every attribute goes through a placeholder).
func names(exprs ...string) map[string]string {
	m := map[string]string{}
	for _, e := range exprs {
		for _, p := range nameRE.FindAllString(e, -1) {
			m[p] = p[1:]
		}
	}
	return m
}

// decode turns an item into a record. A malformed item (written by
// something else) is an error rather than a zero field.
func decode(it item) (*ledger.Record, error) {
	r := &ledger.Record{}
	var err error
	str := func(name string) string {
		if v, ok := it[name].(*types.AttributeValueMemberS); ok {
			return v.Value
		}
		if _, present := it[name]; present && err == nil {
			err = fmt.Errorf("attribute %s is not a string", name)
		}
		return ""
	}
	num := func(name string) int64 {
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
	r.Key = str(attrKey)
	r.State = ledger.State(str(attrState))
	r.Owner = str(attrOwner)
	r.LeaseUntil = time.UnixMilli(num(attrLeaseUntil)).UTC()
	r.ExpiresAt = time.Unix(num(attrExpiresAt), 0).UTC()
	r.Fingerprint = str(attrFingerprint)
	r.Summary = str(attrSummary)
	r.Ref = str(attrRef)
	if v, ok := it[attrResult].(*types.AttributeValueMemberB); ok {
		r.Result = v.Value
	}
	if v, ok := it[attrTruncated].(*types.AttributeValueMemberBOOL); ok {
		r.Truncated = v.Value
	}
	r.Reason = str(attrReason)
	r.Attempt = int(num(attrAttempts))
	if _, ok := it[attrAttemptAt]; ok {
		r.AttemptAt = time.UnixMilli(num(attrAttemptAt)).UTC()
	}
	r.RunID = str(attrRunID)
	r.Tool = str(attrTool)
	r.UpdatedAt = time.UnixMilli(num(attrUpdatedAt)).UTC()
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
func claimable(r *ledger.Record, fp string, now time.Time) bool {
	switch r.State {
	case ledger.StateFailed:
		return true
	case ledger.StateUncertain:
		return r.Fingerprint == fp
	case ledger.StatePending:
		return r.LeaseExpired(now) && r.Fingerprint == fp
	}
	return false
}
