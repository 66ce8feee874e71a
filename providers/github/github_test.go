package github_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	gh "github.com/google/go-github/v93/github"

	"github.com/oncely/oncely/clock"
	"github.com/oncely/oncely/errclass"
	"github.com/oncely/oncely/fakes/fault"
	"github.com/oncely/oncely/fakes/githubfake"
	"github.com/oncely/oncely/providers"
	"github.com/oncely/oncely/providers/github"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

const (
	fakeLag  = 10 * time.Second // the fake index's lag
	boundLag = 20 * time.Second // the adapter's bound, above it
	skew     = time.Second
)

type env struct {
	srv   *githubfake.Server
	clock *clock.Fake
	gh    *gh.Client
	c     *github.Client
}

// newEnv starts a fake GitHub and an adapter on it through go-github, on
// one fake clock. A fresh connection per request: a dropped one is seen.
func newEnv(t *testing.T, fcfg *githubfake.Config, cfg *github.Config) *env {
	t.Helper()
	clk := clock.NewFake(t0)
	var fc githubfake.Config
	if fcfg != nil {
		fc = *fcfg
	}
	fc.Clock, fc.Token = clk, "ghp_test"
	if fc.IndexLag == 0 {
		fc.IndexLag = fakeLag
	}
	srv := githubfake.NewServer(&fc)
	t.Cleanup(srv.Close)
	base := srv.URL + "/"
	client, err := gh.NewClient(
		gh.WithURLs(&base, &base), gh.WithAuthToken("ghp_test"),
		gh.WithHTTPClient(&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}),
		gh.WithDisableRateLimitCheck(),
	)
	if err != nil {
		t.Fatal(err)
	}
	var c github.Config
	if cfg != nil {
		c = *cfg
	}
	c.Clock = clk
	if c.SearchLag == 0 {
		c.SearchLag = boundLag
	}
	if c.ClockSkew == 0 {
		c.ClockSkew = skew
	}
	if c.RetryWaitMin == 0 {
		c.RetryWaitMin, c.RetryWaitMax = time.Millisecond, 5*time.Millisecond
	}
	if c.MaxRetryAfter == 0 {
		c.MaxRetryAfter = 50 * time.Millisecond
	}
	return &env{srv: srv, clock: clk, gh: client, c: github.New(client, "acme", "widgets", &c)}
}

func title(s string) gh.CreateIssueRequest {
	return gh.CreateIssueRequest{Title: s, Body: gh.Ptr("The widget is broken."), Labels: []string{"bug"}}
}

func TestCreateIssueCarriesTheMarker(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil, nil)
	is, err := e.c.Issues.Create(context.Background(), "k1", title("Broken widget"))
	if err != nil {
		t.Fatal(err)
	}
	if is.GetNumber() != 1 || is.Ref() != "acme/widgets#1" || !strings.HasSuffix(is.GetBody(), "\n\n"+github.Marker("k1")) {
		t.Errorf("issue %s, body %q", is.Ref(), is.GetBody())
	}
	if got := is.Summary(); got != "issue acme/widgets#1 opened: Broken widget" {
		t.Errorf("summary %q", got)
	}
	j := e.srv.Journal()
	if len(j) != 1 || j[0].Kind != githubfake.KindIssue || j[0].Key != "k1" || j[0].ID != "acme/widgets#1" {
		t.Errorf("journal %+v", j)
	}
}

// Lookup finds an issue at once through the list, and later, when the
// list window has passed, through the search; it says NotFound for a key
// nobody used, and never mistakes a key for one it prefixes.
func TestIssuesLookupAcrossTheLag(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil, nil)
	ctx := context.Background()
	is, err := e.c.Issues.Create(ctx, "key-a", title("A"))
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		name    string
		advance time.Duration
	}{
		{"at once: not in the index, in the list", 0},
		{"after the fake's lag: in both", fakeLag},
		{"past the list window: in the index only", boundLag + skew + time.Hour},
	} {
		e.clock.Advance(step.advance)
		res, err := e.c.Issues.Lookup(ctx, "key-a")
		if err != nil || res.Status != providers.Found || res.Ref != is.Ref() || res.Summary != is.Summary() {
			t.Errorf("%s: %+v, %v; want found %s", step.name, res, err, is.Ref())
		}
		for _, other := range []string{"key", "key-a-2", "nobody"} {
			if res, err := e.c.Issues.Lookup(ctx, other); err != nil || res.Status != providers.NotFound {
				t.Errorf("%s: lookup %q: %+v, %v; want not found", step.name, other, res, err)
			}
		}
	}
	if c := e.c.Issues.Capabilities(); c.Lookup != providers.Eventual || c.IndexLag != boundLag || c.DedupWindow != 0 {
		t.Errorf("capabilities %+v", c)
	}
}

// When the fake's index lags more than the adapter's bound, an issue just
// past the list window is missed: the bound is what NotFound rests on.
func TestIssuesLookupTrustsTheBound(t *testing.T) {
	t.Parallel()
	e := newEnv(t, &githubfake.Config{IndexLag: time.Hour}, nil)
	ctx := context.Background()
	if _, err := e.c.Issues.Create(ctx, "late", title("Late")); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(boundLag + skew + time.Second)
	if res, err := e.c.Issues.Lookup(ctx, "late"); err != nil || res.Status != providers.NotFound {
		t.Errorf("lookup with an index lagging past the bound: %+v, %v; want not found (the bound was broken)", res, err)
	}
}

// A list window holding more than MaxListPages pages cuts the scan: the
// lookup is inconclusive, not NotFound.
func TestIssuesLookupBoundedScanIsInconclusive(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil, &github.Config{MaxListPages: 1})
	ctx := context.Background()
	for i := range 101 {
		if _, err := e.c.Issues.Create(ctx, fmt.Sprint("bulk-", i), title("bulk")); err != nil {
			t.Fatal(err)
		}
	}
	res, err := e.c.Issues.Lookup(ctx, "absent")
	if err != nil || res.Status != providers.Inconclusive {
		t.Errorf("lookup over 101 recent issues with one page: %+v, %v; want inconclusive", res, err)
	}
	// The oldest is on the second page of the list, but not yet indexed.
	if res, err := e.c.Issues.Lookup(ctx, "bulk-0"); err != nil || res.Status != providers.Inconclusive {
		t.Errorf("lookup of the oldest: %+v, %v; want inconclusive", res, err)
	}
	e.clock.Advance(fakeLag)
	if res, err := e.c.Issues.Lookup(ctx, "bulk-0"); err != nil || res.Status != providers.Found || res.Ref != "acme/widgets#1" {
		t.Errorf("lookup of the oldest once indexed: %+v, %v; want found #1", res, err)
	}
}

func TestComments(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil, nil)
	ctx := context.Background()
	is, err := e.c.Issues.Create(ctx, "issue-key", title("Thread"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := e.c.Comments.Create(ctx, "comment-key", is.GetNumber(), "Fixed in the next release.")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(c.GetBody(), github.Marker("comment-key")) || c.Issue != 1 || c.Summary() != fmt.Sprintf("comment %d added to acme/widgets#1", c.GetID()) {
		t.Errorf("comment %+v: %q", c, c.GetBody())
	}
	for _, advance := range []time.Duration{0, fakeLag, time.Hour} {
		e.clock.Advance(advance)
		res, err := e.c.Comments.Lookup(ctx, "comment-key")
		if err != nil || res.Status != providers.Found || res.Ref != c.Ref() || res.Summary != c.Summary() {
			t.Errorf("+%s: lookup %+v, %v; want found %s", advance, res, err, c.Ref())
		}
		// The issue's own key is in its body, not in a comment.
		if res, err := e.c.Comments.Lookup(ctx, "issue-key"); err != nil || res.Status != providers.NotFound {
			t.Errorf("+%s: lookup of the issue's key among comments: %+v, %v", advance, res, err)
		}
	}
	if _, err := e.c.Comments.Create(ctx, "k", 99, "On no issue"); !isClass(err, errclass.Permanent) || status(err) != http.StatusNotFound {
		t.Errorf("comment on a missing issue: %v; want a permanent 404", err)
	}
	if j := e.srv.Journal(); len(j) != 2 || j[1].Kind != githubfake.KindIssueComment || j[1].Key != "comment-key" {
		t.Errorf("journal %+v", j)
	}
}

// Bad input is refused before anything is sent.
func TestInvalidInputSendsNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil, nil)
	ctx := context.Background()
	long := strings.Repeat("x", github.MaxBody)
	marked := "see " + github.Marker("other")
	cases := []struct {
		name string
		run  func() error
	}{
		{"no key", func() error { _, err := e.c.Issues.Create(ctx, "", title("t")); return err }},
		{"key with a space", func() error { _, err := e.c.Issues.Create(ctx, "a b", title("t")); return err }},
		{"blank title", func() error { _, err := e.c.Issues.Create(ctx, "k", title("  ")); return err }},
		{"body too long with the marker", func() error {
			_, err := e.c.Issues.Create(ctx, "k", gh.CreateIssueRequest{Title: "t", Body: &long})
			return err
		}},
		{"body with a marker", func() error {
			_, err := e.c.Issues.Create(ctx, "k", gh.CreateIssueRequest{Title: "t", Body: &marked})
			return err
		}},
		{"blank comment", func() error { _, err := e.c.Comments.Create(ctx, "k", 1, " "); return err }},
		{"issue 0", func() error { _, err := e.c.Comments.Create(ctx, "k", 0, "hi"); return err }},
		{"bad repository", func() error {
			_, err := github.New(e.gh, "acme/x", "widgets", nil).Issues.Create(ctx, "k", title("t"))
			return err
		}},
	}
	for _, tc := range cases {
		err := tc.run()
		if !errors.Is(err, providers.ErrInvalidRequest) || !isClass(err, errclass.Permanent) {
			t.Errorf("%s: %v; want a permanent invalid request", tc.name, err)
		}
	}
	if j := e.srv.Journal(); len(j) != 0 {
		t.Errorf("journal %+v, want nothing", j)
	}
	// What only GitHub checks: a title over 256 characters is a 422.
	_, err := e.c.Issues.Create(ctx, "k", title(strings.Repeat("t", 300)))
	if !errors.Is(err, github.ErrValidation) || !isClass(err, errclass.Permanent) || status(err) != http.StatusUnprocessableEntity {
		t.Errorf("long title: %v; want a permanent validation error", err)
	}
}

func isClass(err error, c errclass.Class) bool {
	var pe *providers.ProviderError
	return errors.As(err, &pe) && pe.ErrorClass() == c
}

func status(err error) int {
	var pe *providers.ProviderError
	if errors.As(err, &pe) {
		return pe.Status
	}
	return 0
}

// Every failure is classified by what it means for the issue.
func TestCreateFailures(t *testing.T) {
	t.Parallel()
	const route = "POST /repos/{owner}/{repo}/issues"
	cases := []struct {
		name     string
		rule     fault.Rule
		class    errclass.Class
		effects  int
		attempts int
		sentinel error
	}{
		{"500 before commit: maybe processed", fault.Rule{Action: fault.FailBeforeCommit, Status: 500}, errclass.Ambiguous, 0, 1, nil},
		{"500 after commit", fault.Rule{Action: fault.CommitThenError, Status: 500}, errclass.Ambiguous, 1, 1, nil},
		{"502 after commit", fault.Rule{Action: fault.CommitThenError, Status: 502}, errclass.Ambiguous, 1, 1, nil},
		{"dropped after commit", fault.Rule{Action: fault.CommitThenDrop}, errclass.Ambiguous, 1, 1, nil},
		{"dropped before commit: cannot tell", fault.Rule{Action: fault.DropBeforeCommit}, errclass.Ambiguous, 0, 1, nil},
		{"503 with a long Retry-After", fault.Rule{Action: fault.FailBeforeCommit, Status: 503, RetryAfter: time.Minute}, errclass.Definite, 0, 1, nil},
		{"secondary rate limit, long", fault.Rule{Action: fault.FailBeforeCommit, Status: 403, RetryAfter: time.Minute}, errclass.Definite, 0, 1, github.ErrSecondaryRateLimit},
		{"secondary rate limit 429, long", fault.Rule{Action: fault.FailBeforeCommit, Status: 429, RetryAfter: time.Minute}, errclass.Definite, 0, 1, github.ErrSecondaryRateLimit},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, nil, nil)
			tc.rule.Route, tc.rule.Attempt = route, 0
			e.srv.Faults.Add(tc.rule)
			_, err := e.c.Issues.Create(context.Background(), "k", title("t"))
			var pe *providers.ProviderError
			if !errors.As(err, &pe) || pe.ErrorClass() != tc.class || pe.Attempts != tc.attempts {
				t.Fatalf("error %v (%#v); want class %v after %d attempts", err, pe, tc.class, tc.attempts)
			}
			if tc.sentinel != nil && !errors.Is(err, tc.sentinel) {
				t.Errorf("error %v, want %v in its chain", err, tc.sentinel)
			}
			if tc.rule.RetryAfter > 0 && pe.RetryAfter != tc.rule.RetryAfter {
				t.Errorf("RetryAfter %s, want %s", pe.RetryAfter, tc.rule.RetryAfter)
			}
			if n := len(e.srv.Journal()); n != tc.effects {
				t.Errorf("%d effects, want %d", n, tc.effects)
			}
		})
	}
}

// A refusal that says when to come back, within MaxRetryAfter, is waited
// out and retried: one issue.
func TestCreateRetriesDefiniteRefusals(t *testing.T) {
	t.Parallel()
	for _, status := range []int{503, 429, 403} {
		// Retry-After is in whole seconds: each case waits one.
		e := newEnv(t, nil, &github.Config{MaxRetryAfter: 2 * time.Second})
		e.srv.Faults.Add(fault.Rule{Route: "POST /repos/{owner}/{repo}/issues", Attempt: 1, Action: fault.FailBeforeCommit, Status: status, RetryAfter: time.Second})
		is, err := e.c.Issues.Create(context.Background(), "k", title("t"))
		if err != nil || is.GetNumber() != 1 || len(e.srv.Journal()) != 1 {
			t.Errorf("%d then success: %v, %d effects", status, err, len(e.srv.Journal()))
		}
	}
}

// The primary rate limit: 403 with X-RateLimit-Remaining 0 is definite,
// waits until X-RateLimit-Reset by the adapter's clock.
func TestPrimaryRateLimit(t *testing.T) {
	t.Parallel()
	e := newEnv(t, &githubfake.Config{RateLimit: 1}, nil)
	ctx := context.Background()
	if _, err := e.c.Issues.Create(ctx, "k1", title("t")); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(10 * time.Minute)
	_, err := e.c.Issues.Create(ctx, "k2", title("t"))
	var pe *providers.ProviderError
	if !errors.As(err, &pe) || !errors.Is(err, github.ErrRateLimited) || pe.ErrorClass() != errclass.Definite ||
		pe.Status != http.StatusForbidden || pe.RetryAfter != 50*time.Minute {
		t.Fatalf("over the limit: %v (%+v); want definite, rate limited, retry after 50m", err, pe)
	}
	e.clock.Advance(50 * time.Minute)
	if _, err := e.c.Issues.Create(ctx, "k2", title("t")); err != nil {
		t.Errorf("after the reset: %v", err)
	}
	if n := len(e.srv.Journal()); n != 2 {
		t.Errorf("%d effects, want 2", n)
	}
}

// Lookups are GETs: any failure is retried.
func TestLookupRetries(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil, nil)
	ctx := context.Background()
	if _, err := e.c.Issues.Create(ctx, "k", title("t")); err != nil {
		t.Fatal(err)
	}
	e.srv.Faults.Add(fault.Rule{Route: "GET /search/issues", Attempt: 1, Action: fault.CommitThenDrop})
	e.srv.Faults.Add(fault.Rule{Route: "GET /repos/{owner}/{repo}/issues", Attempt: 1, Action: fault.FailBeforeCommit, Status: 502})
	if res, err := e.c.Issues.Lookup(ctx, "k"); err != nil || res.Status != providers.Found {
		t.Errorf("lookup through faults: %+v, %v", res, err)
	}
	e.srv.Faults.Add(fault.Rule{Route: "GET /search/issues", Action: fault.FailBeforeCommit, Status: 500})
	if _, err := e.c.Issues.Lookup(ctx, "k"); !isClass(err, errclass.Ambiguous) || status(err) != 500 {
		t.Errorf("lookup whose search always fails: %v; want the 500", err)
	}
}

// Unreachable: nothing was sent, definite.
func TestNotSent(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil, &github.Config{MaxRetries: -1})
	e.srv.Close()
	_, err := e.c.Issues.Create(context.Background(), "k", title("t"))
	if !isClass(err, errclass.Definite) {
		t.Errorf("closed server: %v; want definite", err)
	}
}

// A 2xx without an issue is ambiguous: something may have been created.
func TestUnreadableAnswerIsAmbiguous(t *testing.T) {
	t.Parallel()
	mux := http.NewServeMux()
	mux.HandleFunc("POST /repos/acme/widgets/issues", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"title": "t"`))
	})
	mux.HandleFunc("POST /repos/acme/widgets/issues/1/comments", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"body": "no id"}`))
	})
	srv := newRaw(t, mux)
	c := github.New(srv, "acme", "widgets", &github.Config{MaxRetries: -1})
	if _, err := c.Issues.Create(context.Background(), "k", title("t")); !isClass(err, errclass.Ambiguous) || !errors.Is(err, providers.ErrBadResponse) {
		t.Errorf("truncated issue: %v; want ambiguous bad response", err)
	}
	if _, err := c.Comments.Create(context.Background(), "k", 1, "hi"); !isClass(err, errclass.Ambiguous) || !errors.Is(err, providers.ErrBadResponse) {
		t.Errorf("comment without id: %v; want ambiguous bad response", err)
	}
}
