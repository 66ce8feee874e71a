package client

import (
	"bytes"
	"reflect"
	"sync"
	"sync/atomic"

	"github.com/oncely/oncely/ledger"
)

// settles tells the callers waiting in this process for an action in
// flight that a run in this process has settled it, so that they look at
// the record at once instead of at their next poll (or, waiting on the
// same Store, take the done record from the run). It is shared by every
// Executor of the process, keyed by action key only: a caller of an
// Executor on another ledger that is woken by mistake looks at its own
// record, finds it still pending and waits on.
var settles = newWakeups()

func newWakeups() *wakeups {
	return &wakeups{m: map[string]*wakeup{}}
}

type wakeups struct {
	// count counts the calls of wake: a caller that reads it before its
	// claim and again once it waits knows whether a key settled in this
	// process in between (and its signal may have been missed).
	count atomic.Uint64
	mu    sync.Mutex
	m     map[string]*wakeup
}

// wakeup is the signal of one key: ch is closed when the key settles; n
// counts the callers holding it. When the run that settled it recorded
// the action done, done (set before ch is closed) is that record, written
// to store.
type wakeup struct {
	ch    chan struct{}
	n     int
	done  *ledger.Record
	store ledger.Store
}

// wait returns the signal of the next settle of key, and a release
// function to call when the caller stops waiting.
func (w *wakeups) wait(key string) (*wakeup, func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	u := w.m[key]
	if u == nil {
		u = &wakeup{ch: make(chan struct{})}
		w.m[key] = u
	}
	u.n++
	return u, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		if u.n--; u.n == 0 && w.m[key] == u {
			delete(w.m, key)
		}
	}
}

// wake signals the callers waiting for key, if there are any. by is the
// run that settled it, or nil.
func (w *wakeups) wake(key string, by *run) {
	w.count.Add(1)
	w.mu.Lock()
	defer w.mu.Unlock()
	if u := w.m[key]; u != nil {
		if by != nil && by.done {
			u.done, u.store = by.doneRecord(), by.e.store
		}
		close(u.ch)
		delete(w.m, key)
	}
}

// handed returns the done record of owner's claim that the run which
// signalled u wrote to store, or nil: what a read of store would have
// returned the moment the write succeeded, so a waiter of that claim need
// not read it. Each caller gets its own copy.
func (u *wakeup) handed(store ledger.Store, owner string) *ledger.Record {
	if u.done == nil || u.done.Owner != owner || !sameStore(u.store, store) {
		return nil
	}
	rec := *u.done
	rec.Result = bytes.Clone(rec.Result)
	return &rec
}

// sameStore reports whether a and b are one Store. Only pointers are
// compared: comparing other values can panic, and then a waiter reads.
func sameStore(a, b ledger.Store) bool {
	t := reflect.TypeOf(a)
	return t != nil && t.Kind() == reflect.Pointer && t == reflect.TypeOf(b) && a == b
}
