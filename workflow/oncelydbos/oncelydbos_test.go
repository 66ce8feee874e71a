package oncelydbos_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/dbos-inc/dbos-transact-golang/dbos"

	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/fakes/fault"
	"github.com/oncely/oncely/fakes/mailfake"
	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/ledger/ledgermem"
	"github.com/oncely/oncely/ledger/ledgerpg"
	"github.com/oncely/oncely/ledger/ledgerpg/pgtest"
	"github.com/oncely/oncely/providers/mail"
	"github.com/oncely/oncely/reconcile"
	"github.com/oncely/oncely/workflow/oncelydbos"
)

// The child process's settings (see runChild).
const (
	envChild    = "ONCELYDBOS_TEST_CHILD" // "plain" or "oncely"
	envDB       = "ONCELYDBOS_TEST_DB"
	envMail     = "ONCELYDBOS_TEST_MAIL"
	envCrash    = "ONCELYDBOS_TEST_CRASH" // "", "after-effect", "after-record"
	envStart    = "ONCELYDBOS_TEST_START" // "1": start the workflow; else wait for its recovery
	envWorkflow = "ONCELYDBOS_TEST_WORKFLOW"
	envRemote   = "ONCELYDBOS_TEST_REMOTE" // "1": a dead owner is never seen as exited, the lease is short

	crashCode = 3
)

func TestMain(m *testing.M) {
	if os.Getenv(envChild) != "" {
		os.Exit(runChild())
	}
	os.Exit(pgtest.Main(m.Run))
}

// Receipt is the step's input: the order is the identity.
type Receipt struct {
	OrderID string `json:"orderId"`
	To      string `json:"to"`
	Text    string `json:"text"`
}

// Sent is the step's result.
type Sent struct {
	MessageID string `json:"messageId"`
}

func message(in Receipt) mail.Message {
	return mail.Message{From: "shop@example.com", To: in.To, Subject: "Receipt for " + in.OrderID, Text: in.Text}
}

// sendPlain is the effect without oncely: one POST per call.
func sendPlain(ctx context.Context, baseURL string, in Receipt) (Sent, error) {
	m := message(in)
	body, _ := json.Marshal(map[string]string{"from": m.From, "to": m.To, "subject": m.Subject, "text": m.Text})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, baseURL+"/v1/messages", bytes.NewReader(body))
	if err != nil {
		return Sent{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return Sent{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return Sent{}, fmt.Errorf("mail: status %d", resp.StatusCode)
	}
	var out struct {
		ID string `json:"id"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return Sent{}, err
	}
	return Sent{MessageID: out.ID}, nil
}

// receiptStep is the step of both modes: plain runs the effect in
// dbos.RunAsStep, oncely through oncelydbos.Step. crash, when set, is called
// right after the effect. The step's answer is the message id: the one
// sent, or the provider's reference a reconciler found.
func receiptStep(mode string, exec *client.Executor, mailURL string, crash func()) (func(dbos.Context, Receipt, ...dbos.StepOption) (Sent, error), error) {
	if crash == nil {
		crash = func() {}
	}
	if mode == "plain" {
		return func(ctx dbos.Context, in Receipt, opts ...dbos.StepOption) (Sent, error) {
			return dbos.RunAsStep(ctx, func(ctx context.Context) (Sent, error) {
				s, err := sendPlain(ctx, mailURL, in)
				crash()
				return s, err
			}, append(opts, dbos.WithStepName("send_receipt"))...)
		}, nil
	}
	mailer := mail.New(mailURL, &mail.Config{IndexLag: 0})
	step, err := oncelydbos.Step(exec, "send_receipt", oncelydbos.Options[Sent]{
		Identity:   []oncelydbos.Key{{Expr: "orderId", Norm: client.String}},
		Reconciler: reconcile.New(mailer, nil),
		Ref:        func(s Sent) string { return s.MessageID },
	}, func(ctx context.Context, in Receipt) (Sent, error) {
		m, err := mailer.Send(ctx, oncelydbos.DownstreamKey(ctx), message(in))
		crash()
		if err != nil {
			return Sent{}, err
		}
		return Sent{MessageID: m.ID}, nil
	})
	if err != nil {
		return nil, err
	}
	return func(ctx dbos.Context, in Receipt, opts ...dbos.StepOption) (Sent, error) {
		d, err := step(ctx, in, opts...)
		if err != nil {
			return Sent{}, err
		}
		if !d.Known {
			// Found by the reconciler: the provider's message id.
			return Sent{MessageID: d.Ref}, nil
		}
		return d.Value, nil
	}, nil
}

// app is a DBOS application with the receipt workflow, on the database
// dbURL, whose ledger is ledgerpg's table in the same database.
type app struct {
	ctx   dbos.Context
	store *ledgerpg.Store
	wf    dbos.Workflow[Receipt, string]
}

func newApp(ctx context.Context, dbURL, mode, mailURL string, wrapStore func(ledger.Store) ledger.Store, crash func(), stepOpts ...dbos.StepOption) (*app, error) {
	return newAppConfig(ctx, dbURL, mode, mailURL, wrapStore, crash, nil, stepOpts...)
}

func newAppConfig(ctx context.Context, dbURL, mode, mailURL string, wrapStore func(ledger.Store) ledger.Store, crash func(), cfg *client.Config, stepOpts ...dbos.StepOption) (*app, error) {
	dctx, err := dbos.NewContext(ctx, dbos.Config{
		DatabaseURL: dbURL, AppName: "oncelydbos-test",
		// Recovery runs only the workflows of the same executor and
		// application version: a relaunch keeps both.
		ExecutorID: "test-executor", ApplicationVersion: "test-v1",
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		return nil, err
	}
	store, err := ledgerpg.OpenURL(ctx, dbURL, nil)
	if err != nil {
		dbos.Shutdown(dctx, time.Second)
		return nil, err
	}
	var s ledger.Store = store
	if wrapStore != nil {
		s = wrapStore(s)
	}
	exec := client.New(s, cfg)
	step, err := receiptStep(mode, exec, mailURL, crash)
	if err != nil {
		dbos.Shutdown(dctx, time.Second)
		store.Close()
		return nil, err
	}
	a := &app{ctx: dctx, store: store}
	a.wf = func(ctx dbos.Context, in Receipt) (string, error) {
		s, err := step(ctx, in, stepOpts...)
		return s.MessageID, err
	}
	dbos.RegisterWorkflow(dctx, a.wf, dbos.WithWorkflowName("receipt"))
	if err := dbos.Launch(dctx); err != nil {
		a.close()
		return nil, err
	}
	return a, nil
}

func (a *app) close() {
	dbos.Shutdown(a.ctx, 5*time.Second)
	a.store.Close()
}

// crashAfterComplete ends the process right after the ledger recorded the
// outcome: after the effect and its record, before DBOS's checkpoint.
type crashAfterComplete struct{ ledger.Store }

func (c crashAfterComplete) Complete(ctx context.Context, key, owner string, comp ledger.Completion) error {
	err := c.Store.Complete(ctx, key, owner, comp)
	if err == nil {
		os.Exit(crashCode)
	}
	return err
}

// runChild is one launch of the application in a process of its own:
// it starts the workflow, or waits for the workflow its predecessor left
// pending to be recovered, and prints the workflow's result.
func runChild() int {
	ctx := context.Background()
	var crash func()
	var wrap func(ledger.Store) ledger.Store
	switch os.Getenv(envCrash) {
	case "after-effect":
		crash = func() { os.Exit(crashCode) }
	case "after-record":
		wrap = func(s ledger.Store) ledger.Store { return crashAfterComplete{s} }
	}
	var cfg *client.Config
	var stepOpts []dbos.StepOption
	if os.Getenv(envRemote) == "1" {
		// The dead owner ran on another machine: its exit is not visible
		// here (no same-machine process check), so its claim stands until
		// its lease ends. The lease is short to bound the test; the step
		// has the README's retries, spent in well under the lease.
		cfg = &client.Config{Lease: remoteLease, OwnerExited: func(string) bool { return false }}
		stepOpts = []dbos.StepOption{dbos.WithStepMaxRetries(3), dbos.WithStepBaseInterval(10 * time.Millisecond)}
	}
	a, err := newAppConfig(ctx, os.Getenv(envDB), os.Getenv(envChild), os.Getenv(envMail), wrap, crash, cfg, stepOpts...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	defer a.close()
	id := os.Getenv(envWorkflow)
	var h dbos.WorkflowHandle[string]
	if os.Getenv(envStart) == "1" {
		h, err = dbos.RunWorkflow(a.ctx, a.wf, Receipt{OrderID: "A-1", To: "ada@example.com", Text: "Thank you."}, dbos.WithWorkflowID(id))
	} else {
		h, err = dbos.RetrieveWorkflow[string](a.ctx, id)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	res, err := h.GetResult()
	if err != nil {
		fmt.Fprintln(os.Stderr, "child: workflow:", err)
		return 1
	}
	fmt.Printf("result=%s\n", res)
	return 0
}

// database returns the URL of a database of its own for t on the test
// server (DBOS creates it), dropped when t ends.
func database(t *testing.T) string {
	t.Helper()
	b := make([]byte, 6)
	rand.Read(b)
	name := "oncely_dbos_" + hex.EncodeToString(b)
	u, err := url.Parse(pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	pool := pgtest.Pool(t)
	t.Cleanup(func() {
		if _, err := pool.Exec(context.Background(), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("dropping %s: %v", name, err)
		}
	})
	return u.String()
}

// launch runs one launch of the application in a child process and
// returns its exit code and output.
func launch(t *testing.T, dbURL, mode, mailURL, crash, workflowID string, start bool, env ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	startFlag := ""
	if start {
		startFlag = "1"
	}
	cmd.Env = append(os.Environ(),
		envChild+"="+mode, envDB+"="+dbURL, envMail+"="+mailURL, envCrash+"="+crash,
		envStart+"="+startFlag, envWorkflow+"="+workflowID)
	cmd.Env = append(cmd.Env, env...)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	err := cmd.Run()
	code := 0
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		code = exitErr.ExitCode()
	} else if err != nil {
		t.Fatalf("child: %v", err)
	}
	if code != 0 && code != crashCode {
		t.Fatalf("child exited %d: %s%s", code, out.String(), stderr.String())
	}
	return code, strings.TrimSpace(out.String())
}

// The process dies between the step's effect and DBOS's checkpoint; the
// relaunched process (same executor id and application version) recovers
// the workflow and DBOS runs the step again.
func TestRecoveryAfterCrash(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, mode, crash string
		wantSent          int
		wantResult        func(journalID string) string
	}{
		// Without oncely the step sends again on recovery.
		{"without oncely", "plain", "after-effect", 2, nil},
		// With oncely, killed after the send and before the ledger's
		// record: the relaunch takes the dead process's claim over (its
		// owner has exited), reconciles, and finds the message: the
		// workflow is told its id (the reconciler's reference).
		{"with oncely, killed before the record", "oncely", "after-effect", 1,
			func(id string) string { return id }},
		// Killed after the record and before the checkpoint: the relaunch
		// replays the recorded result.
		{"with oncely, killed after the record", "oncely", "after-record", 1,
			func(id string) string { return id }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := mailfake.NewServer(nil)
			defer srv.Close()
			dbURL := database(t)
			code, _ := launch(t, dbURL, tc.mode, srv.URL, tc.crash, "order-A-1", true)
			if code != crashCode {
				t.Fatalf("first launch exited %d, want the crash (%d)", code, crashCode)
			}
			if n := len(srv.Journal()); n != 1 {
				t.Fatalf("receipts sent before the crash = %d, want 1", n)
			}
			code, out := launch(t, dbURL, tc.mode, srv.URL, "", "order-A-1", false)
			if code != 0 {
				t.Fatalf("relaunch exited %d", code)
			}
			journal := srv.Journal()
			if len(journal) != tc.wantSent {
				t.Fatalf("receipts sent = %d, want %d", len(journal), tc.wantSent)
			}
			if tc.wantResult == nil {
				return
			}
			if want := "result=" + tc.wantResult(journal[0].ID); out != want {
				t.Fatalf("relaunch printed %q, want %q", out, want)
			}
			assertDone(t, dbURL, journal[0].ID)
		})
	}
}

// assertDone checks that the ledger holds one done record of the message
// sent, under the workflow id.
func assertDone(t *testing.T, dbURL, messageID string) {
	t.Helper()
	ctx := context.Background()
	store, err := ledgerpg.OpenURL(ctx, dbURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	recs, err := store.List(ctx, ledger.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || recs[0].State != ledger.StateDone || recs[0].Ref != messageID || recs[0].RunID != "order-A-1" {
		t.Fatalf("ledger = %+v, want one done record of %s in run order-A-1", recs, messageID)
	}
}

// The provider commits the send and drops the connection: the step fails
// ambiguously and WithStepMaxRetries runs it again in the same process.
func TestStepRetries(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		mode     string
		wantSent int
	}{{"plain", 2}, {"oncely", 1}} {
		t.Run(tc.mode, func(t *testing.T) {
			t.Parallel()
			srv := mailfake.NewServer(nil)
			defer srv.Close()
			srv.Faults.Add(fault.Rule{Route: "POST /v1/messages", Attempt: 1, Action: fault.CommitThenDrop})
			dbURL := database(t)
			ctx := context.Background()
			a, err := newApp(ctx, dbURL, tc.mode, srv.URL, nil, nil,
				dbos.WithStepMaxRetries(3), dbos.WithStepBaseInterval(time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			defer a.close()
			h, err := dbos.RunWorkflow(a.ctx, a.wf, Receipt{OrderID: "A-1", To: "ada@example.com", Text: "Thank you."}, dbos.WithWorkflowID("order-A-1"))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := h.GetResult(); err != nil {
				t.Fatal(err)
			}
			journal := srv.Journal()
			if len(journal) != tc.wantSent {
				t.Fatalf("receipts sent (%s) = %d, want %d", tc.mode, len(journal), tc.wantSent)
			}
			if tc.mode == "oncely" {
				assertDone(t, dbURL, journal[0].ID)
			}
		})
	}
}

// An input without its identity fails at once, without DBOS's retries,
// and sends nothing.
func TestInvalidInputIsNotRetried(t *testing.T) {
	t.Parallel()
	srv := mailfake.NewServer(nil)
	defer srv.Close()
	dbURL := database(t)
	ctx := context.Background()
	a, err := newApp(ctx, dbURL, "oncely", srv.URL, nil, nil,
		dbos.WithStepMaxRetries(5), dbos.WithStepBaseInterval(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	defer a.close()
	h, err := dbos.RunWorkflow(a.ctx, a.wf, Receipt{To: "ada@example.com", Text: "no order"}, dbos.WithWorkflowID("order-none"))
	if err != nil {
		t.Fatal(err)
	}
	// A retry would wait an hour: the context bounds the test instead.
	done := make(chan error, 1)
	go func() { _, err := h.GetResult(); done <- err }()
	select {
	case err = <-done:
	case <-time.After(time.Minute):
		t.Fatal("the workflow is still running: the invalid input was retried")
	}
	if err == nil || !strings.Contains(err.Error(), "invalid input") || len(srv.Journal()) != 0 {
		t.Fatalf("err = %v, receipts = %d; want the invalid input and no receipt", err, len(srv.Journal()))
	}
}

// Outside a workflow there is no workflow id to scope the action.
func TestOutsideWorkflow(t *testing.T) {
	t.Parallel()
	exec := client.New(ledgermem.New(nil), nil)
	step, err := oncelydbos.Step(exec, "noop", oncelydbos.Options[Sent]{Identity: []oncelydbos.Key{{Expr: "orderId"}}},
		func(context.Context, Receipt) (Sent, error) { t.Error("ran"); return Sent{}, nil })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := step(nil, Receipt{OrderID: "X"}); !errors.Is(err, oncelydbos.ErrNotWorkflow) {
		t.Fatalf("err = %v, want ErrNotWorkflow", err)
	}
}

// remoteLease is the executor's lease in the remote dead owner case.
const remoteLease = 4 * time.Second

// A process on another machine claims the send, sends and dies: its
// claim stands until its lease ends, since this machine cannot see that
// it exited. The relaunch's step is told "in progress"; it must not spend
// WithStepMaxRetries(3) (a few milliseconds here) and end the workflow in
// ERROR, but wait durably until the claim may be taken over, take it
// over, reconcile and find the message: one receipt, the workflow
// completes with the message id, after one wait (the documented bound:
// one lease, plus a second).
func TestRemoteDeadOwner(t *testing.T) {
	t.Parallel()
	for i := range 5 {
		t.Run(fmt.Sprint("run ", i+1), func(t *testing.T) {
			t.Parallel()
			srv := mailfake.NewServer(nil)
			defer srv.Close()
			dbURL := database(t)
			code, _ := launch(t, dbURL, "oncely", srv.URL, "after-effect", "order-A-1", true, envRemote+"=1")
			if code != crashCode {
				t.Fatalf("first launch exited %d, want the crash (%d)", code, crashCode)
			}
			code, out := launch(t, dbURL, "oncely", srv.URL, "", "order-A-1", false, envRemote+"=1")
			if code != 0 {
				t.Fatalf("relaunch exited %d", code)
			}
			journal := srv.Journal()
			if len(journal) != 1 {
				t.Fatalf("receipts sent = %d, want 1", len(journal))
			}
			if want := "result=" + journal[0].ID; out != want {
				t.Fatalf("relaunch printed %q, want %q", out, want)
			}
			assertDone(t, dbURL, journal[0].ID)
			// The bound: one step told "in progress", one durable sleep
			// of at most the lease and a second, one step that acts.
			steps := workflowSteps(t, dbURL, "order-A-1")
			if len(steps) != 3 || steps[0].StepName != "send_receipt" || steps[1].StepName != "DBOS.sleep" || steps[2].StepName != "send_receipt" {
				t.Fatalf("steps = %v, want send_receipt (in progress), DBOS.sleep, send_receipt", stepNames(steps))
			}
		})
	}
}

func workflowSteps(t *testing.T, dbURL, id string) []dbos.StepInfo {
	t.Helper()
	c, err := dbos.NewClient(context.Background(), dbos.ClientConfig{DatabaseURL: dbURL, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Shutdown(c, 5*time.Second)
	steps, err := dbos.GetWorkflowSteps(c, id)
	if err != nil {
		t.Fatal(err)
	}
	return steps
}

func stepNames(steps []dbos.StepInfo) []string {
	var n []string
	for _, s := range steps {
		n = append(n, s.StepName)
	}
	return n
}

// The step function gets DBOS's own context (dbos.GetWorkflowID and
// dbos.GetStepID work in it), and a step name the caller passes is kept.
func TestStepContextAndOptions(t *testing.T) {
	t.Parallel()
	dbURL := database(t)
	ctx := context.Background()
	dctx, err := dbos.NewContext(ctx, dbos.Config{DatabaseURL: dbURL, AppName: "oncelydbos-ctx", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer dbos.Shutdown(dctx, 5*time.Second)
	exec := client.New(ledgermem.New(nil), nil)
	type seen struct {
		Workflow string `json:"workflow"`
		Step     int    `json:"step"`
		Key      string `json:"key"`
	}
	step, err := oncelydbos.Step(exec, "look", oncelydbos.Options[seen]{Identity: []oncelydbos.Key{{Expr: "orderId"}}},
		func(ctx context.Context, in Receipt) (seen, error) {
			dc, ok := ctx.(dbos.Context)
			if !ok {
				return seen{}, client.Permanent(fmt.Errorf("the step's context is a %T, not a dbos.Context", ctx))
			}
			wf, err := dbos.GetWorkflowID(dc)
			if err != nil {
				return seen{}, client.Permanent(err)
			}
			id, err := dbos.GetStepID(dc)
			if err != nil {
				return seen{}, client.Permanent(err)
			}
			return seen{Workflow: wf, Step: id, Key: oncelydbos.DownstreamKey(ctx)}, nil
		})
	if err != nil {
		t.Fatal(err)
	}
	wf := func(ctx dbos.Context, in Receipt) (seen, error) {
		d, err := step(ctx, in, dbos.WithStepName("look_up_order"))
		return d.Value, err
	}
	dbos.RegisterWorkflow(dctx, wf, dbos.WithWorkflowName("look"))
	if err := dbos.Launch(dctx); err != nil {
		t.Fatal(err)
	}
	h, err := dbos.RunWorkflow(dctx, wf, Receipt{OrderID: "A-1"}, dbos.WithWorkflowID("order-ctx"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := h.GetResult()
	if err != nil {
		t.Fatal(err)
	}
	if got.Workflow != "order-ctx" || got.Step != 0 || got.Key == "" {
		t.Fatalf("the step saw %+v, want workflow order-ctx, step 0 and a downstream key", got)
	}
	steps, err := dbos.GetWorkflowSteps(dctx, "order-ctx")
	if err != nil {
		t.Fatal(err)
	}
	if len(steps) != 1 || steps[0].StepName != "look_up_order" {
		t.Fatalf("steps = %v, want the caller's name look_up_order", stepNames(steps))
	}
}
