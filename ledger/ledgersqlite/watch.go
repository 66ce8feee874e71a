package ledgersqlite

import (
	"context"
	"os"
	"sync"

	"github.com/oncely/oncely/internal/watch"
	"github.com/oncely/oncely/ledger"
)

// settledSuffix names the signal file beside the ledger file: every Store
// that settles records (Complete, Fail) writes one byte to it once they
// are durable, and Stores whose callers wait for a record watch it
// (Watch). It holds nothing: only the writes to it carry the signal.
const settledSuffix = "-settled"

var _ ledger.Watcher = (*Store)(nil)

// watching is the watch side of a Store: the watches of its callers, and
// the file-change notification that wakes them (watch_linux.go).
type watching struct {
	hub watch.Hub

	mu      sync.Mutex
	n       int       // watches in place
	signal  *os.File  // the signal file, for writing; nil: no signals
	watcher fileWatch // nil until the first Watch
}

// openSignal opens (creating) the signal file beside the ledger. A Store
// that cannot open it signals nothing and does not watch: its waiters,
// and waiters elsewhere for the records it settles, poll.
func (s *Store) openSignal() {
	f, err := os.OpenFile(s.path+settledSuffix, os.O_RDWR|os.O_CREATE, 0o644)
	if err == nil {
		s.watching.signal = f
	}
}

// signalSettled tells the Stores watching the ledger that records were
// settled: one write to the signal file, after the commit that settled
// them is durable. A failed write is ignored (the waiters poll).
func (s *Store) signalSettled() {
	if f := s.watching.signal; f != nil {
		_, _ = f.WriteAt([]byte{'s'}, 0)
	}
}

// Watch implements ledger.Watcher. A Store of this package, in any
// process on this host, signals the records it settles by writing to a
// file beside the ledger (the ledger's path with "-settled" appended);
// Watch follows that file with the operating system's file-change
// notification (inotify, Linux only: elsewhere it returns
// ledger.ErrNoWatch and callers poll). A signal says that some record
// was settled, not which one: every watch of the Store is woken, at most
// once per millisecond, and its caller reads its record again.
func (s *Store) Watch(ctx context.Context, key string) (<-chan struct{}, func(), error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	if key == "" {
		return nil, nil, ledger.ErrInvalid
	}
	if err := s.refused(); err != nil {
		return nil, nil, err
	}
	w := s.watching
	w.mu.Lock()
	defer w.mu.Unlock()
	if s.closed.Load() {
		return nil, nil, errClosed
	}
	if w.signal == nil {
		return nil, nil, ledger.ErrNoWatch
	}
	if w.n == 0 {
		if w.watcher == nil {
			fw, err := newFileWatch(s.path+settledSuffix, w.hub.SignalAll)
			if err != nil {
				return nil, nil, err
			}
			w.watcher = fw
		}
		if err := w.watcher.start(); err != nil {
			return nil, nil, err
		}
	}
	w.n++
	ch, stop := w.hub.Add(key)
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			stop()
			w.mu.Lock()
			defer w.mu.Unlock()
			if w.n--; w.n == 0 && w.watcher != nil {
				w.watcher.pause()
			}
		})
	}, nil
}

// closeWatch stops the file-change notification and closes the signal
// file.
func (s *Store) closeWatch() error {
	w := s.watching
	w.mu.Lock()
	defer w.mu.Unlock()
	var err error
	if w.watcher != nil {
		err = w.watcher.close()
		w.watcher = nil
	}
	if w.signal != nil {
		if cerr := w.signal.Close(); err == nil {
			err = cerr
		}
		w.signal = nil
	}
	return err
}

// fileWatch follows writes to one file and calls its function for them.
type fileWatch interface {
	start() error // from now on, a write to the file calls the function
	pause() error // stop following (nobody watches)
	close() error
}
