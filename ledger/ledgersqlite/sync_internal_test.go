package ledgersqlite

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/oncely/oncely/ledger"
)

// heldSync replaces the writer's sync of s (before any write) with one that
// reports each call on entered and returns what release sends it; once the
// test ends, syncs return at once.
func heldSync(t *testing.T, s *Store) (entered chan struct{}, release chan error) {
	entered, release = make(chan struct{}, 16), make(chan error)
	ended := make(chan struct{})
	t.Cleanup(func() { close(ended) }) // runs before the store's Close
	s.wr.sync = func() error {
		entered <- struct{}{}
		select {
		case err := <-release:
			return err
		case <-ended:
			return nil
		}
	}
	return entered, release
}

// pollUntil polls cond until it holds or a minute has passed.
func pollUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func testClaim(key string) ledger.ClaimParams {
	now := time.Now()
	return ledger.ClaimParams{Key: key, Tool: "send_reply", RunID: "run-1", Owner: "owner-" + key,
		LeaseUntil: now.Add(time.Hour), Fingerprint: "fp", ExpiresAt: now.Add(24 * time.Hour)}
}

func openTemp(t *testing.T, cfg *Config) *Store {
	t.Helper()
	s, err := Open(context.Background(), filepath.Join(t.TempDir(), "sync.db"), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// A write is answered only once a sync that began after its commit has
// returned; the writes that arrive while a sync runs wait in one open
// transaction and commit together when it ends, so that one commit and
// one sync serve them all.
func TestAnsweredAfterSync(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openTemp(t, nil)
	entered, release := heldSync(t, s)

	// A claim given to the writer directly, so that its answer can be seen
	// arrive.
	p := testClaim("first")
	first := &op{ctx: ctx, name: "claim", done: make(chan error, 1), run: func(ctx context.Context) error {
		var attempt int
		return s.claim.QueryRowContext(ctx, p.Key, p.Tool, p.RunID, p.Owner, p.LeaseUntil.UnixMilli(),
			p.ExpiresAt.UnixMilli(), p.Fingerprint, time.Now().UnixMilli(), p.Abandoned).Scan(&attempt, new(string), new(string),
			new(int64), new(int64), new(string), new(int), new(int64), new(string), new(int64), new(string), new(string))
	}}
	// As submit starts a commit, but with nobody taking the answer.
	s.wr.mu.Lock()
	s.wr.queue, s.wr.committing = append(s.wr.queue, first), true
	s.wr.active.Add(1)
	s.wr.mu.Unlock()
	go s.wr.lead()
	select {
	case <-entered: // committed alone, now syncing
	case err := <-first.done:
		t.Fatalf("the claim was answered before any sync: %v", err)
	}
	if len(first.done) != 0 {
		t.Fatal("the write was answered before the sync of its commit returned")
	}
	if st := s.Stats(); st.Commits != 1 || st.Syncs != 0 {
		t.Fatalf("Stats while the first sync runs = %+v, want 1 commit, 0 syncs", st)
	}

	// Writes arriving during the sync run in an open transaction and wait.
	const n = 5
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			res, err := s.Claim(ctx, testClaim(fmt.Sprintf("k%d", i)))
			if err == nil && !res.Claimed {
				err = fmt.Errorf("not claimed: %+v", res)
			}
			errs[i] = err
		})
	}
	pollUntil(t, "the writes run in the open transaction", func() bool {
		waiting, running := WriterQueue(s)
		return waiting == 0 && running == n
	})
	if st := s.Stats(); st.Commits != 1 {
		t.Fatalf("Stats = %+v: the batch committed while the sync of the last commit ran", st)
	}
	release <- nil // the first sync ends: first is answered, the batch commits
	if err := <-first.done; err != nil {
		t.Fatalf("first write: %v", err)
	}
	<-entered // the batch's sync
	if st := s.Stats(); st.Commits != 2 || st.Writes != 1+n {
		t.Fatalf("Stats = %+v, want %d writes in 2 commits", st, 1+n)
	}
	release <- nil
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("claim %d: %v", i, err)
		}
	}
	if st := s.Stats(); st.Syncs != 2 {
		t.Errorf("Stats = %+v, want 2 syncs", st)
	}
}

// A lone caller's write commits and syncs at once: one commit and one
// sync per write, with nothing held.
func TestLoneWritesSyncEach(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openTemp(t, nil)
	for i := range 3 {
		p := testClaim(fmt.Sprintf("k%d", i))
		if _, err := s.Claim(ctx, p); err != nil {
			t.Fatal(err)
		}
		if err := s.Complete(ctx, p.Key, p.Owner, ledger.Completion{Summary: "done"}); err != nil {
			t.Fatal(err)
		}
	}
	if st := s.Stats(); st.Writes != 6 || st.Commits != 6 || st.Syncs != 6 {
		t.Errorf("Stats = %+v, want 6 writes, commits and syncs", st)
	}
	normal := openTemp(t, &Config{Synchronous: SyncNormal})
	if _, err := normal.Claim(ctx, testClaim("n")); err != nil {
		t.Fatal(err)
	}
	if st := normal.Stats(); st.Commits != 1 || st.Syncs != 0 {
		t.Errorf("SyncNormal: Stats = %+v, want 1 commit and no sync of its own", st)
	}
}

// A failed sync is every waiting write's failure (ledger.ErrUnavailable:
// the caller runs nothing), and since which commits reached the disk is
// unknown, the store refuses every call after it.
func TestSyncFailureRefusesStore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openTemp(t, nil)
	boom := errors.New("disk on fire")
	s.wr.sync = func() error { return boom }
	_, err := s.Claim(ctx, testClaim("k"))
	if !errors.Is(err, ledger.ErrUnavailable) || !errors.Is(err, boom) {
		t.Fatalf("Claim with a failing sync: %v, want ledger.ErrUnavailable wrapping the sync's error", err)
	}
	for name, call := range map[string]func() error{
		"claim": func() error { _, err := s.Claim(ctx, testClaim("other")); return err },
		"get":   func() error { _, err := s.Get(ctx, "k"); return err },
		"extend": func() error {
			return s.Extend(ctx, "k", "owner-k", time.Now().Add(time.Hour))
		},
	} {
		if err := call(); !errors.Is(err, ledger.ErrUnavailable) {
			t.Errorf("%s after a failed sync: %v, want ledger.ErrUnavailable", name, err)
		}
	}
	if st := s.Stats(); st.Writes != 1 {
		t.Errorf("Stats = %+v: a write ran after the failed sync", st)
	}
}

// The real sync flushes the write-ahead log SQLite appends commits to; a
// log that cannot be opened is a failed sync, not a silent success.
func TestSyncWAL(t *testing.T) {
	t.Parallel()
	s := openTemp(t, nil)
	if _, err := s.Claim(context.Background(), testClaim("k")); err != nil {
		t.Fatal(err)
	}
	if s.wal == nil || s.wal.Name() != s.path+"-wal" {
		t.Fatalf("the store synced %v, want %s-wal", s.wal, s.path)
	}
	missing := &Store{path: filepath.Join(t.TempDir(), "none.db")}
	if err := missing.syncWAL(); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("syncWAL without a log: %v, want an error", err)
	}
}

// While the writer is busy a claim goes to it without reading first; one
// that a committed record blocks is answered with that record as soon as
// its statement has run, without waiting for the sync the writer waits
// for.
func TestBlockedClaimAnsweredBeforeSync(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openTemp(t, nil)
	entered, release := heldSync(t, s)

	first := testClaim("k")
	claimed := make(chan error, 1)
	go func() {
		_, err := s.Claim(ctx, first)
		claimed <- err
	}()
	<-entered // first's claim is committed; its sync is held
	if !s.wr.busy() {
		t.Fatal("the writer is not busy while a commit waits for its sync")
	}
	second := testClaim("k")
	second.Owner = "owner-second"
	type answer struct {
		res ledger.ClaimResult
		err error
	}
	got := make(chan answer, 1)
	go func() {
		res, err := s.Claim(ctx, second)
		got <- answer{res, err}
	}()
	select {
	case a := <-got:
		if a.err != nil || a.res.Claimed || a.res.Previous == nil || a.res.Previous.Owner != first.Owner {
			t.Fatalf("blocked claim = %+v, %v; want not claimed, shown %s's record", a.res, a.err, first.Owner)
		}
	case <-time.After(time.Minute): // a hang guard: the answer needs no sync
		t.Fatal("the blocked claim waited for the sync of another write")
	}
	if st := s.Stats(); st.Syncs != 0 {
		t.Errorf("Stats = %+v: a sync ended before the blocked claim was answered", st)
	}
	release <- nil
	if err := <-claimed; err != nil {
		t.Fatal(err)
	}
}

// After a sync that covered the writes of several callers, the next write
// waits, in an open transaction, for as many writes (its callers write
// again at once) and commits with them: one commit and one sync. A gather
// that times out commits what it has and turns gathering off for the next
// gatherRest syncs; a store whose syncs cover one write never gathers
// (TestLoneWritesSyncEach).
func TestGatherAfterSharedSync(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openTemp(t, nil)
	entered, release := heldSync(t, s)

	claim := func(key string, errs chan<- error) {
		res, err := s.Claim(ctx, testClaim(key))
		if err == nil && !res.Claimed {
			err = fmt.Errorf("%s not claimed: %+v", key, res)
		}
		errs <- err
	}
	errs := make(chan error, 8)
	// A sync that covers two writes: one commits alone and syncs, two more
	// wait for that sync and commit together.
	go claim("a", errs)
	<-entered
	go claim("b", errs)
	go claim("c", errs)
	pollUntil(t, "two writes wait in the open transaction", func() bool {
		waiting, running := WriterQueue(s)
		return waiting == 0 && running == 2
	})
	release <- nil
	<-entered // the sync of b and c
	release <- nil
	for range 3 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	before := s.Stats()
	s.wr.smu.Lock()
	covered := s.wr.lastCovered
	s.wr.lastSync, s.wr.gatherMax = time.Hour, time.Hour // a gather that never times out here
	s.wr.smu.Unlock()
	if covered != 2 {
		t.Fatalf("the last sync covered %d writes, want 2", covered)
	}

	// The next write waits for a second one: no commit until it comes.
	go claim("d", errs)
	pollUntil(t, "the write gathers", func() bool {
		_, running := WriterQueue(s)
		return running == 1
	})
	if st := s.Stats(); st.Commits != before.Commits {
		t.Fatalf("Stats = %+v: committed without gathering (before: %+v)", st, before)
	}
	go claim("e", errs)
	<-entered
	if st := s.Stats(); st.Commits != before.Commits+1 || st.Writes != before.Writes+2 {
		t.Fatalf("Stats = %+v, want 2 more writes in 1 more commit than %+v", st, before)
	}
	release <- nil
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}

	// A gather that times out: the write commits alone, and the next
	// syncs do not gather.
	s.wr.smu.Lock()
	s.wr.gatherMax = time.Nanosecond
	s.wr.smu.Unlock()
	go claim("f", errs)
	<-entered
	s.wr.smu.Lock()
	rest := s.wr.gatherRest
	s.wr.smu.Unlock()
	if rest != gatherRest {
		t.Errorf("after a gather that timed out, %d syncs rest, want %d", rest, gatherRest)
	}
	release <- nil
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
}
