// Package slackfake is a fake of the Slack Web API methods that package
// providers/slack and Slack's official clients (slack-go, @slack/web-api)
// use to post a message carrying message metadata and to find it again in
// the channel's history. Slack offers no idempotency: every accepted post
// is one more message.
//
// # What it models
//
//	POST /api/chat.postMessage        channel, text, blocks, metadata, mrkdwn, unfurl_links,
//	                                  unfurl_media, parse, link_names, username, icon_emoji,
//	                                  icon_url → {"ok": true, "channel", "ts", "message"}
//	POST /api/conversations.history   channel, oldest, latest, inclusive, limit, cursor,
//	(or GET)                          include_all_metadata → {"ok": true, "messages" (newest
//	                                  first), "has_more", "pin_count", "response_metadata":
//	                                  {"next_cursor"}}
//
// Parameters come as a form (application/x-www-form-urlencoded, what both
// official clients send), as JSON (application/json, for writes), or in
// the query string. The token comes as the "token" parameter or as
// "Authorization: Bearer"; without one the answer is not_authed, with
// another than Config.Token invalid_auth.
//
// Slack answers errors with HTTP 200 and {"ok": false, "error": code}; the
// fake does the same for: channel_not_found (an unknown channel; history
// needs the channel id, a post also takes the name or #name), no_text
// (neither text nor blocks), msg_too_long (text over 40,000 characters),
// invalid_blocks_format, invalid_metadata_format (metadata that is not a
// JSON object), invalid_metadata_schema (no event_type, or an
// event_payload that is not an object), invalid_limit, invalid_cursor,
// invalid_ts_oldest, invalid_ts_latest. Message timestamps ("ts") are the
// fake clock's time in microseconds, unique and increasing per channel.
// Metadata is returned by history only with include_all_metadata.
//
// Metadata whose event_type is not letters, digits, underscores and
// hyphens (a period, other punctuation) is dropped as Slack drops it: the
// message is posted without it, and the answer carries the warning
// invalid_metadata_schema ("warning" and response_metadata.warnings), so
// a lookup by that metadata never finds the message.
//
// Lag: a message appears in conversations.history Config.HistoryLag after
// it was posted (default 0). Slack does not document a bound; the lag lets
// a test exercise a lookup that must not trust an empty history too soon.
//
// Rate limits, off unless configured, answered HTTP 429 with Retry-After
// and {"ok": false, "error": "ratelimited"}: Config.PostsPerSecond per
// channel for chat.postMessage (Slack: about one per second per channel,
// short bursts allowed) and Config.HistoryPerMinute for
// conversations.history (Slack: Tier 3, 50+ per minute; one per minute for
// apps outside the Marketplace created since 2025, which are also limited
// to Config.HistoryMaxLimit = 15 messages per page).
//
// # What it does not model
//
// Every other method (chat.update, chat.delete, conversations.replies,
// files, users, reactions ...), threads (thread_ts, reply_broadcast),
// attachments, scheduled messages, ephemeral messages, channel membership
// (not_in_channel), archived channels, workspace and user tokens' scopes,
// edits and deletions, text formatting and escaping (text is stored as
// sent), blocks validation beyond being a JSON array, metadata size limits.
// A method or a parameter outside the list above is answered {"ok":
// false, "error": "the fake does not model ... (slackfake)"}, never an
// error code Slack would give. It comes with HTTP 200, like Slack's own
// errors, because both official clients drop the body of any other
// status: so the message reaches whoever uses them.
//
// # Effects
//
// KindMessage for each accepted post, ID "<channel>/<ts>", Key the
// metadata's event_payload[MetadataKeyField] when it is a string.
package slackfake

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"mime"
	"net/http"
	"net/url"
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

// KindMessage is a message posted through chat.postMessage.
const KindMessage = "slack.message"

// MetadataKeyField is the event_payload field the journal reads the key
// from (the field package providers/slack writes).
const MetadataKeyField = "oncely_key"

// MaxTextLen is the longest text chat.postMessage accepts.
const MaxTextLen = 40000

// DefaultChannels are the channels of a fake whose Config names none:
// name → id.
var DefaultChannels = map[string]string{"general": "C0000000001", "alerts": "C0000000002"}

// Config configures a fake. The zero value (or nil) gives the defaults.
type Config struct {
	// Seed seeds random faults, so a run can be replayed.
	Seed int64
	// Clock is the fake's time (default: the system clock): message
	// timestamps, the history lag and the rate limits use it.
	Clock clock.Clock
	// Token, when set, is the only token accepted; otherwise any
	// non-empty one is.
	Token string
	// Channels maps channel names to ids (default DefaultChannels).
	Channels map[string]string
	// HistoryLag is how long after its post a message appears in
	// conversations.history.
	HistoryLag time.Duration
	// PostsPerSecond limits chat.postMessage per channel; 0: no limit.
	PostsPerSecond int
	// HistoryPerMinute limits conversations.history; 0: no limit.
	HistoryPerMinute int
	// HistoryMaxLimit caps the limit parameter of conversations.history
	// (default and Slack's maximum: 999; the default limit is 100 or this
	// cap when smaller).
	HistoryMaxLimit int
}

// Metadata is a message's metadata.
type Metadata struct {
	EventType    string         `json:"event_type"`
	EventPayload map[string]any `json:"event_payload"`
}

// Message is a message as the API returns it.
type Message struct {
	Type     string            `json:"type"`
	Subtype  string            `json:"subtype,omitempty"`
	Text     string            `json:"text"`
	User     string            `json:"user"`
	BotID    string            `json:"bot_id"`
	AppID    string            `json:"app_id"`
	Team     string            `json:"team"`
	TS       string            `json:"ts"`
	Username string            `json:"username,omitempty"`
	Blocks   []json.RawMessage `json:"blocks,omitempty"`
	Metadata *Metadata         `json:"metadata,omitempty"`
}

type stored struct {
	msg Message
	at  time.Time
	us  int64 // ts in microseconds
}

type channel struct {
	id    string
	msgs  []*stored // in post order
	posts []time.Time
}

// Handler is the fake Slack API as an http.Handler.
type Handler struct {
	// Faults decides which requests fail; rules may be added at any time.
	Faults *fault.Injector

	cfg     Config
	now     func() time.Time
	mux     *http.ServeMux
	journal fakes.Journal

	mu       sync.Mutex
	channels map[string]*channel // by id
	names    map[string]string   // name → id
	lastUS   int64
	history  []time.Time
}

// NewHandler returns a fake with empty channels, configured by cfg (nil
// for the defaults).
func NewHandler(cfg *Config) *Handler {
	var c Config
	if cfg != nil {
		c = *cfg
	}
	if c.Channels == nil {
		c.Channels = DefaultChannels
	}
	if c.HistoryMaxLimit <= 0 || c.HistoryMaxLimit > 999 {
		c.HistoryMaxLimit = 999
	}
	h := &Handler{
		Faults: fault.NewInjector(c.Seed),
		cfg:    c,
		now:    fakehttp.Clock(c.Clock),
		mux:    http.NewServeMux(),
	}
	h.reset()
	h.route("POST /api/chat.postMessage", h.post)
	h.route("POST /api/conversations.history", h.historyMethod)
	h.route("GET /api/conversations.history", h.historyMethod)
	h.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		notModelled("the method " + r.Method + " " + r.URL.Path).Write(w)
	})
	return h
}

func (h *Handler) reset() {
	h.channels, h.names = map[string]*channel{}, map[string]string{}
	for name, id := range h.cfg.Channels {
		h.channels[id] = &channel{id: id}
		h.names[name] = id
	}
	h.lastUS, h.history = 0, nil
}

// ServeHTTP serves the fake API.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

// Journal returns the effects committed so far: one per message posted.
func (h *Handler) Journal() []fakes.Effect { return h.journal.Snapshot() }

// Reset forgets every message and effect and clears the fault rules and
// the rate limits' windows (the fault log is kept).
func (h *Handler) Reset() {
	h.mu.Lock()
	h.reset()
	h.mu.Unlock()
	h.journal.Reset()
	h.Faults.Clear()
}

func answer(v map[string]any) fault.Response {
	v["ok"] = true
	return fakehttp.JSON(http.StatusOK, "application/json; charset=utf-8", v)
}

func slackError(code string) fault.Response {
	return fakehttp.JSON(http.StatusOK, "application/json; charset=utf-8", map[string]any{"ok": false, "error": code})
}

func notModelled(what string) fault.Response {
	return fakehttp.JSON(http.StatusOK, "application/json; charset=utf-8", map[string]any{
		"ok": false, "error": "the fake does not model " + what + " (slackfake)",
	})
}

func faultError(status int, message string) fault.Response {
	code := "internal_error"
	if status == http.StatusTooManyRequests {
		code = "ratelimited"
	}
	return fakehttp.JSON(status, "application/json; charset=utf-8", map[string]any{"ok": false, "error": code, "detail": message})
}

func ratelimited(wait time.Duration) fault.Response {
	resp := slackError("ratelimited")
	resp.Status = http.StatusTooManyRequests
	resp.Header.Set("Retry-After", strconv.Itoa(max(1, int((wait+time.Second-1)/time.Second))))
	return resp
}

// params are a request's parameters: strings, or JSON values from a JSON
// body.
type params map[string]any

func (p params) str(k string) string {
	switch v := p[k].(type) {
	case string:
		return v
	case bool:
		return strconv.FormatBool(v)
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	return ""
}

// readParams reads the query string and the form or JSON body.
func readParams(w http.ResponseWriter, r *http.Request) (params, fault.Response, bool) {
	p := params{}
	for k, vs := range r.URL.Query() {
		p[k] = vs[0]
	}
	if r.Method != http.MethodPost {
		return p, fault.Response{}, true
	}
	body, tooLarge, err := fakehttp.ReadBody(w, r)
	switch {
	case tooLarge:
		return nil, slackError("request_too_large"), false
	case err != nil:
		return nil, slackError("request_timeout"), false
	}
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	switch {
	case len(body) == 0:
	case ct == "application/json":
		var m map[string]any
		if json.Unmarshal(body, &m) != nil {
			return nil, slackError("invalid_json"), false
		}
		for k, v := range m {
			p[k] = v
		}
	case ct == "application/x-www-form-urlencoded" || ct == "":
		form, err := url.ParseQuery(string(body))
		if err != nil {
			return nil, slackError("invalid_form_data"), false
		}
		for k, vs := range form {
			p[k] = vs[0]
		}
	default:
		return nil, notModelled("the content type " + strconv.Quote(ct)), false
	}
	return p, fault.Response{}, true
}

// route serves pattern: parameters, the token, the rate limit, then the
// fault injector around fn, which runs with the lock held.
func (h *Handler) route(pattern string, fn func(p params) fault.Response) {
	h.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, fakehttp.MaxBody)
		p, resp, ok := readParams(w, r)
		if !ok {
			resp.Write(w)
			return
		}
		tok := p.str("token")
		if b, isBearer := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); isBearer && b != "" {
			tok = b
		}
		delete(p, "token")
		switch {
		case tok == "":
			slackError("not_authed").Write(w)
			return
		case h.cfg.Token != "" && tok != h.cfg.Token:
			slackError("invalid_auth").Write(w)
			return
		}
		h.Faults.Decide(r).Serve(w, r, faultError, func() fault.Response {
			h.mu.Lock()
			defer h.mu.Unlock()
			return fn(p)
		})
	})
}

// allow refuses parameters outside allowed.
func allow(p params, method string, allowed ...string) (fault.Response, bool) {
	for k := range p {
		if !slices.Contains(allowed, k) {
			return notModelled("the parameter " + strconv.Quote(k) + " of " + method), false
		}
	}
	return fault.Response{}, true
}

func (h *Handler) channel(ref string, byName bool) *channel {
	if c, ok := h.channels[ref]; ok {
		return c
	}
	if byName {
		if id, ok := h.names[strings.TrimPrefix(ref, "#")]; ok {
			return h.channels[id]
		}
	}
	return nil
}

// window drops the times before from and returns the rest.
func window(ts []time.Time, from time.Time) []time.Time {
	i := 0
	for i < len(ts) && !ts[i].After(from) {
		i++
	}
	return ts[i:]
}

func (h *Handler) post(p params) fault.Response {
	if resp, ok := allow(p, "chat.postMessage", "channel", "text", "blocks", "metadata", "mrkdwn", "unfurl_links",
		"unfurl_media", "parse", "link_names", "username", "icon_emoji", "icon_url"); !ok {
		return resp
	}
	ch := h.channel(p.str("channel"), true)
	if ch == nil {
		return slackError("channel_not_found")
	}
	text := p.str("text")
	var blocks []json.RawMessage
	if b, ok := p["blocks"]; ok {
		raw, isStr := b.(string)
		if !isStr {
			enc, _ := json.Marshal(b)
			raw = string(enc)
		}
		if json.Unmarshal([]byte(raw), &blocks) != nil {
			return slackError("invalid_blocks_format")
		}
	}
	switch {
	case text == "" && len(blocks) == 0:
		return slackError("no_text")
	case len([]rune(text)) > MaxTextLen:
		return slackError("msg_too_long")
	}
	var md *Metadata
	warning := ""
	if m, ok := p["metadata"]; ok {
		raw, isStr := m.(string)
		if !isStr {
			enc, _ := json.Marshal(m)
			raw = string(enc)
		}
		var obj map[string]json.RawMessage
		if json.Unmarshal([]byte(raw), &obj) != nil {
			return slackError("invalid_metadata_format")
		}
		md = &Metadata{}
		if json.Unmarshal(obj["event_type"], &md.EventType) != nil || md.EventType == "" ||
			json.Unmarshal(obj["event_payload"], &md.EventPayload) != nil || md.EventPayload == nil {
			return slackError("invalid_metadata_schema")
		}
		if !validEventType(md.EventType) {
			md, warning = nil, "invalid_metadata_schema" // posted, without its metadata
		}
	}
	now := h.now()
	if h.cfg.PostsPerSecond > 0 {
		ch.posts = window(ch.posts, now.Add(-time.Second))
		if len(ch.posts) >= h.cfg.PostsPerSecond {
			return ratelimited(ch.posts[0].Add(time.Second).Sub(now))
		}
		ch.posts = append(ch.posts, now)
	}
	us := now.UnixMicro()
	if us <= h.lastUS {
		us = h.lastUS + 1
	}
	h.lastUS = us
	s := &stored{at: now, us: us, msg: Message{
		Type: "message", Text: text, User: "U0FAKEBOT1", BotID: "B0FAKEBOT1", AppID: "A0FAKEAPP1", Team: "T0FAKETEAM",
		TS: formatTS(us), Username: p.str("username"), Blocks: blocks, Metadata: md,
	}}
	ch.msgs = append(ch.msgs, s)
	params := map[string]string{"channel": ch.id, "text": text}
	key := ""
	if md != nil {
		params["metadata.event_type"] = md.EventType
		for k, v := range md.EventPayload {
			params["metadata.event_payload."+k] = fmt.Sprint(v)
		}
		key, _ = md.EventPayload[MetadataKeyField].(string)
	}
	h.journal.Append(fakes.Effect{Kind: KindMessage, ID: ch.id + "/" + s.msg.TS, Key: key, Params: params, At: now})
	out := map[string]any{"channel": ch.id, "ts": s.msg.TS, "message": s.msg}
	if warning != "" {
		out["warning"] = warning
		out["response_metadata"] = map[string]any{"warnings": []string{warning}}
	}
	return answer(out)
}

// validEventType reports whether Slack keeps metadata of event type t:
// letters, digits, underscores and hyphens, "but not periods or other
// punctuation" (Slack's message metadata guide).
func validEventType(t string) bool {
	for _, r := range t {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return false
		}
	}
	return t != ""
}

func formatTS(us int64) string { return fmt.Sprintf("%d.%06d", us/1e6, us%1e6) }

// parseTS reads a Slack timestamp ("1700000000.000100", or whole seconds)
// as microseconds.
func parseTS(s string) (int64, bool) {
	secs, frac, _ := strings.Cut(s, ".")
	n, err := strconv.ParseInt(secs, 10, 64)
	if err != nil || n < 0 || len(frac) > 6 {
		return 0, false
	}
	us := n * 1e6
	if frac != "" {
		f, err := strconv.ParseInt(frac+strings.Repeat("0", 6-len(frac)), 10, 64)
		if err != nil || f < 0 {
			return 0, false
		}
		us += f
	}
	return us, true
}

func flag(p params, k string) bool {
	switch strings.ToLower(p.str(k)) {
	case "1", "true":
		return true
	}
	return false
}

func (h *Handler) historyMethod(p params) fault.Response {
	if resp, ok := allow(p, "conversations.history", "channel", "oldest", "latest", "inclusive", "limit", "cursor", "include_all_metadata"); !ok {
		return resp
	}
	ch := h.channel(p.str("channel"), false)
	if ch == nil {
		return slackError("channel_not_found")
	}
	now := h.now()
	oldest, latest := int64(0), int64(math.MaxInt64)
	if s := p.str("oldest"); s != "" {
		v, ok := parseTS(s)
		if !ok {
			return slackError("invalid_ts_oldest")
		}
		oldest = v
	}
	if s := p.str("latest"); s != "" {
		v, ok := parseTS(s)
		if !ok {
			return slackError("invalid_ts_latest")
		}
		latest = v
	}
	limit := min(100, h.cfg.HistoryMaxLimit)
	if s := p.str("limit"); s != "" && s != "0" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return slackError("invalid_limit")
		}
		limit = min(n, h.cfg.HistoryMaxLimit)
	}
	// The cursor is the ts (microseconds) below which the next page starts.
	below := int64(-1)
	if c := p.str("cursor"); c != "" {
		raw, err := base64.StdEncoding.DecodeString(c)
		v, cut := strings.CutPrefix(string(raw), "next_ts:")
		n, perr := strconv.ParseInt(v, 10, 64)
		if err != nil || !cut || perr != nil {
			return slackError("invalid_cursor")
		}
		below = n
	}
	if h.cfg.HistoryPerMinute > 0 {
		h.history = window(h.history, now.Add(-time.Minute))
		if len(h.history) >= h.cfg.HistoryPerMinute {
			return ratelimited(h.history[0].Add(time.Minute).Sub(now))
		}
		h.history = append(h.history, now)
	}
	inclusive, meta := flag(p, "inclusive"), flag(p, "include_all_metadata")
	visibleUntil := now.Add(-h.cfg.HistoryLag)
	msgs := []Message{}
	hasMore, next := false, ""
	for i := len(ch.msgs) - 1; i >= 0; i-- {
		s := ch.msgs[i]
		in := s.us > oldest && s.us < latest || inclusive && (s.us == oldest || s.us == latest)
		if !in || s.at.After(visibleUntil) || below >= 0 && s.us >= below {
			continue
		}
		if len(msgs) == limit {
			hasMore = true
			break
		}
		m := s.msg
		if !meta {
			m.Metadata = nil
		}
		msgs = append(msgs, m)
	}
	if hasMore {
		last, _ := parseTS(msgs[len(msgs)-1].TS)
		next = base64.StdEncoding.EncodeToString([]byte("next_ts:" + strconv.FormatInt(last, 10)))
	}
	return answer(map[string]any{"messages": msgs, "has_more": hasMore, "pin_count": 0,
		"response_metadata": map[string]string{"next_cursor": next}})
}

// Server is a Handler listening on a loopback address, like
// httptest.Server: URL is its base URL, Close shuts it down and Client
// returns an HTTP client for it (fakes.Listener). Clients take URL +
// "/api/" as their API URL.
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
