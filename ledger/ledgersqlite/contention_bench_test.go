package ledgersqlite_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/oncely/oncely/internal/ledgerbench"
	"github.com/oncely/oncely/ledger"
)

// 64 callers in this process, each with its own executor and its own
// Store on one file, make the same call at once; the tool takes 50 ms. A
// waiter is woken in this process by the holder's settle. See
// ledgerbench.Contention; BenchmarkContentionProcesses is the case of
// callers in separate processes.
func BenchmarkContention(b *testing.B) {
	path := filepath.Join(b.TempDir(), "contention.db")
	ledgerbench.Contention(b, func() ledger.Store {
		s := open(b, path, nil)
		b.Cleanup(func() { s.Close() })
		return s
	}, 64, 50*time.Millisecond)
}

// envBenchDB names the ledger file of BenchmarkContentionProcesses's
// caller processes.
const envBenchDB = "LEDGERSQLITE_BENCH_DB"

// 64 callers, each an OS process with its own Store on one file, make the
// same call at once; the tool takes 50 ms. A waiter learns that the holder
// settled through the ledger's watch (the signal file beside it), or in
// poll by polling it. See ledgerbench.ContentionProcesses.
func BenchmarkContentionProcesses(b *testing.B) {
	for _, mode := range []string{"watch", "poll"} {
		b.Run(mode, func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "contention.db")
			open(b, path, nil).Close() // created once, before 64 processes open it
			ledgerbench.ContentionProcesses(b, []string{envBenchDB + "=" + path}, 64, 50*time.Millisecond, mode == "poll")
		})
	}
}
