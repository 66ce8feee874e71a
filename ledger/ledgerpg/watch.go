package ledgerpg

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemkit/idemkit/internal/watch"
	"github.com/idemkit/idemkit/ledger"
)

var _ ledger.Watcher = (*Store)(nil)

// relistenGap is how long the listener waits before it reconnects after
// its connection failed.
const relistenGap = 100 * time.Millisecond

// watching is the watch side of a Store (shared with its InTx copies):
// its callers' watches, and the listening connection that wakes them,
// opened by the first Watch and kept until Close.
type watching struct {
	hub     watch.Hub
	channel string
	// connConfig configures the listening connection: the pool's or the
	// connection's the Store was made with; nil: no watching.
	connConfig *pgx.ConnConfig
	why        error // why not, when connConfig is nil

	mu     sync.Mutex
	conn   *pgx.Conn
	closed bool
	cancel context.CancelFunc
	done   chan struct{}
}

// settledChannel is the notification channel of the table schema.table:
// "idemkit_" and a hash of the name, within the 63 bytes of an
// identifier whatever the names' lengths.
func settledChannel(schema, table string) string {
	h := fnv.New64a()
	_, _ = h.Write([]byte(schema + "." + table))
	return "idemkit_" + strconv.FormatUint(h.Sum64(), 16)
}

// newWatching prepares the watch side of a Store on db.
func newWatching(db Querier, c Config) *watching {
	w := &watching{channel: settledChannel(c.Schema, c.Table)}
	if c.NoListen {
		w.why = errors.New("Config.NoListen is set")
		return w
	}
	switch db := db.(type) {
	case *pgxpool.Pool:
		w.connConfig = db.Config().ConnConfig.Copy()
	case *pgx.Conn:
		w.connConfig = db.Config().Copy()
	default:
		w.why = fmt.Errorf("a Store on a %T has no connection configuration to listen with", db)
	}
	return w
}

// Watch implements ledger.Watcher with LISTEN and NOTIFY. The statements
// of Complete and Fail notify the table's channel ("idemkit_" and a hash
// of the schema and table names) with the record's key, in the statement
// that settles it, so that the notification is delivered when the
// transaction commits and never for one that rolls back. The first Watch
// of a Store opens a connection of its own (configured as the Store's
// pool or connection, outside the pool, so it takes one of the server's
// max_connections), runs LISTEN on it, and keeps it until Close; a
// notification wakes the watches of its key. When the connection breaks,
// the listener reconnects and wakes every watch, since notifications may
// have been lost meanwhile.
//
// Watch returns ledger.ErrNoWatch on a Store made on a transaction (New
// with a pgx.Tx) and when Config.NoListen is set: behind PgBouncer in
// transaction pooling mode, LISTEN does not work (the server connection
// that listened goes back to the pool after the statement, and its
// notifications are dropped), so callers poll. A Store bound to a
// transaction with InTx watches through the Store it was made from.
func (s *Store) Watch(ctx context.Context, key string) (<-chan struct{}, func(), error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	if key == "" {
		return nil, nil, fmt.Errorf("ledgerpg: watch: %w: key is required", ledger.ErrInvalid)
	}
	w := s.watch
	if w.connConfig == nil {
		return nil, nil, fmt.Errorf("ledgerpg: watch: %w: %w", ledger.ErrNoWatch, w.why)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil, nil, fmt.Errorf("ledgerpg: watch: %w: store closed", ledger.ErrUnavailable)
	}
	if w.conn == nil {
		conn, err := w.listen(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil, nil, ctx.Err()
			}
			return nil, nil, unavailable("watch", err)
		}
		lctx, cancel := context.WithCancel(context.Background())
		w.conn, w.cancel, w.done = conn, cancel, make(chan struct{})
		go w.receive(lctx, conn)
	}
	ch, stop := w.hub.Add(key)
	return ch, stop, nil
}

// listen opens the listening connection and runs LISTEN on it: from its
// return on, every notification committed reaches the connection.
func (w *watching) listen(ctx context.Context) (*pgx.Conn, error) {
	conn, err := pgx.ConnectConfig(ctx, w.connConfig)
	if err != nil {
		return nil, err
	}
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{w.channel}.Sanitize()); err != nil {
		_ = conn.Close(context.Background())
		return nil, err
	}
	return conn, nil
}

// receive wakes the watches of each key notified, until ctx ends; after
// a broken connection it reconnects and wakes every watch.
func (w *watching) receive(ctx context.Context, conn *pgx.Conn) {
	defer close(w.done)
	defer func() { _ = conn.Close(context.Background()) }()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err == nil {
			w.hub.Signal(n.Payload)
			continue
		}
		if ctx.Err() != nil {
			return
		}
		w.hub.SignalAll()
		_ = conn.Close(context.Background())
		for {
			t := time.NewTimer(relistenGap)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			if conn, err = w.listen(ctx); err == nil {
				break
			}
			if ctx.Err() != nil {
				return
			}
		}
		w.hub.SignalAll() // notifications may have been lost meanwhile
	}
}

// close ends the listener.
func (w *watching) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return
	}
	w.closed = true
	if w.cancel != nil {
		w.cancel()
		<-w.done
	}
}
