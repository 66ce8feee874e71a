// Package hubspotfake is a fake of HubSpot's CRM objects API (v3) for
// contacts and deals: what package providers/hubspot and HubSpot's official
// clients use to create, upsert and read records by a unique property.
//
// # What it models
//
//	POST  /crm/v3/objects/{type}              {"properties": {}} → 201 a new record, every
//	                                          time (409 CONFLICT when a unique value is taken)
//	POST  /crm/v3/objects/{type}/batch/upsert {"inputs": [{"idProperty", "id", "properties",
//	                                          "objectWriteTraceId"}]} → 200 {"status": "COMPLETE",
//	                                          "results": [record + "new"], "startedAt", "completedAt"}
//	GET   /crm/v3/objects/{type}/{id}         ?idProperty=&properties=&archived= → 200 or 404
//	PATCH /crm/v3/objects/{type}/{id}         ?idProperty= {"properties": {}} → 200 or 404
//
// {type} is "contacts" or "deals". A record is {"id", "properties",
// "createdAt", "updatedAt", "archived": false}; its properties include
// hs_object_id, createdate and lastmodifieddate (contacts) or
// hs_createdate (deals), and every property written. A read without
// ?properties= returns the default properties of the type (contacts:
// email, firstname, lastname; deals: dealname, amount, dealstage,
// pipeline) plus the system ones, as HubSpot does.
//
// Validation as HubSpot answers it, with its error body {"status": "error",
// "message", "correlationId", "category", "errors": [{"message", "code",
// "context"}]}: 400 VALIDATION_ERROR for an unknown property
// (PROPERTY_DOESNT_EXIST), a contact email that is not an address
// (INVALID_EMAIL), a deal amount that is not a number (INVALID_DECIMAL),
// an idProperty that is not a unique property, an upsert input without id
// or idProperty, a batch of more than 100 inputs or two inputs with the
// same id; 401 without a Bearer token (or with another than Config.Token);
// 404 OBJECT_NOT_FOUND; 409 CONFLICT for a create whose unique value
// another record holds. Upsert and PATCH by idProperty match the unique
// value exactly. Writes are consistent: a record is readable by id and by
// every unique value as soon as the write is answered (HubSpot's object
// store; its search index, which lags, is not modelled).
//
// Rate limit: with Config.RateLimit set, at most that many requests in any
// rolling Config.RateWindow (HubSpot's TEN_SECONDLY_ROLLING policy: 100 to
// 190 per 10 s per private app); the next is answered 429 with
// "errorType": "RATE_LIMIT", "policyName": "TEN_SECONDLY_ROLLING", a
// Retry-After (whole seconds until a slot frees) and the
// X-HubSpot-RateLimit-* headers (-Max, -Remaining and
// -Interval-Milliseconds, which every admitted answer carries too, as
// HubSpot's do). Refused requests do not count.
//
// # What it does not model
//
// Other object types (companies, tickets, custom objects, "0-1" type ids),
// associations, batch create/read/update/archive, search, list and paging,
// property history, archiving, merges, owners, pipelines and their stage
// validation, the daily limit and the search API's own limit, OAuth. A
// route, object type or query parameter outside the list above is answered
// 501 with category "NOT_MODELLED" and a message that says the fake does
// not model it, never an answer HubSpot would give.
//
// # Effects
//
// KindCreate for each plain create (Key: the record's oncely property value
// if it has one), KindUpsert for each upsert input that created or changed
// a record and KindUpdate for each PATCH that changed one (Key: the unique
// value the write named). A write that changes nothing is not an effect.
package hubspotfake

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/mail"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/oncely/oncely/clock"
	"github.com/oncely/oncely/fakes"
	"github.com/oncely/oncely/fakes/fault"
	"github.com/oncely/oncely/fakes/internal/fakehttp"
)

// Effect kinds recorded in the journal.
const (
	// KindCreate is a record made by POST /crm/v3/objects/{type}.
	KindCreate = "hubspot.create"
	// KindUpsert is an upsert input that created or changed a record.
	KindUpsert = "hubspot.upsert"
	// KindUpdate is a PATCH that changed a record.
	KindUpdate = "hubspot.update"
)

// OncelyProperty is the unique property the fake defines on both types for
// the downstream key (the name package providers/hubspot uses by default).
const OncelyProperty = "oncely_key"

// MaxBatch is the largest batch HubSpot accepts.
const MaxBatch = 100

// Property is one property of an object type.
type Property struct {
	Name string
	// Unique: the property has unique values (hasUniqueValue), so it can
	// name a record as idProperty.
	Unique bool
}

// DefaultProperties are the properties each type has unless Config adds
// more: a few of HubSpot's own, and OncelyProperty as a unique custom one.
var DefaultProperties = map[string][]Property{
	"contacts": {
		{Name: "email", Unique: true}, {Name: "firstname"}, {Name: "lastname"}, {Name: "phone"},
		{Name: "company"}, {Name: "lifecyclestage"}, {Name: OncelyProperty, Unique: true},
	},
	"deals": {
		{Name: "dealname"}, {Name: "amount"}, {Name: "dealstage"}, {Name: "pipeline"},
		{Name: "closedate"}, {Name: OncelyProperty, Unique: true},
	},
}

var defaultRead = map[string][]string{
	"contacts": {"email", "firstname", "lastname"},
	"deals":    {"dealname", "amount", "dealstage", "pipeline"},
}

// Config configures a fake. The zero value (or nil) gives the defaults.
type Config struct {
	// Seed seeds random faults, so a run can be replayed.
	Seed int64
	// Clock is the fake's time (default: the system clock): record times
	// and the rate limit window use it.
	Clock clock.Clock
	// Token, when set, is the only Bearer token accepted; otherwise any
	// non-empty one is.
	Token string
	// Properties adds properties to DefaultProperties, per type.
	Properties map[string][]Property
	// RateLimit is how many requests any rolling RateWindow may hold;
	// 0: no limit.
	RateLimit int
	// RateWindow is the rate limit's window (default 10 s).
	RateWindow time.Duration
}

// Record is a CRM record as the API returns it.
type Record struct {
	ID         string            `json:"id"`
	Properties map[string]string `json:"properties"`
	CreatedAt  string            `json:"createdAt"`
	UpdatedAt  string            `json:"updatedAt"`
	Archived   bool              `json:"archived"`
}

type upsertResult struct {
	Record
	New bool `json:"new"`
}

type objectType struct {
	props  map[string]Property
	byID   map[string]*Record
	unique map[string]map[string]*Record // property → value → record
}

// Handler is the fake HubSpot API as an http.Handler.
type Handler struct {
	// Faults decides which requests fail; rules may be added at any time.
	Faults *fault.Injector

	cfg     Config
	now     func() time.Time
	mux     *http.ServeMux
	journal fakes.Journal

	mu     sync.Mutex
	types  map[string]*objectType
	nextID int64
	recent []time.Time // accepted requests in the rate window
	corr   int64
}

// NewHandler returns a fake with no records, configured by cfg (nil for
// the defaults).
func NewHandler(cfg *Config) *Handler {
	var c Config
	if cfg != nil {
		c = *cfg
	}
	if c.RateWindow <= 0 {
		c.RateWindow = 10 * time.Second
	}
	h := &Handler{
		Faults: fault.NewInjector(c.Seed),
		cfg:    c,
		now:    fakehttp.Clock(c.Clock),
		mux:    http.NewServeMux(),
	}
	h.reset()
	h.route("POST /crm/v3/objects/{type}", h.create)
	h.route("POST /crm/v3/objects/{type}/batch/upsert", h.upsert)
	h.route("GET /crm/v3/objects/{type}/{id}", h.get)
	h.route("PATCH /crm/v3/objects/{type}/{id}", h.patch)
	h.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		h.notModelled("route " + r.Method + " " + r.URL.Path).Write(w)
	})
	return h
}

func (h *Handler) reset() {
	h.types = map[string]*objectType{}
	for name, props := range DefaultProperties {
		t := &objectType{props: map[string]Property{}, byID: map[string]*Record{}, unique: map[string]map[string]*Record{}}
		for _, p := range append(slices.Clone(props), h.cfg.Properties[name]...) {
			t.props[p.Name] = p
			if p.Unique {
				t.unique[p.Name] = map[string]*Record{}
			}
		}
		h.types[name] = t
	}
	h.nextID = 1000
	h.recent = nil
}

// route serves pattern through the auth check, the rate limit and the
// fault injector; fn runs as the commit step with the lock held.
func (h *Handler) route(pattern string, fn func(r *http.Request, t *objectType, body []byte) fault.Response) {
	h.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, fakehttp.MaxBody)
		if resp, ok := h.admit(w, r); !ok {
			resp.Write(w)
			return
		}
		h.Faults.Decide(r).Serve(w, r, h.faultError, func() fault.Response {
			var body []byte
			if r.Method != http.MethodGet {
				b, tooLarge, err := fakehttp.ReadBody(w, r)
				switch {
				case tooLarge:
					return h.errorResp(http.StatusRequestEntityTooLarge, "VALIDATION_ERROR", "request body too large", nil)
				case err != nil:
					return h.errorResp(http.StatusBadRequest, "VALIDATION_ERROR", "reading the body: "+err.Error(), nil)
				}
				body = b
			}
			h.mu.Lock()
			defer h.mu.Unlock()
			t, ok := h.types[r.PathValue("type")]
			if !ok {
				return h.notModelled("object type " + strconv.Quote(r.PathValue("type")) + " (only contacts and deals)")
			}
			return fn(r, t, body)
		})
	})
}

// admit checks the token and the rate limit.
func (h *Handler) admit(w http.ResponseWriter, r *http.Request) (fault.Response, bool) {
	auth := r.Header.Get("Authorization")
	tok, isBearer := strings.CutPrefix(auth, "Bearer ")
	switch {
	case !isBearer || tok == "":
		return h.authError("Authentication credentials not found. This API supports OAuth 2.0 authentication and you can find more details at https://developers.hubspot.com/docs/methods/auth/oauth-overview"), false
	case h.cfg.Token != "" && tok != h.cfg.Token:
		return h.authError("Authentication credentials not valid"), false
	}
	if h.cfg.RateLimit <= 0 {
		return fault.Response{}, true
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.now()
	from := now.Add(-h.cfg.RateWindow)
	i := 0
	for i < len(h.recent) && !h.recent[i].After(from) {
		i++
	}
	h.recent = h.recent[i:]
	if len(h.recent) >= h.cfg.RateLimit {
		wait := h.recent[0].Add(h.cfg.RateWindow).Sub(now)
		secs := max(1, int((wait+time.Second-1)/time.Second))
		h.corr++
		resp := fakehttp.JSON(http.StatusTooManyRequests, "", map[string]any{
			"status": "error", "message": "You have reached your ten_secondly_rolling limit.",
			"errorType": "RATE_LIMIT", "correlationId": h.correlation(), "policyName": "TEN_SECONDLY_ROLLING",
			"groupName": "publicapi:private-app-api-calls-ten-secondly:fake",
		})
		resp.Header.Set("Retry-After", strconv.Itoa(secs))
		h.limitHeaders(resp.Header, 0)
		return resp, false
	}
	h.recent = append(h.recent, now)
	h.limitHeaders(w.Header(), h.cfg.RateLimit-len(h.recent))
	return fault.Response{}, true
}

func (h *Handler) limitHeaders(hd http.Header, remaining int) {
	hd.Set("X-HubSpot-RateLimit-Max", strconv.Itoa(h.cfg.RateLimit))
	hd.Set("X-HubSpot-RateLimit-Remaining", strconv.Itoa(remaining))
	hd.Set("X-HubSpot-RateLimit-Interval-Milliseconds", strconv.FormatInt(h.cfg.RateWindow.Milliseconds(), 10))
}

// correlation returns a correlation id; h.mu is held or the caller owns
// h.corr.
func (h *Handler) correlation() string {
	return fmt.Sprintf("00000000-0000-4000-8000-%012d", h.corr)
}

type errDetail struct {
	Message string              `json:"message"`
	Code    string              `json:"code,omitempty"`
	Context map[string][]string `json:"context,omitempty"`
}

func (h *Handler) errorResp(status int, category, message string, details []errDetail) fault.Response {
	h.corr++
	body := map[string]any{"status": "error", "message": message, "correlationId": h.correlation(), "category": category}
	if len(details) > 0 {
		body["errors"] = details
	}
	return fakehttp.JSON(status, "", body)
}

func (h *Handler) authError(msg string) fault.Response {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.errorResp(http.StatusUnauthorized, "INVALID_AUTHENTICATION", msg, nil)
}

func (h *Handler) notModelled(what string) fault.Response {
	return fakehttp.JSON(http.StatusNotImplemented, "", map[string]any{
		"status": "error", "category": "NOT_MODELLED",
		"message": "hubspotfake: the fake does not model " + what,
	})
}

func (h *Handler) faultError(status int, message string) fault.Response {
	h.mu.Lock()
	defer h.mu.Unlock()
	category := "INTERNAL_ERROR"
	if status == http.StatusTooManyRequests {
		category = "RATE_LIMITS"
	}
	return h.errorResp(status, category, message, nil)
}

func (h *Handler) validation(message string, details ...errDetail) fault.Response {
	return h.errorResp(http.StatusBadRequest, "VALIDATION_ERROR", message, details)
}

// ServeHTTP serves the fake API.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

// Journal returns the effects committed so far.
func (h *Handler) Journal() []fakes.Effect { return h.journal.Snapshot() }

// Reset forgets every record and effect, restarts ids and clears the
// fault rules and the rate window (the fault log is kept).
func (h *Handler) Reset() {
	h.mu.Lock()
	h.reset()
	h.mu.Unlock()
	h.journal.Reset()
	h.Faults.Clear()
}

// checkQuery refuses query parameters outside allowed.
func (h *Handler) checkQuery(r *http.Request, allowed ...string) (fault.Response, bool) {
	for k := range r.URL.Query() {
		if !slices.Contains(allowed, k) {
			return h.notModelled("the query parameter " + strconv.Quote(k) + " on " + r.Method + " " + r.URL.Path), false
		}
	}
	return fault.Response{}, true
}

// decode reads body strictly; a field outside v is not modelled.
func (h *Handler) decode(body []byte, v any) (fault.Response, bool) {
	if err := fakehttp.StrictJSON(body, v); err != nil {
		if strings.Contains(err.Error(), "unknown field") {
			return h.notModelled("the body field in " + err.Error()), false
		}
		return h.validation("Invalid input JSON on line 1: " + err.Error()), false
	}
	return fault.Response{}, true
}

// checkProps validates properties written to t.
func (h *Handler) checkProps(t *objectType, typ string, props map[string]string) (fault.Response, bool) {
	var unknown []string
	for k := range props {
		if _, ok := t.props[k]; !ok {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		d := make([]errDetail, len(unknown))
		for i, k := range unknown {
			d[i] = errDetail{Message: fmt.Sprintf("Property %q does not exist", k), Code: "PROPERTY_DOESNT_EXIST", Context: map[string][]string{"propertyName": {k}}}
		}
		return h.validation("Property values were not valid", d...), false
	}
	if e, ok := props["email"]; ok && typ == "contacts" && e != "" {
		if a, err := mail.ParseAddress(e); err != nil || a.Address != e {
			return h.validation("Property values were not valid", errDetail{Message: "Email address " + e + " is invalid", Code: "INVALID_EMAIL", Context: map[string][]string{"propertyName": {"email"}}}), false
		}
	}
	if a, ok := props["amount"]; ok && typ == "deals" && a != "" {
		if _, err := strconv.ParseFloat(a, 64); err != nil {
			return h.validation("Property values were not valid", errDetail{Message: fmt.Sprintf("%q is not a valid decimal", a), Code: "INVALID_DECIMAL", Context: map[string][]string{"propertyName": {"amount"}}}), false
		}
	}
	return fault.Response{}, true
}

// conflict reports a unique value of props held by a record other than
// self.
// conflictResp is HubSpot's 409 when another record of type typ holds a
// unique value: for contacts (their email) HubSpot's own text, "Contact
// already exists. Existing ID: N", which clients parse for the id.
func (h *Handler) conflictResp(typ, name string, other *Record) fault.Response {
	msg := fmt.Sprintf("%s already has that value. Existing ID: %s", name, other.ID)
	if typ == "contacts" {
		msg = "Contact already exists. Existing ID: " + other.ID
	}
	return h.errorResp(http.StatusConflict, "CONFLICT", msg, nil)
}

func conflict(t *objectType, props map[string]string, self *Record) (string, *Record) {
	for name, idx := range t.unique {
		if v := props[name]; v != "" {
			if other, ok := idx[v]; ok && other != self {
				return name, other
			}
		}
	}
	return "", nil
}

func (h *Handler) newRecord(t *objectType, typ string, now time.Time) *Record {
	h.nextID++
	id := strconv.FormatInt(h.nextID, 10)
	ts := fakehttp.Timestamp(now)
	rec := &Record{ID: id, Properties: map[string]string{"hs_object_id": id}, CreatedAt: ts, UpdatedAt: ts}
	if typ == "contacts" {
		rec.Properties["createdate"] = ts
	} else {
		rec.Properties["hs_createdate"] = ts
	}
	rec.Properties["lastmodifieddate"] = ts
	t.byID[id] = rec
	return rec
}

// write sets props on rec, keeping the unique indexes, and reports whether
// anything changed.
func write(t *objectType, rec *Record, props map[string]string, now time.Time) bool {
	changed := false
	for k, v := range props {
		if old, ok := rec.Properties[k]; ok && old == v {
			continue
		}
		if idx, ok := t.unique[k]; ok {
			delete(idx, rec.Properties[k])
			if v != "" {
				idx[v] = rec
			}
		}
		rec.Properties[k] = v
		changed = true
	}
	if changed {
		rec.UpdatedAt = fakehttp.Timestamp(now)
		rec.Properties["lastmodifieddate"] = rec.UpdatedAt
	}
	return changed
}

func (h *Handler) record(kind string, rec *Record, key string, now time.Time) {
	params := map[string]string{}
	for k, v := range rec.Properties {
		switch k {
		case "hs_object_id", "createdate", "hs_createdate", "lastmodifieddate":
		default:
			params[k] = v
		}
	}
	h.journal.Append(fakes.Effect{Kind: kind, ID: rec.ID, Key: key, Params: params, At: now})
}

type propsBody struct {
	Properties   map[string]string `json:"properties"`
	Associations []json.RawMessage `json:"associations,omitempty"`
}

func (h *Handler) create(r *http.Request, t *objectType, body []byte) fault.Response {
	if resp, ok := h.checkQuery(r); !ok {
		return resp
	}
	var in propsBody
	if resp, ok := h.decode(body, &in); !ok {
		return resp
	}
	if len(in.Associations) > 0 {
		return h.notModelled("associations")
	}
	typ := r.PathValue("type")
	if resp, ok := h.checkProps(t, typ, in.Properties); !ok {
		return resp
	}
	if name, other := conflict(t, in.Properties, nil); other != nil {
		return h.conflictResp(r.PathValue("type"), name, other)
	}
	now := h.now()
	rec := h.newRecord(t, typ, now)
	write(t, rec, in.Properties, now)
	h.record(KindCreate, rec, rec.Properties[OncelyProperty], now)
	return fakehttp.JSON(http.StatusCreated, "", rec)
}

type upsertInput struct {
	IDProperty         string            `json:"idProperty"`
	ID                 string            `json:"id"`
	Properties         map[string]string `json:"properties"`
	ObjectWriteTraceID string            `json:"objectWriteTraceId,omitempty"`
}

func (h *Handler) upsert(r *http.Request, t *objectType, body []byte) fault.Response {
	if resp, ok := h.checkQuery(r); !ok {
		return resp
	}
	var in struct {
		Inputs []upsertInput `json:"inputs"`
	}
	if resp, ok := h.decode(body, &in); !ok {
		return resp
	}
	typ := r.PathValue("type")
	switch {
	case len(in.Inputs) == 0:
		return h.validation("inputs must not be empty")
	case len(in.Inputs) > MaxBatch:
		return h.validation(fmt.Sprintf("Batch input has %d inputs; the limit is %d", len(in.Inputs), MaxBatch))
	}
	seen := map[string]bool{}
	for _, x := range in.Inputs {
		switch {
		case x.IDProperty == "":
			return h.validation("idProperty is required for upsert")
		case x.ID == "":
			return h.validation("id is required for upsert")
		}
		p, ok := t.props[x.IDProperty]
		if !ok || !p.Unique {
			return h.validation(fmt.Sprintf("%s is not a unique property of %s; upsert needs an idProperty with unique values", x.IDProperty, typ))
		}
		if v, ok := x.Properties[x.IDProperty]; ok && v != x.ID {
			return h.validation(fmt.Sprintf("properties.%s (%s) differs from id (%s)", x.IDProperty, v, x.ID))
		}
		if seen[x.IDProperty+"\x00"+x.ID] {
			return h.validation("Duplicate IDs found in batch input: " + x.ID)
		}
		seen[x.IDProperty+"\x00"+x.ID] = true
		if resp, ok := h.checkProps(t, typ, x.Properties); !ok {
			return resp
		}
	}
	for _, x := range in.Inputs {
		props := maps.Clone(x.Properties)
		if props == nil {
			props = map[string]string{}
		}
		props[x.IDProperty] = x.ID
		self := t.unique[x.IDProperty][x.ID]
		if name, other := conflict(t, props, self); other != nil {
			return h.conflictResp(r.PathValue("type"), name, other)
		}
	}
	started := h.now()
	out := struct {
		Status      string         `json:"status"`
		Results     []upsertResult `json:"results"`
		StartedAt   string         `json:"startedAt"`
		CompletedAt string         `json:"completedAt"`
	}{Status: "COMPLETE", StartedAt: fakehttp.Timestamp(started)}
	for _, x := range in.Inputs {
		now := h.now()
		props := maps.Clone(x.Properties)
		if props == nil {
			props = map[string]string{}
		}
		props[x.IDProperty] = x.ID
		rec, existed := t.unique[x.IDProperty][x.ID]
		if !existed {
			rec = h.newRecord(t, typ, now)
		}
		if write(t, rec, props, now) {
			h.record(KindUpsert, rec, x.ID, now)
		}
		out.Results = append(out.Results, upsertResult{Record: *project(rec, nil), New: !existed})
	}
	out.CompletedAt = fakehttp.Timestamp(h.now())
	return fakehttp.JSON(http.StatusOK, "", out)
}

// lookup finds the record {id} names, by hs_object_id or by idProperty.
func (h *Handler) lookup(r *http.Request, t *objectType) (*Record, fault.Response, bool) {
	id, idProp := r.PathValue("id"), r.URL.Query().Get("idProperty")
	if idProp == "" || idProp == "hs_object_id" {
		if rec, ok := t.byID[id]; ok {
			return rec, fault.Response{}, true
		}
		return nil, h.notFound(), false
	}
	p, ok := t.props[idProp]
	if !ok || !p.Unique {
		return nil, h.validation(idProp + " is not a unique property; it cannot be used as idProperty"), false
	}
	if rec, ok := t.unique[idProp][id]; ok {
		return rec, fault.Response{}, true
	}
	return nil, h.notFound(), false
}

func (h *Handler) notFound() fault.Response {
	return h.errorResp(http.StatusNotFound, "OBJECT_NOT_FOUND", "resource not found", nil)
}

// project copies rec with the properties asked for (nil: all it has).
func project(rec *Record, names []string) *Record {
	cp := *rec
	cp.Properties = map[string]string{}
	for k, v := range rec.Properties {
		switch k {
		case "hs_object_id", "createdate", "hs_createdate", "lastmodifieddate":
			cp.Properties[k] = v
		default:
			if names == nil || slices.Contains(names, k) {
				cp.Properties[k] = v
			}
		}
	}
	return &cp
}

func (h *Handler) get(r *http.Request, t *objectType, _ []byte) fault.Response {
	if resp, ok := h.checkQuery(r, "idProperty", "properties", "archived"); !ok {
		return resp
	}
	q := r.URL.Query()
	if a := q.Get("archived"); a == "true" {
		return h.notModelled("archived records (archived=true)")
	}
	rec, resp, ok := h.lookup(r, t)
	if !ok {
		return resp
	}
	names := defaultRead[r.PathValue("type")]
	if q.Has("properties") {
		names = nil
		for _, v := range q["properties"] {
			for _, n := range strings.Split(v, ",") {
				if n = strings.TrimSpace(n); n != "" {
					names = append(names, n)
				}
			}
		}
		if names == nil {
			names = []string{}
		}
	}
	return fakehttp.JSON(http.StatusOK, "", project(rec, names))
}

func (h *Handler) patch(r *http.Request, t *objectType, body []byte) fault.Response {
	if resp, ok := h.checkQuery(r, "idProperty"); !ok {
		return resp
	}
	var in struct {
		Properties map[string]string `json:"properties"`
	}
	if resp, ok := h.decode(body, &in); !ok {
		return resp
	}
	typ := r.PathValue("type")
	if resp, ok := h.checkProps(t, typ, in.Properties); !ok {
		return resp
	}
	rec, resp, ok := h.lookup(r, t)
	if !ok {
		return resp
	}
	if name, other := conflict(t, in.Properties, rec); other != nil {
		return h.conflictResp(r.PathValue("type"), name, other)
	}
	now := h.now()
	if write(t, rec, in.Properties, now) {
		h.record(KindUpdate, rec, r.PathValue("id"), now)
	}
	return fakehttp.JSON(http.StatusOK, "", project(rec, nil))
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
