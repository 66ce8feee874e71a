package ledgersqlite_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/ledger/ledgersqlite"
)

// A Store whose file is removed (ledger.db with its -wal and -shm) or
// replaced by another file fails closed at its next write: nothing runs
// through it any more, while a Store opened on the path afterwards works
// on the new file.
func TestFileRemovedOrReplaced(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		lose func(t *testing.T, path string)
	}{
		{"removed", func(t *testing.T, path string) {
			for _, suffix := range []string{"", "-wal", "-shm"} {
				if err := os.Remove(path + suffix); err != nil {
					t.Fatal(err)
				}
			}
		}},
		{"replaced", func(t *testing.T, path string) {
			other := filepath.Join(filepath.Dir(path), "restored.db")
			open(t, other, nil).Close()
			if err := os.Rename(other, path); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			path := filepath.Join(t.TempDir(), "ledger.db")
			s := open(t, path, nil)
			defer s.Close()
			exec, call, runs := newExecutor(t, s)
			if r, err := exec.Execute(ctx, "run-1", call("1")); err != nil || r.Outcome != client.Executed {
				t.Fatalf("Execute before the file went = %+v, %v", r, err)
			}
			pending := claimParams("pending", "owner")
			if res, err := s.Claim(ctx, pending); err != nil || !res.Claimed {
				t.Fatalf("Claim = %+v, %v", res, err)
			}

			c.lose(t, path)

			refused := func(what string, err error) {
				t.Helper()
				if !errors.Is(err, ledgersqlite.ErrFileReplaced) || !errors.Is(err, ledger.ErrUnavailable) {
					t.Errorf("%s after the file went: error = %v, want ErrFileReplaced (a ledger.ErrUnavailable)", what, err)
				}
			}
			r, err := exec.Execute(ctx, "run-1", call("2"))
			refused("Execute", err)
			if r.Outcome == client.Executed || runs.Load() != 1 {
				t.Errorf("Execute after the file went = %+v; the tool ran %d times, want once (before)", r, runs.Load())
			}
			res, err := s.Claim(ctx, claimParams("fresh", "owner"))
			refused("Claim", err)
			if res.Claimed {
				t.Errorf("Claim after the file went = %+v, want not claimed", res)
			}
			refused("Complete", s.Complete(ctx, pending.Key, pending.Owner, ledger.Completion{Summary: "ok"}))
			refused("Fail", s.Fail(ctx, pending.Key, pending.Owner, ledger.Failure{Definite: true}))
			refused("Extend", s.Extend(ctx, pending.Key, pending.Owner, time.Now().Add(time.Hour)))
			_, err = s.Get(ctx, pending.Key)
			refused("Get", err)
			_, err = s.List(ctx, ledger.Filter{})
			refused("List", err)
			_, err = s.Purge(ctx, time.Now())
			refused("Purge", err)

			// A Store opened now works on the file at the path; the first
			// one keeps refusing.
			fresh := open(t, path, nil)
			defer fresh.Close()
			if res, err := fresh.Claim(ctx, claimParams("fresh", "owner")); err != nil || !res.Claimed {
				t.Errorf("Claim on a Store opened after the file went = %+v, %v", res, err)
			}
			if err := fresh.Complete(ctx, "fresh", "owner", ledger.Completion{Summary: "ok"}); err != nil {
				t.Errorf("Complete on a Store opened after the file went: %v", err)
			}
			_, err = exec.Execute(ctx, "run-1", call("3"))
			refused("Execute once a new file is at the path", err)
			_, err = s.Claim(ctx, claimParams("other", "owner"))
			refused("Claim once a new file is at the path", err)
			if runs.Load() != 1 {
				t.Errorf("the tool ran %d times through the first Store, want once", runs.Load())
			}
		})
	}
}
