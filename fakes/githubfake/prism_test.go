//go:build unix

package githubfake_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/oncely/oncely/fakes/fault"
	"github.com/oncely/oncely/fakes/githubfake"
	"github.com/oncely/oncely/fakes/githubfake/githubspec"
	"github.com/oncely/oncely/fakes/internal/testutil"
	"github.com/oncely/oncely/fakes/prismtest"
)

// Every answer of the fake on the routes it models, errors included, is
// within GitHub's published description (@octokit/openapi, cut to these
// operations), as Stoplight Prism validates it; and Prism does validate:
// a request GitHub would refuse is reported.
func TestAnswersWithinGitHubsDescription(t *testing.T) {
	t.Parallel()
	spec := githubspec.Path(t)
	s, _ := newServer(t, &githubfake.Config{Token: "ghp_prism", RateLimit: 20, SearchRateLimit: 3, Repos: []string{"acme/widgets"}})
	proxy := prismtest.Start(t, spec, s.URL)
	hc := proxy.Client()
	auth := []string{"Authorization", "Bearer ghp_prism", "Accept", "application/vnd.github+json"}
	call := func(method, path string, body any, wantStatus int) testutil.Reply {
		t.Helper()
		r, err := testutil.Do(hc, method, proxy.URL+path, body, auth...)
		if r.Status == 0 {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		if r.Status != wantStatus {
			t.Errorf("%s %s: %d %s, want %d", method, path, r.Status, r.Raw, wantStatus)
		}
		return r
	}
	call("POST", "/repos/acme/widgets/issues", map[string]any{"title": "Export fails", "body": "On empty carts.", "labels": []string{"bug"}}, 201)
	call("POST", "/repos/acme/widgets/issues", map[string]any{"title": 7}, 201)
	call("POST", "/repos/acme/widgets/issues/1/comments", map[string]any{"body": "Looking."}, 201)
	call("GET", "/repos/acme/widgets/issues/1", nil, 200)
	call("GET", "/repos/acme/widgets/issues?state=all&sort=created&direction=desc&per_page=1&page=2", nil, 200)
	call("GET", "/repos/acme/widgets/issues/1/comments?per_page=10", nil, 200)
	call("GET", "/repos/acme/widgets/issues/comments?sort=created&direction=desc&since=2000-01-01T00:00:00Z", nil, 200)
	call("GET", "/search/issues?q=export+repo:acme/widgets+is:issue&per_page=5", nil, 200)
	call("GET", "/rate_limit", nil, 200)
	// GitHub's errors.
	call("POST", "/repos/acme/widgets/issues", map[string]any{"title": strings.Repeat("t", 300)}, 422)
	call("POST", "/repos/acme/gadgets/issues", map[string]any{"title": "t"}, 404)
	call("GET", "/repos/acme/widgets/issues/9", nil, 404)
	call("POST", "/repos/acme/widgets/issues/9/comments", map[string]any{"body": "x"}, 404)
	call("GET", "/search/issues?q=a", nil, 200)
	call("GET", "/search/issues?q=b", nil, 200)
	call("GET", "/search/issues?q=c", nil, 403) // the search rate limit
	// Injected faults, in GitHub's shapes: a 503, a secondary rate limit.
	s.Faults.Add(fault.Rule{Route: "POST /repos/{owner}/{repo}/issues", Attempt: 1, Action: fault.FailBeforeCommit, Status: 503})
	call("POST", "/repos/acme/widgets/issues", map[string]any{"title": "t"}, 503)
	s.Faults.Add(fault.Rule{Route: "POST /repos/{owner}/{repo}/issues", Attempt: 1, Action: fault.FailBeforeCommit, Status: 403, RetryAfter: time.Second})
	call("POST", "/repos/acme/widgets/issues", map[string]any{"title": "t"}, 403)
	proxy.Check(t)
	if n := proxy.Exchanges(); n != 18 {
		t.Errorf("%d exchanges through Prism, want 18", n)
	}

	// The control: Prism reports what GitHub would refuse.
	control := prismtest.Start(t, spec, s.URL)
	r, _ := testutil.Do(control.Client(), "POST", control.URL+"/repos/acme/widgets/issues", map[string]any{"body": "no title"}, auth...)
	if r.Status == http.StatusCreated || len(control.Errors()) == 0 {
		t.Errorf("an issue without a title through Prism: %d %s, violations %v; want a request violation", r.Status, r.Raw, control.Violations())
	}
	if n := len(s.Journal()); n != 3 { // two issues, one comment
		t.Errorf("%d effects, want 3", n)
	}
}
