package ledgersqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/idemkit/idemkit/ledger"
)

// maxBatch bounds the writes committed together.
const maxBatch = 256

// errClosed answers writes to a closed Store.
var errClosed = errors.New("ledgersqlite: store closed")

// op is one write waiting for the writer. run executes its statement on
// the writer's connection, inside the batch's transaction when there is
// one, and keeps its own result; it returns ledger.ErrNotOwner as an
// answer, any other error as a failure of the batch.
type op struct {
	ctx  context.Context
	name string
	run  func(ctx context.Context) error
	done chan error
}

// Stats counts the writes of a Store and the commits that made them
// durable: Writes/Commits is the mean batch size of group commit.
type Stats struct {
	Writes  uint64
	Commits uint64
}

// writer is the group commit of one Store. One goroutine owns the writing
// connection. It takes the next write, and with it every write that queued
// while the previous commit was running, and commits them in one
// transaction: one disk sync for all. A write that finds the writer idle
// goes alone, at once, as a plain statement: a single caller never waits
// for company.
type writer struct {
	conn    *sql.Conn
	ops     chan *op
	quit    chan struct{}
	stopped chan struct{}
	verify  func() error
	failed  func(op string, err error) error
	writes  atomic.Uint64
	commits atomic.Uint64
	running atomic.Int64 // writes in the batch being committed
}

func (w *writer) loop() {
	defer close(w.stopped)
	batch := make([]*op, 0, maxBatch)
	for {
		select {
		case o := <-w.ops:
			batch = append(batch[:0], o)
		case <-w.quit:
			w.drain()
			return
		}
	more:
		for len(batch) < maxBatch {
			select {
			case o := <-w.ops:
				batch = append(batch, o)
			default:
				break more
			}
		}
		w.commit(batch)
		clear(batch)
	}
}

// drain answers the writes still queued when the Store closes.
func (w *writer) drain() {
	for {
		select {
		case o := <-w.ops:
			o.done <- errClosed
		default:
			return
		}
	}
}

// commit runs the batch and answers every write in it. A failure of one
// statement or of the commit rolls the whole batch back and is every
// write's answer (ledger.ErrUnavailable); so is a file found replaced.
func (w *writer) commit(batch []*op) {
	live := batch[:0]
	for _, o := range batch {
		if err := o.ctx.Err(); err != nil {
			o.done <- err
			continue
		}
		live = append(live, o)
	}
	if len(live) == 0 {
		return
	}
	w.running.Store(int64(len(live)))
	defer w.running.Store(0)
	// The statements run to the end whoever waits: a caller that gives up
	// only stops waiting, as with a lost answer.
	ctx := context.Background()
	answers := make([]error, len(live))
	fail := func(name string, err error) {
		for _, o := range live {
			o.done <- w.failed(name, err)
		}
	}
	if len(live) == 1 {
		answers[0] = live[0].run(ctx)
		if answers[0] != nil && !isAnswer(answers[0]) {
			fail(live[0].name, answers[0])
			return
		}
	} else {
		if _, err := w.conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
			fail("begin", err)
			return
		}
		for i, o := range live {
			if answers[i] = o.run(ctx); answers[i] != nil && !isAnswer(answers[i]) {
				_, _ = w.conn.ExecContext(ctx, "ROLLBACK")
				fail(o.name, answers[i])
				return
			}
		}
		if _, err := w.conn.ExecContext(ctx, "COMMIT"); err != nil {
			_, _ = w.conn.ExecContext(ctx, "ROLLBACK")
			fail("commit", err)
			return
		}
	}
	w.writes.Add(uint64(len(live)))
	w.commits.Add(1)
	if err := w.verify(); err != nil {
		for _, o := range live {
			o.done <- err
		}
		return
	}
	for i, o := range live {
		o.done <- answers[i]
	}
}

// isAnswer reports whether a write's error is its answer rather than a
// failure.
func isAnswer(err error) bool { return errors.Is(err, ledger.ErrNotOwner) }

// Stats returns the counts of writes and commits since Open.
func (s *Store) Stats() Stats {
	if s.wr == nil {
		return Stats{}
	}
	return Stats{Writes: s.wr.writes.Load(), Commits: s.wr.commits.Load()}
}

// submit queues a write and waits for its answer.
func (s *Store) submit(ctx context.Context, name string, run func(ctx context.Context) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := s.refused(); err != nil {
		return err
	}
	o := &op{ctx: ctx, name: name, run: run, done: make(chan error, 1)}
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return errClosed
	}
	s.wr.ops <- o
	s.mu.RUnlock()
	select {
	case err := <-o.done:
		return err
	case <-ctx.Done():
		return s.unavailable(name, fmt.Errorf("gave up waiting for the write: %w", ctx.Err()))
	}
}
