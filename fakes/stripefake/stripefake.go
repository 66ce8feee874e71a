package stripefake

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/oncely/oncely/clock"
	"github.com/oncely/oncely/fakes"
	"github.com/oncely/oncely/fakes/fault"
	"github.com/oncely/oncely/fakes/internal/fakehttp"
)

// DefaultKeyWindow is how long an idempotency key is remembered by default.
const DefaultKeyWindow = 24 * time.Hour

// Config configures a fake. The zero value (or nil) gives the defaults.
type Config struct {
	// Seed seeds object ids and random faults, so a run can be replayed.
	Seed int64
	// Clock is the fake's time (default: the system clock): object
	// creation times, key expiry and search lag use it.
	Clock clock.Clock
	// KeyWindow is how long idempotency keys are kept (default 24 h).
	KeyWindow time.Duration
	// SearchLag is how long after its creation an object becomes visible
	// to search (default 0: at once).
	SearchLag time.Duration
	// APIVersions are Stripe-Version values accepted besides the ones the
	// fake knows (released after it, or private betas).
	APIVersions []string
}

// Handler is the fake Stripe API as an http.Handler.
type Handler struct {
	// Faults decides which requests fail; rules may be added at any time.
	Faults *fault.Injector

	cfg     Config
	now     func() time.Time
	mux     *http.ServeMux
	ids     *fakehttp.IDs
	journal fakes.Journal

	mu             sync.Mutex
	seq            int64
	paymentIntents map[string]*paymentIntent
	charges        map[string]*charge
	refunds        map[string]*refund
	piOrder        []*paymentIntent
	chargeOrder    []*charge
	refundOrder    []*refund
	keys           map[string]*oncelyEntry
}

// oncelyEntry is the state of one idempotency key.
type oncelyEntry struct {
	endpoint  string // "POST /v1/payment_intents"
	params    string // canonical parameters
	at        time.Time
	requestID string
	done      bool
	resp      fault.Response
}

// endpoint is one route: its parameters and its work, run with the lock
// held. post reports whether its answer is saved under an idempotency key.
type endpoint struct {
	spec spec
	post func(c *call) (fault.Response, bool)
	get  func(c *call) fault.Response
}

// call is one request being executed.
type call struct {
	r   *http.Request
	p   params
	key string
	now time.Time
}

// NewHandler returns a fake with no objects, configured by cfg (nil for the
// defaults).
func NewHandler(cfg *Config) *Handler {
	var c Config
	if cfg != nil {
		c = *cfg
	}
	if c.KeyWindow <= 0 {
		c.KeyWindow = DefaultKeyWindow
	}
	h := &Handler{
		Faults: fault.NewInjector(c.Seed),
		cfg:    c,
		now:    fakehttp.Clock(c.Clock),
		ids:    fakehttp.NewIDs(c.Seed),
		mux:    http.NewServeMux(),
	}
	h.resetState()
	routes := map[string]endpoint{
		"POST /v1/payment_intents":              {spec: createPaymentIntentSpec, post: h.createPaymentIntent},
		"POST /v1/payment_intents/{id}":         {spec: updatePaymentIntentSpec, post: h.updatePaymentIntent},
		"POST /v1/payment_intents/{id}/confirm": {spec: confirmPaymentIntentSpec, post: h.confirmPaymentIntent},
		"POST /v1/payment_intents/{id}/cancel":  {spec: cancelPaymentIntentSpec, post: h.cancelPaymentIntent},
		"POST /v1/payment_intents/{id}/capture": {spec: capturePaymentIntentSpec, post: h.capturePaymentIntent},
		"GET /v1/payment_intents/{id}":          {spec: spec{"expand": list, "client_secret": scalar}, get: h.retrievePaymentIntent},
		"GET /v1/payment_intents":               {spec: listPaymentIntentsSpec, get: h.listPaymentIntents},
		"GET /v1/payment_intents/search":        {spec: searchSpec, get: h.searchPaymentIntents},
		"POST /v1/refunds":                      {spec: createRefundSpec, post: h.createRefund},
		"GET /v1/refunds/{id}":                  {spec: spec{"expand": list}, get: h.retrieveRefund},
		"GET /v1/refunds":                       {spec: listRefundsSpec, get: h.listRefunds},
		"POST /v1/charges":                      {spec: createChargeSpec, post: h.createCharge},
		"GET /v1/charges/{id}":                  {spec: spec{"expand": list}, get: h.retrieveCharge},
		"GET /v1/charges":                       {spec: listChargesSpec, get: h.listCharges},
	}
	for pattern, ep := range routes {
		h.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) { h.serve(w, r, ep) })
	}
	// A Stripe route the fake does not model, which another pattern would
	// otherwise take (GET /v1/charges/{id} with the id "search").
	h.mux.HandleFunc("GET /v1/charges/search", func(w http.ResponseWriter, r *http.Request) {
		errorResponse(&apiError{Type: typeInvalidRequest, Code: codeNotModeled, status: http.StatusNotImplemented,
			Message: "stripefake does not model the route GET /v1/charges/search (Stripe's charge search); search PaymentIntents or list charges instead."}).Write(w)
	})
	h.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		errorResponse(&apiError{Type: typeInvalidRequest, Message: "Unrecognized request URL (" + r.Method + ": " + r.URL.Path + ").", status: http.StatusNotFound}).Write(w)
	})
	return h
}

// ServeHTTP serves the fake API.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

// Journal returns the effects committed so far.
func (h *Handler) Journal() []fakes.Effect { return h.journal.Snapshot() }

// Reset forgets every object, idempotency key and effect, restarts ids from
// the seed and clears the fault rules (the fault log is kept).
func (h *Handler) Reset() {
	h.mu.Lock()
	h.resetState()
	h.mu.Unlock()
	h.journal.Reset()
	h.ids.Reset()
	h.Faults.Clear()
}

func (h *Handler) resetState() {
	h.seq = 0
	h.paymentIntents = map[string]*paymentIntent{}
	h.charges = map[string]*charge{}
	h.refunds = map[string]*refund{}
	h.piOrder, h.chargeOrder, h.refundOrder = nil, nil, nil
	h.keys = map[string]*oncelyEntry{}
}

// Server is a Handler listening on a loopback address, like
// httptest.Server: URL is its base URL, Close shuts it down and Client
// returns an HTTP client for it (fakes.Listener).
type Server struct {
	*Handler
	fakes.Listener
}

// NewServer starts a fake on 127.0.0.1, configured by cfg (nil for the
// defaults). Close it when done.
func NewServer(cfg *Config) *Server {
	h := NewHandler(cfg)
	return &Server{Handler: h, Listener: fakes.Listen(h)}
}

// serve runs one request through faults, authentication, parameter parsing
// and, for keyed POSTs, the idempotency layer.
func (h *Handler) serve(w http.ResponseWriter, r *http.Request, ep endpoint) {
	d := h.Faults.Decide(r)
	reqID := h.ids.New("req_", 14)
	w.Header().Set("Request-Id", reqID)
	var key string
	if r.Method == http.MethodPost {
		key = strings.TrimSpace(r.Header.Get("Idempotency-Key"))
		if key != "" {
			w.Header().Set("Idempotency-Key", key)
		}
	}
	if d.Reject(w, faultError) {
		return
	}
	d.Deliver(w, withRequestLog(d.Answer(h.handle(w, r, d, ep, key, reqID), faultError), reqID))
}

func (h *Handler) handle(w http.ResponseWriter, r *http.Request, d fault.Decision, ep endpoint, key, reqID string) fault.Response {
	if e := authenticate(r); e != nil {
		return errorResponse(e)
	}
	version, e := h.apiVersion(r.Header.Get("Stripe-Version"))
	if e != nil {
		return errorResponse(e)
	}
	w.Header().Set("Stripe-Version", version)
	raw := r.URL.RawQuery
	if r.Method == http.MethodPost {
		body, tooLarge, err := fakehttp.ReadBody(w, r)
		if tooLarge {
			return errorResponse(&apiError{Type: typeInvalidRequest, Message: "Request body too large.", status: http.StatusRequestEntityTooLarge})
		}
		if err != nil {
			return errorResponse(&apiError{Type: typeInvalidRequest, Message: "Invalid request: the body could not be read."})
		}
		raw = string(body)
	}
	p, e := parseParams(raw, ep.spec)
	if e != nil {
		return errorResponse(e)
	}
	c := &call{r: r, p: p, key: key}
	if ep.post != nil && key != "" {
		return h.idempotent(r.Context(), d, ep, c, reqID)
	}
	d.Wait(r.Context())
	h.mu.Lock()
	defer h.mu.Unlock()
	c.now = h.now()
	if ep.post != nil {
		resp, _ := ep.post(c)
		return resp
	}
	return ep.get(c)
}

// idempotent runs a keyed POST: replay, conflict, in-flight, or a claimed
// execution whose answer is saved under the key.
func (h *Handler) idempotent(ctx context.Context, d fault.Decision, ep endpoint, c *call, reqID string) fault.Response {
	if len(c.key) > 255 {
		return errorResponse(&apiError{Type: typeInvalidRequest, Message: "Keys for idempotent requests can be no longer than 255 characters."})
	}
	endpointName := c.r.Method + " " + c.r.URL.Path
	canonical := c.p.canonical()

	h.mu.Lock()
	now := h.now()
	e := h.keys[c.key]
	if e != nil && e.done && now.Sub(e.at) >= h.cfg.KeyWindow {
		delete(h.keys, c.key)
		e = nil
	}
	var resp fault.Response
	claimed := false
	switch {
	case e == nil:
		e = &oncelyEntry{endpoint: endpointName, params: canonical, at: now, requestID: reqID}
		h.keys[c.key] = e
		claimed = true
	case e.endpoint != endpointName:
		resp = errorResponse(&apiError{Type: typeIdempotency, Message: "Keys for idempotent requests can only be used for the same endpoint they were first used for ('" + e.endpoint + "'). Try using a key other than '" + c.key + "' if you meant to execute a different request."})
	case e.params != canonical:
		resp = errorResponse(&apiError{Type: typeIdempotency, Message: "Keys for idempotent requests can only be used with the same parameters they were first used with. Try using a key other than '" + c.key + "' if you meant to execute a different request."})
	case !e.done:
		resp = errorResponse(&apiError{Type: typeInvalidRequest, Code: "idempotency_key_in_use", Message: "There is currently another in-progress request using this Idempotent Key (that probably means you submitted twice, and the other request is still going through): " + c.key + ". Please try again later.", status: http.StatusConflict})
	default:
		resp = e.resp
		resp.Header = resp.Header.Clone()
		resp.Header.Set("Idempotent-Replayed", "true")
		resp.Header.Set("Original-Request", e.requestID)
	}
	h.mu.Unlock()

	d.Wait(ctx)
	if !claimed {
		return resp
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	c.now = h.now()
	resp, save := ep.post(c)
	resp = withRequestLog(resp, reqID)
	switch {
	case h.keys[c.key] != e:
		// Reset ran meanwhile: the key is gone with everything else.
	case save:
		e.done = true
		e.resp = resp
		if d.Active && d.Rule.SaveError {
			e.resp = d.Answer(resp, faultError)
		}
	default:
		delete(h.keys, c.key)
	}
	return resp
}

// withRequestLog adds request_log_url to a Stripe error body, unless it
// has one (a replay keeps the first request's).
func withRequestLog(resp fault.Response, reqID string) fault.Response {
	const open = `{"error":{`
	if resp.Status < 400 || !bytes.HasPrefix(resp.Body, []byte(open)) || bytes.Contains(resp.Body, []byte(`"request_log_url":`)) {
		return resp
	}
	body := make([]byte, 0, len(resp.Body)+80)
	body = append(body, open...)
	body = append(body, `"request_log_url":"`+requestLogURLBase+reqID+`",`...)
	resp.Body = append(body, resp.Body[len(open):]...)
	return resp
}

// authenticate accepts any secret (sk_test_) or restricted (rk_test_)
// test key as a Bearer token or basic-auth user; restricted keys have
// every permission.
func authenticate(r *http.Request) *apiError {
	header := r.Header.Get("Authorization")
	if header == "" {
		return &apiError{Type: typeInvalidRequest, Message: "You did not provide an API key. You need to provide your API key in the Authorization header, using Bearer auth (e.g. 'Authorization: Bearer YOUR_SECRET_KEY').", status: http.StatusUnauthorized}
	}
	key, ok := strings.CutPrefix(header, "Bearer ")
	if !ok {
		key, _, ok = r.BasicAuth()
	}
	key = strings.TrimSpace(key)
	if !ok || !testKey(key) {
		return &apiError{Type: typeInvalidRequest, Message: "Invalid API Key provided: " + redact(key), status: http.StatusUnauthorized}
	}
	return nil
}

func testKey(key string) bool {
	for _, prefix := range []string{"sk_test_", "rk_test_"} {
		if rest, ok := strings.CutPrefix(key, prefix); ok && rest != "" {
			return true
		}
	}
	return false
}

func redact(key string) string {
	if len(key) <= 12 {
		return strings.Repeat("*", len(key))
	}
	return key[:8] + strings.Repeat("*", len(key)-12) + key[len(key)-4:]
}

// errorResponse renders e as Stripe does: {"error": {...}}, with the
// documentation of its code.
func errorResponse(e *apiError) fault.Response {
	if e.Code != "" && e.Code != codeNotModeled && e.DocURL == "" {
		e.DocURL = docURLBase + strings.ReplaceAll(e.Code, "_", "-")
	}
	resp := fakehttp.JSON(e.httpStatus(), "", map[string]*apiError{"error": e})
	if e.httpStatus() == http.StatusUnauthorized {
		resp.Header.Set("WWW-Authenticate", `Basic realm="Stripe"`)
	}
	return resp
}

// faultError renders an injected failure as a Stripe error.
func faultError(status int, message string) fault.Response {
	e := &apiError{Type: typeAPI, Message: "An unknown error occurred (" + message + ").", status: status}
	if status == http.StatusTooManyRequests {
		e = &apiError{Type: typeInvalidRequest, Code: "rate_limit", Message: "Request rate limit exceeded (" + message + ").", status: status}
	}
	return errorResponse(e)
}
