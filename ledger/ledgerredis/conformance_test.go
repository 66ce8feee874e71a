package ledgerredis_test

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idemkit/ledger"
	"github.com/idemkit/idemkit/ledger/ledgerredis"
	"github.com/idemkit/idemkit/ledger/ledgerredis/redistest"
	"github.com/idemkit/idemkit/ledger/ledgertest"
)

// conformance runs the suite on the server at url, every subtest under
// its own key prefix.
func conformance(t *testing.T, url string) {
	client := redistest.NewClient(t, url)
	ledgertest.Run(t, func(t *testing.T, clock ledger.Clock) ledger.Store {
		return ledgerredis.New(client, &ledgerredis.Config{Clock: clock, Prefix: redistest.Prefix(t, url)})
	})
}

func TestConformance(t *testing.T) {
	t.Parallel()
	conformance(t, redistest.URL(t))
}

// The suite against Valkey, started for this test, where the machine has
// valkey-server or can install the Debian package.
func TestConformanceValkey(t *testing.T) {
	t.Parallel()
	srv, err := redistest.StartBinary(context.Background(), "valkey-server", "valkey-server")
	if err != nil {
		t.Skipf("no Valkey on this machine: %v", err)
	}
	t.Cleanup(srv.Close)
	conformance(t, srv.URL)
}

// newStore returns a store on its own prefix of the shared server, its
// client and the prefix.
func newStore(t *testing.T, cfg *ledgerredis.Config) (*ledgerredis.Store, *redis.Client, string) {
	t.Helper()
	url := redistest.URL(t)
	client := redistest.NewClient(t, url)
	c := ledgerredis.Config{}
	if cfg != nil {
		c = *cfg
	}
	c.Prefix = redistest.Prefix(t, url)
	return ledgerredis.New(client, &c), client, c.Prefix
}
