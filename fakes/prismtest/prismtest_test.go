package prismtest_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/oncely/oncely/fakes/prismtest"
)

// upstream answers POST /items: {"id": "it_1"}, or, for the names
// "badresp" and "conflict", an id of the wrong type and an undocumented
// 409.
func upstream(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in struct{ Name string }
		_ = json.NewDecoder(r.Body).Decode(&in)
		w.Header().Set("Content-Type", "application/json")
		switch in.Name {
		case "badresp":
			fmt.Fprint(w, `{"id": 5}`)
		case "conflict":
			w.WriteHeader(http.StatusConflict)
			fmt.Fprint(w, `{"message": "conflict"}`)
		default:
			fmt.Fprint(w, `{"id": "it_1"}`)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func post(t *testing.T, c *http.Client, url, body string) int {
	t.Helper()
	resp, err := c.Post(url+"/items", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// recordingTB is a testing.TB whose failures are recorded, not reported.
type recordingTB struct {
	testing.TB
	errors []string
}

func (r *recordingTB) Helper() {}
func (r *recordingTB) Error(args ...any) {
	r.errors = append(r.errors, fmt.Sprint(args...))
}
func (r *recordingTB) Errorf(format string, args ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

// Prism forwards a valid exchange unchanged, refuses a request outside the
// description and flags a response outside it; Check fails on both, and
// an undocumented status is a warning only.
func TestProxyValidates(t *testing.T) {
	t.Parallel()
	up := upstream(t)
	proxy := prismtest.Start(t, "testdata/items.yaml", up.URL)
	c := proxy.Client()

	if got := post(t, c, proxy.URL, `{"name": "ok"}`); got != http.StatusOK {
		t.Fatalf("valid exchange: status %d, want 200", got)
	}
	clean := &recordingTB{TB: t}
	proxy.Check(clean)
	if len(clean.errors) != 0 || len(proxy.Violations()) != 0 {
		t.Fatalf("valid exchange: Check failed with %q, violations %v", clean.errors, proxy.Violations())
	}

	if got := post(t, c, proxy.URL, `{"name": "conflict"}`); got != http.StatusConflict {
		t.Fatalf("undocumented status: %d, want the upstream's 409", got)
	}
	if w := proxy.Warnings(); len(w) != 1 || !strings.Contains(w[0].Message, "status code") || len(proxy.Errors()) != 0 {
		t.Fatalf("undocumented status: warnings %v, errors %v; want one warning", w, proxy.Errors())
	}

	if got := post(t, c, proxy.URL, `{}`); got != http.StatusUnprocessableEntity {
		t.Fatalf("invalid request: status %d, want Prism's 422", got)
	}
	if got := post(t, c, proxy.URL, `{"name": "badresp"}`); got != http.StatusInternalServerError {
		t.Fatalf("invalid response: status %d, want Prism's 500", got)
	}
	errs := proxy.Errors()
	if len(errs) != 2 || errs[0].Code != "required" || errs[0].Location != "body" ||
		errs[1].Location != "response.body.id" || errs[1].Request != "POST /items" {
		t.Fatalf("errors = %v, want the missing name and the id's type", errs)
	}
	failing := &recordingTB{TB: t}
	proxy.Check(failing)
	if len(failing.errors) != 2 || !strings.Contains(failing.errors[1], "must be string") {
		t.Fatalf("Check reported %q, want both violations", failing.errors)
	}
	if n := proxy.Exchanges(); n != 4 {
		t.Fatalf("exchanges = %d, want 4", n)
	}
}

// Check fails a test that sent nothing through the proxy.
func TestCheckWithoutTraffic(t *testing.T) {
	t.Parallel()
	proxy := prismtest.Start(t, "testdata/items.yaml", upstream(t).URL)
	r := &recordingTB{TB: t}
	proxy.Check(r)
	if len(r.errors) != 1 || !strings.Contains(r.errors[0], "no request") {
		t.Fatalf("Check without traffic reported %q", r.errors)
	}
}
