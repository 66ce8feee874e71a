// Package mailfake is a fake email API with no idempotency at all: every
// accepted POST sends one more message, whatever it carries. A client that
// must not send twice stores its key as the message reference and searches
// for it before sending; the search index lags behind by Config.IndexLag, so
// an empty search shortly after a send proves nothing.
//
// # Routes
//
//	POST /v1/messages       JSON {"from", "to", "subject", "text", "reference", "metadata": {}}
//	                        → 202 the message, "status": "queued"
//	GET  /v1/messages       ?reference=X → {"data": [messages]}, oldest first; only
//	                        messages at least IndexLag old are visible
//	GET  /v1/messages/{id}  → 200 the message (immediately consistent) or 404
//
// "from" and "to" are bare email addresses (one recipient), "subject" or
// "text" must be non-empty, "reference" is at most 255 bytes and metadata
// values are strings. Errors are {"error": {"code", "message"}}: 400 for
// malformed JSON, unknown fields or invalid values, 404, 413 past 1 MiB.
//
// Each accepted message is a "message" effect whose Key is its reference.
package mailfake

import (
	"maps"
	"net/http"
	"sync"
	"time"

	"github.com/oncely/oncely/clock"
	"github.com/oncely/oncely/fakes"
	"github.com/oncely/oncely/fakes/fault"
	"github.com/oncely/oncely/fakes/internal/fakehttp"
)

// Config configures a fake. The zero value (or nil) gives the defaults.
type Config struct {
	// Seed seeds message ids and random faults, so a run can be replayed.
	Seed int64
	// Clock is the fake's time (default: the system clock); message times
	// and the index lag use it.
	Clock clock.Clock
	// IndexLag is how long after it was sent a message becomes visible to
	// GET /v1/messages (default 0: at once).
	IndexLag time.Duration
}

// Message is a message as the API returns it.
type Message struct {
	ID        string            `json:"id"`
	Object    string            `json:"object"`
	From      string            `json:"from"`
	To        string            `json:"to"`
	Subject   string            `json:"subject"`
	Text      string            `json:"text"`
	Reference string            `json:"reference"`
	Metadata  map[string]string `json:"metadata"`
	Status    string            `json:"status"`
	CreatedAt string            `json:"created_at"`
}

// sendRequest is the body of POST /v1/messages.
type sendRequest struct {
	From      string            `json:"from"`
	To        string            `json:"to"`
	Subject   string            `json:"subject"`
	Text      string            `json:"text"`
	Reference string            `json:"reference"`
	Metadata  map[string]string `json:"metadata"`
}

type stored struct {
	msg Message
	at  time.Time
}

// Handler is the fake email API as an http.Handler.
type Handler struct {
	// Faults decides which requests fail; rules may be added at any time.
	Faults *fault.Injector

	cfg     Config
	now     func() time.Time
	mux     *http.ServeMux
	ids     *fakehttp.IDs
	journal fakes.Journal

	mu       sync.Mutex
	messages []*stored
	byID     map[string]*stored
}

// NewHandler returns a fake with no messages, configured by cfg (nil for the
// defaults).
func NewHandler(cfg *Config) *Handler {
	var c Config
	if cfg != nil {
		c = *cfg
	}
	h := &Handler{
		Faults: fault.NewInjector(c.Seed),
		cfg:    c,
		now:    fakehttp.Clock(c.Clock),
		ids:    fakehttp.NewIDs(c.Seed),
		mux:    http.NewServeMux(),
		byID:   map[string]*stored{},
	}
	h.route("POST /v1/messages", h.send)
	h.route("GET /v1/messages", h.search)
	h.route("GET /v1/messages/{id}", h.get)
	h.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		fakehttp.ErrorJSON(http.StatusNotFound, "unknown_route", "no route "+r.Method+" "+r.URL.Path).Write(w)
	})
	return h
}

// route serves pattern through the fault injector; fn runs as the commit
// step.
func (h *Handler) route(pattern string, fn func(w http.ResponseWriter, r *http.Request) fault.Response) {
	h.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, fakehttp.MaxBody)
		h.Faults.Decide(r).Serve(w, r, fakehttp.FaultErrorJSON, func() fault.Response { return fn(w, r) })
	})
}

// ServeHTTP serves the fake API.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

// Journal returns the effects committed so far: one per message sent.
func (h *Handler) Journal() []fakes.Effect { return h.journal.Snapshot() }

// Reset forgets every message and effect, restarts ids from the seed and
// clears the fault rules (the fault log is kept).
func (h *Handler) Reset() {
	h.mu.Lock()
	h.messages, h.byID = nil, map[string]*stored{}
	h.mu.Unlock()
	h.journal.Reset()
	h.ids.Reset()
	h.Faults.Clear()
}

func invalid(code, msg string) fault.Response {
	return fakehttp.ErrorJSON(http.StatusBadRequest, code, msg)
}

func (h *Handler) send(w http.ResponseWriter, r *http.Request) fault.Response {
	var req sendRequest
	if status, err := fakehttp.DecodeJSON(w, r, &req); err != nil {
		code := "invalid_json"
		if status == http.StatusRequestEntityTooLarge {
			code = "body_too_large"
		}
		return fakehttp.ErrorJSON(status, code, err.Error())
	}
	switch {
	case req.From == "" || req.To == "":
		return invalid("missing_field", "from and to are required")
	case !fakehttp.ValidEmail(req.From):
		return invalid("invalid_field", "from is not an email address: "+req.From)
	case !fakehttp.ValidEmail(req.To):
		return invalid("invalid_field", "to is not an email address: "+req.To)
	case req.Subject == "" && req.Text == "":
		return invalid("missing_field", "subject or text is required")
	case len(req.Reference) > 255:
		return invalid("invalid_field", "reference is longer than 255 bytes")
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.now()
	m := &stored{at: now, msg: Message{
		ID: h.ids.New("msg_", 20), Object: "message", From: req.From, To: req.To, Subject: req.Subject, Text: req.Text,
		Reference: req.Reference, Metadata: maps.Clone(req.Metadata), Status: "queued", CreatedAt: fakehttp.Timestamp(now),
	}}
	if m.msg.Metadata == nil {
		m.msg.Metadata = map[string]string{}
	}
	h.messages = append(h.messages, m)
	h.byID[m.msg.ID] = m
	params := map[string]string{"from": req.From, "to": req.To, "subject": req.Subject}
	for k, v := range req.Metadata {
		params["metadata."+k] = v
	}
	h.journal.Append(fakes.Effect{Kind: fakes.KindMessage, ID: m.msg.ID, Key: req.Reference, Params: params, At: now})
	return fakehttp.JSON(http.StatusAccepted, "", m.msg)
}

func (h *Handler) search(_ http.ResponseWriter, r *http.Request) fault.Response {
	q := r.URL.Query()
	for k := range q {
		if k != "reference" {
			return invalid("invalid_query", "unknown query parameter "+k)
		}
	}
	ref, filter := q.Get("reference"), q.Has("reference")
	h.mu.Lock()
	defer h.mu.Unlock()
	visibleUntil := h.now().Add(-h.cfg.IndexLag)
	out := struct {
		Data []Message `json:"data"`
	}{Data: []Message{}}
	for _, m := range h.messages {
		if !m.at.After(visibleUntil) && (!filter || m.msg.Reference == ref) {
			out.Data = append(out.Data, m.msg)
		}
	}
	return fakehttp.JSON(http.StatusOK, "", out)
}

func (h *Handler) get(_ http.ResponseWriter, r *http.Request) fault.Response {
	h.mu.Lock()
	defer h.mu.Unlock()
	m, ok := h.byID[r.PathValue("id")]
	if !ok {
		return fakehttp.ErrorJSON(http.StatusNotFound, "not_found", "no message "+r.PathValue("id"))
	}
	return fakehttp.JSON(http.StatusOK, "", m.msg)
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
