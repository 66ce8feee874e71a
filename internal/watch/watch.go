// Package watch holds the waiters of a ledger.Watcher: the channels of the
// callers watching each key, signalled when a store learns that a key may
// have been settled.
package watch

import "sync"

// Hub is the set of watches of one store. The zero Hub is ready to use.
type Hub struct {
	mu sync.Mutex
	m  map[string]map[chan struct{}]struct{}
}

// Add registers a watch of key and returns its channel (buffer of one) and
// the function that removes it (safe to call more than once).
func (h *Hub) Add(key string) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.m == nil {
		h.m = map[string]map[chan struct{}]struct{}{}
	}
	set := h.m[key]
	if set == nil {
		set = map[chan struct{}]struct{}{}
		h.m[key] = set
	}
	set[ch] = struct{}{}
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			h.mu.Lock()
			defer h.mu.Unlock()
			if set := h.m[key]; set != nil {
				delete(set, ch)
				if len(set) == 0 {
					delete(h.m, key)
				}
			}
		})
	}
}

// Signal wakes every watch of key, without blocking.
func (h *Hub) Signal(key string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.m[key] {
		wake(ch)
	}
}

// SignalAll wakes every watch: after a signal may have been lost (a
// connection that broke), or when the store cannot tell which key a
// write touched.
func (h *Hub) SignalAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, set := range h.m {
		for ch := range set {
			wake(ch)
		}
	}
}

// Len reports how many keys are watched.
func (h *Hub) Len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.m)
}

func wake(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}
