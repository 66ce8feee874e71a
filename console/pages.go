package console

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/providers"
)

func (c *Console) routes() {
	m := c.mux
	m.Handle("GET /static/", http.StripPrefix("/static/", c.static))
	m.HandleFunc("GET /{$}", c.attentionPage)
	m.HandleFunc("GET /action/{key}", c.actionPage)
	m.HandleFunc("GET /search", c.searchPage)
	m.HandleFunc("GET /overview", c.overviewPage)
	m.HandleFunc("GET /resolutions", c.resolutionsPage)
	m.HandleFunc("POST /action/{key}/resolve", c.post(c.resolve))
	m.HandleFunc("POST /action/{key}/reconcile", c.post(c.reconcile))
}

// page is what every template receives.
type page struct {
	Title    string
	Nav      string
	User     string
	ReadOnly bool
	CSRF     string
	Refresh  int // milliseconds; 0: the page does not refresh
	Now      time.Time
	Data     any
}

// render writes the template name with p; a ?fragment=1 request gets only
// the live part of the page (the live refresh fetches it).
func (c *Console) render(w http.ResponseWriter, r *http.Request, name string, status int, p page) {
	p.User, p.ReadOnly, p.CSRF = c.user(r), c.cfg.ReadOnly, c.csrf(r)
	if p.Now.IsZero() {
		p.Now = c.cfg.Clock.Now()
	}
	tmpl := name
	if r.URL.Query().Get("fragment") == "1" && c.tmpl.Lookup(name+"-live") != nil {
		tmpl = name + "-live"
	}
	var buf bytes.Buffer
	if err := c.tmpl.ExecuteTemplate(&buf, tmpl, p); err != nil {
		http.Error(w, "console: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// fail renders an error page.
func (c *Console) fail(w http.ResponseWriter, r *http.Request, status int, err error) {
	c.render(w, r, "error", status, page{Title: "Error", Data: err.Error()})
}

// cursorParam reads a cursor from the query (after_ms, after_key).
func cursorParam(v url.Values) ledger.Cursor {
	ms, err := strconv.ParseInt(v.Get("after_ms"), 10, 64)
	if err != nil || v.Get("after_key") == "" {
		return ledger.Cursor{}
	}
	return ledger.Cursor{LeaseUntil: time.UnixMilli(ms).UTC(), Key: v.Get("after_key")}
}

// withCursor returns the query v with the position c.
func withCursor(v url.Values, c ledger.Cursor) string {
	out := url.Values{}
	for k, vs := range v {
		if k != "after_ms" && k != "after_key" && k != "fragment" {
			out[k] = vs
		}
	}
	out.Set("after_ms", strconv.FormatInt(c.LeaseUntil.UnixMilli(), 10))
	out.Set("after_key", c.Key)
	return "?" + out.Encode()
}

// row is a record in a list, with what the console derives from it.
type row struct {
	ledger.Record
	DownstreamKey string
	Link          string    // the provider's page of the effect, "" when its adapter knows none
	Conclude      time.Time // when the reconciler can conclude on its own
	Lag           time.Duration
	HasReconciler bool
	Lapsed        bool
}

func (c *Console) row(r *ledger.Record, now time.Time) row {
	at, lag, ok := c.conclusion(r)
	out := row{Record: *r, DownstreamKey: client.DownstreamKey(r.Key, r.Attempt), Conclude: at, Lag: lag, HasReconciler: ok,
		Lapsed: r.State == ledger.StatePending && r.LeaseExpired(now)}
	if l, isLinker := c.cfg.Adapters[r.Tool].(providers.Linker); isLinker {
		if u := l.Link(r.Ref, out.DownstreamKey); strings.HasPrefix(u, "https://") || strings.HasPrefix(u, "http://") {
			out.Link = u
		}
	}
	return out
}

type listData struct {
	Rows  []row
	Next  string // the next page's query, "" when none
	Query query
	Form  url.Values
	Note  string
	Exact bool
	Sorts []string
	Tools []string // the tools with a reconciler, for the filter's suggestions
}

func (c *Console) attentionPage(w http.ResponseWriter, r *http.Request) {
	now := c.cfg.Clock.Now()
	v := r.URL.Query()
	o := attentionOpts{Tool: strings.TrimSpace(v.Get("tool")), Run: strings.TrimSpace(v.Get("run")), State: v.Get("state"), Sort: v.Get("sort")}
	d := listData{Form: v, Sorts: []string{"oldest", "newest", "tool"}}
	for name := range c.cfg.Adapters {
		d.Tools = append(d.Tools, name)
	}
	slices.Sort(d.Tools)
	var bad []string
	for _, name := range []string{"tool", "run", "state", "sort"} {
		if b := badText("the filter's "+name, v.Get(name)); b != "" {
			bad = append(bad, b)
		}
	}
	if o.State != "" && o.State != "uncertain" && o.State != "lapsed" {
		bad = append(bad, "state is uncertain or lapsed")
	}
	if o.Sort != "" && !slices.Contains(d.Sorts, o.Sort) {
		bad = append(bad, "sort is oldest, newest or tool")
	}
	if len(bad) > 0 {
		d.Form = url.Values{}
		d.Note = strings.Join(bad, "; ")
		c.render(w, r, "attention", http.StatusBadRequest, page{Title: "Needs attention", Nav: "attention", Now: now, Data: d})
		return
	}
	res, err := c.attention(r.Context(), o, cursorParam(v), now)
	if err != nil {
		c.fail(w, r, http.StatusBadGateway, err)
		return
	}
	for i := range res.Records {
		d.Rows = append(d.Rows, c.row(&res.Records[i], now))
	}
	if !res.Next.IsZero() {
		d.Next = withCursor(v, res.Next)
	}
	d.Note = res.Note
	c.render(w, r, "attention", http.StatusOK, page{Title: "Needs attention", Nav: "attention", Now: now,
		Refresh: int(c.cfg.Refresh.Milliseconds()), Data: d})
}

// resolution is a record settled by hand, as the resolutions page lists it.
type resolution struct {
	row
	By     string
	Note   string
	Change string
}

// resolutionsData is the resolutions page's data.
type resolutionsData struct {
	Rows []resolution
	Next string
	Form url.Values
	Note string
	From time.Time
}

// resolutionsPage lists the actions settled by hand (who, when, the note,
// what it changed), oldest first from ?from (default: the last 7 days),
// read from the done and failed listings a bounded number at a time.
func (c *Console) resolutionsPage(w http.ResponseWriter, r *http.Request) {
	v := r.URL.Query()
	now := c.cfg.Clock.Now()
	q := query{Resolved: true, After: cursorParam(v), From: now.Add(-7 * 24 * time.Hour)}
	d := resolutionsData{Form: v}
	var bad []string
	for _, f := range []struct {
		name string
		t    *time.Time
	}{{"from", &q.From}, {"to", &q.To}} {
		s := v.Get(f.name)
		if b := badText("the "+f.name+" time", s); b != "" {
			bad = append(bad, b)
			continue
		}
		if s != "" {
			t, err := parseTime(s)
			if err != nil {
				bad = append(bad, f.name+": "+err.Error())
			}
			*f.t = t
		}
	}
	d.From = q.From
	if len(bad) > 0 {
		d.Form, d.Note = url.Values{}, strings.Join(bad, "; ")
		c.render(w, r, "resolutions", http.StatusBadRequest, page{Title: "Resolutions", Nav: "resolutions", Now: now, Data: d})
		return
	}
	res, err := c.search(r.Context(), q, now)
	if err != nil {
		c.fail(w, r, http.StatusBadGateway, err)
		return
	}
	for i := range res.Records {
		rec := &res.Records[i]
		x := resolution{row: c.row(rec, now), By: rec.ResolvedBy()}
		if rec.State == ledger.StateDone {
			x.Note = strings.TrimPrefix(rec.Summary, rec.Ref+": ")
			x.Change = "settled done"
			if rec.Ref != "" {
				x.Change += ", provider's reference " + rec.Ref
			}
		} else {
			x.Note = strings.TrimPrefix(rec.Reason, byHand)
			x.Change = fmt.Sprintf("settled failed: the next call of the action acts again, as attempt %d", rec.Attempt+1)
		}
		d.Rows = append(d.Rows, x)
	}
	if !res.Next.IsZero() {
		d.Next = withCursor(v, res.Next)
		if len(res.Records) < pageSize {
			d.Note = fmt.Sprintf("read %d settled records without filling the page; the next page reads on", res.Scanned)
		}
	}
	c.render(w, r, "resolutions", http.StatusOK, page{Title: "Resolutions", Nav: "resolutions", Now: now, Data: d})
}

// detail is the action page's data.
type detail struct {
	row
	ResolvedBy string
	Resolvable bool      // uncertain, or pending with a lapsed lease
	FailableAt time.Time // when marking it failed is allowed
	CanFailNow bool
	LiveLease  bool
	Message    string // the outcome of the action just taken
	Error      string
	FormNote   string // what the operator typed, shown again after a refusal
	FormRef    string
	InFlight   time.Duration
	ResultText string
	Timeline   []event
}

// event is a moment of an action's latest attempt, as its record tells it.
type event struct {
	At     time.Time
	What   string
	Who    string
	Detail string
	Future bool
}

// timeline is what the record tells of its latest attempt, in time order:
// its claim, its lease or its settling (by whom, why), when a reconciler
// can conclude and when it may be marked failed, and when it expires. The
// ledger keeps one record an action, its latest attempt: earlier attempts
// leave no trace but the attempt number.
func (c *Console) timeline(d *detail, now time.Time) []event {
	rec := &d.Record
	who := ownerName(rec.Owner)
	ev := []event{{At: rec.AttemptAt, What: fmt.Sprintf("attempt %d claimed", rec.Attempt), Who: who,
		Detail: "downstream key " + d.DownstreamKey}}
	switch rec.State {
	case ledger.StatePending:
		what := "lease ends: its owner may act until then"
		if d.Lapsed {
			what = "lease ran out: its owner stopped without settling"
		}
		ev = append(ev, event{At: rec.LeaseUntil, What: what, Who: who})
	case ledger.StateUncertain:
		ev = append(ev, event{At: rec.LeaseUntil, What: "settled uncertain: the provider may or may not have the effect", Who: who, Detail: rec.Reason})
	case ledger.StateDone, ledger.StateFailed:
		what, detail := "settled "+string(rec.State), rec.Reason
		if rec.State == ledger.StateDone {
			detail = rec.Summary
		}
		if by := rec.ResolvedBy(); by != "" {
			what += " by hand"
			who = "operator " + by
		}
		ev = append(ev, event{At: rec.LeaseUntil, What: what, Who: who, Detail: detail})
	}
	if d.Resolvable {
		if d.HasReconciler {
			ev = append(ev, event{At: d.Conclude, What: "a reconciler can conclude on its own", Detail: "SentBy + in-flight bound + the provider's search lag"})
		}
		ev = append(ev, event{At: d.FailableAt, What: "mark failed allowed", Detail: "no request of the attempt can still commit"})
	}
	if !rec.ExpiresAt.IsZero() {
		ev = append(ev, event{At: rec.ExpiresAt, What: "record expires", Detail: "a call after this acts anew"})
	}
	if rec.Attempt > 1 {
		ev = append(ev, event{At: rec.AttemptAt, What: fmt.Sprintf("%d earlier attempts", rec.Attempt-1),
			Detail: "the ledger keeps the latest attempt of an action only"})
	}
	slices.SortStableFunc(ev, func(a, b event) int { return a.At.Compare(b.At) })
	for i := range ev {
		ev[i].Future = ev[i].At.After(now)
	}
	return ev
}

// ownerName says who an owner token names: an operator, or a process
// ("pid 42 on host-a") where the token says, else the token's start.
func ownerName(owner string) string {
	if by, ok := strings.CutPrefix(owner, "operator:"); ok {
		by, _, _ = strings.Cut(by, ":")
		return "operator " + by
	}
	if at := strings.LastIndexByte(owner, '@'); at > 0 {
		host, _, _ := strings.Cut(owner[at+1:], "/")
		if parts := strings.Split(owner[:at], "."); len(parts) == 3 {
			return "pid " + parts[1] + " on " + host
		}
	}
	return "owner " + shortKey(owner)
}

func (c *Console) detail(rec *ledger.Record, now time.Time) detail {
	d := detail{row: c.row(rec, now), ResolvedBy: rec.ResolvedBy(), InFlight: c.cfg.InFlight}
	d.LiveLease = rec.State == ledger.StatePending && !rec.LeaseExpired(now)
	d.Resolvable = rec.State == ledger.StateUncertain || (rec.State == ledger.StatePending && !d.LiveLease)
	d.FailableAt = ledger.FailableAt(rec, c.cfg.InFlight)
	d.CanFailNow = !now.Before(d.FailableAt)
	d.Timeline = c.timeline(&d, now)
	if len(rec.Result) > 0 {
		d.ResultText = string(rec.Result)
		if len(d.ResultText) > 8<<10 {
			d.ResultText = d.ResultText[:8<<10] + " ..."
		}
	}
	return d
}

// badText says what is wrong with a value a request gives for a ledger's
// field: text a ledger stores is UTF-8 without NUL bytes (PostgreSQL
// refuses both), so the console refuses it with a plain message before
// any query, on every store alike. "" when s is fine.
func badText(what, s string) string {
	switch {
	case !utf8.ValidString(s):
		return what + " is not valid UTF-8 text"
	case strings.ContainsRune(s, 0):
		return what + " contains a NUL byte"
	}
	return ""
}

func (c *Console) load(ctx context.Context, key string) (*ledger.Record, int, error) {
	if bad := badText("the action key", key); bad != "" {
		return nil, http.StatusBadRequest, errors.New(bad)
	}
	rec, err := c.cfg.Store.Get(ctx, key)
	switch {
	case errors.Is(err, ledger.ErrNotFound):
		return nil, http.StatusNotFound, fmt.Errorf("no record has key %s (it may have expired)", key)
	case errors.Is(err, ledger.ErrInvalid), errors.Is(err, ledger.ErrTooLarge):
		return nil, http.StatusBadRequest, err
	case err != nil:
		return nil, http.StatusBadGateway, err
	}
	return rec, http.StatusOK, nil
}

func (c *Console) actionPage(w http.ResponseWriter, r *http.Request) {
	rec, status, err := c.load(r.Context(), r.PathValue("key"))
	if err != nil {
		c.fail(w, r, status, err)
		return
	}
	now := c.cfg.Clock.Now()
	d := c.detail(rec, now)
	d.Message = message(r.URL.Query().Get("done"), rec)
	c.render(w, r, "action", http.StatusOK, page{Title: "Action " + shortKey(rec.Key), Nav: "action", Now: now, Data: d})
}

// Status messages the action page shows after an action, by the code its
// redirect carries (?done=CODE). Only these render: a link cannot make
// the page say anything else.
var messages = map[string]string{
	"reconciled-done":   "reconciled: the provider has the effect; the action is done",
	"reconciled-failed": "reconciled: the provider has no such effect and no request can still create it; the action is failed",
	"reconcile-nothing": "reconcile: nothing to reconcile (the action is not uncertain, nor pending with a lapsed lease)",
	"reconcile-skipped": "reconcile: someone else was acting on the record; look again",
	"reconcile-pending": "reconciled: the provider's answer is not conclusive yet; the action stays as it was",
	"marked-done":       "marked done",
	"marked-failed":     "marked failed",
}

// message is the status message of code for rec ("" for an unknown code):
// a resolution's message names who resolved it, from the record itself.
func message(code string, rec *ledger.Record) string {
	m, ok := messages[code]
	if !ok {
		return ""
	}
	if strings.HasPrefix(code, "marked-") {
		if by := rec.ResolvedBy(); by != "" {
			m += " by " + by
		}
	}
	return m
}

// maxForm bounds the body of a POST.
const maxForm = 64 << 10

// post wraps a state-changing handler: refused in read-only mode and
// without the user's CSRF token.
func (c *Console) post(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if c.cfg.ReadOnly {
			c.fail(w, r, http.StatusForbidden, errors.New("the console is read-only: it takes no action"))
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxForm)
		if err := r.ParseForm(); err != nil {
			status := http.StatusBadRequest
			if mbe := (*http.MaxBytesError)(nil); errors.As(err, &mbe) {
				status = http.StatusRequestEntityTooLarge
				err = fmt.Errorf("the form is larger than %d KiB: a note the ledger keeps is at most %d bytes; go back and shorten it (nothing was saved)", maxForm>>10, ledger.MaxSummaryBytes)
			}
			c.fail(w, r, status, err)
			return
		}
		if !c.checkCSRF(r) {
			c.fail(w, r, http.StatusForbidden, errors.New("the form's CSRF token is missing or wrong: reload the page and try again"))
			return
		}
		h(w, r)
	}
}

// noteLimit is the longest note (in bytes) the ledger keeps whole: a done
// action's summary is "REF: NOTE" (MaxSummaryBytes), a failed one's reason
// byHand+NOTE (MaxReasonBytes).
func noteLimit(verdict, ref string) int {
	if verdict == "failed" {
		return ledger.MaxReasonBytes - len(byHand)
	}
	if ref == "" {
		return ledger.MaxSummaryBytes
	}
	return ledger.MaxSummaryBytes - len(ref) - len(": ")
}

// byHand begins the reason of an action marked failed from the console.
const byHand = "resolved by hand: "

// tooEarly is the refusal of a failure before FailableAt: what the
// operator can do, from the console and beyond it.
func tooEarly(key string, at time.Time) string {
	return "not yet: a request sent before the lease end may still commit at the provider until " + at.UTC().Format(time.RFC3339) + ", " +
		"so marking it failed now could make the next call act twice. If the provider has the effect, mark it done with its reference; " +
		"if it has none, wait until then: the Mark failed button enables itself. " +
		"Only if the provider itself confirmed the request will never take effect: oncely ledger resolve " + key + " --failed --force --reason TEXT settles it now."
}

func (c *Console) resolve(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	key := r.PathValue("key")
	if bad := badText("the action key", key); bad != "" {
		c.fail(w, r, http.StatusBadRequest, errors.New(bad))
		return
	}
	verdict := r.PostFormValue("verdict")
	note := strings.TrimSpace(r.PostFormValue("note"))
	ref := strings.TrimSpace(r.PostFormValue("ref"))
	res := ledger.Resolution{By: c.user(r), InFlight: c.cfg.InFlight}
	var problem string
	status := http.StatusConflict
	switch {
	case badText("the note", note) != "" || badText("the reference", ref) != "":
		status = http.StatusBadRequest
		problem = badText("the note", note) + badText("the reference", ref)
		note, ref = strings.ToValidUTF8(strings.ReplaceAll(note, "\x00", ""), "\uFFFD"), strings.ToValidUTF8(strings.ReplaceAll(ref, "\x00", ""), "\uFFFD")
	case verdict != "done" && verdict != "failed":
		problem = "choose mark done or mark failed"
	case note == "":
		problem = "a note is required: say what you checked at the provider"
	case len(ref) > ledger.MaxRefBytes:
		status = http.StatusBadRequest
		problem = fmt.Sprintf("the provider's reference is %d bytes; the ledger keeps at most %d: shorten it", len(ref), ledger.MaxRefBytes)
	case len(note) > noteLimit(verdict, ref):
		status = http.StatusBadRequest
		problem = fmt.Sprintf("the note is %d bytes; the ledger keeps at most %d here, and would cut the rest: shorten it (nothing was saved)",
			len(note), noteLimit(verdict, ref))
	case verdict == "done":
		res.Done, res.Ref = true, ref
		res.Summary = note
		if ref != "" {
			res.Summary = ref + ": " + note
		}
	default:
		if ref != "" {
			problem = "a provider's reference goes with mark done"
		}
		res.Reason = byHand + note
	}
	now := c.cfg.Clock.Now()
	early := false
	if problem == "" {
		_, err := ledger.Resolve(ctx, c.cfg.Store, key, res, now)
		switch {
		case err == nil:
			http.Redirect(w, r, "/action/"+pathKey(key)+"?done=marked-"+verdict, http.StatusSeeOther)
			return
		case errors.Is(err, ledger.ErrTooEarly):
			early = true
		default:
			problem = err.Error()
		}
	}
	rec, code, err := c.load(ctx, key)
	if err != nil {
		c.fail(w, r, code, err)
		return
	}
	d := c.detail(rec, now)
	if early {
		problem = tooEarly(key, ledger.FailableAt(rec, c.cfg.InFlight))
	}
	d.Error, d.FormNote, d.FormRef = problem, note, ref
	c.render(w, r, "action", status, page{Title: "Action " + shortKey(rec.Key), Nav: "action", Now: now, Data: d})
}

func (c *Console) reconcile(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	key := r.PathValue("key")
	rec, status, err := c.load(ctx, key)
	if err != nil {
		c.fail(w, r, status, err)
		return
	}
	rep, err := c.reconcileNow(ctx, rec)
	var code string
	switch {
	case err != nil:
		status := http.StatusBadGateway // the provider or the ledger failed
		if a := c.cfg.Adapters[rec.Tool]; a == nil {
			status = http.StatusConflict
		}
		now := c.cfg.Clock.Now()
		d := c.detail(rec, now)
		d.Error = "reconcile: " + err.Error()
		c.render(w, r, "action", status, page{Title: "Action " + shortKey(rec.Key), Nav: "action", Now: now, Data: d})
		return
	case rep.Examined == 0:
		code = "reconcile-nothing"
	case rep.Done > 0:
		code = "reconciled-done"
	case rep.Failed > 0:
		code = "reconciled-failed"
	case rep.Skipped > 0:
		code = "reconcile-skipped"
	default:
		code = "reconcile-pending"
	}
	http.Redirect(w, r, "/action/"+pathKey(key)+"?done="+code, http.StatusSeeOther)
}

func (c *Console) searchPage(w http.ResponseWriter, r *http.Request) {
	v := r.URL.Query()
	q := query{Run: strings.TrimSpace(v.Get("run")), Tool: strings.TrimSpace(v.Get("tool")),
		Prefix: strings.ToLower(strings.TrimSpace(v.Get("key"))), DownstreamKey: strings.TrimSpace(v.Get("dkey")),
		State: ledger.State(v.Get("state")), After: cursorParam(v)}
	var bad []string
	for _, name := range []string{"run", "tool", "key", "dkey", "state", "from", "to"} {
		if b := badText("the search's "+name, v.Get(name)); b != "" {
			bad = append(bad, b)
			v.Set(name, "") // not shown again in the form
		}
	}
	if len(bad) > 0 {
		q = query{}
	} else if q.State != "" && !q.State.Valid() {
		bad = append(bad, "state is pending, done, failed or uncertain")
	}
	for _, f := range []struct {
		name string
		t    *time.Time
	}{{"from", &q.From}, {"to", &q.To}} {
		if s := v.Get(f.name); s != "" {
			t, err := parseTime(s)
			if err != nil {
				bad = append(bad, f.name+": "+err.Error())
			}
			*f.t = t
		}
	}
	d := listData{Query: q, Form: v}
	now := c.cfg.Clock.Now()
	if len(bad) > 0 {
		d.Note = strings.Join(bad, "; ")
		c.render(w, r, "search", http.StatusBadRequest, page{Title: "Search", Nav: "search", Now: now, Data: d})
		return
	}
	res, err := c.search(r.Context(), q, now)
	if err != nil {
		c.fail(w, r, http.StatusBadGateway, err)
		return
	}
	for i := range res.Records {
		d.Rows = append(d.Rows, c.row(&res.Records[i], now))
	}
	d.Exact = res.Exact
	if !res.Next.IsZero() {
		d.Next = withCursor(v, res.Next)
		if len(res.Records) < pageSize {
			d.Note = fmt.Sprintf("read %d records without filling the page; the next page reads on", res.Scanned)
		}
	}
	if res.RunScan {
		d.Note = strings.TrimPrefix(d.Note+"; ", "; ") + fmt.Sprintf("this ledger keeps no index of runs (PostgreSQL: ledgerpg.Config.RunIndex), so the search reads the records by time, at most %d a page, oldest first; a time range narrows it", scanBudget)
	}
	c.render(w, r, "search", http.StatusOK, page{Title: "Search", Nav: "search", Now: now, Data: d})
}

// parseTime reads a time as the search form gives it (a datetime-local
// field, in UTC) or as RFC 3339.
func parseTime(s string) (time.Time, error) {
	for _, layout := range []string{time.RFC3339, "2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%q is not a time like 2026-01-02T15:04 (UTC)", s)
}

func (c *Console) overviewPage(w http.ResponseWriter, r *http.Request) {
	v := r.URL.Query()
	rng := ranges[2]
	for _, x := range ranges {
		if x.Name == v.Get("range") {
			rng = x
		}
	}
	now := c.cfg.Clock.Now()
	ov, err := c.overviewOf(r.Context(), rng, v.Get("tool"), now)
	if err != nil {
		c.fail(w, r, http.StatusBadGateway, err)
		return
	}
	c.render(w, r, "overview", http.StatusOK, page{Title: "Overview", Nav: "overview", Now: now,
		Refresh: int(c.cfg.Refresh.Milliseconds()), Data: ov})
}

// shortKey abbreviates an action key for titles and tables.
func shortKey(k string) string {
	if len(k) <= 16 {
		return k
	}
	return k[:16]
}
