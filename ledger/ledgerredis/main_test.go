package ledgerredis_test

import (
	"os"
	"testing"

	"github.com/idemkit/idemkit/ledger/ledgerredis/redistest"
)

// The tests run against the server of redistest: IDEMKIT_REDIS_URL, the
// one on 127.0.0.1:6379, or a redis-server it starts for this test binary.
func TestMain(m *testing.M) { os.Exit(redistest.Main(m.Run)) }
