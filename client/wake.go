package client

import (
	"sync"
	"sync/atomic"
)

// settles tells the callers waiting in this process for an action in
// flight that a run in this process has settled it, so that they look at
// the record at once instead of at their next poll. It is shared by every
// Executor of the process, keyed by action key only: a caller of an
// Executor on another ledger that is woken by mistake looks at its own
// record, finds it still pending and waits on.
var settles = newWakeups()

func newWakeups() *wakeups { return &wakeups{m: map[string]*wakeup{}} }

type wakeups struct {
	// count counts the calls of wake: a caller that reads it before its
	// claim and again once it waits knows whether a key settled in this
	// process in between (and its signal may have been missed).
	count atomic.Uint64
	mu    sync.Mutex
	m     map[string]*wakeup
}

// wakeup is the signal of one key: ch is closed when the key settles; n
// counts the callers holding it.
type wakeup struct {
	ch chan struct{}
	n  int
}

// wait returns a channel closed at the next settle of key, and a release
// function to call when the caller stops waiting.
func (w *wakeups) wait(key string) (<-chan struct{}, func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	u := w.m[key]
	if u == nil {
		u = &wakeup{ch: make(chan struct{})}
		w.m[key] = u
	}
	u.n++
	return u.ch, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		if u.n--; u.n == 0 && w.m[key] == u {
			delete(w.m, key)
		}
	}
}

// wake closes the channel of key, if anyone waits for it.
func (w *wakeups) wake(key string) {
	w.count.Add(1)
	w.mu.Lock()
	defer w.mu.Unlock()
	if u := w.m[key]; u != nil {
		close(u.ch)
		delete(w.m, key)
	}
}
