// Package fault injects provider failures into the fake servers, per route
// and per attempt, or at random from a seed.
//
// A fake asks its Injector for a Decision at the start of every request and
// applies it around its commit step (see Decision.Serve). The five actions
// cover the ways a real provider call goes wrong for a client:
//
//   - FailBeforeCommit: the provider answers 500, 503 or 429 (with
//     Retry-After if set) and nothing happened. A definite failure.
//   - DropBeforeCommit: the connection closes before anything happened.
//   - CommitThenDrop: the effect is committed, then the connection closes
//     without an answer. The client cannot tell this from DropBeforeCommit.
//   - CommitThenError: the effect is committed, then the client gets an error
//     status (500 unless set) — like a gateway failing after the backend.
//   - Delay: the request waits Delay (or until the client gives up and its
//     context ends), then commits normally: the classic timeout after success.
//
// A note for tests of keyed POSTs: Go's http.Transport transparently resends
// a request that carries an Idempotency-Key header when a reused keep-alive
// connection breaks before any answer, so a dropped request may succeed on
// the client's side through a replay. Use a client without keep-alives to
// observe the drop itself.
package fault

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Action is what a fault does to a request.
type Action int

// The fault actions. The zero Action is not valid.
const (
	// FailBeforeCommit answers Rule.Status (500 by default) without
	// committing anything, with a Retry-After header when Rule.RetryAfter is
	// set.
	FailBeforeCommit Action = iota + 1
	// CommitThenDrop commits, then closes the connection without answering.
	CommitThenDrop
	// CommitThenError commits, then answers Rule.Status (500 by default) with
	// an error body instead of the real result.
	CommitThenError
	// Delay waits Rule.Delay, or until the request's context ends, then
	// handles the request normally. A Delay of zero waits for the context.
	Delay
	// DropBeforeCommit closes the connection without committing anything.
	DropBeforeCommit
)

var actionNames = map[Action]string{
	FailBeforeCommit: "FailBeforeCommit",
	CommitThenDrop:   "CommitThenDrop",
	CommitThenError:  "CommitThenError",
	Delay:            "Delay",
	DropBeforeCommit: "DropBeforeCommit",
}

// String returns the action's Go name.
func (a Action) String() string {
	if n, ok := actionNames[a]; ok {
		return n
	}
	return "Action(" + strconv.Itoa(int(a)) + ")"
}

// DefaultRandomDelay is the wait of a random Delay fault chosen by SetRandom.
const DefaultRandomDelay = time.Second

// Rule says which request gets which fault.
type Rule struct {
	// Route is "METHOD /pattern" as documented by the fake (for example
	// "POST /v1/payment_intents" or "PUT /v1/contacts/by-external-id/{id}");
	// "" matches every route.
	Route string
	// Attempt is the 1-based index, among the requests seen on Route since
	// the rule was added, of the one request the rule hits; 0 hits every
	// request on Route.
	Attempt int
	// Action is what happens to the request.
	Action Action
	// Status is the answer of FailBeforeCommit and CommitThenError
	// (default 500).
	Status int
	// RetryAfter, when positive, is sent as a Retry-After header (whole
	// seconds, rounded up) with the Status answer.
	RetryAfter time.Duration
	// Delay is how long a Delay fault waits.
	Delay time.Duration
	// SaveError matters only for CommitThenError on fakes that store
	// idempotent responses: the injected error, not the real result, is what
	// the key stores and replays afterwards (Stripe v1 saves a 500 once the
	// endpoint began executing). By default the key stores the real result,
	// as when a proxy fails between the provider and the client.
	SaveError bool
}

// String describes the rule for test logs.
func (r Rule) String() string {
	var b strings.Builder
	route := r.Route
	if route == "" {
		route = "*"
	}
	fmt.Fprintf(&b, "%s on %s", r.Action, route)
	if r.Attempt > 0 {
		fmt.Fprintf(&b, " attempt %d", r.Attempt)
	}
	if r.Action == FailBeforeCommit || r.Action == CommitThenError {
		fmt.Fprintf(&b, " status %d", r.Status)
	}
	if r.RetryAfter > 0 {
		fmt.Fprintf(&b, " retry-after %s", r.RetryAfter)
	}
	if r.Action == Delay {
		fmt.Fprintf(&b, " delay %s", r.Delay)
	}
	if r.SaveError {
		b.WriteString(" (error saved)")
	}
	return b.String()
}

// normalize checks r and fills its defaults.
func (r Rule) normalize() (Rule, error) {
	if _, ok := actionNames[r.Action]; !ok {
		return r, fmt.Errorf("fault: invalid action %d", int(r.Action))
	}
	if r.Attempt < 0 {
		return r, fmt.Errorf("fault: negative attempt %d", r.Attempt)
	}
	if r.Status == 0 && (r.Action == FailBeforeCommit || r.Action == CommitThenError) {
		r.Status = http.StatusInternalServerError
	}
	if r.Status != 0 && (r.Status < 400 || r.Status > 599) {
		return r, fmt.Errorf("fault: status %d is not an error status", r.Status)
	}
	r.Route = normalizeRoute(r.Route)
	return r, nil
}

func normalizeRoute(route string) string { return strings.Join(strings.Fields(route), " ") }

// Applied records one fault applied to one request.
type Applied struct {
	// Request is the 1-based index of the request among all requests the
	// injector has seen.
	Request int
	// Route is the route pattern the request matched.
	Route string
	// Target is the request's method and URL path.
	Target string
	// Attempt is the request's index among the requests seen on Route: since
	// the rule was added for a rule, since the last Clear for a random fault.
	Attempt int
	// Rule is the fault applied, defaults filled in.
	Rule Rule
	// Random tells a random fault from an added rule.
	Random bool
}

// String describes the applied fault for test logs.
func (a Applied) String() string {
	src := "rule"
	if a.Random {
		src = "random"
	}
	return fmt.Sprintf("request %d (%s, attempt %d on %s): %s %s", a.Request, a.Target, a.Attempt, a.Route, src, a.Rule)
}

type ruleState struct {
	rule Rule
	seen int
}

// Injector decides, per request, whether and how a fake fails it. It is safe
// for concurrent use. A nil *Injector injects nothing.
type Injector struct {
	mu        sync.Mutex
	rules     []*ruleState
	rng       *rand.Rand
	rate      float64
	templates []template
	routeSeen map[string]int
	requests  int
	log       []Applied
}

// NewInjector returns an injector with no rules whose random faults draw
// from a generator seeded with seed.
func NewInjector(seed int64) *Injector {
	return &Injector{
		rng:       rand.New(rand.NewPCG(uint64(seed), 0x1de4c17)),
		routeSeen: make(map[string]int),
	}
}

// Add appends a rule. Rules are consulted in the order they were added; the
// first that hits a request wins, but every rule counts every request on its
// route. Add panics on a rule with an invalid Action, a negative Attempt or
// a Status outside 400-599: a broken test setup, not a runtime condition.
func (in *Injector) Add(r Rule) {
	r, err := r.normalize()
	if err != nil {
		panic(err)
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	in.rules = append(in.rules, &ruleState{rule: r})
}

// Clear removes every rule and turns random faults off. The log is kept.
func (in *Injector) Clear() {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.rules = nil
	in.rate = 0
	in.templates = nil
	clear(in.routeSeen)
}

// SetRandom makes a fraction rate (0 to 1) of the requests that no rule hits
// fail with one of actions, chosen uniformly (every action when none is
// given). A random FailBeforeCommit answers 500, 503 or 429; a random
// CommitThenError answers 500; a random Delay waits DefaultRandomDelay.
// The choices are deterministic for a given seed and request order.
// A rate of zero turns random faults off. It panics on an invalid action.
func (in *Injector) SetRandom(rate float64, actions ...Action) {
	if len(actions) == 0 {
		actions = []Action{FailBeforeCommit, CommitThenDrop, CommitThenError, Delay, DropBeforeCommit}
	}
	templates := make([]template, 0, len(actions))
	for _, a := range actions {
		r := Rule{Action: a}
		if a == Delay {
			r.Delay = DefaultRandomDelay
		}
		templates = append(templates, mustTemplate(r, a == FailBeforeCommit))
	}
	in.setRandom(rate, templates)
}

// SetRandomRules is SetRandom with full rules as templates: a random fault is
// drawn uniformly among the templates whose Route matches the request.
// Attempt is ignored. It panics on an invalid template, as Add does.
func (in *Injector) SetRandomRules(rate float64, rules ...Rule) {
	templates := make([]template, 0, len(rules))
	for _, r := range rules {
		r.Attempt = 0
		templates = append(templates, mustTemplate(r, false))
	}
	in.setRandom(rate, templates)
}

// template is a rule random faults draw from; drawStatus picks the status
// among randomStatuses per request.
type template struct {
	rule       Rule
	drawStatus bool
}

func mustTemplate(r Rule, drawStatus bool) template {
	r, err := r.normalize()
	if err != nil {
		panic(err)
	}
	return template{rule: r, drawStatus: drawStatus}
}

func (in *Injector) setRandom(rate float64, templates []template) {
	rate = min(max(rate, 0), 1)
	in.mu.Lock()
	defer in.mu.Unlock()
	in.rate = rate
	in.templates = templates
}

var randomStatuses = [...]int{http.StatusInternalServerError, http.StatusServiceUnavailable, http.StatusTooManyRequests}

// Decide counts r against the rules and returns the fault to apply to it, if
// any. r.Pattern must hold the route pattern the fake's mux matched.
func (in *Injector) Decide(r *http.Request) Decision {
	if in == nil {
		return Decision{}
	}
	route := normalizeRoute(r.Pattern)
	in.mu.Lock()
	defer in.mu.Unlock()
	in.requests++
	in.routeSeen[route]++
	var hit *Applied
	for _, rs := range in.rules {
		if rs.rule.Route != "" && rs.rule.Route != route {
			continue
		}
		rs.seen++
		if hit == nil && (rs.rule.Attempt == 0 || rs.rule.Attempt == rs.seen) {
			hit = &Applied{Attempt: rs.seen, Rule: rs.rule}
		}
	}
	if hit == nil && in.rate > 0 {
		// Three draws per request, whatever the outcome, keep the sequence a
		// function of the seed and the request order only.
		u, pick, status := in.rng.Float64(), in.rng.Uint64(), in.rng.IntN(len(randomStatuses))
		var candidates []template
		for _, t := range in.templates {
			if t.rule.Route == "" || t.rule.Route == route {
				candidates = append(candidates, t)
			}
		}
		if u < in.rate && len(candidates) > 0 {
			t := candidates[pick%uint64(len(candidates))]
			if t.drawStatus {
				t.rule.Status = randomStatuses[status]
			}
			hit = &Applied{Attempt: in.routeSeen[route], Rule: t.rule, Random: true}
		}
	}
	if hit == nil {
		return Decision{}
	}
	hit.Request = in.requests
	hit.Route = route
	hit.Target = r.Method + " " + r.URL.Path
	in.log = append(in.log, *hit)
	return Decision{Rule: hit.Rule, Active: true}
}

// Log returns the faults applied so far, oldest first.
func (in *Injector) Log() []Applied {
	in.mu.Lock()
	defer in.mu.Unlock()
	return slices.Clone(in.log)
}

// Response is a complete answer a fake can write, store and replay.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// Write sends the response on w, adding its headers to those already set.
func (resp Response) Write(w http.ResponseWriter) {
	for k, vs := range resp.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	w.WriteHeader(resp.Status)
	_, _ = w.Write(resp.Body)
}

// ErrorFunc builds a fake's own error answer (status, message) for an
// injected failure.
type ErrorFunc func(status int, message string) Response

// Decision is the fault chosen for one request. The zero Decision injects
// nothing. A fake applies it in three steps around its commit: Reject at the
// start, Wait just before executing, Answer and Deliver after committing.
type Decision struct {
	// Rule is the applied fault, defaults filled in; valid when Active.
	Rule Rule
	// Active reports whether a fault applies to the request.
	Active bool
}

// Reject applies FailBeforeCommit and DropBeforeCommit: it answers or drops
// the request and reports true, and the fake must then return without
// committing. For every other decision it does nothing and reports false.
func (d Decision) Reject(w http.ResponseWriter, errf ErrorFunc) bool {
	if !d.Active {
		return false
	}
	switch d.Rule.Action {
	case FailBeforeCommit:
		d.withRetryAfter(errf(d.Rule.Status, "fault: injected failure before commit")).Write(w)
		return true
	case DropBeforeCommit:
		drop(w)
		return true
	}
	return false
}

// Wait applies Delay: it returns after Rule.Delay or when ctx ends,
// whichever comes first (only when ctx ends if Rule.Delay is zero). For
// other decisions it returns at once.
func (d Decision) Wait(ctx context.Context) {
	if !d.Active || d.Rule.Action != Delay {
		return
	}
	if d.Rule.Delay <= 0 {
		<-ctx.Done()
		return
	}
	t := time.NewTimer(d.Rule.Delay)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// Answer returns what the client should be sent once resp was committed:
// the injected error for CommitThenError, resp otherwise.
func (d Decision) Answer(resp Response, errf ErrorFunc) Response {
	if d.Active && d.Rule.Action == CommitThenError {
		return d.withRetryAfter(errf(d.Rule.Status, "fault: injected error after commit"))
	}
	return resp
}

// Deliver writes resp, or closes the connection without answering for
// CommitThenDrop.
func (d Decision) Deliver(w http.ResponseWriter, resp Response) {
	if d.Active && d.Rule.Action == CommitThenDrop {
		drop(w)
		return
	}
	resp.Write(w)
}

// Serve applies the whole decision around commit, for fakes without an
// idempotency layer: Reject, Wait on r's context, commit, Answer, Deliver.
//
// For a Delay, Serve first reads r.Body to its end, since net/http notices
// that a client went away (ending r's context) only once the body was
// consumed; commit then reads the same bytes, and the same read error if
// any, from r.Body. Cap the body beforehand (http.MaxBytesReader) if its
// size matters.
func (d Decision) Serve(w http.ResponseWriter, r *http.Request, errf ErrorFunc, commit func() Response) {
	if d.Reject(w, errf) {
		return
	}
	if d.Active && d.Rule.Action == Delay {
		body, err := io.ReadAll(r.Body)
		r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body), errReader{err}))
	}
	d.Wait(r.Context())
	d.Deliver(w, d.Answer(commit(), errf))
}

// errReader replays a read error, or io.EOF.
type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) {
	if e.err == nil {
		return 0, io.EOF
	}
	return 0, e.err
}

func (d Decision) withRetryAfter(resp Response) Response {
	if d.Rule.RetryAfter > 0 {
		if resp.Header == nil {
			resp.Header = http.Header{}
		}
		secs := (d.Rule.RetryAfter + time.Second - 1) / time.Second
		resp.Header.Set("Retry-After", strconv.Itoa(int(secs)))
	}
	return resp
}

// drop closes the client connection without an answer. When the connection
// cannot be hijacked (HTTP/2), it aborts the handler, which resets the
// stream.
func drop(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	_ = conn.Close()
}
