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
// right after the effect.
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
	return oncelydbos.Step(exec, "send_receipt", oncelydbos.Options[Sent]{
		Identity:   []oncelydbos.Key{{Expr: "orderId", Norm: client.String}},
		Reconciler: reconcile.New(mailer, nil),
		Ref:        func(s Sent) string { return s.MessageID },
		// A send found by reconciliation has no stored Sent: the workflow
		// goes on with the zero value (the record keeps the reference).
		ZeroOnLostResult: true,
	}, func(ctx context.Context, in Receipt) (Sent, error) {
		m, err := mailer.Send(ctx, oncelydbos.DownstreamKey(ctx), message(in))
		crash()
		if err != nil {
			return Sent{}, err
		}
		return Sent{MessageID: m.ID}, nil
	})
}

// app is a DBOS application with the receipt workflow, on the database
// dbURL, whose ledger is ledgerpg's table in the same database.
type app struct {
	ctx   dbos.Context
	store *ledgerpg.Store
	wf    dbos.Workflow[Receipt, string]
}

func newApp(ctx context.Context, dbURL, mode, mailURL string, wrapStore func(ledger.Store) ledger.Store, crash func(), stepOpts ...dbos.StepOption) (*app, error) {
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
	exec := client.New(s, nil)
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
	a, err := newApp(ctx, os.Getenv(envDB), os.Getenv(envChild), os.Getenv(envMail), wrap, crash)
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
func launch(t *testing.T, dbURL, mode, mailURL, crash, workflowID string, start bool) (int, string) {
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
		// owner has exited), reconciles, and finds the message.
		{"with oncely, killed before the record", "oncely", "after-effect", 1,
			func(string) string { return "" }},
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
