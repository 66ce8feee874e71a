package ledgerpg_test

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncely/oncely/ledger/ledgerpg/pgtest"
)

// wire is a TCP proxy in front of the test server that counts, on the
// wire, the connections made and the round trips completed: the server's
// ReadyForQuery messages, one at the end of every exchange (a simple
// query, or an extended-protocol exchange ending in Sync).
type wire struct {
	ln         net.Listener
	conns      atomic.Int64
	roundTrips atomic.Int64
	wg         sync.WaitGroup
}

// newWire starts a proxy to the test binary's server and returns it with
// a pool through it of at most maxConns connections, which never pings
// (so that only the store's statements cross the wire).
func newWire(t *testing.T, maxConns int32) (*wire, *pgxpool.Pool) {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	target := net.JoinHostPort(cfg.ConnConfig.Host, strconv.Itoa(int(cfg.ConnConfig.Port)))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	w := &wire{ln: ln}
	w.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			w.conns.Add(1)
			w.wg.Go(func() { w.serve(c, target) })
		}
	})
	cfg.ConnConfig.Host, cfg.ConnConfig.Port = "127.0.0.1", uint16(ln.Addr().(*net.TCPAddr).Port)
	cfg.ConnConfig.TLSConfig, cfg.ConnConfig.Fallbacks = nil, nil
	cfg.MaxConns = maxConns
	cfg.ShouldPing = func(context.Context, pgxpool.ShouldPingParams) bool { return false }
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		pool.Close()
		ln.Close()
		w.wg.Wait()
	})
	return w, pool
}

// warm opens n connections of pool at once, so that later calls reuse
// them, and returns the round trips counted so far.
func (w *wire) warm(t *testing.T, pool *pgxpool.Pool, n int) int64 {
	t.Helper()
	var conns []*pgxpool.Conn
	for range n {
		c, err := pool.Acquire(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	for _, c := range conns {
		c.Release()
	}
	return w.roundTrips.Load()
}

func (w *wire) serve(client net.Conn, target string) {
	defer client.Close()
	server, err := net.Dial("tcp", target)
	if err != nil {
		return
	}
	defer server.Close()
	go func() {
		_, _ = io.Copy(server, client)
		server.Close()
	}()
	// The server's messages: a type byte and a length that counts itself.
	var head [5]byte
	for {
		if _, err := io.ReadFull(server, head[:]); err != nil {
			return
		}
		n := int64(binary.BigEndian.Uint32(head[1:])) - 4
		if head[0] == 'Z' {
			w.roundTrips.Add(1)
		}
		if _, err := client.Write(head[:]); err != nil {
			return
		}
		if _, err := io.CopyN(client, server, n); err != nil {
			return
		}
	}
}
