package ledgerredis_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/ledger/ledgerredis"
	"github.com/oncely/oncely/ledger/ledgerredis/redistest"
)

func TestOpenURL(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := redistest.URL(t)
	prefix := redistest.Prefix(t, url)

	store, err := ledgerredis.OpenURL(ctx, url+"?prefix="+prefix+"&wait=0&wait_timeout=2s&spread=48", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	p := params("k-url", "owner-a", time.Now())
	if res, err := store.Claim(ctx, p); err != nil || !res.Claimed {
		t.Fatalf("Claim = %+v, %v", res, err)
	}
	// The same prefix through New sees the record: the URL's prefix was used.
	same, _, _ := newStore(t, nil)
	if _, err := same.Get(ctx, p.Key); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("Get under another prefix: %v, want ErrNotFound", err)
	}
	c := redistest.NewClient(t, url)
	if rec, err := ledgerredis.New(c, &ledgerredis.Config{Prefix: prefix, Spread: 48}).Get(ctx, p.Key); err != nil || rec.Owner != p.Owner {
		t.Errorf("Get under the URL's prefix and spread = %+v, %v", rec, err)
	}
	// Without the URL's spread the record is in another bucket: the
	// layout is the ledger's.
	if _, err := ledgerredis.New(c, &ledgerredis.Config{Prefix: prefix}).Get(ctx, p.Key); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("Get under the URL's prefix without its spread: %v, want ErrNotFound", err)
	}

	for _, bad := range []string{
		url + "?wait=many",
		url + "?wait=-1",
		url + "?wait_timeout=soon",
		url + "?unknown_option=1",
		url + "?spread=0",
		url + "?spread=257",
		url + "?spread=many",
		url + "?durability=always",
		"http://127.0.0.1:6379",
	} {
		if _, err := ledgerredis.OpenURL(ctx, bad, nil); !errors.Is(err, ledger.ErrConfig) {
			t.Errorf("OpenURL(%s) = %v, want ErrConfig", bad, err)
		}
	}

	// Nothing listens on a port just closed.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	if _, err := ledgerredis.OpenURL(ctx, "redis://"+addr+"/0", nil); !errors.Is(err, ledger.ErrUnavailable) {
		t.Errorf("OpenURL of a closed port = %v, want ErrUnavailable", err)
	}
}

// OpenURL refuses a server that could lose or evict claims, naming the
// setting, unless the URL or Config accepts the loss; a server that hides
// CONFIG (as managed services do) can pass only the checks INFO answers.
func TestOpenURLDurability(t *testing.T) {
	t.Parallel()
	always := []string{"--appendonly", "yes", "--appendfsync", "always"}
	for _, tc := range []struct {
		name string
		args []string
		// The setting refused at each level (power_loss, restart), "" when
		// the server passes.
		powerLoss, restart string
	}{
		{"no AOF", nil, "appendonly", "appendonly"},
		{"AOF everysec", []string{"--appendonly", "yes"}, "appendfsync", ""},
		{"evicting", append(always, "--maxmemory-policy", "allkeys-lru"), "maxmemory-policy", "maxmemory-policy"},
		{"volatile eviction", append(always, "--maxmemory-policy", "volatile-ttl"), "maxmemory-policy", "maxmemory-policy"},
		{"durable", always, "", ""},
		{"no CONFIG", append(always, "--rename-command", "CONFIG", ""), "appendfsync", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			srv, err := redistest.StartBinary(ctx, "redis-server", "redis-server", tc.args...)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(srv.Close)
			for _, level := range []struct {
				param, refused string
			}{{"", tc.powerLoss}, {"?durability=power_loss", tc.powerLoss}, {"?durability=restart", tc.restart}, {"?durability=unchecked", ""}} {
				store, err := ledgerredis.OpenURL(ctx, srv.URL+level.param, nil)
				if level.refused == "" {
					if err != nil {
						t.Errorf("OpenURL(%s) = %v, want a store", level.param, err)
						continue
					}
					if _, err := store.Claim(ctx, params("k", "owner-a", time.Now())); err != nil {
						t.Errorf("Claim through OpenURL(%s): %v", level.param, err)
					}
					store.Close()
					continue
				}
				var de *ledgerredis.DurabilityError
				if !errors.Is(err, ledger.ErrConfig) || !errors.As(err, &de) || de.Setting != level.refused {
					t.Errorf("OpenURL(%s) = %v, want a DurabilityError on %s matching ErrConfig", level.param, err, level.refused)
					continue
				}
				if msg := err.Error(); !strings.Contains(msg, level.refused) || !strings.Contains(msg, "durability=unchecked") {
					t.Errorf("the error does not name the setting and the way out: %s", msg)
				} else if level.param == "" && tc.name == "AOF everysec" {
					t.Log(msg)
				}
			}
			// Config.Durability is the same choice; the URL's overrides it.
			if store, err := ledgerredis.OpenURL(ctx, srv.URL, &ledgerredis.Config{Durability: ledgerredis.DurabilityUnchecked}); err != nil {
				t.Errorf("OpenURL with Config.Durability unchecked = %v", err)
			} else {
				store.Close()
			}
			if tc.powerLoss != "" {
				_, err := ledgerredis.OpenURL(ctx, srv.URL+"?durability=power_loss", &ledgerredis.Config{Durability: ledgerredis.DurabilityUnchecked})
				if !errors.Is(err, ledger.ErrConfig) {
					t.Errorf("OpenURL(?durability=power_loss) with Config unchecked = %v, want ErrConfig", err)
				}
			}
		})
	}
}
