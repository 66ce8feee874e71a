package githubfake

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/oncely/oncely/clock"
	"github.com/oncely/oncely/fakes"
	"github.com/oncely/oncely/fakes/fault"
	"github.com/oncely/oncely/fakes/internal/fakehttp"
)

// Effect kinds recorded in the journal.
const (
	// KindIssue is an issue opened through POST /repos/{owner}/{repo}/issues.
	KindIssue = "github.issue"
	// KindIssueComment is a comment added through
	// POST /repos/{owner}/{repo}/issues/{issue_number}/comments.
	KindIssueComment = "github.issue_comment"
)

// Limits of GitHub's validation that the fake applies.
const (
	MaxTitle = 256   // characters in an issue title
	MaxBody  = 65536 // characters in an issue or comment body
)

// Documentation URLs of GitHub's error bodies. go-github recognises a
// secondary rate limit by the suffix of SecondaryRateLimitDoc.
const (
	RateLimitDoc          = "https://docs.github.com/rest/using-the-rest-api/rate-limits-for-the-rest-api#about-primary-rate-limits"
	SecondaryRateLimitDoc = "https://docs.github.com/rest/using-the-rest-api/rate-limits-for-the-rest-api#about-secondary-rate-limits"
)

// markerRE finds the key marker package providers/github writes.
var markerRE = regexp.MustCompile(`<!-- oncely-key: (\S+) -->`)

// KeyOf returns the key in body's "<!-- oncely-key: KEY -->" marker, or
// "" without one.
func KeyOf(body string) string {
	if m := markerRE.FindStringSubmatch(body); m != nil {
		return m[1]
	}
	return ""
}

// Config configures a fake. The zero value (or nil) gives the defaults.
type Config struct {
	// Seed seeds node ids and random faults, so a run can be replayed.
	Seed int64
	// Clock is the fake's time (default: the system clock): timestamps,
	// the index lag and the rate-limit windows read it.
	Clock clock.Clock
	// IndexLag is how long after it was written an issue or a comment
	// shows in GET /search/issues (default 0: at once).
	IndexLag time.Duration
	// Repos, when set, are the only repositories ("owner/name") that
	// exist; others answer 404. Empty: every repository exists.
	Repos []string
	// Token, when set, is the only token accepted (as "Bearer T" or
	// "token T"); others answer 401. Empty: any request is accepted.
	Token string
	// Login is the user the token belongs to (default "oncely-bot").
	Login string
	// RateLimit, when positive, is the primary rate limit of the core API:
	// requests per hour. SearchRateLimit, when positive, is the search
	// API's: requests per minute. 0: no limit, no X-RateLimit headers.
	RateLimit, SearchRateLimit int
}

type comment struct {
	id        int64
	nodeID    string
	issue     *issue
	body      string
	createdAt time.Time
}

type issue struct {
	repo      *repo
	id        int64
	nodeID    string
	number    int
	title     string
	body      *string
	labels    []string
	createdAt time.Time
	updatedAt time.Time
	comments  []*comment
}

type repo struct {
	owner, name string
	issues      []*issue // by number - 1
}

type window struct {
	start time.Time
	used  int
}

// Handler is the fake GitHub API as an http.Handler.
type Handler struct {
	// Faults decides which requests fail; rules may be added at any time.
	Faults *fault.Injector

	cfg     Config
	now     func() time.Time
	mux     *http.ServeMux
	ids     *fakehttp.IDs
	journal fakes.Journal

	mu       sync.Mutex
	repos    map[string]*repo
	nextID   int64
	comments []*comment // every comment, in creation order
	core     window
	search   window
}

// NewHandler returns a fake with no issues, configured by cfg (nil for the
// defaults).
func NewHandler(cfg *Config) *Handler {
	var c Config
	if cfg != nil {
		c = *cfg
	}
	if c.Login == "" {
		c.Login = "oncely-bot"
	}
	h := &Handler{
		Faults: fault.NewInjector(c.Seed),
		cfg:    c,
		now:    fakehttp.Clock(c.Clock),
		ids:    fakehttp.NewIDs(c.Seed),
		mux:    http.NewServeMux(),
	}
	h.resetState()
	h.route("POST /repos/{owner}/{repo}/issues", false, h.createIssue)
	h.route("GET /repos/{owner}/{repo}/issues", false, h.listIssues)
	h.route("GET /repos/{owner}/{repo}/issues/{issue_number}", false, h.getIssue)
	h.route("POST /repos/{owner}/{repo}/issues/{issue_number}/comments", false, h.createComment)
	h.route("GET /repos/{owner}/{repo}/issues/{issue_number}/comments", false, h.listIssueComments)
	h.route("GET /repos/{owner}/{repo}/issues/comments", false, h.listRepoComments)
	h.route("GET /search/issues", true, h.searchIssues)
	h.mux.HandleFunc("GET /rate_limit", h.rateLimit)
	h.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		notModelled("route " + r.Method + " " + r.URL.Path).Write(w)
	})
	return h
}

func (h *Handler) resetState() {
	h.repos = map[string]*repo{}
	for _, full := range h.cfg.Repos {
		owner, name, _ := strings.Cut(full, "/")
		h.repos[strings.ToLower(full)] = &repo{owner: owner, name: name}
	}
	h.nextID = 1000
	h.comments = nil
	h.core, h.search = window{}, window{}
}

// route serves pattern: authentication, the rate limit, then the fault
// injector around fn, which runs as the commit step.
func (h *Handler) route(pattern string, search bool, fn func(r *http.Request) fault.Response) {
	h.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, fakehttp.MaxBody)
		if resp, ok := h.authenticate(r); !ok {
			resp.Write(w)
			return
		}
		if resp, ok := h.limit(w, search); !ok {
			resp.Write(w)
			return
		}
		h.Faults.Decide(r).Serve(w, r, faultError, func() fault.Response { return fn(r) })
	})
}

// ServeHTTP serves the fake API.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

// Journal returns the effects committed so far: one per issue opened and
// per comment added.
func (h *Handler) Journal() []fakes.Effect { return h.journal.Snapshot() }

// Reset forgets every issue, comment and effect, restarts ids from the
// seed, the rate-limit windows, and clears the fault rules (the fault log
// is kept).
func (h *Handler) Reset() {
	h.mu.Lock()
	h.resetState()
	h.mu.Unlock()
	h.journal.Reset()
	h.ids.Reset()
	h.Faults.Clear()
}

// errorBody is GitHub's error shape.
type errorBody struct {
	Message          string       `json:"message"`
	DocumentationURL string       `json:"documentation_url,omitempty"`
	Errors           []fieldError `json:"errors,omitempty"`
	Status           string       `json:"status,omitempty"`
}

type fieldError struct {
	Resource string `json:"resource"`
	Field    string `json:"field"`
	Code     string `json:"code"`
	Message  string `json:"message,omitempty"`
}

func ghError(status int, message, doc string, errs ...fieldError) fault.Response {
	return fakehttp.JSON(status, "application/json; charset=utf-8", errorBody{
		Message: message, DocumentationURL: doc, Errors: errs, Status: strconv.Itoa(status),
	})
}

// notModelled is the answer to what the fake does not model: 501, never a
// status GitHub would give for a request it refuses.
func notModelled(what string) fault.Response {
	return ghError(http.StatusNotImplemented, "githubfake: the fake does not model "+what+"; its answer says nothing about GitHub", "")
}

func notFound() fault.Response {
	return ghError(http.StatusNotFound, "Not Found", "https://docs.github.com/rest")
}

func validationFailed(errs ...fieldError) fault.Response {
	return ghError(http.StatusUnprocessableEntity, "Validation Failed", "https://docs.github.com/rest", errs...)
}

// faultError renders an injected failure: a 429 or a 403 as GitHub's
// secondary rate limit, anything else as a server error.
func faultError(status int, message string) fault.Response {
	switch status {
	case http.StatusTooManyRequests, http.StatusForbidden:
		return ghError(status, "You have exceeded a secondary rate limit. "+message, SecondaryRateLimitDoc)
	}
	return ghError(status, message, "")
}

func (h *Handler) authenticate(r *http.Request) (fault.Response, bool) {
	if h.cfg.Token == "" {
		return fault.Response{}, true
	}
	auth := r.Header.Get("Authorization")
	if auth == "Bearer "+h.cfg.Token || auth == "token "+h.cfg.Token {
		return fault.Response{}, true
	}
	if auth == "" {
		return ghError(http.StatusUnauthorized, "Requires authentication", "https://docs.github.com/rest"), false
	}
	return ghError(http.StatusUnauthorized, "Bad credentials", "https://docs.github.com/rest"), false
}

// limit counts the request against its rate limit and sets the
// X-RateLimit headers; past the limit it returns GitHub's 403.
func (h *Handler) limit(w http.ResponseWriter, search bool) (fault.Response, bool) {
	limit, period, win, resource := h.cfg.RateLimit, time.Hour, &h.core, "core"
	if search {
		limit, period, win, resource = h.cfg.SearchRateLimit, time.Minute, &h.search, "search"
	}
	if limit <= 0 {
		return fault.Response{}, true
	}
	h.mu.Lock()
	now := h.now()
	if win.start.IsZero() || !now.Before(win.start.Add(period)) {
		*win = window{start: now}
	}
	exceeded := win.used >= limit
	if !exceeded {
		win.used++
	}
	used, reset := win.used, win.start.Add(period)
	h.mu.Unlock()
	hd := w.Header()
	hd.Set("X-RateLimit-Limit", strconv.Itoa(limit))
	hd.Set("X-RateLimit-Remaining", strconv.Itoa(limit-used))
	hd.Set("X-RateLimit-Used", strconv.Itoa(used))
	hd.Set("X-RateLimit-Reset", strconv.FormatInt(reset.Unix(), 10))
	hd.Set("X-RateLimit-Resource", resource)
	if exceeded {
		return ghError(http.StatusForbidden, "API rate limit exceeded for user "+h.cfg.Login+".", RateLimitDoc), false
	}
	return fault.Response{}, true
}

func (h *Handler) rateLimit(w http.ResponseWriter, _ *http.Request) {
	h.mu.Lock()
	now := h.now()
	res := func(limit int, period time.Duration, win window) map[string]int64 {
		if limit <= 0 {
			return map[string]int64{"limit": 0, "remaining": 0, "used": 0, "reset": 0}
		}
		if win.start.IsZero() || !now.Before(win.start.Add(period)) {
			win = window{start: now}
		}
		return map[string]int64{"limit": int64(limit), "remaining": int64(limit - win.used), "used": int64(win.used), "reset": win.start.Add(period).Unix()}
	}
	core, search := res(h.cfg.RateLimit, time.Hour, h.core), res(h.cfg.SearchRateLimit, time.Minute, h.search)
	h.mu.Unlock()
	fakehttp.JSON(http.StatusOK, "", map[string]any{"resources": map[string]any{"core": core, "search": search}, "rate": core}).Write(w)
}

// repoOf returns the repository the request names, creating it when
// Config.Repos is empty. h.mu must be held.
func (h *Handler) repoOf(r *http.Request) *repo {
	owner, name := r.PathValue("owner"), r.PathValue("repo")
	k := strings.ToLower(owner + "/" + name)
	rp, ok := h.repos[k]
	if !ok && len(h.cfg.Repos) == 0 {
		rp = &repo{owner: owner, name: name}
		h.repos[k] = rp
	}
	return rp
}

// issueOf returns the issue the request names. h.mu must be held.
func (h *Handler) issueOf(r *http.Request) (*repo, *issue) {
	rp := h.repoOf(r)
	if rp == nil {
		return nil, nil
	}
	n, err := strconv.Atoi(r.PathValue("issue_number"))
	if err != nil || n < 1 || n > len(rp.issues) {
		return rp, nil
	}
	return rp, rp.issues[n-1]
}

// decodeObject reads a JSON object body; fields outside allowed answer
// that the fake does not model them.
func decodeObject(r *http.Request, route string, allowed ...string) (map[string]json.RawMessage, fault.Response, bool) {
	body, tooLarge, err := fakehttp.ReadBody(nil, r)
	if tooLarge {
		return nil, ghError(http.StatusRequestEntityTooLarge, "Payload too large", ""), false
	}
	var obj map[string]json.RawMessage
	if err != nil || json.Unmarshal(body, &obj) != nil || obj == nil {
		return nil, ghError(http.StatusBadRequest, "Problems parsing JSON", "https://docs.github.com/rest"), false
	}
	for k := range obj {
		if !slices.Contains(allowed, k) {
			return nil, notModelled(fmt.Sprintf("the body field %q of %s", k, route)), false
		}
	}
	return obj, fault.Response{}, true
}

// text reads a string (or, for a title, a number, which GitHub accepts)
// field; ok is false when it has another type.
func text(raw json.RawMessage, numberOK bool) (s string, present, ok bool) {
	if raw == nil || string(raw) == "null" {
		return "", false, true
	}
	if json.Unmarshal(raw, &s) == nil {
		return s, true, true
	}
	var n json.Number
	if numberOK && json.Unmarshal(raw, &n) == nil {
		return n.String(), true, true
	}
	return "", true, false
}

const issuesRoute = "POST /repos/{owner}/{repo}/issues"

func (h *Handler) createIssue(r *http.Request) fault.Response {
	obj, resp, ok := decodeObject(r, issuesRoute, "title", "body", "labels")
	if !ok {
		return resp
	}
	title, present, ok := text(obj["title"], true)
	switch {
	case !ok:
		return validationFailed(fieldError{Resource: "Issue", Field: "title", Code: "invalid"})
	case !present || strings.TrimSpace(title) == "":
		return validationFailed(fieldError{Resource: "Issue", Field: "title", Code: "missing_field"})
	case utf8.RuneCountInString(title) > MaxTitle:
		return validationFailed(fieldError{Resource: "Issue", Field: "title", Code: "custom", Message: fmt.Sprintf("title is too long (maximum is %d characters)", MaxTitle)})
	}
	var body *string
	b, present, ok := text(obj["body"], false)
	switch {
	case !ok:
		return validationFailed(fieldError{Resource: "Issue", Field: "body", Code: "invalid"})
	case utf8.RuneCountInString(b) > MaxBody:
		return validationFailed(fieldError{Resource: "Issue", Field: "body", Code: "custom", Message: fmt.Sprintf("body is too long (maximum is %d characters)", MaxBody)})
	case present:
		body = &b
	}
	var labels []string
	if raw := obj["labels"]; raw != nil && string(raw) != "null" {
		if err := json.Unmarshal(raw, &labels); err != nil {
			return notModelled("labels given other than as a list of names")
		}
		for _, l := range labels {
			if strings.TrimSpace(l) == "" || utf8.RuneCountInString(l) > 50 {
				return validationFailed(fieldError{Resource: "Label", Field: "name", Code: "invalid"})
			}
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	rp := h.repoOf(r)
	if rp == nil {
		return notFound()
	}
	now := h.now()
	h.nextID++
	is := &issue{
		repo: rp, id: h.nextID, nodeID: h.ids.New("I_kwDO", 14), number: len(rp.issues) + 1,
		title: title, body: body, labels: labels, createdAt: now, updatedAt: now,
	}
	rp.issues = append(rp.issues, is)
	h.journal.Append(fakes.Effect{
		Kind: KindIssue, ID: rp.owner + "/" + rp.name + "#" + strconv.Itoa(is.number), Key: KeyOf(b),
		Params: map[string]string{"repo": rp.owner + "/" + rp.name, "title": title, "labels": strings.Join(labels, ",")},
		At:     now,
	})
	return h.issueResponse(http.StatusCreated, r, is)
}

func (h *Handler) getIssue(r *http.Request) fault.Response {
	if len(r.URL.Query()) > 0 {
		return notModelled("query parameters of GET /repos/{owner}/{repo}/issues/{issue_number}")
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	_, is := h.issueOf(r)
	if is == nil {
		return notFound()
	}
	return h.issueResponse(http.StatusOK, r, is)
}

const commentsRoute = "POST /repos/{owner}/{repo}/issues/{issue_number}/comments"

func (h *Handler) createComment(r *http.Request) fault.Response {
	obj, resp, ok := decodeObject(r, commentsRoute, "body")
	if !ok {
		return resp
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	_, is := h.issueOf(r)
	if is == nil {
		return notFound()
	}
	body, present, ok := text(obj["body"], false)
	switch {
	case !ok:
		return validationFailed(fieldError{Resource: "IssueComment", Field: "body", Code: "invalid"})
	case !present || strings.TrimSpace(body) == "":
		return validationFailed(fieldError{Resource: "IssueComment", Field: "body", Code: "missing_field"})
	case utf8.RuneCountInString(body) > MaxBody:
		return validationFailed(fieldError{Resource: "IssueComment", Field: "body", Code: "custom", Message: fmt.Sprintf("body is too long (maximum is %d characters)", MaxBody)})
	}
	now := h.now()
	h.nextID++
	c := &comment{id: h.nextID, nodeID: h.ids.New("IC_kwDO", 14), issue: is, body: body, createdAt: now}
	is.comments = append(is.comments, c)
	is.updatedAt = now
	h.comments = append(h.comments, c)
	full := is.repo.owner + "/" + is.repo.name
	h.journal.Append(fakes.Effect{
		Kind: KindIssueComment, ID: strconv.FormatInt(c.id, 10), Key: KeyOf(body),
		Params: map[string]string{"repo": full, "issue": strconv.Itoa(is.number)},
		At:     now,
	})
	return fakehttp.JSON(http.StatusCreated, "application/json; charset=utf-8", h.commentJSON(r, c))
}

// page is the pagination of a list request.
type page struct {
	perPage, page int
}

// query checks the request's parameters against the modelled ones and
// reads the pagination.
func query(r *http.Request, route string, allowed ...string) (page, fault.Response, bool) {
	q := r.URL.Query()
	for k := range q {
		if !slices.Contains(allowed, k) && k != "per_page" && k != "page" {
			return page{}, notModelled(fmt.Sprintf("the parameter %q of %s", k, route)), false
		}
	}
	p := page{perPage: 30, page: 1}
	if v := q.Get("per_page"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return page{}, notModelled(fmt.Sprintf("per_page=%q (GitHub's answer to it is not modelled)", v)), false
		}
		p.perPage = min(n, 100)
	}
	if v := q.Get("page"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return page{}, notModelled(fmt.Sprintf("page=%q (GitHub's answer to it is not modelled)", v)), false
		}
		p.page = n
	}
	return p, fault.Response{}, true
}

// since reads the since parameter (ISO 8601).
func since(r *http.Request) (time.Time, bool) {
	v := r.URL.Query().Get("since")
	if v == "" {
		return time.Time{}, true
	}
	t, err := time.Parse(time.RFC3339, v)
	return t, err == nil
}

func invalidParam(name, value string) fault.Response {
	return validationFailed(fieldError{Resource: "Search", Field: name, Code: "invalid", Message: fmt.Sprintf("%s is not a valid value for %s", value, name)})
}

// paginate cuts items to the page and sets GitHub's Link header.
func paginate[T any](r *http.Request, p page, items []T) ([]T, http.Header) {
	hd := http.Header{}
	last := max(1, (len(items)+p.perPage-1)/p.perPage)
	link := func(n int, rel string) string {
		u := *r.URL
		u.Scheme, u.Host = "http", r.Host
		q := u.Query()
		q.Set("page", strconv.Itoa(n))
		q.Set("per_page", strconv.Itoa(p.perPage))
		u.RawQuery = q.Encode()
		return fmt.Sprintf("<%s>; rel=%q", u.String(), rel)
	}
	var links []string
	if p.page < last {
		links = append(links, link(p.page+1, "next"), link(last, "last"))
	}
	if p.page > 1 {
		links = append(links, link(1, "first"), link(min(p.page-1, last), "prev"))
	}
	if len(links) > 0 {
		hd.Set("Link", strings.Join(links, ", "))
	}
	from := min((p.page-1)*p.perPage, len(items))
	return items[from:min(from+p.perPage, len(items))], hd
}

func listResponse(hd http.Header, v any) fault.Response {
	resp := fakehttp.JSON(http.StatusOK, "application/json; charset=utf-8", v)
	for k, vs := range hd {
		resp.Header[k] = vs
	}
	return resp
}

const listIssuesRoute = "GET /repos/{owner}/{repo}/issues"

func (h *Handler) listIssues(r *http.Request) fault.Response {
	p, resp, ok := query(r, listIssuesRoute, "state", "sort", "direction", "since")
	if !ok {
		return resp
	}
	q := r.URL.Query()
	state, sort, dir := q.Get("state"), q.Get("sort"), q.Get("direction")
	if !slices.Contains([]string{"", "open", "closed", "all"}, state) {
		return invalidParam("state", state)
	}
	if !slices.Contains([]string{"", "created", "updated", "comments"}, sort) {
		return invalidParam("sort", sort)
	}
	if !slices.Contains([]string{"", "asc", "desc"}, dir) {
		return invalidParam("direction", dir)
	}
	from, ok := since(r)
	if !ok {
		return invalidParam("since", q.Get("since"))
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	rp := h.repoOf(r)
	if rp == nil {
		return notFound()
	}
	var out []*issue
	if state != "closed" { // every issue of the fake is open
		for _, is := range rp.issues {
			if !is.updatedAt.Truncate(time.Second).Before(from) {
				out = append(out, is)
			}
		}
	}
	sortIssues(out, sort, dir != "asc")
	items, hd := paginate(r, p, out)
	js := make([]issueJSON, len(items))
	for i, is := range items {
		js[i] = h.issueJSON(r, is)
	}
	return listResponse(hd, js)
}

// sortIssues orders issues by created (default), updated or comments;
// ties by number.
func sortIssues(is []*issue, by string, desc bool) {
	key := func(x *issue) int64 {
		switch by {
		case "updated":
			return x.updatedAt.UnixNano()
		case "comments":
			return int64(len(x.comments))
		}
		return x.createdAt.UnixNano()
	}
	slices.SortStableFunc(is, func(a, b *issue) int {
		c := cmpInt(key(a), key(b))
		if c == 0 {
			c = cmpInt(a.id, b.id)
		}
		if desc {
			return -c
		}
		return c
	})
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func (h *Handler) listIssueComments(r *http.Request) fault.Response {
	p, resp, ok := query(r, "GET /repos/{owner}/{repo}/issues/{issue_number}/comments", "since")
	if !ok {
		return resp
	}
	from, ok := since(r)
	if !ok {
		return invalidParam("since", r.URL.Query().Get("since"))
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	_, is := h.issueOf(r)
	if is == nil {
		return notFound()
	}
	return h.commentList(r, p, is.comments, from, "", false)
}

func (h *Handler) listRepoComments(r *http.Request) fault.Response {
	p, resp, ok := query(r, "GET /repos/{owner}/{repo}/issues/comments", "sort", "direction", "since")
	if !ok {
		return resp
	}
	q := r.URL.Query()
	sort, dir := q.Get("sort"), q.Get("direction")
	if !slices.Contains([]string{"", "created", "updated"}, sort) {
		return invalidParam("sort", sort)
	}
	if !slices.Contains([]string{"", "asc", "desc"}, dir) {
		return invalidParam("direction", dir)
	}
	from, ok := since(r)
	if !ok {
		return invalidParam("since", q.Get("since"))
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	rp := h.repoOf(r)
	if rp == nil {
		return notFound()
	}
	var cs []*comment
	for _, c := range h.comments {
		if c.issue.repo == rp {
			cs = append(cs, c)
		}
	}
	// GitHub applies direction only with sort; the default is ascending.
	return h.commentList(r, p, cs, from, sort, sort != "" && dir == "desc")
}

func (h *Handler) commentList(r *http.Request, p page, cs []*comment, from time.Time, _ string, desc bool) fault.Response {
	var out []*comment
	for _, c := range cs {
		if !c.createdAt.Truncate(time.Second).Before(from) {
			out = append(out, c)
		}
	}
	if desc {
		slices.Reverse(out)
	}
	items, hd := paginate(r, p, out)
	js := make([]commentJSON, len(items))
	for i, c := range items {
		js[i] = h.commentJSON(r, c)
	}
	return listResponse(hd, js)
}

func (h *Handler) issueResponse(status int, r *http.Request, is *issue) fault.Response {
	return fakehttp.JSON(status, "application/json; charset=utf-8", h.issueJSON(r, is))
}
