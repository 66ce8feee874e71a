package ledgerredis

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/oncely/oncely/internal/watch"
	"github.com/oncely/oncely/ledger"
)

var _ ledger.Watcher = (*Store)(nil)

// resubscribeGap is how long the subscription waits before it reconnects
// after its connection failed.
const resubscribeGap = 100 * time.Millisecond

// watching is the watch side of a Store: its callers' watches, and the
// subscription that wakes them, made by the first Watch and kept until
// Close.
type watching struct {
	hub watch.Hub

	mu     sync.Mutex
	ps     *redis.PubSub
	closed bool
	stop   chan struct{} // closed by Close
	done   chan struct{} // closed when the receiving goroutine returns
}

// settledChannel is the channel the write scripts publish a settled
// record's key on: one per ledger (prefix). Channels are shared by every
// database of a server, so ledgers of one prefix in two databases wake
// each other's watches, which then read their records and wait on.
func (s *Store) settledChannel() string { return s.prefix + ":settled" }

// Watch implements ledger.Watcher. The first Watch of a Store subscribes
// to the ledger's channel (the prefix followed by ":settled"), on a
// connection of its own that the Store keeps until Close, and waits for
// the server to confirm the subscription. Each Watch then marks the
// record watched when it is pending (a script of its own), and the
// scripts of Complete and Fail publish the key of a watched record on
// that channel in the same script as the write: records nobody waits for
// cost no message, however many Stores subscribe. A claim that takes the
// record over keeps the mark. No settle is missed: the mark and a settle
// are scripts on the same key and run one after the other, so either the
// mark comes first and the settle, published, reaches the subscription
// made before it, or the settle comes first and the caller's read after
// Watch finds the record settled. A message wakes the watches of its key.
// When the connection breaks, the subscription is renewed and every watch
// is woken, since messages may have been lost meanwhile. Stores of an
// earlier version publish nothing: a caller waiting for a record one of
// them settles learns of it by polling.
func (s *Store) Watch(ctx context.Context, key string) (<-chan struct{}, func(), error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	if key == "" {
		return nil, nil, fmt.Errorf("ledgerredis: watch: %w: key is required", ledger.ErrInvalid)
	}
	w := s.watching
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil, nil, fmt.Errorf("ledgerredis: watch: %w: store closed", ledger.ErrUnavailable)
	}
	if w.ps == nil {
		ps := s.c.Subscribe(ctx, s.settledChannel())
		// The first reply confirms the subscription: from then on every
		// message published on the channel reaches it.
		v, err := ps.Receive(ctx)
		if err == nil {
			if _, ok := v.(*redis.Subscription); !ok {
				err = fmt.Errorf("unexpected reply %T", v)
			}
		}
		if err != nil {
			_ = ps.Close()
			if ctx.Err() != nil {
				return nil, nil, ctx.Err()
			}
			return nil, nil, unavailable(fmt.Errorf("subscribe: %w", err))
		}
		w.ps, w.stop, w.done = ps, make(chan struct{}), make(chan struct{})
		go w.receive(ps)
	}
	ch, stop := w.hub.Add(key)
	if err := markScript.Run(ctx, s.c, []string{s.recordKey(key)}).Err(); err != nil {
		stop()
		return nil, nil, unavailable(fmt.Errorf("mark watched: %w", err))
	}
	return ch, stop, nil
}

// receive wakes the watches of each key published, and every watch after
// the subscription was renewed (messages may have been lost), until
// Close.
func (w *watching) receive(ps *redis.PubSub) {
	defer close(w.done)
	for {
		v, err := ps.Receive(context.Background())
		select {
		case <-w.stop:
			return
		default:
		}
		if err != nil {
			w.hub.SignalAll()
			t := time.NewTimer(resubscribeGap)
			select {
			case <-w.stop:
				t.Stop()
				return
			case <-t.C:
			}
			continue
		}
		switch m := v.(type) {
		case *redis.Message:
			w.hub.Signal(m.Payload)
		case *redis.Subscription:
			w.hub.SignalAll() // renewed after a broken connection
		}
	}
}

// closeWatch ends the subscription.
func (s *Store) closeWatch() error {
	w := s.watching
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	w.closed = true
	if w.ps == nil {
		return nil
	}
	close(w.stop)
	err := w.ps.Close()
	<-w.done
	if errors.Is(err, redis.ErrClosed) {
		err = nil
	}
	return err
}
