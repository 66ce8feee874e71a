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

	"github.com/oncely/oncely/internal/watch"
	"github.com/oncely/oncely/ledger"
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
	// db is the pool or connection the Store was made on, which marks the
	// records watched (mark), outside any transaction of InTx; onConn: it
	// is a *pgx.Conn, which an InTx copy's transaction occupies.
	db     Querier
	onConn bool
	mark   string

	mu     sync.Mutex
	conn   *pgx.Conn
	closed bool
	cancel context.CancelFunc
	done   chan struct{}
}

// settledChannel is the notification channel of the table schema.table:
// "oncely_" and a hash of the name, within the 63 bytes of an
// identifier whatever the names' lengths.
func settledChannel(schema, table string) string {
	h := fnv.New64a()
	_, _ = h.Write([]byte(schema + "." + table))
	return "oncely_" + strconv.FormatUint(h.Sum64(), 16)
}

// newWatching prepares the watch side of a Store on db.
func newWatching(db Querier, c Config) *watching {
	w := &watching{channel: settledChannel(c.Schema, c.Table), db: db,
		mark: `UPDATE ` + pgx.Identifier{c.Schema, c.Table}.Sanitize() +
			` SET watched = true WHERE key = $1 AND state = 'pending' AND NOT watched`}
	if c.NoListen {
		w.why = errors.New("Config.NoListen is set")
		return w
	}
	switch db := db.(type) {
	case *pgxpool.Pool:
		w.connConfig = db.Config().ConnConfig.Copy()
	case *pgx.Conn:
		w.connConfig = db.Config().Copy()
		w.onConn = true
	default:
		w.why = fmt.Errorf("a Store on a %T has no connection configuration to listen with", db)
	}
	return w
}

// Watch implements ledger.Watcher with LISTEN and NOTIFY. The first
// Watch of a Store opens a connection of its own (configured as the
// Store's pool or connection, outside the pool, so it takes one of the
// server's max_connections), runs LISTEN on the table's channel
// ("oncely_" and a hash of the schema and table names), and keeps it
// until Close; a notification wakes the watches of its key. When the
// connection breaks, the listener reconnects and wakes every watch, since
// notifications may have been lost meanwhile.
//
// Only watched records are notified. A transaction that ran NOTIFY holds
// a lock of the whole cluster from the start of its commit to the end of
// its commit record's flush, so that notifying every settle would
// serialise the commits of every settle, while a record has waiters only
// when a duplicate meets it in flight. So, once it listens, Watch marks
// the record watched (an UPDATE of the column watched, on the Store's
// pool or connection, in a transaction of its own) if it is pending and
// not marked yet; Complete and Fail notify the key, in the statement that
// settles the record and so at its commit (never for one that rolls
// back), only when the record they settle is marked. A claim that takes
// the record over keeps the mark, so a waiter still waiting is woken by
// the next owner's settle; a record marked once costs a notification at
// each later settle, until Purge deletes it.
//
// No settle is missed, whichever of the mark and a settle comes first.
// Both UPDATE the record's row and so take its lock, and each runs at
// READ COMMITTED, which rechecks a row changed by a concurrent writer on
// its newest version:
//   - the mark commits first: the settle's UPDATE reads (or, having
//     waited for the mark's lock, rechecks) the newest version, which is
//     marked, and notifies; the listener was listening before the mark,
//     so it receives the notification when the settle commits.
//   - the settle locks the row first: the mark waits for the settle's
//     transaction to end, then finds the record no longer pending and
//     marks nothing (or, after a rollback, marks the pending record).
//     The settle committed before Watch returns, so the caller's read of
//     the record after Watch sees it settled.
//
// So the mark waits while another transaction holds the row: a settle's
// statement, an instant, or the whole transaction of a claim made with
// InTx, whose end the caller waits for in any case; ctx bounds it. A
// settle with InTx at REPEATABLE READ or SERIALIZABLE, in a transaction
// whose snapshot is older than a mark of the record (one that did not
// claim the record, which would hold its row), fails with a
// serialization error, as a claim there does after any concurrent write.
//
// A watch therefore signals the settles of a record that was pending when
// Watch returned; a key not yet claimed, or already settled, is not
// marked, and the caller learns its state from the read it makes after
// Watch returns (the executor watches only a record it found pending).
//
// Watch returns ledger.ErrNoWatch on a Store made on a transaction (New
// with a pgx.Tx) and when Config.NoListen is set: behind PgBouncer in
// transaction pooling mode, LISTEN does not work (the server connection
// that listened goes back to the pool after the statement, and its
// notifications are dropped), so callers poll; its settles still notify
// the records marked by Stores that listen on a direct connection. A
// Store bound to a transaction with InTx watches through the Store it was
// made from, and marks through its pool; one made from a Store on a
// *pgx.Conn returns ledger.ErrNoWatch, since the only connection it could
// mark on runs the transaction.
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
	if s.derived && w.onConn {
		return nil, nil, fmt.Errorf("ledgerpg: watch: %w: a Store bound to a transaction on a *pgx.Conn has no connection to mark the record on", ledger.ErrNoWatch)
	}
	ch, stop, err := w.add(ctx, key)
	if err != nil {
		return nil, nil, err
	}
	// After the LISTEN and the registration: a settle that sees the mark
	// notifies a listener that already listens, for a watch that already
	// waits.
	if _, err := w.db.Exec(ctx, w.mark, s.mode, key); err != nil {
		stop()
		if ctx.Err() != nil {
			return nil, nil, ctx.Err()
		}
		return nil, nil, unavailable("watch: mark the record", err)
	}
	return ch, stop, nil
}

// add registers a watch of key, first opening the listening connection
// if the Store has none.
func (w *watching) add(ctx context.Context, key string) (<-chan struct{}, func(), error) {
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
