package slackfake_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/oncely/oncely/fakes/internal/testutil"
	"github.com/oncely/oncely/fakes/slackfake"
	"github.com/oncely/oncely/internal/nodetools"
)

const (
	token   = "xoxb-test"
	general = "C0000000001"
)

func start(t *testing.T, cfg *slackfake.Config) *slackfake.Server {
	t.Helper()
	if cfg == nil {
		cfg = &slackfake.Config{}
	}
	cfg.Token = token
	s := slackfake.NewServer(cfg)
	t.Cleanup(s.Close)
	return s
}

type reply struct {
	status int
	header http.Header
	body   map[string]any
	raw    string
}

// form calls method with form parameters, as the official clients do.
func form(t *testing.T, s *slackfake.Server, method string, p url.Values) reply {
	t.Helper()
	if !p.Has("token") {
		p.Set("token", token)
	}
	resp, err := s.Client().Post(s.URL+"/api/"+method, "application/x-www-form-urlencoded", strings.NewReader(p.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	r := reply{status: resp.StatusCode, header: resp.Header, raw: string(raw)}
	if err := json.Unmarshal(raw, &r.body); err != nil {
		t.Fatalf("%s: %v: %s", method, err, raw)
	}
	return r
}

func (r reply) err() string { s, _ := r.body["error"].(string); return s }

func post(t *testing.T, s *slackfake.Server, key, text string) reply {
	t.Helper()
	return form(t, s, "chat.postMessage", url.Values{"channel": {general}, "text": {text},
		"metadata": {`{"event_type":"oncely_action","event_payload":{"oncely_key":"` + key + `"}}`}})
}

func TestPostAndHistory(t *testing.T) {
	t.Parallel()
	clk := testutil.NewClock()
	s := start(t, &slackfake.Config{Clock: clk, HistoryLag: 10 * time.Second})
	a := post(t, s, "k1", "one")
	b := post(t, s, "k2", "two")
	if a.status != 200 || a.body["ok"] != true || a.body["channel"] != general || a.body["ts"] == b.body["ts"] {
		t.Fatalf("posts: %s / %s", a.raw, b.raw)
	}
	if a.body["ts"] != "1740830400.000000" || b.body["ts"] != "1740830400.000001" {
		t.Fatalf("timestamps %v %v, want the clock's, unique", a.body["ts"], b.body["ts"])
	}
	h := form(t, s, "conversations.history", url.Values{"channel": {general}, "include_all_metadata": {"true"}})
	if n := len(h.body["messages"].([]any)); n != 0 {
		t.Fatalf("inside the lag: %s", h.raw)
	}
	clk.Advance(10 * time.Second)
	h = form(t, s, "conversations.history", url.Values{"channel": {general}, "include_all_metadata": {"1"}, "limit": {"1"}})
	msgs := h.body["messages"].([]any)
	if len(msgs) != 1 || msgs[0].(map[string]any)["text"] != "two" || h.body["has_more"] != true {
		t.Fatalf("page 1: %s", h.raw)
	}
	cursor := h.body["response_metadata"].(map[string]any)["next_cursor"].(string)
	h = form(t, s, "conversations.history", url.Values{"channel": {general}, "include_all_metadata": {"1"}, "limit": {"1"}, "cursor": {cursor}})
	msgs = h.body["messages"].([]any)
	if len(msgs) != 1 || msgs[0].(map[string]any)["metadata"].(map[string]any)["event_payload"].(map[string]any)["oncely_key"] != "k1" || h.body["has_more"] != false {
		t.Fatalf("page 2: %s", h.raw)
	}
	// Without include_all_metadata no metadata; oldest is exclusive
	// unless inclusive.
	h = form(t, s, "conversations.history", url.Values{"channel": {general}, "oldest": {"1740830400.000000"}})
	if msgs = h.body["messages"].([]any); len(msgs) != 1 || msgs[0].(map[string]any)["metadata"] != nil {
		t.Fatalf("oldest exclusive: %s", h.raw)
	}
	h = form(t, s, "conversations.history", url.Values{"channel": {general}, "oldest": {"1740830400.000000"}, "inclusive": {"1"}})
	if len(h.body["messages"].([]any)) != 2 {
		t.Fatalf("oldest inclusive: %s", h.raw)
	}
	j := s.Journal()
	if len(j) != 2 || j[0].Kind != slackfake.KindMessage || j[0].Key != "k1" || j[0].ID != general+"/1740830400.000000" || j[0].Params["text"] != "one" {
		t.Fatalf("journal %+v", j)
	}
}

func TestValidation(t *testing.T) {
	t.Parallel()
	s := start(t, nil)
	for _, tc := range []struct {
		name, method string
		p            url.Values
		status       int
		err          string
	}{
		{"no token", "chat.postMessage", url.Values{"token": {""}, "channel": {general}, "text": {"x"}}, 200, "not_authed"},
		{"other token", "chat.postMessage", url.Values{"token": {"xoxb-other"}, "channel": {general}, "text": {"x"}}, 200, "invalid_auth"},
		{"unknown channel", "chat.postMessage", url.Values{"channel": {"C404"}, "text": {"x"}}, 200, "channel_not_found"},
		{"no text", "chat.postMessage", url.Values{"channel": {general}}, 200, "no_text"},
		{"too long", "chat.postMessage", url.Values{"channel": {general}, "text": {strings.Repeat("x", slackfake.MaxTextLen+1)}}, 200, "msg_too_long"},
		{"bad blocks", "chat.postMessage", url.Values{"channel": {general}, "blocks": {"{"}}, 200, "invalid_blocks_format"},
		{"bad metadata", "chat.postMessage", url.Values{"channel": {general}, "text": {"x"}, "metadata": {"[]"}}, 200, "invalid_metadata_format"},
		{"metadata schema", "chat.postMessage", url.Values{"channel": {general}, "text": {"x"}, "metadata": {`{"event_type":"t","event_payload":3}`}}, 200, "invalid_metadata_schema"},
		{"history by name", "conversations.history", url.Values{"channel": {"general"}}, 200, "channel_not_found"},
		{"bad limit", "conversations.history", url.Values{"channel": {general}, "limit": {"x"}}, 200, "invalid_limit"},
		{"bad cursor", "conversations.history", url.Values{"channel": {general}, "cursor": {"zz"}}, 200, "invalid_cursor"},
		{"bad oldest", "conversations.history", url.Values{"channel": {general}, "oldest": {"yesterday"}}, 200, "invalid_ts_oldest"},
		{"unmodelled method", "chat.update", url.Values{"channel": {general}}, 200, "the fake does not model"},
		{"unmodelled parameter", "chat.postMessage", url.Values{"channel": {general}, "text": {"x"}, "thread_ts": {"1.2"}}, 200, "the fake does not model"},
		{"unmodelled history parameter", "conversations.history", url.Values{"channel": {general}, "include_pin_count": {"1"}}, 200, "the fake does not model"},
	} {
		r := form(t, s, tc.method, tc.p)
		if r.status != tc.status || r.body["ok"] != false || !strings.HasPrefix(r.err(), tc.err) {
			t.Errorf("%s: %d %s, want %d %s", tc.name, r.status, r.raw, tc.status, tc.err)
		}
	}
	// By name, with or without #.
	for _, ch := range []string{"general", "#general"} {
		if r := form(t, s, "chat.postMessage", url.Values{"channel": {ch}, "text": {"x"}}); r.body["channel"] != general {
			t.Errorf("%s: %s", ch, r.raw)
		}
	}
	if n := len(s.Journal()); n != 2 {
		t.Fatalf("%d effects, want the two good posts", n)
	}
}

func TestJSONBodyAndBearer(t *testing.T) {
	t.Parallel()
	s := start(t, nil)
	r, err := testutil.Do(s.Client(), "POST", s.URL+"/api/chat.postMessage",
		map[string]any{"channel": general, "text": "hi", "metadata": map[string]any{"event_type": "e", "event_payload": map[string]any{"oncely_key": "k"}}},
		"Authorization", "Bearer "+token)
	if err != nil || r.Status != 200 || r.Get("ok") != true || r.Str("message", "metadata", "event_type") != "e" {
		t.Fatalf("%v %s", err, r.Raw)
	}
	if j := s.Journal(); len(j) != 1 || j[0].Key != "k" {
		t.Fatalf("journal %+v", j)
	}
}

func TestRateLimits(t *testing.T) {
	t.Parallel()
	clk := testutil.NewClock()
	s := start(t, &slackfake.Config{Clock: clk, PostsPerSecond: 1, HistoryPerMinute: 1, HistoryMaxLimit: 15})
	post(t, s, "a", "a")
	r := post(t, s, "b", "b")
	if r.status != 429 || r.err() != "ratelimited" || r.header.Get("Retry-After") != "1" {
		t.Fatalf("posts: %d %s %v", r.status, r.raw, r.header)
	}
	// The limit is per channel.
	if r := form(t, s, "chat.postMessage", url.Values{"channel": {"C0000000002"}, "text": {"x"}}); r.body["ok"] != true {
		t.Fatalf("other channel: %s", r.raw)
	}
	clk.Advance(time.Second)
	if r := post(t, s, "b", "b"); r.body["ok"] != true {
		t.Fatalf("after a second: %s", r.raw)
	}
	for range 20 {
		clk.Advance(time.Second)
		if r := post(t, s, "x", "x"); r.body["ok"] != true {
			t.Fatalf("a post a second: %s", r.raw)
		}
	}
	h := form(t, s, "conversations.history", url.Values{"channel": {general}, "limit": {"100"}})
	if n := len(h.body["messages"].([]any)); n != 15 || h.body["has_more"] != true {
		t.Fatalf("limit capped at 15: %d", n)
	}
	h = form(t, s, "conversations.history", url.Values{"channel": {general}})
	if h.status != 429 || h.header.Get("Retry-After") != "60" {
		t.Fatalf("history limit: %d %s %v", h.status, h.raw, h.header)
	}
	if n := len(s.Journal()); n != 23 {
		t.Fatalf("%d effects", n)
	}
}

// Slack's official Node client (@slack/web-api, pinned in tools/slack)
// runs a scripted session against the fake unchanged.
func TestOfficialNodeClient(t *testing.T) {
	t.Parallel()
	s := start(t, nil)
	out := nodetools.Run(t, "slack", "session.mjs", "SLACK_API_URL="+s.URL+"/api/", "SLACK_TOKEN="+token, "SLACK_CHANNEL="+general, "ONCELY_KEY=key-1")
	steps := map[string]map[string]any{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil && m["step"] != nil {
			steps[m["step"].(string)] = m
		}
	}
	check := func(step, field string, want any) {
		t.Helper()
		if got := steps[step][field]; got != want {
			t.Errorf("%s.%s = %v, want %v\n%s", step, field, got, want, out)
		}
	}
	check("post", "ok", true)
	check("post", "channel", general)
	check("post", "key", "key-1")
	check("post2", "channel", general)
	check("history1", "count", 1.0)
	check("history1", "text", "Second")
	check("history1", "has_more", true)
	check("history2", "key", "key-1")
	check("history2", "has_more", false)
	check("history3", "count", 2.0)
	check("history3", "metadata", false)
	check("no_channel", "error", "channel_not_found")
	check("no_text", "error", "no_text")
	check("bad_metadata", "error", "invalid_metadata_schema")
	for _, step := range []string{"unmodelled", "unmodelled_param"} {
		if e, _ := steps[step]["error"].(string); !strings.Contains(e, "the fake does not model") {
			t.Errorf("%s: %v\n%s", step, steps[step], out)
		}
	}
	check("dotted", "ok", true)
	check("dotted", "warning", "invalid_metadata_schema")
	check("dotted", "warnings", "invalid_metadata_schema")
	check("dotted", "metadata", false)
	if j := s.Journal(); len(j) != 3 || j[0].Key != "key-1" || j[2].Key != "" {
		t.Fatalf("journal %+v\n%s", j, out)
	}
}
