package ledgerredis_test

import (
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/logging"

	"github.com/oncely/oncely/internal/ledgerbench"
	"github.com/oncely/oncely/ledger/ledgerredis/redistest"
)

// The tests run against the server of redistest: ONCELY_REDIS_URL, the
// one on 127.0.0.1:6379, or a redis-server it starts for this test binary.
// Servers that single tests start for the whole binary stop at its end.
// In a child process of TestKilledWhileClaimed or
// BenchmarkContentionProcesses it runs the child instead.
func TestMain(m *testing.M) {
	// The tests stop servers under live clients: go-redis's pool would log
	// each refused dial into whichever test's output is open.
	redis.SetLogger(&logging.VoidLogger{})
	ledgerbench.Child(benchChild)
	if os.Getenv(envChild) != "" {
		fmt.Fprintln(os.Stderr, "child:", killedChild())
		os.Exit(1)
	}
	os.Exit(redistest.Main(func() int {
		defer func() {
			started.Lock()
			defer started.Unlock()
			for _, s := range started.servers {
				s.Close()
			}
		}()
		return m.Run()
	}))
}

var started struct {
	sync.Mutex
	servers []*redistest.Server
}

// stopAtExit stops s when the tests end.
func stopAtExit(s *redistest.Server) {
	started.Lock()
	defer started.Unlock()
	started.servers = append(started.servers, s)
}
