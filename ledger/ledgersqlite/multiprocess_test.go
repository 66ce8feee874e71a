package ledgersqlite_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oncely/oncely/internal/ledgerbench"
	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/ledger/ledgersqlite"
)

// Environment of a helper process started by TestMultiProcessClaims.
const (
	envRole = "LEDGERSQLITE_HELPER_ROLE" // "claimer" or "batcher"
	envDB   = "LEDGERSQLITE_HELPER_DB"
	envID   = "LEDGERSQLITE_HELPER_ID"
)

// TestMultiProcessClaims races four child processes and the test process
// itself to claim the same key in one file, key after key: exactly one
// claim per key wins.
func TestMultiProcessClaims(t *testing.T) {
	t.Parallel()
	const children, nkeys = 4, 12
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	path := filepath.Join(t.TempDir(), "shared.db")

	type result struct {
		child   int
		key     string
		claimed bool
	}
	var (
		results = make(chan result) // key "" reports a child ready
		errs    = make(chan error, children)
		stdins  []io.WriteCloser
		done    sync.WaitGroup
		stop    = make(chan struct{}) // closed when the test stops listening
	)
	for id := range children {
		cmd := exec.CommandContext(ctx, os.Args[0])
		cmd.Env = append(os.Environ(), envRole+"=claimer", envDB+"="+path, envID+"="+strconv.Itoa(id))
		cmd.Stderr = os.Stderr
		stdin, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		stdins = append(stdins, stdin)
		done.Go(func() {
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				var r result
				switch f := strings.Fields(sc.Text()); {
				case len(f) == 1 && f[0] == "READY":
					r = result{child: id}
				case len(f) == 3 && f[0] == "CLAIM":
					r = result{id, f[1], f[2] == "won"}
				default:
					continue
				}
				select {
				case results <- r:
				case <-stop:
				}
			}
			if err := cmd.Wait(); err != nil {
				errs <- fmt.Errorf("child %d: %w", id, err)
			}
		})
	}
	defer func() {
		close(stop)
		for _, w := range stdins {
			w.Close() // EOF ends the children
		}
		done.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	}()
	// next returns the next answer of a child, the wanted key or "" (ready).
	next := func(key string) result {
		t.Helper()
		select {
		case r := <-results:
			if r.key != key {
				t.Fatalf("child %d answered for %q, want %q", r.child, r.key, key)
			}
			return r
		case err := <-errs:
			t.Fatalf("waiting for %q: %v", key, err)
		case <-ctx.Done():
			t.Fatalf("waiting for %q: %v", key, ctx.Err())
		}
		return result{}
	}

	// Every child has opened the file, all racing to create the schema.
	for range children {
		next("")
	}
	s := open(t, path, nil)
	defer s.Close()

	winners := map[string]int{}
	for i := range nkeys {
		key := fmt.Sprintf("mp-key-%d", i)
		for _, w := range stdins {
			if _, err := io.WriteString(w, key+"\n"); err != nil {
				t.Fatal(err)
			}
		}
		var won []string
		res, err := s.Claim(ctx, claimParams(key, "parent"))
		if err != nil {
			t.Fatalf("parent: Claim %s: %v", key, err)
		}
		if res.Claimed {
			won = append(won, "parent")
		}
		for range children {
			if r := next(key); r.claimed {
				won = append(won, "child-"+strconv.Itoa(r.child))
			}
		}
		if len(won) != 1 {
			t.Fatalf("%s: claims won by %v, want exactly one", key, won)
		}
		rec, err := s.Get(ctx, key)
		if err != nil {
			t.Fatalf("Get %s: %v", key, err)
		}
		if rec.Owner != won[0] || rec.State != ledger.StatePending {
			t.Errorf("%s: won by %s, stored owner %s state %s", key, won[0], rec.Owner, rec.State)
		}
		winners[won[0]]++
	}
	t.Logf("wins per process: %v", winners)
}

// TestMain runs the body of a child process (of TestMultiProcessClaims,
// TestGroupCommitSurvivesKill, TestWatchAcrossProcesses,
// BenchmarkContentionProcesses or BenchmarkScaleProcess) when the environment asks for one, and the
// tests otherwise.
func TestMain(m *testing.M) {
	ledgerbench.Child(func() (ledger.Store, error) {
		return ledgersqlite.Open(context.Background(), os.Getenv(envBenchDB), nil)
	})
	if child, err := scaleChild(); child {
		if err != nil {
			fmt.Fprintln(os.Stderr, "scale child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	roles := map[string]func() error{"claimer": claimer, "batcher": batcher, "watcher": watcher}
	if role := os.Getenv(envRole); role != "" {
		if err := roles[role](); err != nil {
			fmt.Fprintln(os.Stderr, role+":", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// claimer opens the database and claims each key read from stdin,
// answering "CLAIM <key> won|lost".
func claimer() error {
	ctx := context.Background()
	s, err := ledgersqlite.Open(ctx, os.Getenv(envDB), nil)
	if err != nil {
		return fmt.Errorf("open: %w", err)
	}
	defer s.Close()
	fmt.Println("READY")
	id := os.Getenv(envID)
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		key := in.Text()
		res, err := s.Claim(ctx, claimParams(key, "child-"+id))
		if err != nil {
			return fmt.Errorf("claim %s: %w", key, err)
		}
		outcome := "lost"
		if res.Claimed {
			outcome = "won"
		}
		fmt.Println("CLAIM", key, outcome)
	}
	return in.Err()
}

func claimParams(key, owner string) ledger.ClaimParams {
	now := time.Now()
	return ledger.ClaimParams{Key: key, Tool: "send_reply", RunID: "run-1", Owner: owner,
		LeaseUntil: now.Add(time.Hour), Fingerprint: "fp", ExpiresAt: now.Add(24 * time.Hour)}
}

// watcher opens the database, watches the key read from stdin, answers
// "WATCHING", and once signalled (within 30 s) "WOKEN <state>" with the
// state it then reads. It never polls: only the signal can wake it.
func watcher() error {
	ctx := context.Background()
	s, err := ledgersqlite.Open(ctx, os.Getenv(envDB), nil)
	if err != nil {
		return fmt.Errorf("open: %w", err)
	}
	defer s.Close()
	in := bufio.NewScanner(os.Stdin)
	if !in.Scan() {
		return fmt.Errorf("no key: %v", in.Err())
	}
	key := in.Text()
	ch, stop, err := s.Watch(ctx, key)
	if err != nil {
		return fmt.Errorf("watch: %w", err)
	}
	defer stop()
	fmt.Println("WATCHING")
	select {
	case <-ch:
	case <-time.After(30 * time.Second):
		return errors.New("no signal within 30 s")
	}
	r, err := s.Get(ctx, key)
	if err != nil {
		return err
	}
	fmt.Println("WOKEN", r.State)
	return nil
}

// A Store in another process that watches a record is signalled when
// this process settles it: the signal file crosses the process boundary.
func TestWatchAcrossProcesses(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	path := filepath.Join(t.TempDir(), "watched.db")
	s := open(t, path, nil)
	defer s.Close()
	p := claimParams("k-across", "holder")
	if res, err := s.Claim(ctx, p); err != nil || !res.Claimed {
		t.Fatalf("Claim = %+v, %v", res, err)
	}
	cmd := exec.CommandContext(ctx, os.Args[0])
	cmd.Env = append(os.Environ(), envRole+"=watcher", envDB+"="+path)
	cmd.Stderr = os.Stderr
	cmd.Stdin = strings.NewReader(p.Key + "\n")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	out := bufio.NewScanner(stdout)
	if !out.Scan() || out.Text() != "WATCHING" {
		t.Fatalf("child: %q, %v", out.Text(), out.Err())
	}
	if err := s.Complete(ctx, p.Key, p.Owner, ledger.Completion{Summary: "sent"}); err != nil {
		t.Fatal(err)
	}
	if !out.Scan() || out.Text() != "WOKEN done" {
		t.Errorf("child: %q, %v; want WOKEN done", out.Text(), out.Err())
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("child: %v", err)
	}
}
