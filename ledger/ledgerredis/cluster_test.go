package ledgerredis_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/oncely/oncely/clock"
	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/ledger/ledgerredis"
	"github.com/oncely/oncely/ledger/ledgerredis/redistest"
	"github.com/oncely/oncely/ledger/ledgertest"
)

// startCluster starts a Redis Cluster of masters servers on loopback
// ports (redis-server --cluster-enabled yes, joined by redis-cli --cluster
// create, each master owning an equal range of the slots) and returns a
// cluster client of it; the servers stop when t ends.
func startCluster(t *testing.T, masters int) *redis.ClusterClient {
	t.Helper()
	ctx := context.Background()
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		// As redistest does: CI must run it, elsewhere it may be skipped.
		if os.Getenv("CI") == "true" {
			t.Fatalf("a cluster needs redis-cli (Debian package redis-tools): %v", err)
		}
		t.Skipf("a cluster needs redis-cli (Debian package redis-tools): %v", err)
	}
	addrs := make([]string, masters)
	for i := range addrs {
		srv, err := redistest.StartBinary(ctx, "redis-server", "redis-server", "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(srv.Close)
		addrs[i] = strings.TrimSuffix(strings.TrimPrefix(srv.URL, "redis://"), "/0")
	}
	args := append([]string{"--cluster", "create"}, addrs...)
	if out, err := exec.CommandContext(ctx, cli, append(args, "--cluster-replicas", "0", "--cluster-yes")...).CombinedOutput(); err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	// Every node must know the whole layout before the tests start.
	deadline, tick := time.After(time.Minute), time.NewTicker(20*time.Millisecond)
	defer tick.Stop()
	for _, addr := range addrs {
		node := redistest.NewClient(t, "redis://"+addr+"/0")
		for {
			info, err := node.ClusterInfo(ctx).Result()
			if err == nil && strings.Contains(info, "cluster_state:ok") && strings.Contains(info, fmt.Sprintf("cluster_known_nodes:%d", masters)) {
				break
			}
			select {
			case <-deadline:
				t.Fatalf("the cluster did not come up on %s: %v\n%s", addr, err, info)
			case <-tick.C:
			}
		}
	}
	cluster := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	t.Cleanup(func() { cluster.Close() })
	return cluster
}

// The buckets' share of each master of a three-master cluster: with
// Spread the masters hold equal shares, within one.
func TestClusterSpread(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cluster := startCluster(t, 3)
	share := func(cfg *ledgerredis.Config) []int {
		t.Helper()
		store := ledgerredis.New(cluster, cfg)
		count := map[string]int{}
		for _, tag := range ledgerredis.Tags(store) {
			node, err := cluster.MasterForKey(ctx, tag)
			if err != nil {
				t.Fatal(err)
			}
			count[node.Options().Addr]++
		}
		var n []int
		for _, c := range count {
			n = append(n, c)
		}
		slices.Sort(n)
		return n
	}
	t.Logf("LegacySpread: buckets per master %v", share(&ledgerredis.Config{Prefix: "oncely", Spread: ledgerredis.LegacySpread}))
	for _, spread := range []int{0, 16, 48, 100} { // 0: the default
		for _, prefix := range []string{"oncely", "agents", "a-much-longer-prefix-of-a-ledger"} {
			got := share(&ledgerredis.Config{Prefix: prefix, Spread: spread})
			if len(got) != 3 || got[2]-got[0] > 1 {
				t.Errorf("Spread %d, prefix %s: buckets per master %v, want equal shares within one", spread, prefix, got)
			}
		}
	}
}

// The conformance suite on a cluster of three masters, with and without
// Spread: every script touches the keys it declares, of one slot, and
// List reads the indexes and records of every master.
func TestConformanceThreeMasters(t *testing.T) {
	t.Parallel()
	cluster := startCluster(t, 3)
	for _, spread := range []int{ledgerredis.LegacySpread, 0} {
		t.Run(fmt.Sprintf("spread=%d", spread), func(t *testing.T) {
			t.Parallel()
			ledgertest.Run(t, func(t *testing.T, clock clock.Clock) ledger.Store {
				// The cluster goes with its keys when the test ends.
				prefix := fmt.Sprintf("three-%d", clusterSeq.Add(1))
				return ledgerredis.New(cluster, &ledgerredis.Config{Clock: clock, Prefix: prefix, Spread: spread})
			})
		})
	}
	t.Run("Check", func(t *testing.T) {
		// The test servers run without AOF: Check asks every master.
		var de *ledgerredis.DurabilityError
		if err := ledgerredis.New(cluster, nil).Check(context.Background()); !errors.As(err, &de) || de.Setting != "appendonly" {
			t.Errorf("Check on a cluster without AOF = %v, want a DurabilityError on appendonly", err)
		}
		if err := ledgerredis.New(cluster, &ledgerredis.Config{Durability: ledgerredis.DurabilityUnchecked}).Check(context.Background()); err != nil {
			t.Errorf("Check unchecked = %v", err)
		}
	})
}

var clusterSeq atomic.Int64
