// Package pgtest gives tests a PostgreSQL server and a fresh schema per
// test.
//
// The server is, in this order: the one ONCELY_POSTGRES_URL names; the
// one on 127.0.0.1:5432 (database test, user postgres, trust
// authentication) when it answers; else one this package starts for the
// test binary: it installs the Debian postgresql package with apt-get when
// no initdb is found, runs initdb in a temporary directory and starts
// postgres on a free loopback port. A test binary that may start a server
// stops it in TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(pgtest.Main(m.Run)) }
//
//	func TestSomething(t *testing.T) {
//		t.Parallel()
//		pool := pgtest.Pool(t)           // shared by the tests of the binary
//		schema := pgtest.Schema(t, pool) // dropped when t ends
//		...
//	}
//
// Runnable examples take a pool and a schema from ForExamples.
// PgBouncerURL puts a PgBouncer in transaction pooling mode in front of
// the server (installing the Debian pgbouncer package when it is
// missing), for tests of what works through a pooler.
//
// Nothing is ever skipped: when no server can be found or started, the
// test fails and says why. A server or PgBouncer started here runs in its
// own process group from a temporary directory named pgtest-*; Main stops
// it, but a test binary killed before Main returns leaves it running.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// EnvURL names the environment variable with the URL of a server to use.
const EnvURL = "ONCELY_POSTGRES_URL"

// LocalURL is the server the development and CI machines run.
const LocalURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// shared is the server of the test binary, found or started on first use,
// and what Main cleans up.
var shared struct {
	once sync.Once
	url  string
	err  error
	srv  *Server // started by this process; nil otherwise

	mu             sync.Mutex
	pool           *pgxpool.Pool
	exampleSchemas []string
}

// Main runs the tests (run is m.Run, or a function that calls it), then
// drops the schemas of ForExamples, closes the pool of Pool and stops the
// PgBouncer of PgBouncerURL and the server that URL started, if it
// started them. It returns run's exit code,
// or 1 when the cleanup failed.
func Main(run func() int) int {
	code := run()
	shared.mu.Lock()
	var errs []error
	if shared.pool != nil {
		for _, name := range shared.exampleSchemas {
			errs = append(errs, dropSchema(shared.pool, name))
		}
		shared.pool.Close()
	}
	shared.mu.Unlock()
	errs = append(errs, stopBouncer())
	if shared.srv != nil {
		errs = append(errs, shared.srv.Stop())
	}
	if err := errors.Join(errs...); err != nil {
		fmt.Fprintln(os.Stderr, "pgtest:", err)
		code = max(code, 1)
	}
	return code
}

// server finds or starts the test binary's server on the first call.
func server() (string, error) {
	shared.once.Do(func() { shared.url, shared.srv, shared.err = find(context.Background()) })
	if shared.err != nil {
		return "", fmt.Errorf("pgtest: no PostgreSQL server: %w", shared.err)
	}
	return shared.url, nil
}

// URL returns the URL of the test binary's server, finding or starting it
// on the first call. It fails tb when there is none.
func URL(tb testing.TB) string {
	tb.Helper()
	url, err := server()
	if err != nil {
		tb.Fatal(err)
	}
	return url
}

// find returns the URL of the first server that answers, starting one when
// neither the environment's nor the local one does.
func find(ctx context.Context) (string, *Server, error) {
	if u := os.Getenv(EnvURL); u != "" {
		if err := ping(ctx, u); err != nil {
			return "", nil, fmt.Errorf("%s: %w", EnvURL, err)
		}
		return u, nil, nil
	}
	if ping(ctx, LocalURL) == nil {
		return LocalURL, nil, nil
	}
	srv, err := Start(ctx)
	if err != nil {
		return "", nil, err
	}
	return srv.URL, srv, nil
}

// ping connects to url and runs a query, within a few seconds.
func ping(ctx context.Context, url string) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	return conn.Ping(ctx)
}

// sharedPool returns the pool of Pool, making it on the first call.
func sharedPool() (*pgxpool.Pool, error) {
	url, err := server()
	if err != nil {
		return nil, err
	}
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.pool == nil {
		cfg, err := pgxpool.ParseConfig(url)
		if err != nil {
			return nil, fmt.Errorf("pgtest: %w", err)
		}
		cfg.MaxConns = 16
		if shared.pool, err = pgxpool.NewWithConfig(context.Background(), cfg); err != nil {
			return nil, fmt.Errorf("pgtest: %w", err)
		}
	}
	return shared.pool, nil
}

// Pool returns a connection pool on URL shared by the tests of the binary
// (at most 16 connections). Main closes it.
func Pool(tb testing.TB) *pgxpool.Pool {
	tb.Helper()
	pool, err := sharedPool()
	if err != nil {
		tb.Fatal(err)
	}
	return pool
}

var schemaSeq atomic.Int64

// createSchema creates a schema with a name no other test uses, in this
// or another test binary on the same server.
func createSchema(pool *pgxpool.Pool) (string, error) {
	b := make([]byte, 4)
	rand.Read(b)
	name := fmt.Sprintf("oncely_test_%d_%d_%s", os.Getpid(), schemaSeq.Add(1), hex.EncodeToString(b))
	if _, err := pool.Exec(context.Background(), "CREATE SCHEMA "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", fmt.Errorf("pgtest: create schema: %w", err)
	}
	return name, nil
}

func dropSchema(pool *pgxpool.Pool, name string) error {
	if _, err := pool.Exec(context.Background(), "DROP SCHEMA "+pgx.Identifier{name}.Sanitize()+" CASCADE"); err != nil {
		return fmt.Errorf("pgtest: drop schema %s: %w", name, err)
	}
	return nil
}

// Schema creates a schema of its own for tb in pool's database and drops
// it, with everything in it, when tb ends.
func Schema(tb testing.TB, pool *pgxpool.Pool) string {
	tb.Helper()
	name, err := createSchema(pool)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := dropSchema(pool, name); err != nil {
			tb.Error(err)
		}
	})
	return name
}

// ForExamples returns, for a runnable example (which has no testing.TB),
// the pool of Pool and a schema of its own, which Main drops after the
// tests. It panics when there is no server.
func ForExamples() (*pgxpool.Pool, string) {
	pool, err := sharedPool()
	if err != nil {
		panic(err)
	}
	name, err := createSchema(pool)
	if err != nil {
		panic(err)
	}
	shared.mu.Lock()
	defer shared.mu.Unlock()
	shared.exampleSchemas = append(shared.exampleSchemas, name)
	return pool, name
}

// bouncer is the PgBouncer of the test binary, started on first use.
var bouncer struct {
	once sync.Once
	url  string
	err  error
	srv  *Bouncer
}

// PgBouncerURL returns the URL of a PgBouncer in transaction pooling mode
// in front of URL's server, started for the test binary on the first call
// (StartPgBouncer) and stopped by Main. It fails tb when there is none.
func PgBouncerURL(tb testing.TB) string {
	tb.Helper()
	target := URL(tb)
	bouncer.once.Do(func() {
		bouncer.srv, bouncer.err = StartPgBouncer(context.Background(), target)
		if bouncer.err == nil {
			bouncer.url = bouncer.srv.URL
		}
	})
	if bouncer.err != nil {
		tb.Fatalf("pgtest: no PgBouncer: %v", bouncer.err)
	}
	return bouncer.url
}

// stopBouncer stops the PgBouncer of PgBouncerURL, if it started one.
func stopBouncer() error {
	if bouncer.srv == nil {
		return nil
	}
	return bouncer.srv.Stop()
}
