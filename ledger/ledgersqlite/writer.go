package ledgersqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/oncely/oncely/ledger"
)

// maxBatch bounds the writes committed together.
const maxBatch = 256

// errClosed answers writes to a closed Store.
var errClosed = errors.New("ledgersqlite: store closed")

// errUnchanged is the answer of a write whose statement changed nothing
// and whose caller goes on to read the committed record (a claim that a
// record blocks): it is answered as soon as its statement has run, without
// waiting for the commit or its sync, unless a write of the same key came
// before it in its transaction (what it found is then not committed yet).
var errUnchanged = errors.New("ledgersqlite: nothing changed")

// op is one write of key. run executes its statement on the writing
// connection, inside the batch's transaction when there is one, and keeps
// its own result; it returns ledger.ErrNotOwner or errUnchanged as an
// answer, any other error as a failure of the batch.
type op struct {
	ctx  context.Context
	name string
	key  string
	run  func(ctx context.Context) error
	done chan error // buffered: the committer never waits for the caller
	gen  uint64     // the syncs that had ended when the write was submitted
}

// Stats counts the writes of a Store, the commits that made them, and the
// disk syncs that made those durable (none with SyncNormal):
// Writes/Commits is the mean batch size of group commit, Commits/Syncs the
// mean number of commits one sync covered.
type Stats struct {
	Writes  uint64
	Commits uint64
	Syncs   uint64
}

// writer is the group commit of one Store: whoever commits owns the
// writing connection. A write that finds nobody committing commits at
// once, on its caller's goroutine: a single caller never waits for
// company or for a hand-over. Writes that arrive while a commit is running
// queue; when it ends, the committer starts a goroutine that takes every
// queued write into one transaction, and so on until the queue is empty.
//
// With sync set (SyncFull), SQLite does not sync at commit; a commit is
// durable once sync has returned after it, and nobody is answered before.
// A committer syncs after handing the connection over, and one sync covers
// every commit made before it began. While a commit still waits for its
// sync, the next batch does not commit: it runs its statements in an open
// transaction, taking in the writes that arrive, and commits when the sync
// ends. So the disk syncs one batch while the next one runs, and there is
// one commit per sync, whatever the number of callers.
//
// A batch about to commit after a sync that covered the writes of several
// callers first gathers (gatherFor): those callers, answered at that
// sync's end, usually write again at once, and without the wait they
// would form a cohort of their own, committing while the others' sync
// runs, every write waiting for two syncs.
type writer struct {
	conn   *sql.Conn
	verify func() error
	failed func(op string, err error) error
	sync   func() error // makes every commit so far durable; nil: SQLite does
	// settled, if set, signals that a commit settled records (Complete,
	// Fail): called once it is durable, before its writes are answered.
	settled func()
	writes  atomic.Uint64
	commits atomic.Uint64
	syncs   atomic.Uint64
	running atomic.Int64 // writes in the batch being committed

	// busyTimeout bounds the wait for a write lock held by another
	// process (see retryBusy).
	busyTimeout time.Duration

	mu         sync.Mutex
	queue      []*op
	committing bool
	closed     bool
	active     sync.WaitGroup // leaders: committing, or syncing and answering

	// wake (capacity 1) tells a committer waiting in an open transaction
	// that a write was queued or a sync ended.
	wake chan struct{}

	// Durability: commits are numbered in the order they were made; durable
	// is the highest number a finished sync covers.
	smu       sync.Mutex
	synced    *sync.Cond // on smu: a sync ended
	committed uint64
	durable   uint64
	syncing   bool
	// Gathering (see gatherFor): the writes committed since the last sync
	// began; the writes that sync covered and how long it took; the
	// syncs to come that do not gather.
	unsyncedWrites uint64
	lastCovered    uint64
	lastSync       time.Duration
	gatherRest     int
	gatherMax      time.Duration         // the longest gather (tests change it)
	broken         atomic.Pointer[error] // a sync failed: every later write fails
}

// newWriter returns the group commit of conn; see writer for syncer.
func newWriter(conn *sql.Conn, verify, syncer func() error, failed func(op string, err error) error) *writer {
	w := &writer{conn: conn, verify: verify, sync: syncer, failed: failed, wake: make(chan struct{}, 1), gatherMax: time.Millisecond}
	w.synced = sync.NewCond(&w.smu)
	return w
}

// poke wakes a committer waiting in an open transaction, if there is one.
func (w *writer) poke() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// submit runs a write and returns its answer.
func (w *writer) submit(o *op) error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return errClosed
	}
	if err := w.broken.Load(); err != nil {
		w.mu.Unlock()
		return *err
	}
	o.gen = w.syncs.Load()
	w.queue = append(w.queue, o)
	if w.committing {
		w.mu.Unlock()
		w.poke()
		return w.wait(o)
	}
	w.committing = true
	w.active.Add(1)
	w.mu.Unlock()
	if w.unsynced() {
		// The commit will wait for a sync, and the answer may come before
		// it (errUnchanged): the caller waits apart from the committer.
		go w.lead()
		return w.wait(o)
	}
	w.lead()
	return <-o.done
}

// wait returns the answer to o, or gives up when its context ends.
func (w *writer) wait(o *op) error {
	select {
	case err := <-o.done:
		return err
	case <-o.ctx.Done():
		// The write may still be committed: only the answer is lost.
		return w.failed(o.name, fmt.Errorf("gave up waiting for the write: %w", o.ctx.Err()))
	}
}

// lead commits the queued writes, then hands the queue over to a new
// goroutine if more arrived meanwhile, or stops committing; then it waits
// until its commit is durable and answers its writes.
func (w *writer) lead() {
	defer w.active.Done()
	batch, answers, seq := w.commit()

	w.mu.Lock()
	if len(w.queue) > 0 {
		w.active.Add(1)
		go w.lead()
	} else {
		w.committing = false
	}
	w.mu.Unlock()
	if answers == nil {
		return // answered already: nothing was committed
	}
	err := w.waitDurable(seq)
	if err == nil && w.settled != nil && settles(batch, answers) {
		w.settled()
	}
	for i, o := range batch {
		switch {
		case answers[i] == errUnchanged:
			// answered already
		case err != nil:
			o.done <- err
		default:
			o.done <- answers[i]
		}
	}
}

// settles reports whether a committed batch settled a record.
func settles(batch []*op, answers []error) bool {
	for i, o := range batch {
		if answers[i] == nil && (o.name == "complete" || o.name == "fail") {
			return true
		}
	}
	return false
}

// busy reports whether a write now would wait: one is being committed, or
// a commit waits for its sync.
func (w *writer) busy() bool {
	w.mu.Lock()
	committing := w.committing
	w.mu.Unlock()
	return committing || w.unsynced()
}

// take moves up to n queued writes into batch; a write whose caller has
// given up is answered instead.
func (w *writer) take(batch []*op, n int) []*op {
	w.mu.Lock()
	defer w.mu.Unlock()
	i := 0
	for ; i < len(w.queue) && n > 0; i++ {
		o := w.queue[i]
		if err := o.ctx.Err(); err != nil {
			o.done <- err
			continue
		}
		batch = append(batch, o)
		n--
	}
	w.queue = append(w.queue[:0], w.queue[i:]...)
	return batch
}

// unsynced reports whether a commit waits for a sync that has not ended.
func (w *writer) unsynced() bool {
	if w.sync == nil || w.broken.Load() != nil {
		return false
	}
	w.smu.Lock()
	defer w.smu.Unlock()
	return w.committed > w.durable
}

// commit takes the queued writes and commits them; it returns the writes,
// each one's answer and the number of the commit. A failure of one
// statement or of the commit (which rolls the whole batch back:
// ledger.ErrUnavailable for every write) and a file found replaced are
// answered at once, and then commit returns nil answers.
func (w *writer) commit() (batch []*op, answers []error, seq uint64) {
	defer w.running.Store(0)
	batch = w.take(nil, maxBatch)
	if len(batch) == 0 {
		return nil, nil, 0
	}
	fail := func(name string, err error) {
		for i, o := range batch {
			if i >= len(answers) || answers[i] != errUnchanged {
				o.done <- w.failed(name, err)
			}
		}
	}
	if len(batch) == 1 && !w.unsynced() && w.gatherFor(batch) == 0 {
		// Alone, as a plain statement under its caller's context.
		o := batch[0]
		w.running.Store(1)
		err := retryBusy(o.ctx, w.busyTimeout, func() error { return o.run(o.ctx) })
		if err != nil && !isAnswer(err) {
			fail(o.name, err)
			return nil, nil, 0
		}
		if err == errUnchanged {
			o.done <- err
			return nil, nil, 0
		}
		answers = []error{err}
	} else {
		// Together: the statements run to the end whoever waits; a caller
		// that gives up only stops waiting, as with a lost answer.
		ctx := context.Background()
		if err := w.exec(ctx, "BEGIN IMMEDIATE"); err != nil {
			fail("begin", err)
			return nil, nil, 0
		}
		written := make(map[string]bool, len(batch))
		var gather *gathering
		for {
			w.running.Store(int64(len(batch)))
			for _, o := range batch[len(answers):] {
				err := o.run(ctx)
				switch {
				case err == errUnchanged && !written[o.key]:
					o.done <- err
				case err == errUnchanged:
					err = nil // answered with the batch, once committed
				case err != nil && !isAnswer(err):
					_, _ = w.conn.ExecContext(ctx, "ROLLBACK")
					fail(o.name, err)
					return nil, nil, 0
				default:
					written[o.key] = true
				}
				answers = append(answers, err)
			}
			if len(batch) >= maxBatch {
				break
			}
			if !w.unsynced() {
				// Durable so far: commit now, or first gather.
				if gather == nil {
					if want := w.gatherFor(batch); want > 0 {
						gather = &gathering{want: want, timer: time.NewTimer(w.gatherTime())}
						defer gather.timer.Stop()
					}
				}
				if gather == nil || len(batch) >= gather.want {
					break
				}
				select {
				case <-w.wake:
				case <-gather.timer.C:
					w.smu.Lock()
					w.gatherRest = gatherRest
					w.smu.Unlock()
					batch = w.take(batch, maxBatch-len(batch))
					gather.want = 0 // commit what arrived
					continue
				}
				batch = w.take(batch, maxBatch-len(batch))
				continue
			}
			<-w.wake // a write queued, or the sync ended
			batch = w.take(batch, maxBatch-len(batch))
		}
		if err := w.exec(ctx, "COMMIT"); err != nil {
			_, _ = w.conn.ExecContext(ctx, "ROLLBACK")
			fail("commit", err)
			return nil, nil, 0
		}
	}
	w.writes.Add(uint64(len(batch)))
	w.commits.Add(1)
	if err := w.verify(); err != nil {
		for i, o := range batch {
			if answers[i] != errUnchanged {
				o.done <- err
			}
		}
		return nil, nil, 0 // not numbered: nobody waits for its sync
	}
	w.smu.Lock()
	w.committed++
	seq = w.committed
	w.unsyncedWrites += uint64(len(batch))
	w.smu.Unlock()
	return batch, answers, seq
}

// exec runs a statement of transaction control, waiting for a write lock
// held by another process (a COMMIT that fails with SQLITE_BUSY leaves the
// transaction open, so it can be run again too).
func (w *writer) exec(ctx context.Context, query string) error {
	return retryBusy(ctx, w.busyTimeout, func() error {
		_, err := w.conn.ExecContext(ctx, query)
		return err
	})
}

// waitDurable returns once commit seq is durable: it syncs, or waits for
// a sync that began after the commit. A failed sync leaves unknown which
// commits reached the disk (and a later sync may not report the failure
// again), so it fails every write from then on.
func (w *writer) waitDurable(seq uint64) error {
	if w.sync == nil {
		return nil
	}
	w.smu.Lock()
	defer w.smu.Unlock()
	for w.durable < seq {
		if err := w.broken.Load(); err != nil {
			return *err
		}
		if w.syncing {
			w.synced.Wait()
			continue
		}
		w.syncing = true
		upto, covered := w.committed, w.unsyncedWrites
		w.unsyncedWrites = 0
		w.smu.Unlock()
		t0 := time.Now()
		err := w.sync()
		took := time.Since(t0)
		w.smu.Lock()
		w.syncing = false
		w.lastCovered, w.lastSync = covered, took
		if w.gatherRest > 0 {
			w.gatherRest--
		}
		w.syncs.Add(1)
		if err != nil {
			err = w.failed("sync", err)
			w.broken.Store(&err)
		} else {
			w.durable = upto
		}
		w.synced.Broadcast()
		w.poke()
	}
	return nil
}

// gatherRest is the number of syncs that do not gather after a gather
// that timed out.
const gatherRest = 8

// gathering is a batch's wait for the writes it expects.
type gathering struct {
	want  int
	timer *time.Timer
}

// gatherFor returns the number of writes a batch of the given writes,
// about to commit with every earlier commit durable, should wait for (0:
// commit now). When the last sync covered the writes of several callers,
// the batch expects them again (answered at that sync's end, they write
// again at once) beside the writes that waited for that sync: so that they
// share the next sync rather than split into two cohorts, one committing
// while the other's sync runs, each write waiting for two syncs.
func (w *writer) gatherFor(batch []*op) int {
	if w.sync == nil {
		return 0
	}
	ended := w.syncs.Load()
	w.smu.Lock()
	defer w.smu.Unlock()
	if w.lastCovered < 2 {
		return 0
	}
	if w.gatherRest > 0 {
		return 0
	}
	want := int(w.lastCovered)
	for _, o := range batch {
		if o.gen < ended {
			want++ // it waited for the last sync: not one of its callers
		}
	}
	return min(want, maxBatch)
}

// gatherTime bounds a gather: the time of the last sync, at most
// gatherMax (1 ms).
func (w *writer) gatherTime() time.Duration {
	w.smu.Lock()
	defer w.smu.Unlock()
	return min(w.lastSync, w.gatherMax)
}

// close refuses new writes and waits until the queued ones are answered.
func (w *writer) close() {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	w.active.Wait()
}

// isAnswer reports whether a write's error is its answer rather than a
// failure.
func isAnswer(err error) bool { return errors.Is(err, ledger.ErrNotOwner) }

// submit runs a write through the group commit and returns its answer.
func (s *Store) submit(ctx context.Context, name, key string, run func(ctx context.Context) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := s.refused(); err != nil {
		return err
	}
	return s.wr.submit(&op{ctx: ctx, name: name, key: key, run: run, done: make(chan error, 1)})
}

// Stats returns the counts of writes, commits and syncs since Open.
func (s *Store) Stats() Stats {
	if s.wr == nil {
		return Stats{}
	}
	return Stats{Writes: s.wr.writes.Load(), Commits: s.wr.commits.Load(), Syncs: s.wr.syncs.Load()}
}
