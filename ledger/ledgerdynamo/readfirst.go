package ledgerdynamo

import (
	"context"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/idemkit/idemkit/ledger"
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
// the read is one more round trip and half a read unit, for nothing.
type ReadFirst int

const (
	// ReadFirstSeen (the default) reads first when this Store has seen
	// the key done: it completed it, or a claim or read found it done.
	// It remembers the last 4,096 such keys. A new key costs what it did
	// without reading; so does the first replay in another process (a
	// Lambda instance that never saw the key). Where replays across
	// processes are common, ReadFirstAlways pays once the replays are
	// more than about one claim in twenty (README: Sizing and cost).
	ReadFirstSeen ReadFirst = iota
	// ReadFirstAlways reads first on every claim: every replay is a read,
	// and every new key costs one more request and half a read unit.
	ReadFirstAlways
	// ReadFirstNever never reads first: a replay is the failed
	// conditional write, billed at the stored record's size.
	ReadFirstNever
)

// seenKeys bounds the keys ReadFirstSeen remembers.
const seenKeys = 4096

// newSeen returns the set of keys seen done, or nil when the mode needs
// none.
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

// readsFirst reports whether a claim of key reads the record first.
func (s *Store) readsFirst(key string) bool {
	switch s.cfg.ReadFirst {
	case ReadFirstAlways:
		return true
	case ReadFirstSeen:
		return s.seen.Contains(key)
	}
	return false
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
