package ledgersqlite

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// Both pools run with the PRAGMAs the configuration asks for.
func TestPragmas(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		cfg   *Config
		busy  string // ms: the readers' busy timeout, and the writer's limit
		syncs bool   // the writer syncs the log after each commit
	}{
		{"defaults", nil, "5000", true},
		{"normal", &Config{Synchronous: SyncNormal, BusyTimeout: 250 * time.Millisecond}, "250", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			s, err := Open(ctx, filepath.Join(t.TempDir(), "p.db"), tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if s.wr.busyTimeout.Milliseconds() != mustAtoi(t, tc.busy) {
				t.Errorf("the writer waits for a lock up to %v, want %s ms", s.wr.busyTimeout, tc.busy)
			}
			if got := s.wr.sync != nil; got != tc.syncs {
				t.Errorf("the writer syncs after each commit: %v, want %v", got, tc.syncs)
			}
			type querier interface {
				QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
			}
			for _, c := range []struct {
				pool string
				db   querier
				q    string
				want string
			}{
				{"writer", s.wr.conn, "PRAGMA journal_mode", "wal"},
				// SQLite syncs at checkpoints; the writer after commits.
				{"writer", s.wr.conn, "PRAGMA synchronous", "1"},
				// The writer waits for another's lock in Go (retryBusy).
				{"writer", s.wr.conn, "PRAGMA busy_timeout", "0"},
				{"writer", s.wr.conn, "PRAGMA query_only", "0"},
				{"writer", s.wr.conn, "PRAGMA user_version", fmt.Sprint(schemaVersion)},
				{"reader", s.r, "PRAGMA journal_mode", "wal"},
				{"reader", s.r, "PRAGMA busy_timeout", tc.busy},
				{"reader", s.r, "PRAGMA query_only", "1"},
				// No mapping: a reader unmaps and maps the file again whenever
				// another connection wrote (README.md, Reads).
				{"reader", s.r, "PRAGMA mmap_size", "0"},
				{"writer", s.wr.conn, "PRAGMA mmap_size", "0"},
			} {
				var got string
				if err := c.db.QueryRowContext(ctx, c.q).Scan(&got); err != nil || got != c.want {
					t.Errorf("%s: %s = %q, %v; want %q", c.pool, c.q, got, err, c.want)
				}
			}
		})
	}
}

func mustAtoi(t *testing.T, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
