package github

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	gh "github.com/google/go-github/v93/github"

	"github.com/oncely/oncely/providers"
)

// Comments adds comments to the issues of one repository and finds them
// by downstream key. It implements providers.Adapter.
type Comments struct{ a *api }

// Comment is an issue comment as GitHub returns it, with where it is.
type Comment struct {
	*gh.IssueComment
	// Repo is "owner/name"; Issue the issue's number.
	Repo  string
	Issue int
}

// Ref is the comment's id, the reference oncely records.
func (c *Comment) Ref() string { return strconv.FormatInt(c.GetID(), 10) }

// Summary describes the comment in one line.
func (c *Comment) Summary() string {
	return fmt.Sprintf("comment %d added to %s#%d", c.GetID(), c.Repo, c.Issue)
}

// Create adds a comment with body, and Marker(downstreamKey) appended, to
// the issue numbered issue. body must not be blank, and with its marker
// must fit MaxBody; nothing is sent when it does not.
//
// GitHub does not deduplicate: once the request may have reached it, a
// failure is ambiguous and Create does not resend it (Lookup tells).
func (s *Comments) Create(ctx context.Context, downstreamKey string, issue int, body string) (*Comment, error) {
	const op = "POST /repos/{owner}/{repo}/issues/{issue_number}/comments"
	if err := s.a.check(op, downstreamKey, body); err != nil {
		return nil, err
	}
	switch {
	case strings.TrimSpace(body) == "":
		return nil, invalid(op, fmt.Errorf("%w: a comment needs a body", providers.ErrInvalidRequest))
	case issue <= 0:
		return nil, invalid(op, fmt.Errorf("%w: issue number %d", providers.ErrInvalidRequest, issue))
	}
	var c *gh.IssueComment
	if err := s.a.do(ctx, op, false, func(ctx context.Context) (*gh.Response, error) {
		var resp *gh.Response
		var err error
		c, resp, err = s.a.gh.Issues.CreateComment(ctx, s.a.owner, s.a.repo, issue, gh.IssueCommentRequest{Body: withMarker(body, downstreamKey)})
		return resp, err
	}); err != nil {
		return nil, err
	}
	if c == nil || c.GetID() == 0 {
		return nil, badAnswer(op, "a comment without an id")
	}
	return &Comment{IssueComment: c, Repo: s.a.fullName(), Issue: issue}, nil
}

// Capabilities: no deduplication; a lookup through a lagging search index,
// completed by a consistent list of the recent comments.
func (s *Comments) Capabilities() providers.Capabilities {
	return providers.Capabilities{Lookup: providers.Eventual, IndexLag: s.a.cfg.SearchLag}
}

// Lookup finds the comment added with downstreamKey: it searches the
// repository's issues whose comments hold the key (the index covers
// comments older than SearchLag) and reads their comments, then lists the
// repository's comments of the last SearchLag + ClockSkew, newest first.
// Found when a comment carries the exact marker; NotFound when every
// search, read and list ended within its bounds; Inconclusive otherwise.
func (s *Comments) Lookup(ctx context.Context, downstreamKey string) (providers.LookupResult, error) {
	if err := s.a.check("lookup", downstreamKey, ""); err != nil {
		return providers.LookupResult{}, err
	}
	since := s.a.cfg.Clock.Now().Add(-s.a.cfg.SearchLag - s.a.cfg.ClockSkew)
	marker := Marker(downstreamKey)
	var hit *Comment
	complete := true
	q := quoteTerm(downstreamKey) + " repo:" + s.a.fullName() + " in:comments"
	_, searched, err := s.a.search(ctx, q, func(is *gh.Issue) (bool, error) {
		c, whole, err := s.scan(ctx, is.GetNumber(), marker, time.Time{})
		if err != nil {
			return false, err
		}
		complete = complete && whole
		hit = c
		return c != nil, nil
	})
	if err != nil {
		return providers.LookupResult{}, err
	}
	if hit != nil {
		return found(hit.Ref(), hit.Summary()), nil
	}
	c, listed, err := s.scan(ctx, 0, marker, since)
	switch {
	case err != nil:
		return providers.LookupResult{}, err
	case c != nil:
		return found(c.Ref(), c.Summary()), nil
	case searched && complete && listed:
		return providers.LookupResult{Status: providers.NotFound}, nil
	}
	return providers.LookupResult{Status: providers.Inconclusive}, nil
}

// scan lists the comments of the issue numbered issue (0: of the whole
// repository, newest first, since from) up to MaxListPages pages, for
// the one carrying marker. whole is false when the bound cut the list.
func (s *Comments) scan(ctx context.Context, issue int, marker string, from time.Time) (hit *Comment, whole bool, err error) {
	opts := &gh.IssueListCommentsOptions{ListOptions: gh.ListOptions{PerPage: pageSize}}
	op := "GET /repos/{owner}/{repo}/issues/{issue_number}/comments"
	if issue == 0 {
		sort, dir := "created", "desc"
		opts.Sort, opts.Direction, opts.Since = &sort, &dir, &from
		op = "GET /repos/{owner}/{repo}/issues/comments"
	}
	for range s.a.cfg.MaxListPages {
		var page []*gh.IssueComment
		var resp *gh.Response
		if err := s.a.do(ctx, op, true, func(ctx context.Context) (*gh.Response, error) {
			var err error
			page, resp, err = s.a.gh.Issues.ListComments(ctx, s.a.owner, s.a.repo, issue, opts)
			return resp, err
		}); err != nil {
			return nil, false, err
		}
		for _, c := range page {
			if strings.Contains(c.GetBody(), marker) {
				n := issue
				if n == 0 {
					n = issueNumber(c.GetIssueURL())
				}
				return &Comment{IssueComment: c, Repo: s.a.fullName(), Issue: n}, true, nil
			}
		}
		older := issue == 0 && len(page) > 0 && page[len(page)-1].GetCreatedAt().Before(from)
		if resp.NextPage == 0 || older {
			return nil, true, nil
		}
		opts.ListOptions.Page = resp.NextPage
	}
	return nil, false, nil
}

// issueNumber reads the number at the end of an issue URL (0 if none).
func issueNumber(u string) int {
	n, _ := strconv.Atoi(u[strings.LastIndexByte(u, '/')+1:])
	return n
}

var _ providers.Adapter = (*Comments)(nil)
