package ledgersqlite_test

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/oncely/oncely/internal/tooling"
	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/ledger/ledgersqlite"
)

// envScaleChild, set, makes this process the child of
// BenchmarkScaleProcess: it holds the paths of the 10^3 and 10^6 ledgers.
const envScaleChild = "LEDGERSQLITE_SCALE_CHILD"

// What BenchmarkScaleProcess does: scaleFreshEvery is one fresh action (on
// each ledger) every that many replays, in the warm-up and the timed
// iterations; scaleWarmup the iterations before the timed ones (a few
// seconds of a busy service); scaleCold the replays timed first, on a page
// cache that holds none of the files; scaleBatch the iterations the child
// runs for each iteration of the benchmark (it waits for the next batch on
// a pipe, and a process that waited resumes slower).
const (
	scaleFreshEvery = 8
	scaleWarmup     = 1_000
	scaleCold       = 100
	scaleBatch      = 32
)

// scaleSizes are the sizes BenchmarkScaleProcess compares.
var scaleSizes = [2]int{1_000, 1_000_000}

// BenchmarkScaleProcess is what a service sees at 10^3 and at 10^6 records:
// a new process (a re-run of this test binary) opens both ledgers with the
// default Config and, paired in every iteration (on both ledgers, in
// alternating order), replays a done key drawn at random from the whole
// ledger, and every scaleFreshEvery replays makes a fresh action (a claim
// and a completion, synced) before it, so that replays also follow writes.
// Before the timed iterations it warms up for scaleWarmup iterations, the
// files read once into the page cache: as after a few seconds of service.
// Every iteration of the benchmark is scaleBatch iterations of the child.
//
// replay-small, replay-large, fresh-small and fresh-large are the mean
// times of the timed iterations, and their large/small ratios the cost of
// a large ledger. cold-small and cold-large are the first scaleCold replays
// of the process, with the two files dropped from the page cache before it
// started (written back, then POSIX_FADV_DONTNEED, on those files only):
// what a replay costs a service started on a machine that has not read its
// ledger yet. cold-small-disk-B and cold-large-disk-B are the bytes those
// replays read from the disk (read_bytes of /proc/self/io: page-cache
// misses, readahead included), cold-small-reads and cold-large-reads their
// read system calls (syscr; a pread per page SQLite did not hold), both
// per replay: counts, which a loaded machine does not blur.
//
// The ledgers are built once and kept in the repository's .tmp directory
// (a 10^6-record file takes a while to build); the child deletes its fresh
// records before it exits, so that the files keep their size.
func BenchmarkScaleProcess(b *testing.B) {
	var paths [2]string
	for i, n := range scaleSizes {
		paths[i] = cachedScaleFile(b, n)
	}
	for _, p := range paths {
		if err := dropCache(p); err != nil {
			b.Fatal(err)
		}
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envScaleChild+"="+paths[0]+string(filepath.ListSeparator)+paths[1])
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer cmd.Wait()
	defer stdin.Close()
	answers := bufio.NewScanner(stdout)
	ask := func(q string, n int) []int64 {
		fmt.Fprintf(stdin, "%s %d\n", q, n)
		if !answers.Scan() {
			b.Fatalf("child: no answer to %s: %v", q, answers.Err())
		}
		f := strings.Fields(answers.Text())
		if len(f) == 0 || f[0] != q {
			b.Fatalf("child answered %q to %s", answers.Text(), q)
		}
		var v []int64
		for _, s := range f[1:] {
			x, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				b.Fatalf("child answered %q to %s", answers.Text(), q)
			}
			v = append(v, x)
		}
		return v
	}
	cold := ask("COLD", scaleCold) // times, bytes read from the disk, read calls
	ask("WARM", scaleWarmup)
	var sum [5]int64 // replay small, large; fresh small, large; fresh actions
	for b.Loop() {
		for i, v := range ask("RUN", scaleBatch) {
			sum[i] += v
		}
	}
	ask("END", 0)
	replays := float64(b.N * scaleBatch)
	for i, size := range []string{"small", "large"} {
		b.ReportMetric(float64(sum[i])/replays, "replay-"+size+"-ns/op")
		b.ReportMetric(float64(sum[2+i])/float64(sum[4]), "fresh-"+size+"-ns/op")
		b.ReportMetric(float64(cold[i])/scaleCold, "cold-"+size+"-ns/op")
		b.ReportMetric(float64(cold[2+i])/scaleCold, "cold-"+size+"-disk-B/op")
		b.ReportMetric(float64(cold[4+i])/scaleCold, "cold-"+size+"-reads/op")
	}
	b.ReportMetric(float64(sum[1])/float64(sum[0]), "replay-large/replay-small")
	b.ReportMetric(float64(sum[3])/float64(sum[2]), "fresh-large/fresh-small")
	b.ReportMetric(float64(cold[1])/float64(cold[0]), "cold-large/cold-small")
}

// cachedScaleFile returns the path of a ledger file of n done records,
// keyed actionKey(0..n-1), under the repository's .tmp directory, building
// it (under another name, renamed when complete) unless it is there.
func cachedScaleFile(b *testing.B, n int) string {
	root, err := tooling.RepoRoot()
	if err != nil {
		b.Fatal(err)
	}
	dir := filepath.Join(root, ".tmp", "ledgersqlite-scale")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	// The schema version and page size in the name: a file of another
	// layout is not used.
	path := filepath.Join(dir, fmt.Sprintf("done-v%d-p%d-%d.db", ledgersqlite.SchemaVersion, ledgersqlite.PageSize, n))
	if _, err := os.Stat(path); err == nil {
		return path
	}
	tmp := path + ".building"
	for _, suffix := range []string{"", "-wal", "-shm", "-settled"} {
		os.Remove(tmp + suffix)
	}
	open(b, tmp, nil).Close() // the store's schema
	insertDone(b, tmp, 0, n, time.Now())
	// Into the database file, so that it stands alone, then in place.
	db, err := sql.Open("sqlite", "file:"+tmp)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := db.Exec("PRAGMA wal_checkpoint(TRUNCATE)"); err != nil {
		b.Fatal(err)
	}
	db.Close()
	for _, suffix := range []string{"-wal", "-shm", "-settled"} {
		os.Remove(tmp + suffix)
	}
	if err := os.Rename(tmp, path); err != nil {
		b.Fatal(err)
	}
	return path
}

// dropCache writes the file at path (and its log, if any) to the disk and
// asks the kernel to drop them from the page cache.
func dropCache(path string) error {
	for _, p := range []string{path, path + "-wal"} {
		f, err := os.Open(p)
		if errors.Is(err, os.ErrNotExist) {
			continue
		} else if err != nil {
			return err
		}
		err = f.Sync()
		if err == nil {
			err = unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
		}
		f.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// scaleChild is the body of the child process of BenchmarkScaleProcess,
// when the environment asks for one: it answers the lines of the benchmark
// on stdin, each "WHAT n", with a line "WHAT values...", and returns true.
func scaleChild() (bool, error) {
	spec := os.Getenv(envScaleChild)
	if spec == "" {
		return false, nil
	}
	paths := filepath.SplitList(spec)
	if len(paths) != 2 {
		return true, fmt.Errorf("%s=%q: want two paths", envScaleChild, spec)
	}
	ctx := context.Background()
	var stores [2]*ledgersqlite.Store
	for i, p := range paths {
		s, err := ledgersqlite.Open(ctx, p, nil)
		if err != nil {
			return true, err
		}
		defer s.Close()
		stores[i] = s
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), uint64(os.Getpid())))
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	var fresh [2][]string // the fresh keys, deleted at the end
	params := func(key string) ledger.ClaimParams {
		now := time.Now()
		return ledger.ClaimParams{Key: key, Tool: "send_reply", RunID: "run-" + run, Owner: "owner",
			LeaseUntil: now.Add(time.Minute), Fingerprint: "fp", ExpiresAt: now.Add(time.Hour)}
	}
	replay := func(j int) (time.Duration, error) {
		key := actionKey(rng.IntN(scaleSizes[j]))
		t0 := time.Now()
		res, err := stores[j].Claim(ctx, params(key))
		d := time.Since(t0)
		if err == nil && (res.Claimed || res.Previous == nil || res.Previous.State != ledger.StateDone) {
			err = fmt.Errorf("replay of %s: %+v", key, res)
		}
		return d, err
	}
	action := func(j int) (time.Duration, error) {
		key := "scale-fresh-" + run + "-" + strconv.Itoa(len(fresh[j]))
		fresh[j] = append(fresh[j], key)
		p := params(key)
		t0 := time.Now()
		res, err := stores[j].Claim(ctx, p)
		if err == nil && !res.Claimed {
			err = fmt.Errorf("fresh claim of %s: %+v", key, res)
		}
		if err == nil {
			err = stores[j].Complete(ctx, key, p.Owner, ledger.Completion{Summary: "sent", Ref: "msg_1", Result: []byte(`{"id":"msg_1"}`)})
		}
		return time.Since(t0), err
	}
	i := 0 // iterations so far, warm-up included
	iterate := func(n int) (replays, freshes [2]time.Duration, actions int, err error) {
		for range n {
			for k := range 2 {
				j := (i + k) % 2
				if i%scaleFreshEvery == 0 {
					d, err := action(j)
					if err != nil {
						return replays, freshes, actions, err
					}
					freshes[j] += d
					if k == 0 {
						actions++
					}
				}
				d, err := replay(j)
				if err != nil {
					return replays, freshes, actions, err
				}
				replays[j] += d
			}
			i++
		}
		return replays, freshes, actions, nil
	}
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		var what string
		var n int
		if _, err := fmt.Sscan(sc.Text(), &what, &n); err != nil {
			return true, fmt.Errorf("line %q: %w", sc.Text(), err)
		}
		switch what {
		case "COLD": // the first replays, alternating which ledger goes first
			var cold [2]time.Duration
			var read, calls [2]int64 // from the disk, by read system calls
			for c := range n {
				for k := range 2 {
					j := (c + k) % 2
					b0, c0, err := procIO()
					if err != nil {
						return true, err
					}
					d, err := replay(j)
					if err != nil {
						return true, err
					}
					b1, c1, err := procIO()
					if err != nil {
						return true, err
					}
					cold[j] += d
					read[j] += b1 - b0
					calls[j] += c1 - c0 - 1 // less procIO's own read
				}
			}
			fmt.Println(what, int64(cold[0]), int64(cold[1]), read[0], read[1], calls[0], calls[1])
		case "WARM": // the page cache warm, as in a service that has run a while
			for _, p := range paths {
				if err := readFile(p); err != nil {
					return true, err
				}
			}
			if _, _, _, err := iterate(n); err != nil {
				return true, err
			}
			fmt.Println(what)
		case "RUN":
			r, f, actions, err := iterate(n)
			if err != nil {
				return true, err
			}
			fmt.Println(what, int64(r[0]), int64(r[1]), int64(f[0]), int64(f[1]), actions)
		case "END": // the files as they were: without the fresh records
			for j, p := range paths {
				if err := deleteKeys(p, fresh[j]); err != nil {
					return true, err
				}
			}
			fmt.Println(what)
			return true, nil
		default:
			return true, fmt.Errorf("line %q", sc.Text())
		}
	}
	return true, sc.Err()
}

// procIO returns the bytes this process has caused to be read from the
// disk (not from the page cache) and the read system calls it has made,
// from /proc/self/io.
func procIO() (diskBytes, readCalls int64, err error) {
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return 0, 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		name, value, _ := strings.Cut(line, ": ")
		switch name {
		case "read_bytes":
			diskBytes, err = strconv.ParseInt(value, 10, 64)
		case "syscr":
			readCalls, err = strconv.ParseInt(value, 10, 64)
		}
		if err != nil {
			return 0, 0, err
		}
	}
	return diskBytes, readCalls, nil
}

// readFile reads the file at path, so that the page cache holds it.
func readFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(io.Discard, bufio.NewReaderSize(f, 1<<20))
	return err
}

// deleteKeys deletes the records of keys from the ledger file at path and
// copies its log into it.
func deleteKeys(path string, keys []string) error {
	db, err := sql.Open("sqlite", "file:"+path+"?_busy_timeout=5000")
	if err != nil {
		return err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	tx, err := db.Begin()
	if err != nil {
		return err
	}
	defer tx.Rollback()
	for _, k := range keys {
		if _, err := tx.Exec("DELETE FROM records WHERE key = ?", k); err != nil {
			return err
		}
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	_, err = db.Exec("PRAGMA wal_checkpoint(TRUNCATE)")
	return err
}
