// Package listmerge merges listings that a store keeps in several sorted
// sources (the buckets and states of a Redis ledger, the index shards of a
// DynamoDB one) into one page in the order of ledger.Cursor, reading from
// each source only what the page needs.
package listmerge

import (
	"context"

	"github.com/oncely/oncely/ledger"
)

// Request asks one source for up to N records after the position After.
type Request struct {
	Source int
	After  ledger.Cursor
	N      int
}

// Reply is one source's answer: records in cursor order, all after the
// request's position. Next is how far the source read (at least the last
// record's position: a source that filters may read past records it does
// not return), and Done says that it holds nothing after Next.
type Reply struct {
	Records []ledger.Record
	Next    ledger.Cursor
	Done    bool
}

// Fetch answers the requests, one reply each in the same order. A store
// sends them together (a pipeline, concurrent queries).
type Fetch func(ctx context.Context, reqs []Request) ([]Reply, error)

// Merge returns the first limit records of the sources after the position
// after, in cursor order. Each round fetches from the sources whose
// buffered records are used up, until the page is full or every source is
// done: a source that holds none of the page's records is read once.
func Merge(ctx context.Context, sources int, after ledger.Cursor, limit int, fetch Fetch) ([]ledger.Record, error) {
	// Each source's share of the page, with a little room for skew; a
	// source that holds more of the page is read again.
	return MergeChunk(ctx, sources, after, limit, min(limit, limit/max(sources, 1)+4), fetch)
}

// MergeChunk is Merge asking each source for up to chunk records at a
// time (at least 1): a store whose reads cost little per record and much
// per request asks for more than a source's share of the page, so that
// few sources are read twice.
func MergeChunk(ctx context.Context, sources int, after ledger.Cursor, limit, chunk int, fetch Fetch) ([]ledger.Record, error) {
	type source struct {
		buf  []ledger.Record
		pos  ledger.Cursor
		done bool
	}
	src := make([]source, sources)
	for i := range src {
		src[i].pos = after
	}
	chunk = max(chunk, 1)
	var out []ledger.Record
	for len(out) < limit {
		var reqs []Request
		for i := range src {
			if len(src[i].buf) == 0 && !src[i].done {
				reqs = append(reqs, Request{Source: i, After: src[i].pos, N: min(chunk, limit-len(out))})
			}
		}
		if len(reqs) > 0 {
			replies, err := fetch(ctx, reqs)
			if err != nil {
				return nil, err
			}
			for j, rep := range replies {
				s := &src[reqs[j].Source]
				s.buf, s.done = rep.Records, rep.Done
				if s.pos.Compare(rep.Next) < 0 {
					s.pos = rep.Next
				}
			}
		}
		// Take the smallest head while every source that may hold more has
		// one buffered.
		for len(out) < limit {
			best, refill := -1, false
			for i := range src {
				switch {
				case len(src[i].buf) > 0:
					if best < 0 || ledger.CursorOf(&src[i].buf[0]).Compare(ledger.CursorOf(&src[best].buf[0])) < 0 {
						best = i
					}
				case !src[i].done:
					refill = true
				}
			}
			if refill {
				break
			}
			if best < 0 {
				return out, nil
			}
			out = append(out, src[best].buf[0])
			src[best].buf = src[best].buf[1:]
		}
	}
	return out, nil
}
