package ledgerpg_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/ledger/ledgerpg"
	"github.com/oncely/oncely/ledger/ledgerpg/pgtest"
)

// Environment of a child process of TestMultiProcess.
const (
	envChild  = "LEDGERPG_CHILD"  // the child's number
	envURL    = "LEDGERPG_URL"    // the server
	envSchema = "LEDGERPG_SCHEMA" // the schema of the table
)

// TestMultiProcess starts four child processes that migrate the same new
// table at once (each through its own pool: OpenURL), then races them and
// the test process to claim the same key, key after key: exactly one
// claim per key wins.
func TestMultiProcess(t *testing.T) {
	t.Parallel()
	const children, nkeys = 4, 12
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)

	type answer struct {
		child   int
		key     string // "" reports the child ready
		claimed bool
	}
	var (
		answers = make(chan answer)
		errs    = make(chan error, children)
		stdins  []io.WriteCloser
		wg      sync.WaitGroup
		stop    = make(chan struct{})
	)
	for id := range children {
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), envChild+"="+strconv.Itoa(id), envURL+"="+pgtest.URL(t), envSchema+"="+schema)
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
		wg.Go(func() {
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				a := answer{child: id}
				switch f := strings.Fields(sc.Text()); {
				case len(f) == 1 && f[0] == "READY":
				case len(f) == 3 && f[0] == "CLAIM":
					a.key, a.claimed = f[1], f[2] == "won"
				default:
					continue
				}
				select {
				case answers <- a:
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
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	}()
	next := func(key string) answer {
		t.Helper()
		select {
		case a := <-answers:
			if a.key != key {
				t.Fatalf("child %d answered for %q, want %q", a.child, a.key, key)
			}
			return a
		case err := <-errs:
			t.Fatalf("waiting for %q: %v", key, err)
		case <-ctx.Done():
			t.Fatalf("waiting for %q: %v", key, ctx.Err())
		}
		return answer{}
	}
	for range children {
		next("")
	}
	var versions int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM "+pgx.Identifier{schema, ledgerpg.DefaultTable + "_migrations"}.Sanitize()).Scan(&versions); err != nil || versions != ledgerpg.Versions {
		t.Fatalf("migrations recorded by %d racing processes: %d, %v; want %d", children, versions, err, ledgerpg.Versions)
	}
	s := newStore(t, pool, &ledgerpg.Config{Schema: schema})
	for i := range nkeys {
		key := fmt.Sprintf("mp-key-%d", i)
		for _, w := range stdins {
			if _, err := io.WriteString(w, key+"\n"); err != nil {
				t.Fatal(err)
			}
		}
		var won []string
		res, err := s.Claim(ctx, params(key, "parent", time.Now()))
		if err != nil {
			t.Fatal(err)
		}
		if res.Claimed {
			won = append(won, "parent")
		}
		for range children {
			if a := next(key); a.claimed {
				won = append(won, "child-"+strconv.Itoa(a.child))
			}
		}
		if len(won) != 1 {
			t.Fatalf("%s: claims won by %v, want exactly one", key, won)
		}
		if rec, err := s.Get(ctx, key); err != nil || rec.Owner != won[0] || rec.State != ledger.StatePending {
			t.Errorf("%s: won by %s, stored %+v, %v", key, won[0], rec, err)
		}
	}
}

// childProcess is the body of a child of TestMultiProcess: it opens the
// ledger by URL (migrating it), says READY, and claims each key read
// from stdin, answering "CLAIM <key> won|lost".
func childProcess() int {
	ctx := context.Background()
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	s, err := ledgerpg.OpenURL(ctx, os.Getenv(envURL), &ledgerpg.Config{Schema: os.Getenv(envSchema)})
	if err != nil {
		return fail(err)
	}
	defer s.Close()
	fmt.Println("READY")
	owner := "child-" + os.Getenv(envChild)
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		res, err := s.Claim(ctx, params(in.Text(), owner, time.Now()))
		if err != nil {
			return fail(err)
		}
		outcome := "lost"
		if res.Claimed {
			outcome = "won"
		}
		fmt.Println("CLAIM", in.Text(), outcome)
	}
	if err := in.Err(); err != nil {
		return fail(err)
	}
	return 0
}
