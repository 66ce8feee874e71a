// Package ledgerdynamo is a ledger.Store on Amazon DynamoDB
// (aws-sdk-go-v2), built on conditional writes: the distributed backend of
// idemkit.
//
// # Table
//
// One table, created by CreateTable (on-demand capacity):
//
//	attribute    type  meaning
//	pk           S     partition key: the action key
//	state        S     pending | done | failed | uncertain
//	owner        S     owner token of the latest claim (fencing)
//	lease_until  N     milliseconds since the epoch: end of the claim's lease,
//	                   or when the record was settled
//	expires_at   N     seconds since the epoch: retention; the table's TTL attribute
//	fingerprint  S     hash of the validated fields of the claim
//	summary      S     done: what the model is told
//	ref          S     done: the provider's object reference
//	result       B     done: optional bounded payload
//	truncated    BOOL  done: result was cut to fit
//	reason       S     failed / uncertain: why
//	attempts     N     attempt number (advances on a definite failure only)
//	attempt_at   N     milliseconds since the epoch: when that attempt number began
//	run_id       S     the agent run
//	tool         S     the tool
//	updated_at   N     milliseconds since the epoch: last write
//	state_shard  S     with Layout.Shards: the state and the key's shard, "pending#07"
//
// The global secondary index state-lease_until, keyed on (state, lease_until),
// serves List and so the sweeper ("pending with lease_until before now").
// It projects ALL attributes: List returns whole records as the ledger
// contract requires, and an INCLUDE projection would have to name every
// attribute anyway. The price is that a completion's result payload (at most
// ledger.MaxResultBytes) is written to the index too.
//
// # Sharded index
//
// The unsharded index has the state as its partition key, so every claim,
// renewal and completion writes to the one index key "pending", and
// DynamoDB gives one partition key at most 1,000 write units per second,
// per index, throttling the table's writes when an index cannot take its
// own: about 500 fresh actions per second per table. Layout.Shards (N,
// DefaultShards 64) write-shards it: every write that sets the state also
// sets state_shard to the state and FNV-1a of the action key modulo N
// (Layout.IndexKey), and the index state_shard-lease_until is keyed on
// (state_shard, lease_until), so a record's entries, renewals included,
// stay on one of N keys per state. It projects the keys only: with ALL,
// a completion's result (a write unit per KB) would land on one done
// shard, so no N would bound a key's rate; with KEYS_ONLY every index
// write is one unit. List queries the N shards of each state it lists
// (16 at a time), merges them by (lease_until, key), and fetches the
// records with consistent BatchGetItem reads, leaving out a record that
// has moved since its index entry was read. InitTable adds the sharded
// index to a table made without it and files the existing records under
// it; see "DynamoDB at scale" in the README for the rates, the limits
// that then bind, and how to raise N.
//
// An item stays far below DynamoDB's 400 KB: the ledger.Max* limits bound
// every field (about 270 KB at most), and oversized writes are refused with
// ledger.ErrTooLarge before any request.
//
// # Layouts
//
// Config.Layout fits the Store to an existing table, and
// TableOptions.Layout makes CreateTable create (or accept) that table:
// Layout.Attributes renames any attribute (a table made for Powertools
// for AWS Lambda: "id", "status", "expiration", ...); PartitionKeyValue
// with SortKey puts every record in one partition with the action key as
// sort key (single-table designs); KeyPrefix is prepended to the stored
// action key and stripped when reading; Index names the index. Every
// process on the table, the sweeper included, must use the same Layout.
// Layouts that differ only in PartitionKeyValue or KeyPrefix can share a
// table without seeing each other's records. Expressions name attributes
// through #placeholders only, so reserved words are fine as names. An
// invalid layout is an error matching ErrLayout (Layout.Validate).
//
// # Writes
//
// Claim is a conditional UpdateItem that expects no record
// (attribute_not_exists(pk), attempt 1): the usual case, and the smallest
// request, since a server's cost grows with the expressions it evaluates.
// ReturnValuesOnConditionCheckFailure=ALL_OLD gives the blocking record in
// the same round trip, so a replay is one request; servers that do not
// return it (dynalite) cost one consistent GetItem more. When that record
// may be claimed, a second UpdateItem takes it over. It is an UpdateItem,
// not a PutItem as the design first sketched, because a claim keeps the
// attempt number of the record it takes over (attempts =
// if_not_exists(attempts, 1), and likewise attempt_at) and a PutItem
// replaces the whole item. Its condition: the key is absent, or the live
// record is failed, or it is uncertain or pending with a lapsed lease and
// has the same fingerprint. In words:
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
// A pending record never expires (ledger.Record.Expired): an abandoned one
// whose retention has run out is taken over like any abandoned claim and
// returned, so that the caller reconciles first. ReturnValues=ALL_OLD gives
// the record taken over. A settled record whose retention has run out but
// that TTL has not deleted yet (TTL lags by up to about two days) is
// replaced by a second conditional write (absent, or expired and not
// pending) that restarts the attempt number, as over an absent key.
//
// Complete, Fail and Extend are UpdateItems conditional on owner and state
// pending; a false condition is ledger.ErrNotOwner. Extend also raises
// expires_at to the new lease end, rounded up to the second, so TTL never
// deletes a live claim: expressions have no maximum, so a first request
// moves the lease on condition that expires_at is already beyond it, and
// only when it is not does a second one raise both. TTL does delete an
// abandoned claim once its retention has passed; run the sweeper
// (package reconcile) well within the retention so that abandoned claims
// are reconciled before that. Get is a consistent GetItem, List a Query on
// the index per state (per shard of a state with Layout.Shards, then a
// BatchGetItem of the records found) from the page's cursor (eventually
// consistent); both treat expired records as absent. With Layout.Shards,
// Claim, Complete and Fail set state_shard with the state.
//
// # Retries
//
// Throttling (ProvisionedThroughputExceeded, ThrottlingException,
// RequestLimitExceeded), 5xx answers and broken connections are retried with
// exponential backoff (Config.MaxAttempts, InitialBackoff, MaxBackoff). The
// Store is the only retry layer: it turns the SDK's retryer off for its
// requests, because it must know when an attempt's outcome was lost. If a
// retried write then fails its condition because the lost attempt had in fact
// been applied, the Store recognises its own write (same owner, the intended
// state) and reports success; a claim recovered that way reports the record
// as Previous, so that ClaimResult.MustReconcile makes the caller check the
// provider first. A false condition is never retried. When the attempts run
// out, or on any other error, the error wraps ledger.ErrUnavailable and the
// SDK error.
//
// # IAM
//
// The least privilege for the application (replace REGION, ACCOUNT and TABLE):
//
//	{
//	  "Version": "2012-10-17",
//	  "Statement": [
//	    {
//	      "Sid": "IdemkitLedgerItems",
//	      "Effect": "Allow",
//	      "Action": ["dynamodb:GetItem", "dynamodb:UpdateItem"],
//	      "Resource": "arn:aws:dynamodb:REGION:ACCOUNT:table/TABLE"
//	    },
//	    {
//	      "Sid": "IdemkitLedgerList",
//	      "Effect": "Allow",
//	      "Action": ["dynamodb:Query"],
//	      "Resource": "arn:aws:dynamodb:REGION:ACCOUNT:table/TABLE/index/state-lease_until"
//	    }
//	  ]
//	}
//
// With Layout.Shards, List also reads the table with dynamodb:BatchGetItem
// (add it to the first statement), and the index resource is
// index/state_shard-lease_until. With a layout, the item statement can be
// narrowed with a dynamodb:LeadingKeys condition on the partition key:
// StringEquals the PartitionKeyValue, or StringLike the KeyPrefix
// followed by "*" when the action key is the partition key (see the
// README). The index resource is Layout.Index when it is set.
//
// And, for the principal that runs CreateTable (setup only):
//
//	{
//	  "Version": "2012-10-17",
//	  "Statement": [
//	    {
//	      "Sid": "IdemkitLedgerSetup",
//	      "Effect": "Allow",
//	      "Action": [
//	        "dynamodb:CreateTable",
//	        "dynamodb:DescribeTable",
//	        "dynamodb:DescribeTimeToLive",
//	        "dynamodb:UpdateTimeToLive"
//	      ],
//	      "Resource": "arn:aws:dynamodb:REGION:ACCOUNT:table/TABLE"
//	    }
//	  ]
//	}
//
// InitTable on an existing table with a sharded layout also needs
// dynamodb:UpdateTable (to add the index), dynamodb:Scan and
// dynamodb:UpdateItem (to file the records under it).
//
// # Testing
//
// The tests run against dynalite, a DynamoDB-compatible server from npm
// pinned in tools/dynalite, or against the server named by
// DYNAMODB_ENDPOINT (with AWS credentials from the environment when set,
// for real DynamoDB). Package dynalitetest provides both to any test:
// dynalitetest.Main in TestMain, then dynalitetest.Endpoint, NewClient and
// NewTable in the tests.
package ledgerdynamo
