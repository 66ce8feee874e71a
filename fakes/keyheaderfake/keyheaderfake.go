// Package keyheaderfake is a fake of a generic API that follows the IETF draft
// "The Idempotency-Key HTTP Header Field": creating an order requires an
// Idempotency-Key, and a repeat with the same key is answered from the
// stored first response.
//
// # Routes
//
//	POST /v1/orders       JSON {"sku", "quantity", "customer", "metadata": {}}
//	                      with Idempotency-Key → 201 the order, Location header
//	GET  /v1/orders/{id}  → 200 the order or 404
//
// An order is {"id", "object", "sku", "quantity", "customer", "metadata",
// "status": "created", "created_at"}; "sku" and a "quantity" of at least 1
// are required.
//
// # Idempotency
//
// The key is a Structured Field string ("\"8e03978e...\"", as the draft
// specifies) or, leniently, a bare token, up to 255 characters. As in the
// draft's error scenarios, with application/problem+json bodies:
//
//   - no key: 400 (type "/problems/idempotency-key-missing");
//   - the key of a request still being processed: 409
//     ("/problems/idempotency-key-in-use");
//   - the key reused with another payload: 422
//     ("/problems/idempotency-key-reused"); payloads are compared as JSON
//     values, so key order and spacing do not matter;
//   - otherwise a repeat gets the stored status, body and Location, plus an
//     Idempotent-Replayed: true header (not in the draft; for tests).
//
// Requests rejected before execution (bad key, malformed or invalid body,
// injected FailBeforeCommit or DropBeforeCommit) store nothing. Keys expire
// Config.KeyWindow after first use, by the fake's clock. Each order created
// is an "order" effect whose Key is the idempotency key.
package keyheaderfake

import (
	"bytes"
	"encoding/json"
	"maps"
	"net/http"
	"strconv"
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
	// Seed seeds order ids and random faults, so a run can be replayed.
	Seed int64
	// Clock is the fake's time (default: the system clock); key expiry
	// uses it.
	Clock clock.Clock
	// KeyWindow is how long idempotency keys are kept (default 24 h).
	KeyWindow time.Duration
}

// Order is an order as the API returns it.
type Order struct {
	ID        string            `json:"id"`
	Object    string            `json:"object"`
	SKU       string            `json:"sku"`
	Quantity  int64             `json:"quantity"`
	Customer  string            `json:"customer"`
	Metadata  map[string]string `json:"metadata"`
	Status    string            `json:"status"`
	CreatedAt string            `json:"created_at"`
}

type orderRequest struct {
	SKU      string            `json:"sku"`
	Quantity int64             `json:"quantity"`
	Customer string            `json:"customer"`
	Metadata map[string]string `json:"metadata"`
}

// Problem is an RFC 9457 problem detail, the body of every error answer.
type Problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
}

type keyEntry struct {
	fingerprint string
	at          time.Time
	done        bool
	resp        fault.Response
}

// Handler is the fake API as an http.Handler.
type Handler struct {
	// Faults decides which requests fail; rules may be added at any time.
	Faults *fault.Injector

	window  time.Duration
	now     func() time.Time
	mux     *http.ServeMux
	ids     *fakehttp.IDs
	journal fakes.Journal

	mu     sync.Mutex
	orders map[string]*Order
	keys   map[string]*keyEntry
}

// NewHandler returns a fake with no orders, configured by cfg (nil for the
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
		window: c.KeyWindow,
		now:    fakehttp.Clock(c.Clock),
		ids:    fakehttp.NewIDs(c.Seed),
		mux:    http.NewServeMux(),
		orders: map[string]*Order{},
		keys:   map[string]*keyEntry{},
	}
	h.mux.HandleFunc("POST /v1/orders", h.create)
	h.mux.HandleFunc("GET /v1/orders/{id}", func(w http.ResponseWriter, r *http.Request) {
		h.Faults.Decide(r).Serve(w, r, faultProblem, func() fault.Response {
			h.mu.Lock()
			defer h.mu.Unlock()
			o, ok := h.orders[r.PathValue("id")]
			if !ok {
				return problem(http.StatusNotFound, "about:blank", "Not Found", "no order "+r.PathValue("id"))
			}
			return fakehttp.JSON(http.StatusOK, "", o)
		})
	})
	h.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		problem(http.StatusNotFound, "about:blank", "Not Found", "no route "+r.Method+" "+r.URL.Path).Write(w)
	})
	return h
}

// ServeHTTP serves the fake API.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

// Journal returns the effects committed so far: one per order created.
func (h *Handler) Journal() []fakes.Effect { return h.journal.Snapshot() }

// Reset forgets every order, key and effect, restarts ids from the seed and
// clears the fault rules (the fault log is kept).
func (h *Handler) Reset() {
	h.mu.Lock()
	h.orders, h.keys = map[string]*Order{}, map[string]*keyEntry{}
	h.mu.Unlock()
	h.journal.Reset()
	h.ids.Reset()
	h.Faults.Clear()
}

func problem(status int, typ, title, detail string) fault.Response {
	return fakehttp.JSON(status, "application/problem+json", Problem{Type: typ, Title: title, Status: status, Detail: detail})
}

func faultProblem(status int, message string) fault.Response {
	return problem(status, "about:blank", http.StatusText(status), message)
}

func (h *Handler) create(w http.ResponseWriter, r *http.Request) {
	d := h.Faults.Decide(r)
	if d.Reject(w, faultProblem) {
		return
	}
	d.Deliver(w, d.Answer(h.execute(w, r, d), faultProblem))
}

func (h *Handler) execute(w http.ResponseWriter, r *http.Request, d fault.Decision) fault.Response {
	key, resp, ok := parseKey(r.Header.Values("Idempotency-Key"))
	if !ok {
		return resp
	}
	req, fingerprint, resp, ok := decodeOrder(w, r)
	if !ok {
		return resp
	}

	h.mu.Lock()
	now := h.now()
	e := h.keys[key]
	if e != nil && e.done && now.Sub(e.at) >= h.window {
		delete(h.keys, key)
		e = nil
	}
	claimed := false
	switch {
	case e == nil:
		e = &keyEntry{fingerprint: fingerprint, at: now}
		h.keys[key] = e
		claimed = true
	case e.fingerprint != fingerprint:
		resp = problem(http.StatusUnprocessableEntity, "/problems/idempotency-key-reused", "Idempotency-Key is already used",
			"This Idempotency-Key was used with a different request payload; use a new key for a new request.")
	case !e.done:
		resp = problem(http.StatusConflict, "/problems/idempotency-key-in-use", "A request is outstanding for this Idempotency-Key",
			"The first request with this Idempotency-Key is still being processed; retry later.")
	default:
		resp = e.resp
		resp.Header = resp.Header.Clone()
		resp.Header.Set("Idempotent-Replayed", "true")
	}
	h.mu.Unlock()

	d.Wait(r.Context())
	if !claimed {
		return resp
	}
	return h.commit(d, key, e, req)
}

// commit creates the order of a claimed key and stores the answer under it.
func (h *Handler) commit(d fault.Decision, key string, e *keyEntry, req orderRequest) fault.Response {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.now()
	o := &Order{ID: h.ids.New("ord_", 20), Object: "order", SKU: req.SKU, Quantity: req.Quantity, Customer: req.Customer,
		Metadata: maps.Clone(req.Metadata), Status: "created", CreatedAt: fakehttp.Timestamp(now)}
	if o.Metadata == nil {
		o.Metadata = map[string]string{}
	}
	h.orders[o.ID] = o
	params := map[string]string{"sku": o.SKU, "quantity": strconv.FormatInt(o.Quantity, 10), "customer": o.Customer}
	for k, v := range o.Metadata {
		params["metadata."+k] = v
	}
	h.journal.Append(fakes.Effect{Kind: fakes.KindOrder, ID: o.ID, Key: key, Params: params, At: now})
	resp := fakehttp.JSON(http.StatusCreated, "", o)
	resp.Header.Set("Location", "/v1/orders/"+o.ID)
	if h.keys[key] == e { // else Reset ran meanwhile
		e.done, e.resp = true, resp
		if d.Active && d.Rule.SaveError {
			e.resp = d.Answer(resp, faultProblem)
		}
	}
	return resp
}

// parseKey reads the Idempotency-Key field: one sf-string, or leniently a
// bare token.
func parseKey(values []string) (string, fault.Response, bool) {
	bad := func(detail string) (string, fault.Response, bool) {
		return "", problem(http.StatusBadRequest, "/problems/idempotency-key-missing", "Idempotency-Key is missing", detail), false
	}
	if len(values) == 0 || strings.TrimSpace(values[0]) == "" {
		return bad("This operation is idempotent and it requires correct usage of the Idempotency-Key header.")
	}
	if len(values) > 1 {
		return bad("Send exactly one Idempotency-Key field.")
	}
	v := strings.TrimSpace(values[0])
	if strings.HasPrefix(v, `"`) {
		s, ok := parseSFString(v)
		if !ok {
			return bad("The Idempotency-Key is not a valid Structured Field string.")
		}
		v = s
	}
	if v == "" || len(v) > 255 {
		return bad("The Idempotency-Key must have 1 to 255 characters.")
	}
	return v, fault.Response{}, true
}

// parseSFString decodes an RFC 8941 string: printable ASCII in double
// quotes, with \" and \\ escapes.
func parseSFString(v string) (string, bool) {
	if len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' {
		return "", false
	}
	var b strings.Builder
	inner := v[1 : len(v)-1]
	for i := 0; i < len(inner); i++ {
		c := inner[i]
		switch {
		case c == '\\':
			i++
			if i == len(inner) || (inner[i] != '"' && inner[i] != '\\') {
				return "", false
			}
			b.WriteByte(inner[i])
		case c == '"' || c < 0x20 || c > 0x7e:
			return "", false
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), true
}

// decodeOrder reads and validates the order and returns the fingerprint of
// its payload: the canonical encoding of the JSON value.
func decodeOrder(w http.ResponseWriter, r *http.Request) (orderRequest, string, fault.Response, bool) {
	var req orderRequest
	body, tooLarge, err := fakehttp.ReadBody(w, r)
	if tooLarge {
		return req, "", problem(http.StatusRequestEntityTooLarge, "about:blank", "Content Too Large", "the body is larger than 1 MiB"), false
	}
	if err == nil {
		err = fakehttp.StrictJSON(body, &req)
	}
	if err != nil {
		return req, "", problem(http.StatusBadRequest, "about:blank", "Bad Request", "malformed order: "+err.Error()), false
	}
	if req.SKU == "" || req.Quantity < 1 {
		return req, "", problem(http.StatusBadRequest, "/problems/invalid-order", "Invalid order", "sku and a quantity of at least 1 are required"), false
	}
	// The body is valid JSON: decoding it generically cannot fail, and
	// re-encoding sorts object keys.
	var generic any
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	_ = dec.Decode(&generic)
	fp, _ := json.Marshal(generic)
	return req, string(fp), fault.Response{}, true
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
