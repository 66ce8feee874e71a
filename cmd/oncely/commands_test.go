package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/clock"
	"github.com/oncely/oncely/fakes/mailfake"
	"github.com/oncely/oncely/internal/tooling"
	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/ledger/ledgersqlite"
	"github.com/oncely/oncely/providers/mail"
	"github.com/oncely/oncely/reconcile"
)

func TestKey(t *testing.T) {
	t.Parallel()
	key := func(input string) map[string]any {
		r := runCLI(t, nil, "key", "--tool", "refund_order", "--run", "run-1", "--identity", "orderId:integer, amount:decimal",
			"--input", input, "--json").wantOK(t)
		return decodeJSON[map[string]any](t, r.stdout)
	}
	a := key(`{"orderId": 42, "amount": 10, "note": "refund it"}`)
	b := key(`{"amount": "10.00", "orderId": "42", "note": "please refund"}`)
	if a["key"] != b["key"] || len(a["key"].(string)) != 64 {
		t.Errorf("type drift changed the key: %v vs %v", a, b)
	}
	want := []any{"run:run-1", "refund_order", []any{[]any{"orderId", "42"}, []any{"amount", "10"}}}
	if got, _ := json.Marshal(a["identity"]); string(got) != mustJSON(want) {
		t.Errorf("identity %s, want %s", got, mustJSON(want))
	}
	if c := key(`{"orderId": 42, "amount": 10.01}`); c["key"] == a["key"] {
		t.Error("another amount gave the same key")
	}
	r := runCLI(t, nil, "key", "--tool", "t", "--tenant", "acme", "--identity", "email:email", "--input", `{"email": "A@B.com "}`).wantOK(t)
	if !strings.Contains(r.stdout, `["tenant:acme","t",[["email","a@b.com"]]]`) {
		t.Errorf("tenant key: %q", r.stdout)
	}

	for _, tc := range []struct {
		name  string
		args  []string
		parts []string
	}{
		{"malformed input", []string{"--input", `{"orderId": 42,`}, []string{"invalid JSON"}},
		{"missing field", []string{"--input", `{"amount": 1}`}, []string{"orderId"}},
		{"not an object", []string{"--input", `[42]`}, []string{"must be a JSON object"}},
		{"unknown normalizer", []string{"--identity", "orderId:roman", "--input", `{"orderId": 1}`}, []string{"unknown normalizer \"roman\""}},
		{"no run", []string{"--run", "", "--input", `{"orderId": 1}`}, []string{"--run"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			args := []string{"key", "--tool", "refund_order", "--run", "run-1", "--identity", "orderId:integer"}
			runCLI(t, nil, append(args, tc.args...)...).wantError(t, exitUsage, tc.parts...)
		})
	}
	runCLI(t, nil, "key", "--tool", "t", "--run", "r").wantError(t, exitUsage, "required flag")
}

// TestKeyArrayPathsAndGlobalScope: oncely key reads array indexes in paths
// as client.Field and the MCP gateway do, and derives global keys.
func TestKeyArrayPathsAndGlobalScope(t *testing.T) {
	t.Parallel()
	args := []string{"key", "--tool", "add_observations", "--global", "--identity", "observations.0.entityName:trimmed", "--json", "--input"}
	in := `{"observations": [{"entityName": " alice ", "contents": ["met at the fair"]}]}`
	got := decodeJSON[map[string]any](t, runCLI(t, nil, append(args, in)...).wantOK(t).stdout)
	if id, _ := json.Marshal(got["identity"]); string(id) != `["global","add_observations",[["observations.0.entityName","alice"]]]` {
		t.Errorf("identity %s", id)
	}
	tool := client.Tool{Name: "add_observations", Scope: client.ScopeGlobal,
		Identity: []client.Field{{Path: "observations.0.entityName", Norm: client.Trimmed}}}
	want, err := tool.Key("any-run", client.Call{Tool: tool.Name, Input: json.RawMessage(in)}, 0)
	if err != nil || got["key"] != want {
		t.Errorf("oncely key %v, client.Tool.Key %s (%v)", got["key"], want, err)
	}
	runCLI(t, nil, append(args, `{"observations": []}`)...).wantError(t, exitUsage, "observations.0.entityName")
	runCLI(t, nil, "key", "--tool", "t", "--global", "--run", "r", "--identity", "id", "--input", `{"id": 1}`).wantError(t, exitUsage, "one scope")
	runCLI(t, nil, "key", "--tool", "t", "--global", "--tenant", "acme", "--identity", "id", "--input", `{"id": 1}`).wantError(t, exitUsage, "one scope")
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// started is an oncely process running in the background.
type started struct {
	cmd    *exec.Cmd
	stdout *bufio.Reader
	stderr *tooling.Buffer
	once   sync.Once
	done   chan struct{}
}

// start runs the binary in the background; it is killed when t ends if
// it is still running.
func start(t *testing.T, env []string, args ...string) *started {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(baseEnv(t), env...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &started{cmd: cmd, stdout: bufio.NewReader(out), stderr: &tooling.Buffer{}, done: make(chan struct{})}
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		p.wait()
		<-p.done
	})
	return p
}

// wait reads stdout to its end and reaps the process, in the background.
func (p *started) wait() {
	p.once.Do(func() {
		go func() {
			defer close(p.done)
			_, _ = io.Copy(io.Discard, p.stdout)
			_ = p.cmd.Wait()
		}()
	})
}

// line reads the next line of its stdout.
func (p *started) line(t *testing.T) string {
	t.Helper()
	s, err := p.stdout.ReadString('\n')
	if err != nil {
		t.Fatalf("reading stdout: %v (stderr %q)", err, p.stderr.String())
	}
	return s
}

// stop sends SIGTERM and returns the exit status.
func (p *started) stop(t *testing.T) int {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	p.wait()
	select {
	case <-p.done:
	case <-time.After(time.Minute):
		t.Fatal("no exit a minute after SIGTERM")
	}
	return p.cmd.ProcessState.ExitCode()
}

func httpDo(t *testing.T, method, url, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

func TestServeFakes(t *testing.T) {
	t.Parallel()
	rules := filepath.Join(t.TempDir(), "faults.json")
	if err := os.WriteFile(rules, []byte(`[{"fake": "crm", "route": "POST /v1/contacts", "attempt": 1, "action": "FailBeforeCommit", "status": 503}]`), 0o644); err != nil {
		t.Fatal(err)
	}
	p := start(t, nil, "serve-fakes", "--json", "--faults-file", rules,
		"--fault", "fake=mail,route=POST /v1/messages,attempt=1,action=CommitThenError,status=502")
	urls := decodeJSON[map[string]map[string]string](t, p.line(t))
	for _, name := range fakeNames {
		if !strings.HasPrefix(urls[name]["url"], "http://127.0.0.1:") || urls[name]["journal"] != urls[name]["url"]+"/_oncely/journal" {
			t.Errorf("%s: %v", name, urls[name])
		}
	}

	// The mail fake commits the first message, then answers 502 (the rule).
	msg := `{"from": "support@example.com", "to": "a@example.com", "subject": "Hi", "text": "Hello", "reference": "ref-1"}`
	if code, body := httpDo(t, "POST", urls["mail"]["url"]+"/v1/messages", msg); code != http.StatusBadGateway {
		t.Errorf("first send: %d %s, want the injected 502", code, body)
	}
	if code, body := httpDo(t, "POST", urls["mail"]["url"]+"/v1/messages", msg); code != http.StatusAccepted {
		t.Errorf("second send: %d %s", code, body)
	}
	_, body := httpDo(t, "GET", urls["mail"]["journal"], "")
	journal := decodeJSON[[]effectJSON](t, string(body))
	if len(journal) != 2 || journal[0].Kind != "message" || journal[0].Key != "ref-1" || journal[1].Seq != 2 {
		t.Errorf("mail journal: %+v, want both messages (the first committed before its 502)", journal)
	}
	// The crm fake refuses its first create (the file's rule).
	contact := `{"email": "lead@example.com", "name": "Lead"}`
	if code, _ := httpDo(t, "POST", urls["crm"]["url"]+"/v1/contacts", contact); code != http.StatusServiceUnavailable {
		t.Errorf("first create: %d, want 503", code)
	}
	if code, _ := httpDo(t, "POST", urls["crm"]["url"]+"/v1/contacts", contact); code != http.StatusCreated {
		t.Errorf("second create: %d", code)
	}
	_, body = httpDo(t, "GET", urls["crm"]["journal"], "")
	if j := decodeJSON[[]effectJSON](t, string(body)); len(j) != 1 {
		t.Errorf("crm journal: %+v, want the one create that committed", j)
	}
	_, body = httpDo(t, "GET", urls["crm"]["url"]+"/_oncely/faults", "")
	if f := decodeJSON[[]string](t, string(body)); len(f) != 1 || !strings.Contains(f[0], "FailBeforeCommit") {
		t.Errorf("crm faults: %v", f)
	}
	if code, _ := httpDo(t, "POST", urls["mail"]["url"]+"/_oncely/reset", ""); code != http.StatusNoContent {
		t.Errorf("reset: %d", code)
	}
	if _, body = httpDo(t, "GET", urls["mail"]["journal"], ""); strings.TrimSpace(string(body)) != "[]" {
		t.Errorf("journal after reset: %s", body)
	}
	if code := p.stop(t); code != 0 {
		t.Errorf("exit %d after SIGTERM, want 0; stderr %q", code, p.stderr.String())
	}
}

func TestServeFakesBadInput(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args  []string
		parts []string
	}{
		{[]string{"--fault", "fake=stripe,action=Explode"}, []string{"unknown action"}},
		{[]string{"--fault", "fake=paypal,action=Delay"}, []string{"unknown fake"}},
		{[]string{"--fault", "stripe"}, []string{"key=value"}},
		{[]string{"--fault", "fake=mail,action=FailBeforeCommit,status=200"}, []string{"not an error status"}},
		{[]string{"--faults-file", "/nonexistent/faults.json"}, []string{"no such file"}},
		{[]string{"--fault-rate", "2"}, []string{"--fault-rate"}},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			t.Parallel()
			runCLI(t, nil, append([]string{"serve-fakes"}, tc.args...)...).wantError(t, exitUsage, tc.parts...)
		})
	}
}

// TestReconcile settles an uncertain record whose message the provider
// has: once, then with --watch until SIGTERM.
func TestReconcile(t *testing.T) {
	t.Parallel()
	srv := mailfake.NewServer(nil)
	defer srv.Close()
	ctx := context.Background()
	if _, err := mail.New(srv.URL, nil).Send(ctx, "key-sent", mail.Message{From: "s@example.com", To: "c@example.com", Subject: "Hi", Text: "Hello"}); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "oncely.db")
	s, err := ledgersqlite.Open(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	uncertain := func(key string) {
		now := time.Now()
		if _, err := s.Claim(ctx, ledger.ClaimParams{Key: key, Tool: "send_reply", RunID: "run-1", Owner: "o-" + key,
			LeaseUntil: now.Add(time.Minute), ExpiresAt: now.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		if err := s.Fail(ctx, key, "o-"+key, ledger.Failure{Reason: "timeout"}); err != nil {
			t.Fatal(err)
		}
	}
	uncertain("key-sent")
	url := "sqlite://" + path
	args := []string{"reconcile", "--ledger", url, "--tool", "send_reply=mail", "--mail-url", srv.URL}
	r := runCLI(t, nil, args...).wantOK(t)
	out := lines(r.stdout)
	if len(out) != 2 || !strings.Contains(out[0], "done") || !strings.Contains(out[0], "msg_") ||
		!strings.Contains(out[1], "1 examined, 1 done") {
		t.Errorf("reconcile printed:\n%s", r.stdout)
	}
	if rec, err := s.Get(ctx, "key-sent"); err != nil || rec.State != ledger.StateDone {
		t.Errorf("record after reconcile: %+v %v", rec, err)
	}

	uncertain("key-2")
	if _, err := mail.New(srv.URL, nil).Send(ctx, "key-2", mail.Message{From: "s@example.com", To: "c@example.com", Subject: "Hi", Text: "Hello"}); err != nil {
		t.Fatal(err)
	}
	// A record whose retention ended two days ago.
	old := clock.NewFake(time.Now().Add(-72 * time.Hour))
	s2, err := ledgersqlite.Open(ctx, path, &ledgersqlite.Config{Clock: old})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if _, err := s2.Claim(ctx, ledger.ClaimParams{Key: "key-old", Owner: "o", LeaseUntil: old.Now().Add(time.Minute), ExpiresAt: old.Now().Add(24 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if err := s2.Complete(ctx, "key-old", "o", ledger.Completion{Summary: "sent two days ago"}); err != nil {
		t.Fatal(err)
	}
	p := start(t, nil, append(args, "--watch", "--interval", "20ms", "--purge", "--json")...)
	var out1 struct {
		Resolution *resolution `json:"resolution"`
	}
	if err := json.Unmarshal([]byte(p.line(t)), &out1); err != nil || out1.Resolution == nil ||
		out1.Resolution.Key != "key-2" || out1.Resolution.State != ledger.StateDone {
		t.Errorf("--watch --json first line: %+v %v", out1.Resolution, err)
	}
	if rep := decodeJSON[map[string]reconcile.Report](t, p.line(t)); rep["sweep"].Done != 1 {
		t.Errorf("first sweep: %+v", rep)
	}
	if n := decodeJSON[map[string]int](t, p.line(t)); n["purged"] != 1 {
		t.Errorf("first purge: %v, want the expired record", n)
	}
	if rep := decodeJSON[map[string]reconcile.Report](t, p.line(t)); rep["sweep"].Examined != 0 {
		t.Errorf("second sweep: %+v, want nothing left", rep)
	}
	if code := p.stop(t); code != 0 {
		t.Errorf("reconcile --watch exit %d after SIGTERM, want 0; stderr %q", code, p.stderr.String())
	}
}

func TestDemo(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	r := runCLI(t, nil, "demo", "--runs", "12", "--seed", "7", "--dir", dir, "--json")
	if r.code != 0 {
		t.Fatalf("demo exit %d: %s\n%s", r.code, r.stderr, r.stdout)
	}
	res := decodeJSON[demoResult](t, r.stdout)
	checkDemo(t, &res)
	if res.Oncely.Intended != res.Naive.Intended {
		t.Errorf("oncely side: %+v (naive %+v)", res.Oncely, res.Naive)
	}
	if len(res.Rows) != len(scenarios) {
		t.Errorf("%d provider rows, want %d", len(res.Rows), len(scenarios))
	}
	if !strings.Contains(r.stderr, "demo: naive 12/12 runs") || !strings.Contains(r.stderr, "demo: oncely 12/12 runs") {
		t.Errorf("no progress lines on stderr: %q", r.stderr)
	}
	// The ledger it used stays in --dir for inspection.
	ls := runCLI(t, nil, "ledger", "ls", "--ledger", res.Ledger, "--json", "--limit", "1000").wantOK(t)
	if n := len(decodeJSON[[]recordJSON](t, ls.stdout)); n != res.Oncely.Intended {
		t.Errorf("the demo's ledger has %d records, want one per action (%d)", n, res.Oncely.Intended)
	}
}

// TestRunDemo runs the demo in the test process, where the race detector
// sees its concurrency (parallel resumes, double approvals, workers).
func TestRunDemo(t *testing.T) {
	t.Parallel()
	steps := map[string]int{}
	var mu sync.Mutex
	res, err := runDemo(context.Background(), demoOptions{runs: 6, seed: 3, faults: 0.3, dir: t.TempDir()}, func(side string) {
		mu.Lock()
		defer mu.Unlock()
		steps[side]++
	})
	if err != nil {
		t.Fatal(err)
	}
	checkDemo(t, res)
	if steps["naive"] != 6 || steps["oncely"] != 6 {
		t.Errorf("progress steps %v, want 6 per side", steps)
	}
}

// checkDemo checks what every run of the demo shows: no refusal on either
// side (a request the fakes refuse is a defect of the workload), effects
// on the naive side for every provider that had actions, duplicates
// among them, and none on oncely's side.
func checkDemo(t *testing.T, res *demoResult) {
	t.Helper()
	if res.Naive.Refused+res.Oncely.Refused != 0 || len(res.Refusals) != 0 {
		t.Errorf("refused requests: %q", res.Refusals)
	}
	if res.Naive.Duplicates == 0 {
		t.Errorf("naive side: no duplicates: %+v", res.Naive)
	}
	for _, row := range res.Rows {
		if row.Naive.Intended > 0 && row.Naive.Effects == 0 {
			t.Errorf("%s: the naive side made no effect: %+v", row.Provider, row.Naive)
		}
	}
	if res.Oncely.Duplicates != 0 || res.Oncely.Lost != 0 || res.Oncely.Intended == 0 {
		t.Errorf("oncely side: %+v", res.Oncely)
	}
}
