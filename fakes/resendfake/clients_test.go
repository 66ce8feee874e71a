package resendfake_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	resendgo "github.com/resend/resend-go/v3"

	"github.com/oncely/oncely/fakes/prismtest"
	"github.com/oncely/oncely/fakes/resendfake"
	"github.com/oncely/oncely/internal/tooling"
)

// specPath is Resend's OpenAPI description, copied with its MIT licence
// into testdata/openapi.
const specPath = "testdata/openapi/resend.yaml"

// validated starts a fake behind Prism and returns the Prism proxy.
func validated(t *testing.T) (*resendfake.Server, *prismtest.Proxy) {
	t.Helper()
	s := start(t, nil)
	return s, prismtest.Start(t, specPath, s.URL)
}

// The official Go client, resend-go, works against the fake unchanged, and
// every request it sends and every answer it gets is within Resend's own
// description.
func TestResendGoSession(t *testing.T) {
	t.Parallel()
	s, proxy := validated(t)
	client := resendgo.NewCustomClient(&http.Client{Transport: proxy.Transport(nil)}, apiKey)
	base, _ := url.Parse(proxy.URL + "/")
	client.BaseURL = base
	ctx := context.Background()

	req := &resendgo.SendEmailRequest{
		From: "Acme <orders@acme.test>", To: []string{"ada@example.com"}, Subject: "Order 42 confirmed",
		Html: "<p>Confirmed.</p>", Cc: []string{"ops@acme.test"}, ReplyTo: "help@acme.test",
		Tags: []resendgo.Tag{{Name: "oncely_key", Value: "go-session-1"}},
	}
	opts := &resendgo.SendEmailOptions{IdempotencyKey: "go-session-1"}
	first, err := client.Emails.SendWithOptions(ctx, req, opts)
	if err != nil {
		t.Fatal(err)
	}
	replay, err := client.Emails.SendWithOptions(ctx, req, opts)
	if err != nil || replay.Id != first.Id {
		t.Fatalf("replay = %v, %v; want id %s", replay, err, first.Id)
	}
	other := *req
	other.Subject = "Order 43"
	if _, err := client.Emails.SendWithOptions(ctx, &other, opts); err == nil || !strings.Contains(err.Error(), "different request payload") {
		t.Fatalf("key reused: %v", err)
	}
	got, err := client.Emails.GetWithContext(ctx, first.Id)
	if err != nil || got.Subject != req.Subject || got.From != req.From || len(got.Cc) != 1 || got.LastEvent != "sent" {
		t.Fatalf("get = %+v, %v", got, err)
	}
	limit := 10
	list, err := client.Emails.ListWithOptions(ctx, &resendgo.ListOptions{Limit: &limit})
	if err != nil || len(list.Data) != 1 || list.Data[0].Id != first.Id || list.HasMore {
		t.Fatalf("list = %+v, %v", list, err)
	}
	if _, err := client.Emails.SendWithContext(ctx, &resendgo.SendEmailRequest{From: "a@acme.test", To: []string{"nobody"}, Subject: "s", Text: "t"}); err == nil {
		t.Fatal("an invalid recipient was accepted")
	}
	if n := len(s.Journal()); n != 1 {
		t.Fatalf("journal has %d emails, want 1", n)
	}
	proxy.Check(t)
}

// Prism catches an answer outside Resend's description: the check is able
// to fail.
func TestPrismCatchesABadAnswer(t *testing.T) {
	t.Parallel()
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"id": 42}`))
	}))
	t.Cleanup(bad.Close)
	proxy := prismtest.Start(t, specPath, bad.URL)
	req, _ := http.NewRequest(http.MethodPost, proxy.URL+"/emails", strings.NewReader(`{"from":"a@acme.test","to":"b@example.com","subject":"s"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+apiKey)
	resp, err := proxy.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if errs := proxy.Errors(); len(errs) == 0 || !strings.Contains(errs[0].Location, "response") {
		t.Fatalf("Prism's findings: %v; want the id's type", proxy.Violations())
	}
}

// nodeSession installs tools/resend (npm ci) and runs its session.mjs with
// the official Node client against baseURL (directURL for the request
// Resend's description refuses and the route the fake does not model). It skips without node or npm,
// unless CI=true.
func nodeSession(t *testing.T, baseURL, directURL string) map[string]json.RawMessage {
	t.Helper()
	root, err := tooling.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "tools", "resend")
	node, err := exec.LookPath("node")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("node not found (CI=true: not skipped)")
		}
		t.Skip("node not found; it runs the official Node client")
	}
	if err := tooling.NPMCI(context.Background(), dir); errors.Is(err, tooling.ErrNoNPM) && os.Getenv("CI") != "true" {
		t.Skip(err)
	} else if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join(dir, "session.mjs"))
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "RESEND_BASE_URL="+baseURL, "RESEND_DIRECT_URL="+directURL, "RESEND_API_KEY="+apiKey)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node session: %v\n%s", err, stderr.String())
	}
	var steps map[string]json.RawMessage
	if err := json.Unmarshal(out, &steps); err != nil {
		t.Fatalf("node session output %q: %v", out, err)
	}
	return steps
}

// nodeResult is what a resend Node call returns.
type nodeResult struct {
	Data  map[string]any `json:"data"`
	Error *struct {
		Name       string `json:"name"`
		StatusCode int    `json:"statusCode"`
		Message    string `json:"message"`
	} `json:"error"`
}

// The official Node client, resend, works against the fake unchanged: a
// scripted session of sends with an idempotency key, a replay, a reused
// key, retrieve, list, two refusals and a route the fake does not model.
// Its traffic goes through Prism, checked against Resend's description,
// except the send without "to", which Prism itself would refuse, and the
// cancel, whose 501 Prism would replace with a mocked answer.
func TestNodeClientSession(t *testing.T) {
	t.Parallel()
	s, proxy := validated(t)
	target, _ := url.Parse(proxy.URL)
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.Transport = proxy.Transport(nil)
	front := httptest.NewServer(rp)
	t.Cleanup(front.Close)

	steps := nodeSession(t, front.URL, s.URL)
	get := func(name string) nodeResult {
		t.Helper()
		var r nodeResult
		if err := json.Unmarshal(steps[name], &r); err != nil {
			t.Fatalf("%s: %s: %v", name, steps[name], err)
		}
		return r
	}
	first, replay, second := get("first"), get("replay"), get("second")
	id, _ := first.Data["id"].(string)
	if first.Error != nil || id == "" || replay.Data["id"] != id || second.Data["id"] == id || second.Data["id"] == nil {
		t.Fatalf("sends: first %s, replay %s, second %s", steps["first"], steps["replay"], steps["second"])
	}
	if r := get("reused"); r.Error == nil || r.Error.Name != "invalid_idempotent_request" || r.Error.StatusCode != 409 {
		t.Fatalf("reused key: %s", steps["reused"])
	}
	if r := get("get"); r.Data["id"] != id || r.Data["subject"] != "Order 42 confirmed" {
		t.Fatalf("get: %s", steps["get"])
	}
	if r := get("list"); r.Data["has_more"] != true || len(r.Data["data"].([]any)) != 1 {
		t.Fatalf("list: %s", steps["list"])
	}
	if r := get("missingTo"); r.Error == nil || r.Error.Name != "missing_required_field" {
		t.Fatalf("missing to: %s", steps["missingTo"])
	}
	if r := get("badTag"); r.Error == nil || r.Error.Name != "validation_error" {
		t.Fatalf("bad tag: %s", steps["badTag"])
	}
	if r := get("cancel"); r.Error == nil || r.Error.Name != "not_modeled" || !strings.Contains(r.Error.Message, "does not model") {
		t.Fatalf("cancel: %s", steps["cancel"])
	}
	if n := len(s.Journal()); n != 2 {
		t.Fatalf("journal has %d emails, want 2", n)
	}
	proxy.Check(t)
}
