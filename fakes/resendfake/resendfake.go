package resendfake

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/mail"
	"regexp"
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

// KindEmail is the kind of the journal's effects: one email sent.
const KindEmail = "email"

// DefaultKeyWindow is how long Resend keeps an idempotency key.
const DefaultKeyWindow = 24 * time.Hour

// Limits Resend documents.
const (
	MaxKeyLength  = 256
	MaxRecipients = 50
	MaxTagLength  = 256
)

// Config configures a fake. The zero value (or nil) gives the defaults.
type Config struct {
	// Seed seeds email ids and random faults, so a run can be replayed.
	Seed int64
	// Clock is the fake's time (default: the system clock); creation
	// times, key expiry and the rate limit use it.
	Clock clock.Clock
	// KeyWindow is how long idempotency keys are kept (default 24 h).
	KeyWindow time.Duration
	// RateLimit, when positive, is how many requests each API key may
	// make per second of Clock; 0 turns the limit off.
	RateLimit int
}

// Tag is a name and value attached to an email.
type Tag struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// Email is an email as the API returns it.
type Email struct {
	Object    string   `json:"object"`
	ID        string   `json:"id"`
	To        []string `json:"to"`
	From      string   `json:"from"`
	CreatedAt string   `json:"created_at"`
	Subject   string   `json:"subject"`
	HTML      *string  `json:"html,omitempty"`
	Text      *string  `json:"text,omitempty"`
	Cc        []string `json:"cc,omitempty"`
	Bcc       []string `json:"bcc,omitempty"`
	ReplyTo   []string `json:"reply_to,omitempty"`
	LastEvent string   `json:"last_event"`
	Tags      []Tag    `json:"tags"`
}

// Error is the body of every error answer.
type Error struct {
	StatusCode int    `json:"statusCode"`
	Name       string `json:"name"`
	Message    string `json:"message"`
}

type keyEntry struct {
	fingerprint string
	at          time.Time
	done        bool
	resp        fault.Response
}

type stored struct {
	email Email
	seq   int
}

// Handler is the fake API as an http.Handler.
type Handler struct {
	// Faults decides which requests fail; rules may be added at any time.
	Faults *fault.Injector

	cfg     Config
	now     func() time.Time
	mux     *http.ServeMux
	ids     *fakehttp.IDs
	journal fakes.Journal

	mu     sync.Mutex
	emails []*stored // oldest first
	byID   map[string]*stored
	keys   map[string]*keyEntry
	window map[string]rateWindow // by API key
}

type rateWindow struct {
	second int64
	used   int
}

// NewHandler returns a fake with no emails, configured by cfg (nil for the
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
		byID:   map[string]*stored{},
		keys:   map[string]*keyEntry{},
		window: map[string]rateWindow{},
	}
	h.mux.HandleFunc("POST /emails", h.guard(h.send))
	h.mux.HandleFunc("GET /emails", h.guard(h.serve(h.list)))
	h.mux.HandleFunc("GET /emails/{email_id}", h.guard(h.serve(h.retrieve)))
	h.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		notModeled("the route " + r.Method + " " + r.URL.Path).Write(w)
	})
	return h
}

// ServeHTTP serves the fake API.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

// Journal returns the effects committed so far: one per email sent.
func (h *Handler) Journal() []fakes.Effect { return h.journal.Snapshot() }

// Reset forgets every email, key, rate window and effect, restarts ids from
// the seed and clears the fault rules (the fault log is kept).
func (h *Handler) Reset() {
	h.mu.Lock()
	h.emails, h.byID = nil, map[string]*stored{}
	h.keys, h.window = map[string]*keyEntry{}, map[string]rateWindow{}
	h.mu.Unlock()
	h.journal.Reset()
	h.ids.Reset()
	h.Faults.Clear()
}

func errorResp(status int, name, message string) fault.Response {
	return fakehttp.JSON(status, "", Error{StatusCode: status, Name: name, Message: message})
}

// notModeled answers what Resend has and the fake does not model.
func notModeled(what string) fault.Response {
	return errorResp(http.StatusNotImplemented, "not_modeled",
		"resendfake does not model "+what+": the fake cannot tell what Resend would answer.")
}

func faultError(status int, message string) fault.Response {
	name := "application_error"
	switch status {
	case http.StatusTooManyRequests:
		name = "rate_limit_exceeded"
	case http.StatusServiceUnavailable:
		name = "service_unavailable"
	}
	return errorResp(status, name, message)
}

// guard authenticates the request and applies the rate limit before fn.
func (h *Handler) guard(fn http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		auth := r.Header.Get("Authorization")
		if auth == "" {
			errorResp(http.StatusUnauthorized, "missing_api_key", "Missing API key in the authorization header. Include the following header in the request: Authorization: Bearer YOUR_API_KEY").Write(w)
			return
		}
		key, ok := strings.CutPrefix(auth, "Bearer ")
		if !ok || !strings.HasPrefix(key, "re_") || len(key) < 4 {
			errorResp(http.StatusForbidden, "invalid_api_key", "API key is invalid").Write(w)
			return
		}
		if resp, limited := h.rateLimit(w, key); limited {
			resp.Write(w)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, fakehttp.MaxBody)
		fn(w, r)
	}
}

// rateLimit counts the request against key's window of one second and,
// as Resend does on every response, sets the ratelimit-* headers on w.
func (h *Handler) rateLimit(w http.ResponseWriter, key string) (fault.Response, bool) {
	if h.cfg.RateLimit <= 0 {
		return fault.Response{}, false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.now()
	sec := now.Unix()
	win := h.window[key]
	if win.second != sec {
		win = rateWindow{second: sec}
	}
	reset := time.Unix(sec+1, 0).Sub(now)
	resetSecs := strconv.Itoa(int((reset + time.Second - 1) / time.Second))
	if win.used >= h.cfg.RateLimit {
		resp := errorResp(http.StatusTooManyRequests, "rate_limit_exceeded",
			fmt.Sprintf("Too many requests. You can only make %d requests per second. See rate limit response headers for more information. Or contact support to increase rate limit.", h.cfg.RateLimit))
		resp.Header.Set("ratelimit-limit", strconv.Itoa(h.cfg.RateLimit))
		resp.Header.Set("ratelimit-remaining", "0")
		resp.Header.Set("ratelimit-reset", resetSecs)
		resp.Header.Set("retry-after", resetSecs)
		return resp, true
	}
	win.used++
	h.window[key] = win
	hd := w.Header()
	hd.Set("ratelimit-limit", strconv.Itoa(h.cfg.RateLimit))
	hd.Set("ratelimit-remaining", strconv.Itoa(h.cfg.RateLimit-win.used))
	hd.Set("ratelimit-reset", resetSecs)
	return fault.Response{}, false
}

// serve runs a read-only route through the fault injector.
func (h *Handler) serve(fn func(r *http.Request) fault.Response) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		h.Faults.Decide(r).Serve(w, r, faultError, func() fault.Response { return fn(r) })
	}
}

func (h *Handler) retrieve(r *http.Request) fault.Response {
	h.mu.Lock()
	defer h.mu.Unlock()
	e, ok := h.byID[r.PathValue("email_id")]
	if !ok {
		return errorResp(http.StatusNotFound, "not_found", "Email not found")
	}
	return fakehttp.JSON(http.StatusOK, "", e.email)
}

func (h *Handler) list(r *http.Request) fault.Response {
	q := r.URL.Query()
	for k := range q {
		if k != "limit" && k != "after" && k != "before" {
			return notModeled("the query parameter " + k + " of GET /emails")
		}
	}
	limit := 20
	if v := q.Get("limit"); q.Has("limit") {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			return errorResp(http.StatusUnprocessableEntity, "validation_error", "The `limit` parameter must be an integer between 1 and 100.")
		}
		limit = n
	}
	if q.Has("after") && q.Has("before") {
		return errorResp(http.StatusUnprocessableEntity, "validation_error", "You can only use one of `after` or `before` parameters.")
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	// Newest first: index i of the view is h.emails[len-1-i].
	n := len(h.emails)
	start, end := 0, n // in the newest-first view
	switch {
	case q.Get("after") != "":
		e, ok := h.byID[q.Get("after")]
		if !ok {
			return errorResp(http.StatusNotFound, "not_found", "The `after` cursor does not name an email")
		}
		start = n - e.seq // the one after e in the newest-first view
	case q.Get("before") != "":
		e, ok := h.byID[q.Get("before")]
		if !ok {
			return errorResp(http.StatusNotFound, "not_found", "The `before` cursor does not name an email")
		}
		end = n - 1 - e.seq
		start = max(end-limit, 0)
	}
	out := struct {
		Object  string  `json:"object"`
		HasMore bool    `json:"has_more"`
		Data    []Email `json:"data"`
	}{Object: "list", Data: []Email{}}
	for i := start; i < end && len(out.Data) < limit; i++ {
		out.Data = append(out.Data, h.emails[n-1-i].email)
	}
	if q.Get("before") != "" {
		out.HasMore = start > 0
	} else {
		out.HasMore = start+len(out.Data) < end
	}
	return fakehttp.JSON(http.StatusOK, "", out)
}

// sendRequest is the body of POST /emails; to, cc, bcc and reply_to are a
// string or a list of strings.
type sendRequest struct {
	From    *string           `json:"from"`
	To      json.RawMessage   `json:"to"`
	Subject *string           `json:"subject"`
	Cc      json.RawMessage   `json:"cc"`
	Bcc     json.RawMessage   `json:"bcc"`
	ReplyTo json.RawMessage   `json:"reply_to"`
	HTML    *string           `json:"html"`
	Text    *string           `json:"text"`
	Tags    []Tag             `json:"tags"`
	Headers map[string]string `json:"headers"`
}

// modeledFields are the send fields the fake models; notModeledFields
// are Resend's others.
var (
	modeledFields    = []string{"from", "to", "subject", "cc", "bcc", "reply_to", "html", "text", "tags", "headers"}
	notModeledFields = []string{"attachments", "template", "scheduled_at", "topic_id", "react"}
)

var tagRE = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

func invalid(msg string) fault.Response {
	return errorResp(http.StatusUnprocessableEntity, "validation_error", msg)
}

func missing(field string) fault.Response {
	return errorResp(http.StatusUnprocessableEntity, "missing_required_field", "Missing `"+field+"` field.")
}

// validAddress reports whether s is "addr@domain" or "Name <addr@domain>".
func validAddress(s string) bool {
	a, err := mail.ParseAddress(s)
	return err == nil && len(a.Address) <= 254 && strings.Contains(a.Address, "@")
}

// addresses reads a string or a list of strings of valid addresses.
func addresses(field string, raw json.RawMessage, required bool) ([]string, *fault.Response) {
	fail := func(r fault.Response) ([]string, *fault.Response) { return nil, &r }
	if len(raw) == 0 || string(raw) == "null" {
		if required {
			return fail(missing(field))
		}
		return nil, nil
	}
	var list []string
	var one string
	if err := json.Unmarshal(raw, &one); err == nil {
		list = []string{one}
	} else if err := json.Unmarshal(raw, &list); err != nil {
		return fail(invalid("The `" + field + "` field must be a string or an array of strings."))
	}
	if required && (len(list) == 0 || list[0] == "") {
		return fail(missing(field))
	}
	if len(list) > MaxRecipients {
		return fail(invalid(fmt.Sprintf("The `%s` field must have at most %d addresses.", field, MaxRecipients)))
	}
	for _, a := range list {
		if !validAddress(a) {
			return fail(invalid("Invalid `" + field + "` field. The email address needs to follow the `email@example.com` or `Name <email@example.com>` format."))
		}
	}
	return list, nil
}

// decodeSend reads and validates the send request; fingerprint is the
// canonical encoding of the JSON value.
func decodeSend(w http.ResponseWriter, r *http.Request) (Email, string, fault.Response, bool) {
	body, tooLarge, err := fakehttp.ReadBody(w, r)
	if tooLarge {
		return Email{}, "", errorResp(http.StatusRequestEntityTooLarge, "validation_error", "The request body is larger than 1 MiB."), false
	}
	var generic map[string]json.RawMessage
	if err == nil {
		err = json.Unmarshal(body, &generic)
	}
	if err != nil || generic == nil {
		return Email{}, "", errorResp(http.StatusBadRequest, "validation_error", "The body must be a JSON object."), false
	}
	fields := make([]string, 0, len(generic))
	for k := range generic {
		fields = append(fields, k)
	}
	slices.Sort(fields)
	for _, k := range fields {
		switch {
		case slices.Contains(notModeledFields, k):
			return Email{}, "", notModeled("the field `" + k + "` of POST /emails"), false
		case !slices.Contains(modeledFields, k):
			return Email{}, "", notModeled("the field `" + k + "` of POST /emails, which Resend's description does not list"), false
		}
	}
	var req sendRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return Email{}, "", invalid("Invalid field types: " + err.Error()), false
	}
	if req.From == nil || *req.From == "" {
		return Email{}, "", missing("from"), false
	}
	if !validAddress(*req.From) {
		return Email{}, "", invalid("Invalid `from` field. The email address needs to follow the `email@example.com` or `Name <email@example.com>` format."), false
	}
	to, bad := addresses("to", req.To, true)
	if bad != nil {
		return Email{}, "", *bad, false
	}
	if req.Subject == nil {
		return Email{}, "", missing("subject"), false
	}
	e := Email{Object: "email", To: to, From: *req.From, Subject: *req.Subject, HTML: req.HTML, Text: req.Text, LastEvent: "sent", Tags: []Tag{}}
	for _, f := range []struct {
		name string
		raw  json.RawMessage
		dst  *[]string
	}{{"cc", req.Cc, &e.Cc}, {"bcc", req.Bcc, &e.Bcc}, {"reply_to", req.ReplyTo, &e.ReplyTo}} {
		list, bad := addresses(f.name, f.raw, false)
		if bad != nil {
			return Email{}, "", *bad, false
		}
		*f.dst = list
	}
	for _, t := range req.Tags {
		if !tagRE.MatchString(t.Name) || len(t.Name) > MaxTagLength {
			return Email{}, "", invalid("Invalid tag name `" + t.Name + "`: it can only contain ASCII letters (a–z, A–Z), numbers (0–9), underscores (_), or dashes (-), and at most 256 characters."), false
		}
		if !tagRE.MatchString(t.Value) || len(t.Value) > MaxTagLength {
			return Email{}, "", invalid("Invalid tag value `" + t.Value + "`: it can only contain ASCII letters (a–z, A–Z), numbers (0–9), underscores (_), or dashes (-), and at most 256 characters."), false
		}
		e.Tags = append(e.Tags, t)
	}
	// Re-encoding the generic value sorts object keys.
	var v any
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	_ = dec.Decode(&v)
	fp, _ := json.Marshal(v)
	return e, string(fp), fault.Response{}, true
}

func (h *Handler) send(w http.ResponseWriter, r *http.Request) {
	d := h.Faults.Decide(r)
	if d.Reject(w, faultError) {
		return
	}
	d.Deliver(w, d.Answer(h.execute(w, r, d), faultError))
}

func (h *Handler) execute(w http.ResponseWriter, r *http.Request, d fault.Decision) fault.Response {
	keys := r.Header.Values("Idempotency-Key")
	key := ""
	if len(keys) > 0 {
		key = keys[0]
		if len(keys) > 1 || key == "" || len(key) > MaxKeyLength {
			return errorResp(http.StatusBadRequest, "invalid_idempotency_key", "The key must be between 1-256 chars.")
		}
	}
	email, fingerprint, resp, ok := decodeSend(w, r)
	if !ok {
		return resp
	}
	if key == "" {
		d.Wait(r.Context())
		return h.commit(d, "", nil, email)
	}
	h.mu.Lock()
	now := h.now()
	e := h.keys[key]
	if e != nil && e.done && now.Sub(e.at) >= h.cfg.KeyWindow {
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
		resp = errorResp(http.StatusConflict, "invalid_idempotent_request", "Same idempotency key used with a different request payload. Change your idempotency key or payload.")
	case !e.done:
		resp = errorResp(http.StatusConflict, "concurrent_idempotent_requests", "Same idempotency key used while original request is still in progress. Try the request again later.")
	default:
		resp = e.resp
	}
	h.mu.Unlock()
	d.Wait(r.Context())
	if !claimed {
		return resp
	}
	return h.commit(d, key, e, email)
}

// commit sends the email and stores the answer under its key, if any.
func (h *Handler) commit(d fault.Decision, key string, e *keyEntry, email Email) fault.Response {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.now()
	email.ID = h.uuid()
	email.CreatedAt = now.UTC().Format("2006-01-02 15:04:05.000000-07")
	s := &stored{email: email, seq: len(h.emails)}
	h.emails = append(h.emails, s)
	h.byID[email.ID] = s
	params := map[string]string{"from": email.From, "to": strings.Join(email.To, ","), "subject": email.Subject}
	for _, t := range email.Tags {
		params["tag."+t.Name] = t.Value
	}
	h.journal.Append(fakes.Effect{Kind: KindEmail, ID: email.ID, Key: key, Params: params, At: now})
	resp := fakehttp.JSON(http.StatusOK, "", map[string]string{"id": email.ID})
	if e != nil && h.keys[key] == e { // else Reset ran meanwhile
		e.done, e.resp = true, resp
		if d.Active && d.Rule.SaveError {
			e.resp = d.Answer(resp, faultError)
		}
	}
	return resp
}

// uuid returns a version-4-shaped UUID drawn from the seeded ids.
func (h *Handler) uuid() string {
	sum := sha256.Sum256([]byte(h.ids.New("", 22)))
	b := sum[:16]
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	x := hex.EncodeToString(b)
	return x[:8] + "-" + x[8:12] + "-" + x[12:16] + "-" + x[16:20] + "-" + x[20:]
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
