package githubfake

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/oncely/oncely/fakes"
	"github.com/oncely/oncely/fakes/fault"
)

// userJSON is GitHub's simple-user.
type userJSON struct {
	Login             string `json:"login"`
	ID                int64  `json:"id"`
	NodeID            string `json:"node_id"`
	AvatarURL         string `json:"avatar_url"`
	GravatarID        string `json:"gravatar_id"`
	URL               string `json:"url"`
	HTMLURL           string `json:"html_url"`
	FollowersURL      string `json:"followers_url"`
	FollowingURL      string `json:"following_url"`
	GistsURL          string `json:"gists_url"`
	StarredURL        string `json:"starred_url"`
	SubscriptionsURL  string `json:"subscriptions_url"`
	OrganizationsURL  string `json:"organizations_url"`
	ReposURL          string `json:"repos_url"`
	EventsURL         string `json:"events_url"`
	ReceivedEventsURL string `json:"received_events_url"`
	Type              string `json:"type"`
	SiteAdmin         bool   `json:"site_admin"`
}

type labelJSON struct {
	ID          int64   `json:"id"`
	NodeID      string  `json:"node_id"`
	URL         string  `json:"url"`
	Name        string  `json:"name"`
	Description *string `json:"description"`
	Color       string  `json:"color"`
	Default     bool    `json:"default"`
}

// issueJSON is GitHub's issue object, as far as the fake fills it.
type issueJSON struct {
	ID                int64       `json:"id"`
	NodeID            string      `json:"node_id"`
	URL               string      `json:"url"`
	RepositoryURL     string      `json:"repository_url"`
	LabelsURL         string      `json:"labels_url"`
	CommentsURL       string      `json:"comments_url"`
	EventsURL         string      `json:"events_url"`
	HTMLURL           string      `json:"html_url"`
	Number            int         `json:"number"`
	State             string      `json:"state"`
	StateReason       *string     `json:"state_reason"`
	Title             string      `json:"title"`
	Body              *string     `json:"body"`
	User              userJSON    `json:"user"`
	Labels            []labelJSON `json:"labels"`
	Assignee          *userJSON   `json:"assignee"`
	Assignees         []userJSON  `json:"assignees"`
	Milestone         *struct{}   `json:"milestone"`
	Locked            bool        `json:"locked"`
	ActiveLockReason  *string     `json:"active_lock_reason"`
	Comments          int         `json:"comments"`
	ClosedAt          *string     `json:"closed_at"`
	CreatedAt         string      `json:"created_at"`
	UpdatedAt         string      `json:"updated_at"`
	AuthorAssociation string      `json:"author_association"`
	// Score is set in search results only.
	Score *float64 `json:"score,omitempty"`
}

// commentJSON is GitHub's issue-comment object.
type commentJSON struct {
	ID                int64    `json:"id"`
	NodeID            string   `json:"node_id"`
	URL               string   `json:"url"`
	HTMLURL           string   `json:"html_url"`
	Body              string   `json:"body"`
	User              userJSON `json:"user"`
	CreatedAt         string   `json:"created_at"`
	UpdatedAt         string   `json:"updated_at"`
	IssueURL          string   `json:"issue_url"`
	AuthorAssociation string   `json:"author_association"`
}

// stamp formats t as GitHub does: RFC 3339 in UTC, whole seconds.
func stamp(t time.Time) string { return t.UTC().Truncate(time.Second).Format(time.RFC3339) }

// base is the API's base URL as the client reached it.
func base(r *http.Request) string { return "http://" + r.Host }

func (h *Handler) user(r *http.Request) userJSON {
	api, web := base(r)+"/users/"+h.cfg.Login, base(r)+"/"+h.cfg.Login
	return userJSON{
		Login: h.cfg.Login, ID: 1, NodeID: "U_kgDOAAAAAQ", AvatarURL: base(r) + "/avatars/u/1",
		URL: api, HTMLURL: web, FollowersURL: api + "/followers", FollowingURL: api + "/following{/other_user}",
		GistsURL: api + "/gists{/gist_id}", StarredURL: api + "/starred{/owner}{/repo}",
		SubscriptionsURL: api + "/subscriptions", OrganizationsURL: api + "/orgs", ReposURL: api + "/repos",
		EventsURL: api + "/events{/privacy}", ReceivedEventsURL: api + "/received_events", Type: "User",
	}
}

func (h *Handler) issueJSON(r *http.Request, is *issue) issueJSON {
	repoAPI := base(r) + "/repos/" + is.repo.owner + "/" + is.repo.name
	api := repoAPI + "/issues/" + strconv.Itoa(is.number)
	labels := make([]labelJSON, len(is.labels))
	for i, l := range is.labels {
		labels[i] = labelJSON{ID: int64(i + 1), NodeID: "LA_kwDO" + strconv.Itoa(i+1), URL: repoAPI + "/labels/" + l, Name: l, Color: "ededed"}
	}
	return issueJSON{
		ID: is.id, NodeID: is.nodeID, URL: api, RepositoryURL: repoAPI,
		LabelsURL: api + "/labels{/name}", CommentsURL: api + "/comments", EventsURL: api + "/events",
		HTMLURL: base(r) + "/" + is.repo.owner + "/" + is.repo.name + "/issues/" + strconv.Itoa(is.number),
		Number:  is.number, State: "open", Title: is.title, Body: is.body, User: h.user(r),
		Labels: labels, Assignees: []userJSON{}, Comments: len(is.comments),
		CreatedAt: stamp(is.createdAt), UpdatedAt: stamp(is.updatedAt), AuthorAssociation: "OWNER",
	}
}

func (h *Handler) commentJSON(r *http.Request, c *comment) commentJSON {
	is := c.issue
	repoAPI := base(r) + "/repos/" + is.repo.owner + "/" + is.repo.name
	web := base(r) + "/" + is.repo.owner + "/" + is.repo.name + "/issues/" + strconv.Itoa(is.number)
	return commentJSON{
		ID: c.id, NodeID: c.nodeID, URL: repoAPI + "/issues/comments/" + strconv.FormatInt(c.id, 10),
		HTMLURL: web + "#issuecomment-" + strconv.FormatInt(c.id, 10), Body: c.body, User: h.user(r),
		CreatedAt: stamp(c.createdAt), UpdatedAt: stamp(c.createdAt),
		IssueURL: repoAPI + "/issues/" + strconv.Itoa(is.number), AuthorAssociation: "OWNER",
	}
}

// searchQuery is a parsed q of GET /search/issues.
type searchQuery struct {
	terms []string // lower-cased words and phrases
	repo  string   // lower-cased owner/name, "" for all
	in    []string // title, body, comments
	none  bool     // matches nothing: pull requests, closed issues
}

// parseQuery parses q; a qualifier it does not model is an error.
func parseQuery(q string) (searchQuery, error) {
	var sq searchQuery
	var tokens []string
	for rest := strings.TrimSpace(q); rest != ""; rest = strings.TrimSpace(rest) {
		if rest[0] == '"' {
			end := strings.IndexByte(rest[1:], '"')
			if end < 0 {
				tokens = append(tokens, "\x00"+rest[1:])
				break
			}
			tokens = append(tokens, "\x00"+rest[1:1+end])
			rest = rest[2+end:]
			continue
		}
		end := strings.IndexAny(rest, " \t\n")
		if end < 0 {
			end = len(rest)
		}
		tokens = append(tokens, rest[:end])
		rest = rest[end:]
	}
	for _, t := range tokens {
		if phrase, ok := strings.CutPrefix(t, "\x00"); ok {
			if phrase != "" {
				sq.terms = append(sq.terms, strings.ToLower(phrase))
			}
			continue
		}
		name, value, qualified := strings.Cut(t, ":")
		if !qualified || name == "" || strings.HasPrefix(t, "http") {
			sq.terms = append(sq.terms, strings.ToLower(t))
			continue
		}
		switch v := strings.ToLower(value); strings.ToLower(name) {
		case "repo":
			sq.repo = v
		case "is", "type", "state":
			switch v {
			case "issue":
			case "pr", "pull-request":
				sq.none = true
			case "open":
			case "closed":
				sq.none = true // no issue of the fake is closed
			default:
				return sq, fmt.Errorf("the qualifier %s", t)
			}
		case "in":
			for _, f := range strings.Split(v, ",") {
				if f != "title" && f != "body" && f != "comments" {
					return sq, fmt.Errorf("the qualifier %s", t)
				}
				sq.in = append(sq.in, f)
			}
		default:
			return sq, fmt.Errorf("the qualifier %s", name+":")
		}
	}
	if len(sq.in) == 0 {
		sq.in = []string{"title", "body"}
	}
	return sq, nil
}

// matches reports whether the index, as of visible, shows is as a match.
func (sq searchQuery) matches(is *issue, visible time.Time) bool {
	if sq.none || is.createdAt.After(visible) {
		return false
	}
	if sq.repo != "" && sq.repo != strings.ToLower(is.repo.owner+"/"+is.repo.name) {
		return false
	}
	var fields []string
	for _, f := range sq.in {
		switch f {
		case "title":
			fields = append(fields, strings.ToLower(is.title))
		case "body":
			if is.body != nil {
				fields = append(fields, strings.ToLower(*is.body))
			}
		case "comments":
			for _, c := range is.comments {
				if !c.createdAt.After(visible) {
					fields = append(fields, strings.ToLower(c.body))
				}
			}
		}
	}
	for _, t := range sq.terms {
		if !slices.ContainsFunc(fields, func(f string) bool { return strings.Contains(f, t) }) {
			return false
		}
	}
	return true
}

// maxSearchResults is how many results GitHub's search gives at most.
const maxSearchResults = 1000

func (h *Handler) searchIssues(r *http.Request) fault.Response {
	p, resp, ok := query(r, "GET /search/issues", "q", "sort", "order")
	if !ok {
		return resp
	}
	qv := r.URL.Query()
	q := qv.Get("q")
	if strings.TrimSpace(q) == "" {
		return validationFailed(fieldError{Resource: "Search", Field: "q", Code: "missing"})
	}
	sort, order := qv.Get("sort"), qv.Get("order")
	if !slices.Contains([]string{"", "created", "updated", "comments"}, sort) {
		return notModelled(fmt.Sprintf("sort=%q of GET /search/issues", sort))
	}
	if !slices.Contains([]string{"", "asc", "desc"}, order) {
		return invalidParam("order", order)
	}
	sq, err := parseQuery(q)
	if err != nil {
		return notModelled(err.Error() + " in q of GET /search/issues")
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	visible := h.now().Add(-h.cfg.IndexLag)
	var out []*issue
	for _, rp := range h.repos {
		for _, is := range rp.issues {
			if sq.matches(is, visible) {
				out = append(out, is)
			}
		}
	}
	if sort == "" {
		sort = "created"
	}
	sortIssues(out, sort, order != "asc")
	total := len(out)
	out = out[:min(len(out), maxSearchResults)]
	items, hd := paginate(r, p, out)
	js := make([]issueJSON, len(items))
	for i, is := range items {
		js[i] = h.issueJSON(r, is)
		score := 1.0
		js[i].Score = &score
	}
	return listResponse(hd, struct {
		TotalCount        int         `json:"total_count"`
		IncompleteResults bool        `json:"incomplete_results"`
		SearchType        string      `json:"search_type"`
		Items             []issueJSON `json:"items"`
	}{total, false, "lexical", js})
}

// Server is a Handler listening on a loopback address, like
// httptest.Server: URL is its base URL (the API root, as
// "https://api.github.com" is GitHub's), Close shuts it down and Client
// returns an HTTP client for it (fakes.Listener).
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
