// Package redistest gives tests a Redis server: the one ONCELY_REDIS_URL
// names, else the one answering on 127.0.0.1:6379 when it is configured as
// ledgerredis.OpenURL requires by default (appendonly yes, appendfsync
// always, maxmemory-policy noeviction), else a redis-server so configured
// that it starts on a free loopback port (installing the Debian package
// when the binary is missing) and stops, by its process id, when the tests
// end. The files of a server it starts live in memory (tmpfs) where the
// machine allows: its appendfsync always costs no disk sync, so the tests
// and benchmarks on it measure the server, not the disk. Each test works
// under its own key prefix, deleted when it ends.
//
// Call Main from TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(redistest.Main(m.Run)) }
//
// With CI=true a machine that cannot run a server fails the tests; elsewhere
// the tests that need one are skipped with the reason, and the runnable
// examples are not run.
package redistest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/oncely/oncely/internal/tooling"
	"github.com/oncely/oncely/ledger/ledgerredis"
)

// EnvURL names an existing server to use (a redis:// URL).
const EnvURL = "ONCELY_REDIS_URL"

// DefaultAddr is where a development or CI machine runs its server.
const DefaultAddr = "127.0.0.1:6379"

// ErrUnavailable is matched by the errors of Start and StartBinary when
// this machine has no server binary and cannot install one.
var ErrUnavailable = errors.New("redistest: no server")

// Server is a server the tests use.
type Server struct {
	// URL locates the server (redis://host:port/0).
	URL  string
	proc *tooling.Process // nil when the server was already running
	dir  string
}

// Start returns the server of ONCELY_REDIS_URL (which the tests of
// ledgerredis.OpenURL need configured as it requires by default), else the
// one on DefaultAddr when it is so configured, else a redis-server it
// starts (StartBinary) with appendonly yes and appendfsync always.
func Start(ctx context.Context) (*Server, error) {
	if u := os.Getenv(EnvURL); u != "" {
		if err := ping(ctx, u); err != nil {
			return nil, fmt.Errorf("redistest: %s=%s: %w", EnvURL, u, err)
		}
		return &Server{URL: u}, nil
	}
	u := "redis://" + DefaultAddr + "/0"
	if ping(ctx, u) == nil && durable(ctx, u) {
		return &Server{URL: u}, nil
	}
	return StartBinary(ctx, "redis-server", "redis-server", "--appendonly", "yes", "--appendfsync", "always")
}

// durable reports whether the server at rawurl is configured as
// ledgerredis.OpenURL requires by default.
func durable(ctx context.Context, rawurl string) bool {
	opts, err := redis.ParseURL(rawurl)
	if err != nil {
		return false
	}
	c := redis.NewClient(opts)
	defer c.Close()
	return ledgerredis.New(c, nil).Check(ctx) == nil
}

// StartBinary starts the server binary (redis-server, valkey-server) on a
// free loopback port, without persistence unless args turn it on, with the
// extra configuration args ("--cluster-enabled", "yes"), installing the Debian package pkg when
// the binary is missing and the package exists. Files the server writes
// stay in a temporary directory, its --dir. Close stops it.
func StartBinary(ctx context.Context, binary, pkg string, args ...string) (*Server, error) {
	path, err := exec.LookPath(binary)
	if err != nil {
		if err := install(ctx, pkg); err != nil {
			return nil, err
		}
		if path, err = exec.LookPath(binary); err != nil {
			return nil, fmt.Errorf("%w: %s not found after installing %s", ErrUnavailable, binary, pkg)
		}
	}
	var last error
	for range 3 { // another process may take the free port first
		s, err := startOn(ctx, path, args)
		if err == nil {
			return s, nil
		}
		last = err
	}
	return nil, last
}

func startOn(ctx context.Context, path string, args []string) (*Server, error) {
	port, err := tooling.FreePort()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(memDir(), "redistest")
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(path, append([]string{"--bind", "127.0.0.1", "--port", strconv.Itoa(port), "--dir", dir,
		"--save", "", "--appendonly", "no", "--daemonize", "no", "--logfile", dir + "/server.log"}, args...)...)
	cmd.SysProcAttr = sysProcAttr()
	proc, err := tooling.StartProcess(cmd, 0)
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("redistest: start %s: %w", path, err)
	}
	s := &Server{URL: fmt.Sprintf("redis://127.0.0.1:%d/0", port), proc: proc, dir: dir}
	err = proc.WaitReady(ctx, 30*time.Second, 20*time.Millisecond, func() bool { return ping(ctx, s.URL) == nil })
	switch {
	case errors.Is(err, tooling.ErrExited):
		log, _ := os.ReadFile(dir + "/server.log")
		os.RemoveAll(dir)
		return nil, fmt.Errorf("redistest: %s exited: %v\n%s", path, proc.Cmd.ProcessState, log)
	case err != nil:
		s.Close()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("redistest: %s did not answer on %s", path, s.URL)
	}
	return s, nil
}

// memDir returns a directory in memory (tmpfs) for the servers' files
// where the machine has one, else "" (the temporary directory): the
// server Start starts syncs its append-only file after every write, as
// ledgerredis requires by default, and the tests need the configuration,
// not a disk's sync latency.
func memDir() string {
	const shm = "/dev/shm"
	if fi, err := os.Stat(shm); err == nil && fi.IsDir() {
		if f, err := os.CreateTemp(shm, "redistest-probe"); err == nil {
			f.Close()
			os.Remove(f.Name())
			return shm
		}
	}
	return ""
}

// Close stops the server when Start started it, by its process id.
func (s *Server) Close() {
	if s.proc == nil {
		return
	}
	_ = s.proc.Cmd.Process.Kill()
	<-s.proc.Exited()
	os.RemoveAll(s.dir)
}

func ping(ctx context.Context, rawurl string) error {
	opts, err := redis.ParseURL(rawurl)
	if err != nil {
		return err
	}
	opts.DialTimeout, opts.MaxRetries = time.Second, -1
	c := redis.NewClient(opts)
	defer c.Close()
	return c.Ping(ctx).Err()
}

// install installs the Debian package pkg when it exists (as root, or
// through sudo without a password).
func install(ctx context.Context, pkg string) error {
	apt, err := exec.LookPath("apt-get")
	if err != nil {
		return fmt.Errorf("%w: no %s and no apt-get to install it", ErrUnavailable, pkg)
	}
	run := func(args ...string) ([]byte, error) {
		if os.Geteuid() != 0 {
			args = append([]string{"-n", apt}, args...)
			return exec.CommandContext(ctx, "sudo", args...).CombinedOutput()
		}
		return exec.CommandContext(ctx, apt, args...).CombinedOutput()
	}
	ok := available(ctx, pkg)
	if !ok && neverUpdated() {
		if out, err := run("update", "-qq"); err != nil {
			return fmt.Errorf("%w: apt-get update: %v\n%s", ErrUnavailable, err, out)
		}
		ok = available(ctx, pkg)
	}
	if !ok {
		return fmt.Errorf("%w: no Debian package %s", ErrUnavailable, pkg)
	}
	if out, err := run("install", "-y", "-qq", pkg); err != nil {
		return fmt.Errorf("%w: apt-get install %s: %v\n%s", ErrUnavailable, pkg, err, out)
	}
	return nil
}

// neverUpdated reports whether apt has no package lists yet.
func neverUpdated() bool {
	lists, _ := filepath.Glob("/var/lib/apt/lists/*_Packages*")
	return len(lists) == 0
}

// available reports whether apt knows an installable version of pkg.
func available(ctx context.Context, pkg string) bool {
	out, err := exec.CommandContext(ctx, "apt-cache", "policy", pkg).Output()
	return err == nil && strings.Contains(string(out), "Candidate:") && !strings.Contains(string(out), "Candidate: (none)")
}

// shared is the server Main found or started, written before the tests
// run.
var shared struct {
	started     bool
	url         string
	unavailable string
}

// Main finds or starts the server (Start), sets ONCELY_REDIS_URL to it
// for runnable examples and child processes, runs run (m.Run, or a wrapper
// of it), and stops the server if it started one.
func Main(run func() int) int {
	srv, err := Start(context.Background())
	switch {
	case errors.Is(err, ErrUnavailable) && os.Getenv("CI") != "true":
		shared.unavailable = err.Error()
		fmt.Fprintf(os.Stderr, "%v: the tests that need Redis are skipped, and so are the examples\n", err)
		// An example cannot skip itself.
		if err := tooling.SkipExamples(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	case err != nil:
		fmt.Fprintf(os.Stderr, "redistest: FAIL: %v\n", err)
		return 1
	default:
		shared.url = srv.URL
		defer srv.Close()
		// For runnable examples and child processes.
		if err := os.Setenv(EnvURL, srv.URL); err != nil {
			fmt.Fprintf(os.Stderr, "redistest: FAIL: %v\n", err)
			return 1
		}
	}
	shared.started = true
	return run()
}

// URL returns the URL of the server Main found or started. It skips tb
// when Main found no way to run one, and fails it when TestMain did not
// call Main.
func URL(tb testing.TB) string {
	tb.Helper()
	switch {
	case !shared.started:
		tb.Fatal("redistest: URL needs the server of redistest.Main; call it from TestMain")
	case shared.unavailable != "":
		tb.Skip(shared.unavailable)
	}
	return shared.url
}

// NewClient returns a client of the server at rawurl, closed when tb ends.
func NewClient(tb testing.TB, rawurl string) *redis.Client {
	tb.Helper()
	opts, err := redis.ParseURL(rawurl)
	if err != nil {
		tb.Fatal(err)
	}
	c := redis.NewClient(opts)
	tb.Cleanup(func() { c.Close() })
	return c
}

var seq atomic.Int64

// Prefix returns a key prefix no other test uses, on this or another test
// binary, and deletes the keys under it from the server at rawurl when tb
// ends. The keys of a ledger with that prefix all start with "{" + prefix.
func Prefix(tb testing.TB, rawurl string) string {
	tb.Helper()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	prefix := fmt.Sprintf("oncely-test-%d-%d-%s", os.Getpid(), seq.Add(1), hex.EncodeToString(b))
	tb.Cleanup(func() {
		if err := DeleteKeys(context.Background(), rawurl, "{"+prefix+"*"); err != nil {
			tb.Errorf("redistest: %v", err)
		}
	})
	return prefix
}

// DeleteKeys deletes the keys matching pattern from the server at rawurl.
func DeleteKeys(ctx context.Context, rawurl, pattern string) error {
	opts, err := redis.ParseURL(rawurl)
	if err != nil {
		return err
	}
	c := redis.NewClient(opts)
	defer c.Close()
	iter := c.Scan(ctx, 0, pattern, 1000).Iterator()
	var keys []string
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		return fmt.Errorf("scan %s: %w", pattern, err)
	}
	// One key per UNLINK, pipelined: a cluster node refuses keys of
	// several slots in one command.
	_, err = c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, k := range keys {
			p.Unlink(ctx, k)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("unlink: %w", err)
	}
	return nil
}
