// Package crmfake is a fake CRM with two ways to write a contact: a plain
// create that makes a new contact on every call (even with the same email),
// and an upsert keyed by the caller's external id, which is naturally
// idempotent.
//
// # Routes
//
//	POST /v1/contacts                     JSON {"email", "name", "fields": {}} → 201 a new contact
//	PUT  /v1/contacts/by-external-id/{id} JSON {"email", "name", "fields": {}} → 201 created, 200 updated
//	                                      or unchanged; the body replaces email, name and fields
//	GET  /v1/contacts/by-external-id/{id} → 200 the contact or 404
//	GET  /v1/contacts/{id}                → 200 the contact or 404
//
// A contact is {"id", "external_id" (null for plain creates), "email",
// "name", "fields", "version", "created_at", "updated_at"}; version counts
// the writes that changed it. "email" must be a bare address, field values
// are strings. Errors are {"error": {"code", "message"}}: 400 for malformed
// JSON, unknown fields or invalid values, 404, 413 past 1 MiB.
//
// Effects: "contact.create" for each plain create (Key ""), and
// "contact.upsert" for each upsert that created or changed a contact (Key =
// the external id); an upsert that changes nothing is not an effect.
package crmfake

import (
	"maps"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/oncely/oncely/clock"
	"github.com/oncely/oncely/fakes"
	"github.com/oncely/oncely/fakes/fault"
	"github.com/oncely/oncely/fakes/internal/fakehttp"
)

// Config configures a fake. The zero value (or nil) gives the defaults.
type Config struct {
	// Seed seeds contact ids and random faults, so a run can be replayed.
	Seed int64
	// Clock is the fake's time (default: the system clock).
	Clock clock.Clock
}

// Contact is a contact as the API returns it.
type Contact struct {
	ID         string            `json:"id"`
	Object     string            `json:"object"`
	ExternalID *string           `json:"external_id"`
	Email      string            `json:"email"`
	Name       string            `json:"name"`
	Fields     map[string]string `json:"fields"`
	Version    int               `json:"version"`
	CreatedAt  string            `json:"created_at"`
	UpdatedAt  string            `json:"updated_at"`
}

// contactInput is the body of a create or an upsert.
type contactInput struct {
	Email  string            `json:"email"`
	Name   string            `json:"name"`
	Fields map[string]string `json:"fields"`
}

// Handler is the fake CRM as an http.Handler.
type Handler struct {
	// Faults decides which requests fail; rules may be added at any time.
	Faults *fault.Injector

	now     func() time.Time
	mux     *http.ServeMux
	ids     *fakehttp.IDs
	journal fakes.Journal

	mu         sync.Mutex
	byID       map[string]*Contact
	byExternal map[string]*Contact
}

// NewHandler returns a fake with no contacts, configured by cfg (nil for the
// defaults).
func NewHandler(cfg *Config) *Handler {
	var c Config
	if cfg != nil {
		c = *cfg
	}
	h := &Handler{
		Faults:     fault.NewInjector(c.Seed),
		now:        fakehttp.Clock(c.Clock),
		ids:        fakehttp.NewIDs(c.Seed),
		mux:        http.NewServeMux(),
		byID:       map[string]*Contact{},
		byExternal: map[string]*Contact{},
	}
	h.route("POST /v1/contacts", h.create)
	h.route("PUT /v1/contacts/by-external-id/{id}", h.upsert)
	h.route("GET /v1/contacts/by-external-id/{id}", h.getByExternalID)
	h.route("GET /v1/contacts/{id}", h.get)
	h.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		fakehttp.ErrorJSON(http.StatusNotFound, "unknown_route", "no route "+r.Method+" "+r.URL.Path).Write(w)
	})
	return h
}

// route serves pattern through the fault injector; fn runs as the commit
// step, with the lock held.
func (h *Handler) route(pattern string, fn func(r *http.Request, in *contactInput) fault.Response) {
	needsBody := !strings.HasPrefix(pattern, "GET ")
	h.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, fakehttp.MaxBody)
		h.Faults.Decide(r).Serve(w, r, fakehttp.FaultErrorJSON, func() fault.Response {
			var in *contactInput
			if needsBody {
				in = &contactInput{}
				if resp, ok := decode(w, r, in); !ok {
					return resp
				}
			}
			h.mu.Lock()
			defer h.mu.Unlock()
			return fn(r, in)
		})
	})
}

// decode reads and validates a contact body.
func decode(w http.ResponseWriter, r *http.Request, in *contactInput) (fault.Response, bool) {
	if status, err := fakehttp.DecodeJSON(w, r, in); err != nil {
		code := "invalid_json"
		if status == http.StatusRequestEntityTooLarge {
			code = "body_too_large"
		}
		return fakehttp.ErrorJSON(status, code, err.Error()), false
	}
	switch {
	case in.Email == "":
		return fakehttp.ErrorJSON(http.StatusBadRequest, "missing_field", "email is required"), false
	case !fakehttp.ValidEmail(in.Email):
		return fakehttp.ErrorJSON(http.StatusBadRequest, "invalid_field", "email is not an email address: "+in.Email), false
	}
	if in.Fields == nil {
		in.Fields = map[string]string{}
	}
	return fault.Response{}, true
}

// ServeHTTP serves the fake API.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

// Journal returns the effects committed so far.
func (h *Handler) Journal() []fakes.Effect { return h.journal.Snapshot() }

// Reset forgets every contact and effect, restarts ids from the seed and
// clears the fault rules (the fault log is kept).
func (h *Handler) Reset() {
	h.mu.Lock()
	h.byID, h.byExternal = map[string]*Contact{}, map[string]*Contact{}
	h.mu.Unlock()
	h.journal.Reset()
	h.ids.Reset()
	h.Faults.Clear()
}

func (h *Handler) newContact(in *contactInput, now time.Time) *Contact {
	ts := fakehttp.Timestamp(now)
	c := &Contact{ID: h.ids.New("ct_", 20), Object: "contact", Email: in.Email, Name: in.Name, Fields: maps.Clone(in.Fields), Version: 1, CreatedAt: ts, UpdatedAt: ts}
	h.byID[c.ID] = c
	return c
}

func (h *Handler) record(kind string, c *Contact, key string, now time.Time) {
	params := map[string]string{"email": c.Email, "name": c.Name}
	for k, v := range c.Fields {
		params["fields."+k] = v
	}
	h.journal.Append(fakes.Effect{Kind: kind, ID: c.ID, Key: key, Params: params, At: now})
}

func (h *Handler) create(_ *http.Request, in *contactInput) fault.Response {
	now := h.now()
	c := h.newContact(in, now)
	h.record(fakes.KindContactCreate, c, "", now)
	return fakehttp.JSON(http.StatusCreated, "", c)
}

func (h *Handler) upsert(r *http.Request, in *contactInput) fault.Response {
	ext := r.PathValue("id")
	if len(ext) > 255 {
		return fakehttp.ErrorJSON(http.StatusBadRequest, "invalid_field", "external id is longer than 255 bytes")
	}
	now := h.now()
	c, ok := h.byExternal[ext]
	if !ok {
		c = h.newContact(in, now)
		c.ExternalID = &ext
		h.byExternal[ext] = c
		h.record(fakes.KindContactUpsert, c, ext, now)
		return fakehttp.JSON(http.StatusCreated, "", c)
	}
	if c.Email != in.Email || c.Name != in.Name || !maps.Equal(c.Fields, in.Fields) {
		c.Email, c.Name, c.Fields = in.Email, in.Name, maps.Clone(in.Fields)
		c.Version++
		c.UpdatedAt = fakehttp.Timestamp(now)
		h.record(fakes.KindContactUpsert, c, ext, now)
	}
	return fakehttp.JSON(http.StatusOK, "", c)
}

func (h *Handler) getByExternalID(r *http.Request, _ *contactInput) fault.Response {
	c, ok := h.byExternal[r.PathValue("id")]
	if !ok {
		return fakehttp.ErrorJSON(http.StatusNotFound, "not_found", "no contact with external id "+r.PathValue("id"))
	}
	return fakehttp.JSON(http.StatusOK, "", c)
}

func (h *Handler) get(r *http.Request, _ *contactInput) fault.Response {
	c, ok := h.byID[r.PathValue("id")]
	if !ok {
		return fakehttp.ErrorJSON(http.StatusNotFound, "not_found", "no contact "+r.PathValue("id"))
	}
	return fakehttp.JSON(http.StatusOK, "", c)
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
