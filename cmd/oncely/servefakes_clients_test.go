package main

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/oncely/oncely/internal/nodetools"
)

// steps reads the JSON lines {"step": ..., ...} a session prints.
func steps(out string) map[string]map[string]any {
	m := map[string]map[string]any{}
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var v map[string]any
		if json.Unmarshal(sc.Bytes(), &v) == nil && v["step"] != nil {
			m[v["step"].(string)] = v
		}
	}
	return m
}

// The official Node clients' sessions run against oncely serve-fakes with
// its defaults: Slack drops a dotted event_type with a warning, HubSpot's
// conflict names the existing contact in HubSpot's words, Resend replays
// a keyed send, and GitHub's client works under the rate limits GitHub
// documents, which every answer and GET /rate_limit report truthfully.
func TestServeFakesOfficialClients(t *testing.T) {
	t.Parallel()
	p := start(t, nil, "serve-fakes", "--json")
	urls := decodeJSON[map[string]map[string]string](t, p.line(t))

	sl := steps(nodetools.Run(t, "slack", "session.mjs", "SLACK_API_URL="+urls["slack"]["url"]+"/api/", "SLACK_TOKEN=xoxb-test",
		"SLACK_CHANNEL=C0000000001", "ONCELY_KEY=key-1"))
	if d := sl["dotted"]; d["ok"] != true || d["warning"] != "invalid_metadata_schema" || d["metadata"] != false {
		t.Errorf("slack, a dotted event_type: %v", d)
	}
	if sl["post"]["key"] != "key-1" {
		t.Errorf("slack post: %v", sl["post"])
	}

	hs := steps(nodetools.Run(t, "hubspot", "session.mjs", "HUBSPOT_BASE_URL="+urls["hubspot"]["url"], "HUBSPOT_TOKEN=pat-test", "ONCELY_KEY=key-1"))
	if id, _ := hs["upsert1"]["id"].(string); id == "" || hs["conflict"]["message"] != "Contact already exists. Existing ID: "+id {
		t.Errorf("hubspot conflict: %v (upsert %v)", hs["conflict"], hs["upsert1"])
	}

	var rs map[string]json.RawMessage
	out := nodetools.Run(t, "resend", "session.mjs", "RESEND_BASE_URL="+urls["resend"]["url"], "RESEND_API_KEY=re_test_key")
	if err := json.Unmarshal([]byte(out), &rs); err != nil || !strings.Contains(string(rs["replay"]), `"id"`) ||
		string(rs["first"]) != string(rs["replay"]) {
		t.Errorf("resend: first %s, replay %s (%v)", rs["first"], rs["replay"], err)
	}

	out = nodetools.Run(t, "octokit", "session.mjs", "GITHUB_API_URL="+urls["github"]["url"], "GITHUB_TOKEN=ghp_test")
	lines := strings.Split(strings.TrimSpace(out), "\n") // octokit logs its failed requests first
	out = lines[len(lines)-1]
	var gh []struct {
		Step  string          `json:"step"`
		Value json.RawMessage `json:"value"`
	}
	if err := json.Unmarshal([]byte(out), &gh); err != nil || len(gh) < 8 || gh[0].Step != "create" || !strings.Contains(string(gh[0].Value), `"status":201`) {
		t.Errorf("octokit session: %v\n%s", err, out)
	}
	// The session's requests count against the limits GitHub documents.
	resp, err := http.Get(urls["github"]["url"] + "/rate_limit")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var rl struct {
		Resources map[string]struct{ Limit, Remaining, Used, Reset int64 } `json:"resources"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&rl); err != nil {
		t.Fatal(err)
	}
	core, search := rl.Resources["core"], rl.Resources["search"]
	if core.Limit != 5000 || core.Used < 8 || core.Remaining != core.Limit-core.Used || core.Reset == 0 ||
		search.Limit != 30 || search.Used != 2 || search.Remaining != 28 {
		t.Errorf("GET /rate_limit after the session: %+v", rl.Resources)
	}
	r2, err := http.Get(urls["github"]["url"] + "/repos/acme/widgets/issues/1")
	if err != nil {
		t.Fatal(err)
	}
	r2.Body.Close()
	if r2.Header.Get("X-RateLimit-Limit") != "5000" || r2.Header.Get("X-RateLimit-Resource") != "core" || r2.Header.Get("X-RateLimit-Remaining") == "" {
		t.Errorf("a GitHub answer's rate-limit headers: %v", r2.Header)
	}
}

// The other fakes' limits are flags; once set, every answer carries the
// headers its provider sends.
func TestServeFakesRateLimitFlags(t *testing.T) {
	t.Parallel()
	p := start(t, nil, "serve-fakes", "--json", "--resend-rate-limit", "2", "--hubspot-rate-limit", "100", "--github-rate-limit", "0")
	urls := decodeJSON[map[string]map[string]string](t, p.line(t))
	do := func(method, url, auth, body string) http.Header {
		t.Helper()
		req, err := http.NewRequest(method, url, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", auth)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.Header
	}
	h := do("GET", urls["resend"]["url"]+"/emails/missing", "Bearer re_test_key", "")
	if h.Get("ratelimit-limit") != "2" || h.Get("ratelimit-remaining") != "1" || h.Get("ratelimit-reset") == "" {
		t.Errorf("resend headers: %v", h)
	}
	h = do("GET", urls["hubspot"]["url"]+"/crm/v3/objects/contacts/1", "Bearer pat-test", "")
	if h.Get("X-HubSpot-RateLimit-Max") != "100" || h.Get("X-HubSpot-RateLimit-Remaining") != "99" || h.Get("X-HubSpot-RateLimit-Interval-Milliseconds") != "10000" {
		t.Errorf("hubspot headers: %v", h)
	}
	if h = do("GET", urls["github"]["url"]+"/repos/acme/widgets/issues/1", "Bearer ghp_test", ""); h.Get("X-RateLimit-Limit") != "" {
		t.Errorf("github with --github-rate-limit 0 sends %v", h)
	}
	runCLI(t, nil, "serve-fakes", "--resend-rate-limit", "-1").wantError(t, exitUsage, "rate limit")
}
