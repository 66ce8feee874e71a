package integration

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/oncely/oncely/fakes/fault"
)

// A fake with a Delay fault holds a request until the client gives up, then
// commits it: the classic timeout after success. Here the client gives up
// on a signal — the fake's fault log shows the hold — instead of at a
// timeout, and waits until the fake has finished the request before it
// reports the failure. So no request is ever still in flight once its
// sender has returned: the provider commits within any InFlight the
// reconcile policies assume, on any machine, however busy.

// requestIDHeader carries the id holdTransport gives each request, by
// which served tells when the fake has finished it.
const requestIDHeader = "X-Integration-Request"

// errGaveUp is why a client gave up on a held request.
var errGaveUp = errors.New("integration: the client gave up on a request the provider holds")

// served records which requests a fake is handling.
type served struct {
	next    atomic.Int64
	mu      sync.Mutex
	active  map[string]int // by request id: a transport may resend a request
	changed chan struct{}  // closed and replaced when a request ends
}

func newServed() *served {
	return &served{active: map[string]int{}, changed: make(chan struct{})}
}

// wrap returns h, recording which requests tagged by holdTransport it is
// handling.
func (s *served) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get(requestIDHeader)
		s.mu.Lock()
		s.active[id]++
		s.mu.Unlock()
		defer func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			if s.active[id]--; s.active[id] == 0 {
				delete(s.active, id)
			}
			close(s.changed)
			s.changed = make(chan struct{})
		}()
		h.ServeHTTP(w, r)
	})
}

// handling reports whether the fake is handling request id.
func (s *served) handling(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.active[id] > 0
}

// wait returns once the fake handles no request id, or after hangGuard.
func (s *served) wait(id string) error {
	guard := time.NewTimer(hangGuard)
	defer guard.Stop()
	for {
		s.mu.Lock()
		n, changed := s.active[id], s.changed
		s.mu.Unlock()
		if n == 0 {
			return nil
		}
		select {
		case <-changed:
		case <-guard.C:
			return fmt.Errorf("integration: the fake did not finish request %s within %s", id, hangGuard)
		}
	}
}

// holdTransport sends a kit's requests to one fake it owns. When the fake
// holds a request (a Delay fault shows in its log after the request was
// sent, and the fake is handling it), the transport gives up on the request
// and returns only after the fake has finished it (committed it, or not).
type holdTransport struct {
	base http.RoundTripper
	srv  server
}

func (t *holdTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	id := fmt.Sprint(t.srv.served.next.Add(1))
	from := len(t.srv.faults.Log())
	ctx, cancel := context.WithCancelCause(req.Context())
	req = req.Clone(ctx)
	req.Header.Set(requestIDHeader, id)
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		poll := 100 * time.Microsecond
		// Give up only on a request the fake is handling: once it has
		// finished, nothing of it is in flight.
		for !heldSince(t.srv.faults, from) || !t.srv.served.handling(id) {
			select {
			case <-stop:
				return
			case <-ctx.Done():
				return
			case <-time.After(poll):
			}
			poll = min(2*poll, 5*time.Millisecond)
		}
		cancel(errGaveUp)
	}()
	resp, err := t.base.RoundTrip(req)
	close(stop)
	<-stopped
	if err != nil {
		if errors.Is(context.Cause(ctx), errGaveUp) {
			if werr := t.srv.served.wait(id); werr != nil {
				err = errors.Join(err, werr)
			}
		}
		cancel(nil)
		return nil, err
	}
	resp.Body = &cancelOnClose{ReadCloser: resp.Body, cancel: cancel}
	return resp, nil
}

// heldSince reports whether a Delay fault was applied after the first from
// entries of the injector's log. With several requests in flight at one
// fake, every request sent before the hold gives up: a timeout of the
// caller's choosing, harmless to the others.
func heldSince(faults *fault.Injector, from int) bool {
	log := faults.Log()
	for _, a := range log[min(from, len(log)):] {
		if a.Rule.Action == fault.Delay {
			return true
		}
	}
	return false
}

// cancelOnClose releases a request's context once its body is closed.
type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelCauseFunc
}

func (c *cancelOnClose) Close() error {
	err := c.ReadCloser.Close()
	c.cancel(nil)
	return err
}
