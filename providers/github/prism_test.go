//go:build unix

package github_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	gh "github.com/google/go-github/v93/github"

	"github.com/oncely/oncely/clock"
	"github.com/oncely/oncely/fakes/githubfake"
	"github.com/oncely/oncely/fakes/githubfake/githubspec"
	"github.com/oncely/oncely/fakes/prismtest"
	"github.com/oncely/oncely/providers"
	"github.com/oncely/oncely/providers/github"
)

// Every request the adapter sends, and every answer of the fake it gets
// (errors included), goes through Stoplight Prism validating against
// GitHub's published description (@octokit/openapi, cut to the operations
// used): no request GitHub would refuse, no answer outside the description.
func TestAdapterWithinGitHubsDescription(t *testing.T) {
	t.Parallel()
	spec := githubspec.Path(t)
	clk := clock.NewFake(t0)
	srv := githubfake.NewServer(&githubfake.Config{Clock: clk, IndexLag: fakeLag, Token: "ghp_prism", Repos: []string{"acme/widgets"}})
	t.Cleanup(srv.Close)
	proxy := prismtest.Start(t, spec, srv.URL)
	base := proxy.URL + "/"
	client, err := gh.NewClient(gh.WithURLs(&base, &base), gh.WithAuthToken("ghp_prism"),
		gh.WithHTTPClient(&http.Client{Transport: proxy.Transport(nil)}), gh.WithDisableRateLimitCheck())
	if err != nil {
		t.Fatal(err)
	}
	c := github.New(client, "acme", "widgets", &github.Config{Clock: clk, SearchLag: boundLag, ClockSkew: skew, MaxRetries: -1, Timeout: 5 * time.Minute})
	ctx := context.Background()

	is, err := c.Issues.Create(ctx, "prism-issue", gh.CreateIssueRequest{Title: "Export fails", Body: gh.Ptr("On empty carts."), Labels: []string{"bug"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Issues.Create(ctx, "prism-bare", gh.CreateIssueRequest{Title: "No body"}); err != nil {
		t.Fatal(err)
	}
	cm, err := c.Comments.Create(ctx, "prism-comment", is.GetNumber(), "Looking into it.")
	if err != nil {
		t.Fatal(err)
	}
	for _, advance := range []time.Duration{0, time.Hour} { // through the list, then the search
		clk.Advance(advance)
		if res, err := c.Issues.Lookup(ctx, "prism-issue"); err != nil || res.Ref != is.Ref() {
			t.Errorf("+%s: issue lookup %+v, %v", advance, res, err)
		}
		if res, err := c.Comments.Lookup(ctx, "prism-comment"); err != nil || res.Ref != cm.Ref() {
			t.Errorf("+%s: comment lookup %+v, %v", advance, res, err)
		}
		if res, err := c.Issues.Lookup(ctx, "prism-none"); err != nil || res.Status != providers.NotFound {
			t.Errorf("+%s: absent issue %+v, %v", advance, res, err)
		}
	}
	// GitHub's errors, as the fake answers them.
	if _, err := c.Issues.Create(ctx, "prism-long", gh.CreateIssueRequest{Title: string(make([]byte, 300))}); status(err) != http.StatusUnprocessableEntity {
		t.Errorf("long title: %v", err)
	}
	if _, err := c.Comments.Create(ctx, "prism-missing", 99, "On no issue"); status(err) != http.StatusNotFound {
		t.Errorf("missing issue: %v", err)
	}
	if _, err := github.New(client, "acme", "gadgets", nil).Issues.Create(ctx, "prism-repo", gh.CreateIssueRequest{Title: "t"}); status(err) != http.StatusNotFound {
		t.Errorf("unknown repository: %v", err)
	}
	proxy.Check(t)
	t.Logf("%d exchanges validated; warnings: %v", proxy.Exchanges(), proxy.Warnings())
}
