package ledgersqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/idemkit/idemkit/ledger"
)

// maxBatch bounds the writes committed together.
const maxBatch = 256

// errClosed answers writes to a closed Store.
var errClosed = errors.New("ledgersqlite: store closed")

// op is one write. run executes its statement on the writing connection,
// inside the batch's transaction when there is one, and keeps its own
// result; it returns ledger.ErrNotOwner as an answer, any other error as a
// failure of the batch.
type op struct {
	ctx  context.Context
	name string
	run  func(ctx context.Context) error
	done chan error // buffered: the committer never waits for the caller
}

// Stats counts the writes of a Store and the commits that made them
// durable: Writes/Commits is the mean batch size of group commit.
type Stats struct {
	Writes  uint64
	Commits uint64
}

// writer is the group commit of one Store: whoever commits owns the
// writing connection. A write that finds nobody committing commits at
// once, on its caller's goroutine, alone: a single caller never waits for
// company or for a hand-over. Writes that arrive while a commit is running
// queue; when it ends, the committer starts a goroutine that takes every
// queued write into one transaction (one disk sync for all), and so on
// until the queue is empty.
type writer struct {
	conn    *sql.Conn
	verify  func() error
	failed  func(op string, err error) error
	writes  atomic.Uint64
	commits atomic.Uint64
	running atomic.Int64 // writes in the batch being committed

	mu         sync.Mutex
	queue      []*op
	committing bool
	closed     bool
	active     sync.WaitGroup // while committing
}

// submit runs a write and returns its answer.
func (w *writer) submit(o *op) error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return errClosed
	}
	w.queue = append(w.queue, o)
	if w.committing {
		w.mu.Unlock()
		select {
		case err := <-o.done:
			return err
		case <-o.ctx.Done():
			// The write may still be committed: only the answer is lost.
			return w.failed(o.name, fmt.Errorf("gave up waiting for the write: %w", o.ctx.Err()))
		}
	}
	w.committing = true
	w.active.Add(1)
	w.mu.Unlock()
	w.lead()
	return <-o.done
}

// lead commits the queued writes, then hands the queue over to a new
// goroutine if more arrived meanwhile, or stops committing.
func (w *writer) lead() {
	w.mu.Lock()
	n := min(len(w.queue), maxBatch)
	batch := append([]*op(nil), w.queue[:n]...)
	w.queue = append(w.queue[:0], w.queue[n:]...)
	w.mu.Unlock()

	w.commit(batch)

	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.queue) > 0 {
		go w.lead()
		return
	}
	w.committing = false
	w.active.Done()
}

// close refuses new writes and waits until the queued ones are committed.
func (w *writer) close() {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	w.active.Wait()
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
	answers := make([]error, len(live))
	fail := func(name string, err error) {
		for _, o := range live {
			o.done <- w.failed(name, err)
		}
	}
	if len(live) == 1 {
		// Alone, as a plain statement under its caller's context.
		o := live[0]
		if answers[0] = o.run(o.ctx); answers[0] != nil && !isAnswer(answers[0]) {
			fail(o.name, answers[0])
			return
		}
	} else {
		// Together: the statements run to the end whoever waits; a caller
		// that gives up only stops waiting, as with a lost answer.
		ctx := context.Background()
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

// submit runs a write through the group commit and returns its answer.
func (s *Store) submit(ctx context.Context, name string, run func(ctx context.Context) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := s.refused(); err != nil {
		return err
	}
	return s.wr.submit(&op{ctx: ctx, name: name, run: run, done: make(chan error, 1)})
}

// Stats returns the counts of writes and commits since Open.
func (s *Store) Stats() Stats {
	if s.wr == nil {
		return Stats{}
	}
	return Stats{Writes: s.wr.writes.Load(), Commits: s.wr.commits.Load()}
}
