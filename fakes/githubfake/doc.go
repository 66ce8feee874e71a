// Package githubfake is a fake of GitHub's REST API for issues and issue
// comments, where it matters for retries: an API with no idempotency at
// all, whose search index lags behind writes. The official clients
// (go-github, and @octokit/rest from npm) work against it unchanged.
//
// # Routes
//
//	POST /repos/{owner}/{repo}/issues                         {"title", "body", "labels"} → 201 the issue
//	GET  /repos/{owner}/{repo}/issues                         state, sort, direction, since, per_page, page
//	GET  /repos/{owner}/{repo}/issues/{issue_number}          → the issue, or 404
//	POST /repos/{owner}/{repo}/issues/{issue_number}/comments {"body"} → 201 the comment
//	GET  /repos/{owner}/{repo}/issues/{issue_number}/comments since, per_page, page
//	GET  /repos/{owner}/{repo}/issues/comments                sort, direction, since, per_page, page
//	GET  /search/issues                                       q, sort, order, per_page, page
//	GET  /rate_limit                                          the limits and what is left of them
//
// Every POST creates: a repeat of a request opens a second issue or adds a
// second comment. Lists are consistent (they show every committed write at
// once), paginated with GitHub's Link header (per_page default 30, at most
// 100), and filter on since by updated_at, as GitHub does.
//
// # The search index
//
// GET /search/issues reads an index that shows an issue only
// Config.IndexLag after it was opened, and a comment only IndexLag after
// it was added, by the fake's clock (Config.Clock, injectable). GitHub
// documents no bound for its own lag; it is usually seconds and can be
// minutes. The query language modelled is: free words and "quoted
// phrases", matched case-insensitively as substrings of the fields in:
// names (title and body by default; in:title, in:body, in:comments, or a
// comma list), and the qualifiers repo:OWNER/NAME, is:issue, is:pr,
// type:issue, type:pr, is:open, is:closed and state:open|closed. Results are
// issues newest first (sort=created|updated|comments and order=asc|desc are
// honoured), at most 1000, with total_count, incomplete_results false and
// search_type "lexical".
//
// # Validation, errors and limits
//
// Errors have GitHub's shape, {"message", "documentation_url"} and, for
// 422, "errors": [{"resource", "field", "code"}]. A body that is not a JSON
// object answers 400 "Problems parsing JSON"; a missing or blank title or
// comment body, a title over 256 characters or a body over 65536 answer
// 422 "Validation Failed"; an unknown repository (when Config.Repos is set)
// or issue answers 404 "Not Found"; a wrong token (when Config.Token is
// set) answers 401 "Bad credentials"; a search without q answers 422.
//
// Config.RateLimit and Config.SearchRateLimit turn on GitHub's primary
// rate limits (per hour for the core API, per minute for search, windows
// starting at the first request): every answer then carries X-RateLimit-*
// headers, and a request past the limit answers 403 with
// X-RateLimit-Remaining 0 and X-RateLimit-Reset, the shape go-github reads
// as a RateLimitError. Injected 429 and 403 faults (package fault) answer
// as GitHub's secondary rate limit does, with a documentation_url ending in
// "secondary-rate-limits" and the rule's Retry-After.
//
// # What is not modelled
//
// Any other route, and any parameter or body field not listed above
// (assignees, milestone, issue types, label filters, reactions, pull
// requests, editing, closing, locking, GraphQL), answers 501 with a message
// saying the fake does not model it: such an answer is never evidence of
// what GitHub would do. Labels are accepted by name and created on the
// fly. Conditional requests (ETag), the permission model beyond one token,
// issues disabled on a repository (410), abuse detection of content, and
// the search ranking ("best match" is newest first here) are not modelled.
// The search's word matching is by substring, wider than GitHub's
// tokenizer; the lag is one fixed delay, while GitHub's varies.
//
// # Journal
//
// Each issue opened is a KindIssue effect and each comment a
// KindIssueComment effect. Their Key is the value of a hidden marker in
// the body, an HTML comment "<!-- oncely-key: KEY -->" (the marker
// package providers/github writes), or "" without one.
package githubfake
