// Package ledgerdynamo is a ledger.Store on Amazon DynamoDB
// (aws-sdk-go-v2), built on conditional writes: the distributed backend of
// oncely.
//
// CreateTable makes the table (partition key pk, the action key; a TTL on
// expires_at; the index state_shard-lease_until, in DefaultShards write
// shards, for List and the sweeper), and
// Open returns a Store on it after one DescribeTable that refuses a global
// table whose replicas are eventually consistent across Regions (two
// Regions could both claim one action; Config.AllowEventualReplicas when
// every write goes to one Region); New returns the same Store without a
// request. Config.Layout fits the Store to an existing
// table instead (renamed attributes, a static partition key with the
// action key as sort key, a key prefix; every process on the table must
// use the same Layout); the index is write-sharded (Layout.Shards, 64 by
// default) so that no index key takes more than DynamoDB's 1,000 writes
// per second up to 10,000 actions per second (InitTable adds it to a table
// made with the unsharded index, Layout.Shards Unsharded).
//
// A claim is a conditional UpdateItem that succeeds when, in words:
//
//	attribute_not_exists(pk)
//	OR state = failed AND expires_at > :now_s
//	OR state = uncertain AND fingerprint = :fp AND expires_at > :now_s
//	OR state = pending AND lease_until <= :now_ms AND fingerprint = :fp
//	OR state = pending AND owner = :abandoned AND fingerprint = :fp
//
// (the last line only for a claim that knows the owner to have exited,
// ledger.ClaimParams.Abandoned).
//
// and otherwise returns the blocking record in the same round trip
// (ReturnValuesOnConditionCheckFailure=ALL_OLD; one consistent GetItem
// more on servers that do not return it). Complete, Fail and Extend are
// UpdateItems conditional on the owner and state pending; a false
// condition is ledger.ErrNotOwner. Extend raises expires_at with the
// lease, so TTL never deletes a live claim. Get is consistent; List is
// eventually consistent. The Store is the only retry layer (throttling,
// 5xx, broken connections, with backoff): it recognises its own write
// when a retried request finds a lost attempt applied, and otherwise
// wraps ledger.ErrUnavailable. Its retries share a budget per Store
// (Config.RetryQuota, the SDK standard retryer's token bucket), so that a
// throttled table is not sent every request five times. A claim of a key
// the Store has seen done, or of a run that has not claimed a new key in
// the Store (a run resumed by another process), reads it first
// (Config.ReadFirst), so that a replay is billed as a read, not as a write
// of the stored record.
//
// README.md beside this file has the table's attributes, the layouts, how
// each write works and why, the rates at scale, the IAM policies and how
// the tests run (package dynalitetest).
package ledgerdynamo
