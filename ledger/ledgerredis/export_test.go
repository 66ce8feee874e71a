package ledgerredis

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// FillDone writes done records of the run "run-fill" with the given keys,
// settled at at and kept for a day, straight into s's layout (the record,
// its TTL, the done index, the run's index and the index of all records),
// pipelined, and marks every bucket indexed: for benchmarks that need a
// large ledger quickly.
func FillDone(ctx context.Context, s *Store, keys []string, at time.Time) error {
	l, e := ms(at), ms(at.Add(24*time.Hour))
	const batch = 5000
	for from := 0; from < len(keys); from += batch {
		p := s.c.Pipeline()
		for _, key := range keys[from:min(from+batch, len(keys))] {
			k := s.keys(key, "run-fill")
			p.HSet(ctx, k[0], "t", "send_reply", "u", "run-fill", "s", "done", "o", "owner", "l", l, "e", e,
				"f", "fp", "a", 1, "at", l, "m", "sent", "r", "msg_1", "w", l)
			p.PExpireAt(ctx, k[0], time.UnixMilli(e+60000))
			p.ZAdd(ctx, k[4], redisZ(l, key))
			p.ZAdd(ctx, k[2], redisZ(e+60000, key))
			p.ZAdd(ctx, k[6], redisZ(l, key))
			p.PExpireAt(ctx, k[6], time.UnixMilli(e+60000))
		}
		if _, err := p.Exec(ctx); err != nil {
			return err
		}
	}
	for b := range s.tags {
		if err := s.c.Set(ctx, s.tag(b)+runsIndexedMarker, "1", 0).Err(); err != nil {
			return err
		}
	}
	return nil
}

func redisZ(score int64, member string) redis.Z {
	return redis.Z{Score: float64(score), Member: member}
}

// ScriptNames maps the SHA1 of each script to its name, for reading the
// server's SLOWLOG.
func ScriptNames() map[string]string {
	return map[string]string{
		claimScript.Hash(): "claim", completeScript.Hash(): "complete", failScript.Hash(): "fail",
		extendScript.Hash(): "extend", listScanScript.Hash(): "list", dropStaleScript.Hash(): "drop-stale",
		reindexOneScript.Hash(): "reindex", scanScript.Hash(): "scan", purgeOneScript.Hash(): "purge", markScript.Hash(): "mark",
	}
}

// Tags returns the hash tags of s's buckets.
func Tags(s *Store) []string {
	tags := make([]string, len(s.tags))
	for i, t := range s.tags {
		tags[i] = t[1 : len(t)-2] // "{tag}:"
	}
	return tags
}
