package githubfake_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/oncely/oncely/clock"
	"github.com/oncely/oncely/fakes/fault"
	"github.com/oncely/oncely/fakes/githubfake"
	"github.com/oncely/oncely/fakes/internal/testutil"
)

func newServer(t *testing.T, cfg *githubfake.Config) (*githubfake.Server, *clock.Fake) {
	t.Helper()
	clk := testutil.NewClock()
	var c githubfake.Config
	if cfg != nil {
		c = *cfg
	}
	c.Clock = clk
	s := githubfake.NewServer(&c)
	t.Cleanup(s.Close)
	return s, clk
}

func do(t *testing.T, s *githubfake.Server, method, path string, body any, header ...string) testutil.Reply {
	t.Helper()
	r, err := testutil.Do(s.Client(), method, s.URL+path, body, header...)
	if err != nil && r.Status == 0 {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return r
}

// list decodes a JSON array answer.
func list(t *testing.T, s *githubfake.Server, path string) ([]map[string]any, http.Header) {
	t.Helper()
	r := do(t, s, http.MethodGet, path, nil)
	if r.Status != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, r.Status, r.Raw)
	}
	var out []map[string]any
	if err := jsonUnmarshal(r.Raw, &out); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return out, r.Header
}

func TestValidation(t *testing.T) {
	t.Parallel()
	s, _ := newServer(t, &githubfake.Config{Repos: []string{"acme/widgets"}})
	const path = "/repos/acme/widgets/issues"
	cases := []struct {
		name   string
		path   string
		body   any
		status int
		want   string // in the raw answer
	}{
		{"not JSON", path, "{", 400, "Problems parsing JSON"},
		{"an array", path, "[]", 400, "Problems parsing JSON"},
		{"no title", path, map[string]any{"body": "x"}, 422, `"field":"title","code":"missing_field"`},
		{"blank title", path, map[string]any{"title": "  "}, 422, `"field":"title","code":"missing_field"`},
		{"title an object", path, map[string]any{"title": map[string]any{}}, 422, `"field":"title","code":"invalid"`},
		{"title too long", path, map[string]any{"title": strings.Repeat("é", 257)}, 422, "title is too long (maximum is 256 characters)"},
		{"body too long", path, map[string]any{"title": "t", "body": strings.Repeat("b", 65537)}, 422, "body is too long (maximum is 65536 characters)"},
		{"blank label", path, map[string]any{"title": "t", "labels": []string{""}}, 422, `"resource":"Label"`},
		{"unknown repository", "/repos/acme/gadgets/issues", map[string]any{"title": "t"}, 404, `"message":"Not Found"`},
		{"unmodelled field", path, map[string]any{"title": "t", "milestone": 1}, 501, `the fake does not model the body field \"milestone\"`},
		{"labels as objects", path, map[string]any{"title": "t", "labels": []any{map[string]any{"name": "x"}}}, 501, "does not model labels given other than"},
		{"comment without body", path + "/1/comments", map[string]any{}, 404, "Not Found"},
	}
	for _, tc := range cases {
		r := do(t, s, http.MethodPost, tc.path, tc.body)
		if r.Status != tc.status || !strings.Contains(r.Raw, tc.want) {
			t.Errorf("%s: %d %s; want %d with %s", tc.name, r.Status, r.Raw, tc.status, tc.want)
		}
	}
	if j := s.Journal(); len(j) != 0 {
		t.Errorf("journal after refusals: %+v", j)
	}
	// A number is a title GitHub accepts.
	if r := do(t, s, http.MethodPost, path, map[string]any{"title": 42}); r.Status != 201 || r.Str("title") != "42" || r.Get("body") != nil {
		t.Errorf("numeric title: %d %s", r.Status, r.Raw)
	}
	for _, body := range []any{map[string]any{}, map[string]any{"body": " "}, map[string]any{"body": 3}, map[string]any{"body": "x", "extra": 1}} {
		r := do(t, s, http.MethodPost, path+"/1/comments", body)
		if r.Status != 422 && r.Status != 501 {
			t.Errorf("comment %v: %d %s; want 422 or 501", body, r.Status, r.Raw)
		}
	}
}

func TestNotModelled(t *testing.T) {
	t.Parallel()
	s, _ := newServer(t, nil)
	for _, tc := range []struct{ method, path string }{
		{"GET", "/repos/acme/widgets/issues?labels=bug"},
		{"GET", "/repos/acme/widgets/issues?assignee=ada"},
		{"GET", "/repos/acme/widgets/issues/1?foo=1"},
		{"GET", "/repos/acme/widgets/issues/comments?foo=1"},
		{"GET", "/search/issues?q=x+label:bug"},
		{"GET", "/search/issues?q=x&sort=reactions"},
		{"PATCH", "/repos/acme/widgets/issues/1"},
		{"GET", "/repos/acme/widgets/pulls"},
		{"POST", "/graphql"},
	} {
		r := do(t, s, tc.method, tc.path, nil)
		if r.Status != http.StatusNotImplemented || !strings.Contains(r.Str("message"), "the fake does not model") {
			t.Errorf("%s %s: %d %s; want 501 saying the fake does not model it", tc.method, tc.path, r.Status, r.Raw)
		}
	}
}

// Issues and comments are listed at once, and searchable only IndexLag
// after they were written.
func TestSearchLags(t *testing.T) {
	t.Parallel()
	s, clk := newServer(t, &githubfake.Config{IndexLag: 30 * time.Second})
	body := "Steps to reproduce.\n\n<!-- oncely-key: abc123 -->"
	if r := do(t, s, "POST", "/repos/acme/widgets/issues", map[string]any{"title": "Crash on save", "body": body}); r.Status != 201 {
		t.Fatalf("create: %d %s", r.Status, r.Raw)
	}
	search := func(q string) int {
		r := do(t, s, "GET", "/search/issues?q="+strings.ReplaceAll(q, " ", "+"), nil)
		if r.Status != 200 {
			t.Fatalf("search %q: %d %s", q, r.Status, r.Raw)
		}
		return int(r.Num("total_count"))
	}
	if items, _ := list(t, s, "/repos/acme/widgets/issues"); len(items) != 1 {
		t.Errorf("list at once: %d issues", len(items))
	}
	if n := search(`"abc123" repo:acme/widgets is:issue in:body`); n != 0 {
		t.Errorf("search at once: %d", n)
	}
	clk.Advance(30 * time.Second)
	for q, want := range map[string]int{
		`"abc123" repo:acme/widgets is:issue in:body`: 1,
		`"ABC123"`:                 1,
		`crash save`:               1,
		`abc123 in:title`:          0,
		`abc123 repo:acme/other`:   0,
		`abc123 is:pr`:             0,
		`abc123 is:closed`:         0,
		`"oncely-key: abc123 -->"`: 1,
		`abc123 in:comments`:       0,
	} {
		if n := search(q); n != want {
			t.Errorf("search %q: %d, want %d", q, n, want)
		}
	}
	if r := do(t, s, "POST", "/repos/acme/widgets/issues/1/comments", map[string]any{"body": "seen <!-- oncely-key: c9 -->"}); r.Status != 201 || r.Str("issue_url") == "" {
		t.Fatalf("comment: %d %s", r.Status, r.Raw)
	}
	if n := search(`c9 in:comments`); n != 0 {
		t.Errorf("comment searchable at once: %d", n)
	}
	clk.Advance(30 * time.Second)
	if n := search(`c9 in:comments repo:acme/widgets`); n != 1 {
		t.Errorf("comment searchable after the lag: %d", n)
	}
	if r := do(t, s, "GET", "/search/issues", nil); r.Status != 422 {
		t.Errorf("search without q: %d %s", r.Status, r.Raw)
	}
	j := s.Journal()
	if len(j) != 2 || j[0].Key != "abc123" || j[1].Key != "c9" || j[1].Kind != githubfake.KindIssueComment {
		t.Errorf("journal %+v", j)
	}
}

func TestListPaginationAndSince(t *testing.T) {
	t.Parallel()
	s, clk := newServer(t, nil)
	for i := range 5 {
		do(t, s, "POST", "/repos/acme/widgets/issues", map[string]any{"title": fmt.Sprint("issue ", i)})
		clk.Advance(time.Minute)
	}
	items, hd := list(t, s, "/repos/acme/widgets/issues?per_page=2&sort=created&direction=desc&state=all")
	if len(items) != 2 || items[0]["number"] != 5.0 || items[1]["number"] != 4.0 {
		t.Errorf("first page: %v", items)
	}
	if link := hd.Get("Link"); !strings.Contains(link, `page=2&per_page=2`) || !strings.Contains(link, `rel="next"`) || !strings.Contains(link, `page=3&per_page=2`) {
		t.Errorf("Link %q", link)
	}
	items, hd = list(t, s, "/repos/acme/widgets/issues?per_page=2&page=3")
	if len(items) != 1 || items[0]["number"] != 1.0 || strings.Contains(hd.Get("Link"), `rel="next"`) {
		t.Errorf("last page: %v, Link %q", items, hd.Get("Link"))
	}
	since := clk.Now().Add(-150 * time.Second).UTC().Format(time.RFC3339)
	if items, _ := list(t, s, "/repos/acme/widgets/issues?since="+since); len(items) != 2 {
		t.Errorf("since %s: %d issues, want 2", since, len(items))
	}
	if r := do(t, s, "GET", "/repos/acme/widgets/issues?state=bogus", nil); r.Status != 422 {
		t.Errorf("bad state: %d", r.Status)
	}
	// Comments of the repository, newest first with sort and direction.
	do(t, s, "POST", "/repos/acme/widgets/issues/1/comments", map[string]any{"body": "first"})
	clk.Advance(time.Second)
	do(t, s, "POST", "/repos/acme/widgets/issues/2/comments", map[string]any{"body": "second"})
	items, _ = list(t, s, "/repos/acme/widgets/issues/comments?sort=created&direction=desc")
	if len(items) != 2 || items[0]["body"] != "second" {
		t.Errorf("repository comments: %v", items)
	}
	items, _ = list(t, s, "/repos/acme/widgets/issues/1/comments")
	if len(items) != 1 || items[0]["body"] != "first" {
		t.Errorf("issue comments: %v", items)
	}
	if r := do(t, s, "GET", "/repos/acme/widgets/issues/1", nil); r.Status != 200 || r.Num("comments") != 1 {
		t.Errorf("issue 1: %d %s", r.Status, r.Raw)
	}
	if r := do(t, s, "GET", "/repos/acme/widgets/issues/9", nil); r.Status != 404 {
		t.Errorf("issue 9: %d", r.Status)
	}
}

func TestAuthAndRateLimits(t *testing.T) {
	t.Parallel()
	s, clk := newServer(t, &githubfake.Config{Token: "ghp_x", RateLimit: 2, SearchRateLimit: 1})
	if r := do(t, s, "GET", "/repos/a/b/issues", nil); r.Status != 401 || r.Str("message") != "Requires authentication" {
		t.Errorf("no token: %d %s", r.Status, r.Raw)
	}
	if r := do(t, s, "GET", "/repos/a/b/issues", nil, "Authorization", "token nope"); r.Status != 401 || r.Str("message") != "Bad credentials" {
		t.Errorf("wrong token: %d %s", r.Status, r.Raw)
	}
	auth := []string{"Authorization", "Bearer ghp_x"}
	r1 := do(t, s, "GET", "/repos/a/b/issues", nil, auth...)
	r2 := do(t, s, "GET", "/repos/a/b/issues", nil, auth...)
	r3 := do(t, s, "GET", "/repos/a/b/issues", nil, auth...)
	if r1.Header.Get("X-RateLimit-Remaining") != "1" || r2.Header.Get("X-RateLimit-Remaining") != "0" || r2.Status != 200 {
		t.Errorf("within the limit: %v / %v", r1.Header, r2.Header)
	}
	reset := fmt.Sprint(clk.Now().Add(time.Hour).Unix())
	if r3.Status != 403 || r3.Header.Get("X-RateLimit-Remaining") != "0" || r3.Header.Get("X-RateLimit-Reset") != reset {
		t.Errorf("over the limit: %d %v %s", r3.Status, r3.Header, r3.Raw)
	}
	if r := do(t, s, "GET", "/search/issues?q=x", nil, auth...); r.Status != 200 || r.Header.Get("X-RateLimit-Resource") != "search" {
		t.Errorf("search within its own limit: %d %v", r.Status, r.Header)
	}
	if r := do(t, s, "GET", "/search/issues?q=x", nil, auth...); r.Status != 403 {
		t.Errorf("second search in a minute: %d", r.Status)
	}
	clk.Advance(time.Hour)
	if r := do(t, s, "GET", "/repos/a/b/issues", nil, auth...); r.Status != 200 || r.Header.Get("X-RateLimit-Remaining") != "1" {
		t.Errorf("after the reset: %d %v", r.Status, r.Header)
	}
}

// Faults: a secondary rate limit has GitHub's shape; a commit then drop
// leaves the issue in the journal.
func TestFaults(t *testing.T) {
	t.Parallel()
	s, _ := newServer(t, nil)
	const route = "POST /repos/{owner}/{repo}/issues"
	s.Faults.Add(fault.Rule{Route: route, Attempt: 1, Action: fault.FailBeforeCommit, Status: 429, RetryAfter: 3 * time.Second})
	s.Faults.Add(fault.Rule{Route: route, Attempt: 2, Action: fault.CommitThenDrop})
	r := do(t, s, "POST", "/repos/a/b/issues", map[string]any{"title": "t"})
	if r.Status != 429 || r.Header.Get("Retry-After") != "3" || !strings.HasSuffix(r.Str("documentation_url"), "secondary-rate-limits") {
		t.Errorf("secondary rate limit: %d %v %s", r.Status, r.Header, r.Raw)
	}
	if _, err := testutil.Do(testutil.FreshClient(5*time.Second), "POST", s.URL+"/repos/a/b/issues", map[string]any{"title": "t"}); err == nil {
		t.Error("commit then drop answered")
	}
	if j := s.Journal(); len(j) != 1 || j[0].ID != "a/b#1" {
		t.Errorf("journal %+v", j)
	}
	s.Reset()
	if j := s.Journal(); len(j) != 0 {
		t.Errorf("journal after Reset: %+v", j)
	}
	if r := do(t, s, "POST", "/repos/a/b/issues", map[string]any{"title": "t"}); r.Status != 201 || r.Num("number") != 1 {
		t.Errorf("after Reset: %d %s", r.Status, r.Raw)
	}
}

func jsonUnmarshal(raw string, v any) error { return json.Unmarshal([]byte(raw), v) }
