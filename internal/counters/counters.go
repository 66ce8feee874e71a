// Package counters keeps, per tool, what an executor or a sweeper did that
// the ledger's records do not show (a replay writes nothing), and writes it
// into the ledger as counter records: done records of the reserved tool
// and run ledger.CountersRun, one per tool that had something to count,
// at most once per Interval per Recorder (one a minute by default), never
// on the path of the call that is counted. The operator console reads them
// for its replay and reconcile rates.
//
// A counter record costs what one fresh action costs the ledger (a claim
// and a completion: on PostgreSQL about 1.2 KB of WAL, on DynamoDB 3 WU),
// per tool and Interval and process, whatever the number of calls counted.
// Counts not yet written when a process exits are lost unless it calls
// Flush (client.Executor.FlushCounters).
package counters

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/oncely/oncely/clock"
	"github.com/oncely/oncely/ledger"
)

// Counts are what was done with one tool.
type Counts struct {
	// Tool is the counted tool's name.
	Tool string `json:"tool"`
	// Executed: calls that ran the tool and succeeded.
	Executed int64 `json:"executed,omitempty"`
	// Replayed: calls answered from a done record (nothing written).
	Replayed int64 `json:"replayed,omitempty"`
	// Merged: duplicates in flight merged in one process.
	Merged int64 `json:"merged,omitempty"`
	// Reconciled: actions whose outcome a reconciler established (the
	// effect found, or conclusively absent), in an executor or a sweep.
	Reconciled int64 `json:"reconciled,omitempty"`
}

// Add adds d's counts to c's.
func (c *Counts) Add(d Counts) {
	c.Executed += d.Executed
	c.Replayed += d.Replayed
	c.Merged += d.Merged
	c.Reconciled += d.Reconciled
}

func (c Counts) empty() bool {
	return c.Executed == 0 && c.Replayed == 0 && c.Merged == 0 && c.Reconciled == 0
}

// Interval is how often a Recorder writes, at most.
const Interval = time.Minute

// Retention is how long a counter record is kept: the console's longest
// range (7 days) and a day.
const Retention = 8 * 24 * time.Hour

// Recorder accumulates counts in memory and writes them at most once per
// interval. It is safe for concurrent use.
type Recorder struct {
	store    ledger.Store
	clock    clock.Clock
	interval time.Duration
	token    string // names this Recorder in its records' keys

	mu      sync.Mutex
	pending map[string]*Counts
	timer   bool // a write is scheduled
	seq     int
	writing sync.Mutex // one write at a time
	// OnError, when set, receives the error of a scheduled write (whose
	// counts are kept for the next one).
	OnError func(error)
}

// New returns a Recorder that writes into store every interval (0:
// Interval), stamping its records with clk's time.
func New(store ledger.Store, clk clock.Clock, interval time.Duration) *Recorder {
	if interval <= 0 {
		interval = Interval
	}
	if clk == nil {
		clk = clock.System{}
	}
	return &Recorder{store: store, clock: clk, interval: interval, token: ledger.NewOwner()[:16], pending: map[string]*Counts{}}
}

// Add counts d for its tool. The first count after a write schedules the
// next write an interval later (a timer: nothing is written here).
func (r *Recorder) Add(d Counts) {
	if r == nil || d.empty() || d.Tool == ledger.CountersRun {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.pending[d.Tool]
	if c == nil {
		c = &Counts{Tool: d.Tool}
		r.pending[d.Tool] = c
	}
	c.Add(d)
	if !r.timer {
		r.timer = true
		time.AfterFunc(r.interval, func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := r.Flush(ctx); err != nil && r.OnError != nil {
				r.OnError(err)
			}
		})
	}
}

// Flush writes the counts accumulated so far, one record per tool, now.
// Counts it could not write are kept for the next write.
func (r *Recorder) Flush(ctx context.Context) error {
	if r == nil {
		return nil
	}
	r.writing.Lock()
	defer r.writing.Unlock()
	r.mu.Lock()
	pending := r.pending
	r.pending = map[string]*Counts{}
	r.timer = false
	r.seq++
	seq := r.seq
	r.mu.Unlock()
	var firstErr error
	for _, c := range pending {
		if err := write(ctx, r.store, r.clock, r.token+"/"+strconv.Itoa(seq), *c); err != nil {
			if firstErr == nil {
				firstErr = err
			}
			r.mu.Lock()
			if p := r.pending[c.Tool]; p != nil {
				p.Add(*c)
			} else {
				r.pending[c.Tool] = c
			}
			r.mu.Unlock()
		}
	}
	return firstErr
}

// Write records each of cs as one counter record now, for a writer that
// counts a bounded batch of work (a sweep) rather than calls.
func Write(ctx context.Context, store ledger.Store, clk clock.Clock, cs ...Counts) error {
	token := ledger.NewOwner()[:16]
	var errs []error
	for _, c := range cs {
		if !c.empty() {
			errs = append(errs, write(ctx, store, clk, token, c))
		}
	}
	return errors.Join(errs...)
}

// write records c as one counter record under a key unique to the writer
// and the write (token).
func write(ctx context.Context, store ledger.Store, clk clock.Clock, token string, c Counts) error {
	sum := sha256.Sum256([]byte(c.Tool))
	key := ledger.CountersRun + "/" + token + "/" + hex.EncodeToString(sum[:8])
	body, err := json.Marshal(c)
	if err != nil {
		return err
	}
	now := clk.Now()
	owner := ledger.NewOwner()
	cr, err := store.Claim(ctx, ledger.ClaimParams{Key: key, Tool: ledger.CountersRun, RunID: ledger.CountersRun, Owner: owner,
		LeaseUntil: now.Add(time.Minute), Fingerprint: ledger.CountersRun, ExpiresAt: now.Add(Retention)})
	switch {
	case err != nil:
		return fmt.Errorf("counters: %w", err)
	case !cr.Claimed:
		return fmt.Errorf("counters: the key %s is taken", key)
	}
	summary := fmt.Sprintf("%s: %d executed, %d replayed, %d merged, %d reconciled", c.Tool, c.Executed, c.Replayed, c.Merged, c.Reconciled)
	if err := store.Complete(ctx, key, owner, ledger.Completion{Summary: summary, Result: body, Retention: Retention}.Fit(ledger.MaxResultBytes)); err != nil {
		return fmt.Errorf("counters: %w", err)
	}
	return nil
}

// Decode reads a counter record (one of tool ledger.CountersRun); ok is
// false for any other record.
func Decode(rec *ledger.Record) (c Counts, ok bool) {
	if rec.Tool != ledger.CountersRun || rec.RunID != ledger.CountersRun || rec.State != ledger.StateDone {
		return Counts{}, false
	}
	if err := json.Unmarshal(rec.Result, &c); err != nil || c.Tool == "" {
		return Counts{}, false
	}
	return c, true
}
