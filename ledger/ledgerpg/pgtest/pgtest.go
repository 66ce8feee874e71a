// Package pgtest gives tests a PostgreSQL server and a fresh schema per
// test.
//
// The server is, in this order: the one IDEMKIT_POSTGRES_URL names; the
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
//		pool := pgtest.Pool(t)          // shared by the tests of the binary
//		schema := pgtest.Schema(t, pool) // dropped when t ends
//		...
//	}
//
// Nothing is ever skipped: when no server can be found or started, the
// test fails and says why.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
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
const EnvURL = "IDEMKIT_POSTGRES_URL"

// LocalURL is the server the development and CI machines run.
const LocalURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// shared is the server of the test binary, found or started on first use.
var shared struct {
	once sync.Once
	url  string
	err  error
	srv  *Server // started by this process; nil otherwise
	mu   sync.Mutex
	pool *pgxpool.Pool
}

// Main runs the tests (run is m.Run, or a function that calls it) and then
// closes the pool of Pool and stops the server URL started, if it started
// one. It returns run's exit code, or 1 when the server could not be
// stopped.
func Main(run func() int) int {
	code := run()
	shared.mu.Lock()
	if shared.pool != nil {
		shared.pool.Close()
	}
	shared.mu.Unlock()
	if shared.srv != nil {
		if err := shared.srv.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "pgtest:", err)
			if code == 0 {
				code = 1
			}
		}
	}
	return code
}

// URL returns the URL of the test binary's server, finding or starting it
// on the first call. It fails tb when there is none.
func URL(tb testing.TB) string {
	tb.Helper()
	shared.once.Do(func() { shared.url, shared.srv, shared.err = find(context.Background()) })
	if shared.err != nil {
		tb.Fatalf("pgtest: no PostgreSQL server: %v", shared.err)
	}
	return shared.url
}

// find returns the URL of the first server that answers, starting one when
// neither the environment's nor the local one does.
func find(ctx context.Context) (string, *Server, error) {
	if u := os.Getenv(EnvURL); u != "" {
		if err := ping(ctx, u); err != nil {
			return "", nil, fmt.Errorf("%s=%s: %w", EnvURL, u, err)
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

// Pool returns a connection pool on URL shared by the tests of the binary
// (at most 16 connections). Main closes it.
func Pool(tb testing.TB) *pgxpool.Pool {
	tb.Helper()
	url := URL(tb)
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.pool == nil {
		cfg, err := pgxpool.ParseConfig(url)
		if err != nil {
			tb.Fatalf("pgtest: %v", err)
		}
		cfg.MaxConns = 16
		if shared.pool, err = pgxpool.NewWithConfig(context.Background(), cfg); err != nil {
			tb.Fatalf("pgtest: %v", err)
		}
	}
	return shared.pool
}

var schemaSeq atomic.Int64

// Schema creates a schema with a name no other test uses, in this or
// another test binary on the same server, and drops it with everything in
// it when tb ends.
func Schema(tb testing.TB, pool *pgxpool.Pool) string {
	tb.Helper()
	b := make([]byte, 4)
	rand.Read(b)
	name := fmt.Sprintf("idemkit_test_%d_%d_%s", os.Getpid(), schemaSeq.Add(1), hex.EncodeToString(b))
	ctx := context.Background()
	if _, err := pool.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{name}.Sanitize()); err != nil {
		tb.Fatalf("pgtest: create schema: %v", err)
	}
	tb.Cleanup(func() {
		if _, err := pool.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{name}.Sanitize()+" CASCADE"); err != nil {
			tb.Errorf("pgtest: drop schema %s: %v", name, err)
		}
	})
	return name
}
