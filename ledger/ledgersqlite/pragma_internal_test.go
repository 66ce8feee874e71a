package ledgersqlite

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"
	"time"
)

// Both pools run with the PRAGMAs the configuration asks for.
func TestPragmas(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		cfg  *Config
		sync string // PRAGMA synchronous: 1 NORMAL, 2 FULL
		busy string // ms
	}{
		{"defaults", nil, "2", "5000"},
		{"normal", &Config{Synchronous: SyncNormal, BusyTimeout: 250 * time.Millisecond}, "1", "250"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			s, err := Open(ctx, filepath.Join(t.TempDir(), "p.db"), tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			for _, c := range []struct {
				pool string
				db   *sql.DB
				q    string
				want string
			}{
				{"writer", s.w, "PRAGMA journal_mode", "wal"},
				{"writer", s.w, "PRAGMA synchronous", tc.sync},
				{"writer", s.w, "PRAGMA busy_timeout", tc.busy},
				{"writer", s.w, "PRAGMA query_only", "0"},
				{"writer", s.w, "PRAGMA user_version", fmt.Sprint(schemaVersion)},
				{"reader", s.r, "PRAGMA journal_mode", "wal"},
				{"reader", s.r, "PRAGMA synchronous", tc.sync},
				{"reader", s.r, "PRAGMA busy_timeout", tc.busy},
				{"reader", s.r, "PRAGMA query_only", "1"},
			} {
				var got string
				if err := c.db.QueryRowContext(ctx, c.q).Scan(&got); err != nil || got != c.want {
					t.Errorf("%s: %s = %q, %v; want %q", c.pool, c.q, got, err, c.want)
				}
			}
		})
	}
}
