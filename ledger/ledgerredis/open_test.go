package ledgerredis_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/idemkit/idemkit/ledger"
	"github.com/idemkit/idemkit/ledger/ledgerredis"
	"github.com/idemkit/idemkit/ledger/ledgerredis/redistest"
)

func TestOpenURL(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := redistest.URL(t)
	prefix := redistest.Prefix(t, url)

	store, err := ledgerredis.OpenURL(ctx, url+"?prefix="+prefix+"&wait=0&wait_timeout=2s", nil)
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
	if rec, err := ledgerredis.New(c, &ledgerredis.Config{Prefix: prefix}).Get(ctx, p.Key); err != nil || rec.Owner != p.Owner {
		t.Errorf("Get under the URL's prefix = %+v, %v", rec, err)
	}

	for _, bad := range []string{
		url + "?wait=many",
		url + "?wait=-1",
		url + "?wait_timeout=soon",
		url + "?unknown_option=1",
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
