package ledgerdynamo

import (
	"context"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/oncely/oncely/ledger"
)

// ReadFirst says when a Claim reads the key's record before its
// conditional write (Config.ReadFirst).
//
// A claim that finds a done record is a replay, and DynamoDB bills a
// conditional write whose condition fails as a write of the item it was
// checked against: 2, 65 or 257 write units for a record with a 1, 64 or
// 256 KiB result. An eventually consistent GetItem of the same record
// costs 0.5, 8.5 or 32.5 read units, and on demand a read unit costs a
// fifth of a write unit. A done record read eventually consistently is
// final (done changes only by expiring, which the Store checks with its
// clock), so a Claim may answer from it; any other record, or none, goes
// to the conditional write, which alone decides a claim. For a new key
// the read is one more round trip and half a read unit, for nothing: the
// default reads first only where a replay is likely.
type ReadFirst int

const (
	// ReadFirstSeen (the default) reads first when this Store has seen
	// the key done (it completed it, or a claim or read found it done),
	// and for the claims of a run until one of them claims a new key in
	// this Store. A run resumed by another process (a restart, a Lambda
	// instance that never saw it) replays its done actions before it acts
	// anew, so each such replay is a read; once the run acts anew here,
	// its later claims are new keys or keys this Store saw done. A new
	// key costs what it did without reading, except the first claim of
	// each run in a Store (one GetItem more). It remembers the last 4,096
	// keys and runs of each kind. A replay still claims (a write) when
	// another process completed the key after this Store acted anew in
	// the run (two processes serving one run at once); ReadFirstAlways
	// reads first on every claim.
	ReadFirstSeen ReadFirst = iota
	// ReadFirstAlways reads first on every claim: every replay is a read,
	// and every new key costs one more request and half a read unit.
	ReadFirstAlways
	// ReadFirstNever never reads first: a replay is the failed
	// conditional write, billed at the stored record's size.
	ReadFirstNever
)

// seenKeys bounds the keys, and the runs, ReadFirstSeen remembers.
const seenKeys = 4096

// newSeen returns a set of keys (or runs) for ReadFirstSeen, or nil when
// the mode needs none.
func newSeen(mode ReadFirst) *lru.Cache[string, struct{}] {
	if mode != ReadFirstSeen {
		return nil
	}
	c, err := lru.New[string, struct{}](seenKeys)
	if err != nil {
		panic(err) // only for a size <= 0
	}
	return c
}

// readsFirst reports whether a claim reads the record first.
func (s *Store) readsFirst(p ledger.ClaimParams) bool {
	switch s.cfg.ReadFirst {
	case ReadFirstAlways:
		return true
	case ReadFirstSeen:
		return s.seen.Contains(p.Key) || !s.acting.Contains(p.RunID)
	}
	return false
}

// actedAnew remembers that a claim of run took a new key (ReadFirstSeen):
// the run is past its replays in this Store.
func (s *Store) actedAnew(run string) {
	if s.acting != nil {
		s.acting.Add(run, struct{}{})
	}
}

// sawDone remembers that key was found done (ReadFirstSeen).
func (s *Store) sawDone(key string) {
	if s.seen != nil {
		s.seen.Add(key, struct{}{})
	}
}

// replay answers a claim from an eventually consistent read when the
// record is done and live (ok); otherwise the caller claims. A read that
// fails leaves the answer to the claim.
func (s *Store) replay(ctx context.Context, p ledger.ClaimParams) (res ledger.ClaimResult, ok bool) {
	rec, err := s.read(ctx, p.Key, false)
	if err != nil || rec == nil || rec.State != ledger.StateDone || rec.Expired(s.cfg.Clock.Now()) {
		if s.seen != nil && err == nil {
			s.seen.Remove(p.Key)
		}
		return ledger.ClaimResult{}, false
	}
	return ledger.Refused(rec, p.Owner), true
}
