package github

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	gh "github.com/google/go-github/v93/github"

	"github.com/oncely/oncely/providers"
)

// Issues opens issues in one repository and finds them by downstream key.
// It implements providers.Adapter.
type Issues struct{ a *api }

// Issue is an issue as GitHub returns it, with the repository it is in.
type Issue struct {
	*gh.Issue
	// Repo is "owner/name".
	Repo string
}

// Ref is "owner/name#number", the reference oncely records.
func (i *Issue) Ref() string { return i.Repo + "#" + strconv.Itoa(i.GetNumber()) }

// Summary describes the issue in one line.
func (i *Issue) Summary() string { return fmt.Sprintf("issue %s opened: %s", i.Ref(), i.GetTitle()) }

// Create opens the issue req describes, with Marker(downstreamKey) appended
// to its body. req.Title must not be blank; the body with its marker must
// fit MaxBody. Nothing is sent when they do not.
//
// GitHub does not deduplicate: once the request may have reached it, a
// failure is ambiguous and Create does not resend it (Lookup tells).
func (s *Issues) Create(ctx context.Context, downstreamKey string, req gh.CreateIssueRequest) (*Issue, error) {
	const op = "POST /repos/{owner}/{repo}/issues"
	body := ""
	if req.Body != nil {
		body = *req.Body
	}
	if err := s.a.check(op, downstreamKey, body); err != nil {
		return nil, err
	}
	if strings.TrimSpace(req.Title) == "" {
		return nil, invalid(op, fmt.Errorf("%w: an issue needs a title", providers.ErrInvalidRequest))
	}
	marked := withMarker(body, downstreamKey)
	req.Body = &marked
	var is *gh.Issue
	if err := s.a.do(ctx, op, false, func(ctx context.Context) (*gh.Response, error) {
		var resp *gh.Response
		var err error
		is, resp, err = s.a.gh.Issues.Create(ctx, s.a.owner, s.a.repo, req)
		return resp, err
	}); err != nil {
		return nil, err
	}
	if is == nil || is.GetNumber() <= 0 {
		return nil, badAnswer(op, "an issue without a number")
	}
	return &Issue{Issue: is, Repo: s.a.fullName()}, nil
}

// Capabilities: no deduplication; a lookup through a lagging search index,
// completed by a consistent list of the recent issues.
func (s *Issues) Capabilities() providers.Capabilities {
	return providers.Capabilities{Lookup: providers.Eventual, IndexLag: s.a.cfg.SearchLag}
}

// Lookup finds the issue opened with downstreamKey: it searches the
// repository's issue bodies for the key (the index covers issues older
// than SearchLag), then lists the issues updated in the last SearchLag +
// ClockSkew, newest first. Found when either shows an issue carrying the
// exact marker; NotFound when both ended within their bounds; Inconclusive
// otherwise.
func (s *Issues) Lookup(ctx context.Context, downstreamKey string) (providers.LookupResult, error) {
	if err := s.a.check("lookup", downstreamKey, ""); err != nil {
		return providers.LookupResult{}, err
	}
	// The window is reckoned before the search, so that an issue the index
	// has not shown yet is within it.
	since := s.a.cfg.Clock.Now().Add(-s.a.cfg.SearchLag - s.a.cfg.ClockSkew)
	marker := Marker(downstreamKey)
	q := quoteTerm(downstreamKey) + " repo:" + s.a.fullName() + " is:issue in:body"
	hit, searched, err := s.a.search(ctx, q, func(is *gh.Issue) (bool, error) {
		return !is.IsPullRequest() && strings.Contains(is.GetBody(), marker), nil
	})
	if err != nil {
		return providers.LookupResult{}, err
	}
	if hit != nil {
		return s.found(hit), nil
	}
	opts := &gh.IssueListByRepoOptions{State: "all", Sort: "created", Direction: "desc", Since: since, ListOptions: gh.ListOptions{PerPage: pageSize}}
	for range s.a.cfg.MaxListPages {
		var page []*gh.Issue
		var resp *gh.Response
		if err := s.a.do(ctx, "GET /repos/{owner}/{repo}/issues", true, func(ctx context.Context) (*gh.Response, error) {
			var err error
			page, resp, err = s.a.gh.Issues.ListByRepo(ctx, s.a.owner, s.a.repo, opts)
			return resp, err
		}); err != nil {
			return providers.LookupResult{}, err
		}
		for _, is := range page {
			if !is.IsPullRequest() && strings.Contains(is.GetBody(), marker) {
				return s.found(is), nil
			}
		}
		// Newest first: past an issue older than the window, every later
		// one is older still.
		older := len(page) > 0 && page[len(page)-1].GetCreatedAt().Before(since)
		if resp.NextPage == 0 || older {
			if !searched {
				return providers.LookupResult{Status: providers.Inconclusive}, nil
			}
			return providers.LookupResult{Status: providers.NotFound}, nil
		}
		opts.ListOptions.Page = resp.NextPage
	}
	return providers.LookupResult{Status: providers.Inconclusive}, nil
}

func (s *Issues) found(is *gh.Issue) providers.LookupResult {
	i := &Issue{Issue: is, Repo: s.a.fullName()}
	return found(i.Ref(), i.Summary())
}

var _ providers.Adapter = (*Issues)(nil)
