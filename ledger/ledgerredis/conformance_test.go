package ledgerredis_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/oncely/oncely/clock"
	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/ledger/ledgerredis"
	"github.com/oncely/oncely/ledger/ledgerredis/redistest"
	"github.com/oncely/oncely/ledger/ledgertest"
)

// conformance runs the suite on the server at url, every subtest under
// its own key prefix.
func conformance(t *testing.T, url string) {
	client := redistest.NewClient(t, url)
	ledgertest.Run(t, func(t *testing.T, clock clock.Clock) ledger.Store {
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

// The suite through a cluster client on a one-node Redis Cluster that
// serves every slot: a script whose keys span two slots would fail with
// CROSSSLOT, and the pipelined List and the WAIT after a write go to the
// node of each slot.
func TestConformanceCluster(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv, err := redistest.StartBinary(ctx, "redis-server", "redis-server", "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	node := redistest.NewClient(t, srv.URL)
	if err := node.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", 0, 16383).Err(); err != nil {
		t.Fatal(err)
	}
	deadline, tick := time.After(time.Minute), time.NewTicker(20*time.Millisecond)
	defer tick.Stop()
	for {
		info, err := node.ClusterInfo(ctx).Result()
		if err == nil && strings.Contains(info, "cluster_state:ok") {
			break
		}
		select {
		case <-deadline:
			t.Fatalf("the cluster did not come up: %v\n%s", err, info)
		case <-tick.C:
		}
	}
	cluster := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{node.Options().Addr}})
	t.Cleanup(func() { cluster.Close() })
	ledgertest.Run(t, func(t *testing.T, clock clock.Clock) ledger.Store {
		return ledgerredis.New(cluster, &ledgerredis.Config{Clock: clock, Prefix: redistest.Prefix(t, srv.URL)})
	})
	// The settle scripts PUBLISH on a cluster too; a cluster client
	// subscribes through one of its nodes.
	t.Run("Watch", func(t *testing.T) {
		ledgertest.RunWatch(t, func(t *testing.T, clock clock.Clock) (ledger.Store, ledger.Store) {
			prefix := redistest.Prefix(t, srv.URL)
			other := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{node.Options().Addr}})
			t.Cleanup(func() { other.Close() })
			return ledgerredis.New(cluster, &ledgerredis.Config{Clock: clock, Prefix: prefix}),
				ledgerredis.New(other, &ledgerredis.Config{Clock: clock, Prefix: prefix})
		})
	})
	t.Run("WaitReplicas", func(t *testing.T) {
		store := ledgerredis.New(cluster, &ledgerredis.Config{Prefix: redistest.Prefix(t, srv.URL), WaitReplicas: 1, WaitTimeout: time.Millisecond})
		if _, err := store.Claim(ctx, params("k", "owner-a", time.Now())); !errors.Is(err, ledgerredis.ErrNotReplicated) {
			t.Errorf("Claim without replicas = %v, want ErrNotReplicated", err)
		}
	})
}

// Two Stores on one prefix, each with a client of its own, as two
// processes would share the ledger.
func TestWatchConformance(t *testing.T) {
	t.Parallel()
	url := redistest.URL(t)
	ledgertest.RunWatch(t, func(t *testing.T, clock clock.Clock) (ledger.Store, ledger.Store) {
		prefix := redistest.Prefix(t, url)
		a := ledgerredis.New(redistest.NewClient(t, url), &ledgerredis.Config{Clock: clock, Prefix: prefix})
		b := ledgerredis.New(redistest.NewClient(t, url), &ledgerredis.Config{Clock: clock, Prefix: prefix})
		return a, b
	})
}
