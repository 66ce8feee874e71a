package ledgersqlite_test

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/ledger/ledgersqlite"
)

// holdWriteLock takes the write lock of the file at path on a connection of
// its own, so that the Store's writer stalls on its next write; release
// gives the lock back.
func holdWriteLock(t testing.TB, path string) (release func()) {
	t.Helper()
	ctx := context.Background()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	return func() {
		if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
			t.Error(err)
		}
		conn.Close()
		db.Close()
	}
}

// waitQueue polls until the writer of s has the given writes waiting and
// running.
func waitQueue(t testing.TB, s *ledgersqlite.Store, waiting, running int) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		w, r := ledgersqlite.WriterQueue(s)
		if w == waiting && r == running {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("writer queue: %d waiting, %d running; want %d and %d", w, r, waiting, running)
		}
		time.Sleep(time.Millisecond)
	}
}

// Writes that queue while a commit runs are committed together, in one
// transaction, and each caller still gets its own answer: one of several
// claims on one key inside a batch wins and the others are shown its
// record; a write of the wrong owner is refused without failing the batch.
func TestGroupCommit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "group.db")
	s := open(t, path, &ledgersqlite.Config{BusyTimeout: time.Minute})
	defer s.Close()

	release := holdWriteLock(t, path)
	first := claimParams("first", "owner-first")
	firstDone := make(chan error, 1)
	go func() {
		res, err := s.Claim(ctx, first)
		if err == nil && !res.Claimed {
			err = fmt.Errorf("not claimed: %+v", res)
		}
		firstDone <- err
	}()
	waitQueue(t, s, 0, 1) // the writer is stalled on the first claim

	const racers, others = 8, 4
	var (
		wg      sync.WaitGroup
		results = make([]ledger.ClaimResult, racers+others)
		errs    = make([]error, racers+others)
		wrong   error
	)
	for i := range racers + others {
		key := "contended"
		if i >= racers {
			key = fmt.Sprintf("other-%d", i)
		}
		wg.Go(func() { results[i], errs[i] = s.Claim(ctx, claimParams(key, fmt.Sprintf("owner-%d", i))) })
	}
	waitQueue(t, s, racers+others, 1)
	wg.Go(func() { wrong = s.Complete(ctx, first.Key, "not-the-owner", ledger.Completion{Summary: "x"}) })
	waitQueue(t, s, racers+others+1, 1)
	release()
	wg.Wait()
	if err := <-firstDone; err != nil {
		t.Fatalf("first claim: %v", err)
	}

	winner := ""
	for i := range racers {
		switch res := results[i]; {
		case errs[i] != nil:
			t.Errorf("claim %d: %v", i, errs[i])
		case res.Claimed && winner != "":
			t.Errorf("two claims won the contended key: %s and owner-%d", winner, i)
		case res.Claimed:
			winner = fmt.Sprintf("owner-%d", i)
		}
	}
	if winner == "" {
		t.Fatal("no claim won the contended key")
	}
	for i := range racers {
		if res := results[i]; !res.Claimed && (res.Previous == nil || res.Previous.Owner != winner || res.Previous.State != ledger.StatePending) {
			t.Errorf("losing claim %d was shown %+v, want the pending record of %s", i, res.Previous, winner)
		}
	}
	for i := racers; i < racers+others; i++ {
		if errs[i] != nil || !results[i].Claimed {
			t.Errorf("claim of its own key %d = %+v, %v; want claimed", i, results[i], errs[i])
		}
	}
	if !errors.Is(wrong, ledger.ErrNotOwner) {
		t.Errorf("Complete by another owner inside the batch: %v, want ledger.ErrNotOwner", wrong)
	}
	// The first claim alone, then every queued write in one commit.
	if st := s.Stats(); st.Commits != 2 || st.Writes != 1+racers+others+1 {
		t.Errorf("Stats = %+v, want %d writes in 2 commits", st, 1+racers+others+1)
	}
	for _, key := range []string{first.Key, "contended"} {
		if r, err := s.Get(ctx, key); err != nil || r.State != ledger.StatePending {
			t.Errorf("Get(%s) = %+v, %v", key, r, err)
		}
	}
}

// Environment of the child process of TestGroupCommitSurvivesKill.
const envBatch = "LEDGERSQLITE_HELPER_BATCH" // number of batched claims

// A claim that was committed in a batch and answered survives the death of
// its process: a child process claims keys in one batch, the test kills it
// (SIGKILL) as soon as one of those claims has returned, and every claim
// the child reported is in the file when it is opened again.
func TestGroupCommitSurvivesKill(t *testing.T) {
	t.Parallel()
	const batched = 15
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	path := filepath.Join(t.TempDir(), "killed.db")
	cmd := exec.CommandContext(ctx, os.Args[0])
	cmd.Env = append(os.Environ(), envRole+"=batcher", envDB+"="+path, envBatch+"="+strconv.Itoa(batched))
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cmd.StdinPipe(); err != nil { // held open: the child waits for EOF
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	reported := map[string]string{} // key -> stats line
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 4 || f[0] != "CLAIMED" {
			continue
		}
		reported[f[1]] = f[2] + " writes, " + f[3] + " commits"
		if strings.HasPrefix(f[1], "batch-") {
			if err := cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			if want := fmt.Sprintf("%d writes, 2 commits", 1+batched); reported[f[1]] != want {
				t.Errorf("the batched claim returned after %s, want %s (the first claim alone, then one batch)", reported[f[1]], want)
			}
			break
		}
	}
	_ = cmd.Wait() // killed
	if len(reported) == 0 {
		t.Fatalf("the child reported no claim (scan: %v)", sc.Err())
	}

	s := open(t, path, nil)
	defer s.Close()
	keys := []string{"alone"}
	for i := range batched {
		keys = append(keys, fmt.Sprintf("batch-%d", i))
	}
	for _, key := range keys {
		r, err := s.Get(context.Background(), key)
		if err != nil || r.State != ledger.StatePending || r.Owner != "child" {
			_, told := reported[key]
			t.Errorf("after the kill: Get(%s) = %+v, %v; want the child's pending claim (reported: %v)", key, r, err, told)
		}
	}
}

// batcher is the child of TestGroupCommitSurvivesKill: with the write lock
// held elsewhere it claims one key, then queues the batched claims behind
// it, releases the lock, and reports every claim as it returns
// ("CLAIMED <key> <writes> <commits>"), then waits to be killed.
func batcher() error {
	ctx := context.Background()
	path := os.Getenv(envDB)
	n, err := strconv.Atoi(os.Getenv(envBatch))
	if err != nil {
		return err
	}
	s, err := ledgersqlite.Open(ctx, path, &ledgersqlite.Config{BusyTimeout: time.Minute})
	if err != nil {
		return err
	}
	defer s.Close()
	t := &childT{}
	release := holdWriteLock(t, path)
	var out sync.Mutex
	claim := func(key string) {
		res, err := s.Claim(ctx, claimParams(key, "child"))
		if err != nil || !res.Claimed {
			fmt.Fprintln(os.Stderr, "claim", key, res, err)
			os.Exit(1)
		}
		st := s.Stats()
		out.Lock()
		fmt.Println("CLAIMED", key, st.Writes, st.Commits)
		out.Unlock()
	}
	go claim("alone")
	waitQueue(t, s, 0, 1)
	for i := range n {
		go claim(fmt.Sprintf("batch-%d", i))
	}
	waitQueue(t, s, n, 1)
	release()
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n') // until killed
	return nil
}

// childT lets the child process use the test helpers: a failure ends it.
type childT struct{ testing.TB }

func (*childT) Helper() {}

func (*childT) Fatal(args ...any) {
	fmt.Fprintln(os.Stderr, args...)
	os.Exit(1)
}

func (*childT) Fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
	os.Exit(1)
}

func (*childT) Error(args ...any) {
	fmt.Fprintln(os.Stderr, args...)
	os.Exit(1)
}

// purgeFixture returns a Store on a new ledger file, a connection of its
// own to the file (to write records as they would be found), and the
// file's path.
func purgeFixture(t *testing.T) (*ledgersqlite.Store, *sql.DB, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "purge.db")
	s := open(t, path, nil)
	t.Cleanup(func() { s.Close() })
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	db.SetMaxOpenConns(1)
	return s, db, path
}

// Purge deletes in chunks of at most PurgeChunk records, one write each:
// over more expired records than one chunk holds, it deletes exactly the
// expired ones, and the others stay.
func TestPurgeInChunks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, db, _ := purgeFixture(t)
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	const n = 2500 // 834 expired: 13 chunks and a part
	expired, pending := 0, 0
	for i := range n {
		state, exp := "done", now.Add(time.Hour)
		switch i % 3 {
		case 0:
			exp = now.Add(-time.Hour)
			expired++
		case 1:
			state, exp = "pending", now.Add(-time.Hour) // never expires
			pending++
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO records (key, tool, run_id, state, owner, lease_until, expires_at,
			fingerprint, attempt, attempt_at, updated_at) VALUES (?, 't', 'r', ?, 'o', ?, ?, 'fp', 1, ?, ?)`,
			actionKey(i), state, now.Add(-2*time.Hour).UnixMilli(), exp.UnixMilli(), now.UnixMilli(), now.UnixMilli()); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	got, err := s.Purge(ctx, now)
	if err != nil || got != expired {
		t.Fatalf("Purge = %d, %v; want %d", got, err, expired)
	}
	if st, want := s.Stats(), (expired+ledgersqlite.PurgeChunk-1)/ledgersqlite.PurgeChunk; st.Writes != uint64(want) {
		t.Errorf("Purge of %d expired records took %d writes, want one per chunk of %d: %d", expired, st.Writes, ledgersqlite.PurgeChunk, want)
	}
	var left, leftPending int
	if err := db.QueryRowContext(ctx, "SELECT count(*), count(*) FILTER (WHERE state = 'pending') FROM records").Scan(&left, &leftPending); err != nil {
		t.Fatal(err)
	}
	if left != n-expired || leftPending != pending {
		t.Errorf("after Purge: %d records (%d pending), want %d (%d pending)", left, leftPending, n-expired, pending)
	}
}

// Purge checkpoints the log after its chunks, so that the pages it
// dirtied are not left for a claim's commit to copy: the database file
// alone, without its log, holds the ledger as the purge left it.
func TestPurgeCheckpoints(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, db, path := purgeFixture(t)
	now := time.Now()
	const expired, live = 100, 50 // a few pages: no automatic checkpoint
	for i := range expired + live {
		exp := now.Add(time.Hour)
		if i < expired {
			exp = now.Add(-time.Hour)
		}
		if _, err := db.ExecContext(ctx, `INSERT INTO records (key, tool, run_id, state, owner, lease_until, expires_at,
			fingerprint, attempt, attempt_at, updated_at) VALUES (?, 't', 'r', 'done', 'o', ?, ?, 'fp', 1, ?, ?)`,
			actionKey(i), now.UnixMilli(), exp.UnixMilli(), now.UnixMilli(), now.UnixMilli()); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := s.Purge(ctx, now); err != nil || n != expired {
		t.Fatalf("Purge = %d, %v; want %d", n, err, expired)
	}
	main, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	alone := filepath.Join(filepath.Dir(path), "alone.db")
	if err := os.WriteFile(alone, main, 0o600); err != nil {
		t.Fatal(err)
	}
	copied, err := sql.Open("sqlite", alone)
	if err != nil {
		t.Fatal(err)
	}
	defer copied.Close()
	var n int
	if err := copied.QueryRowContext(ctx, "SELECT count(*) FROM records").Scan(&n); err != nil || n != live {
		t.Fatalf("the database file without its log holds %d records (%v), want the %d the purge left", n, err, live)
	}
}
