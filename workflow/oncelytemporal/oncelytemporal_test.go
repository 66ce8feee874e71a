package oncelytemporal_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	tclient "go.temporal.io/sdk/client"

	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/fakes/fault"
	"github.com/oncely/oncely/fakes/mailfake"
	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/ledger/ledgermem"
	"github.com/oncely/oncely/providers/mail"
	"github.com/oncely/oncely/reconcile"
	"github.com/oncely/oncely/workflow/oncelytemporal"
)

// Receipt is the activity's input: the order is the identity, the text is
// free and may differ between attempts.
type Receipt struct {
	OrderID string `json:"orderId"`
	To      string `json:"to"`
	Text    string `json:"text"`
}

// Sent is the activity's result.
type Sent struct {
	MessageID string `json:"messageId"`
}

const activityName = "SendReceipt"

// receiptWorkflow sends one receipt through the activity, retried by
// Temporal up to five attempts.
func receiptWorkflow(ctx workflow.Context, in Receipt) (string, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: time.Minute,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval: time.Second, BackoffCoefficient: 1, MaximumAttempts: 5,
		},
	})
	var out oncelytemporal.Done[Sent]
	if err := workflow.ExecuteActivity(ctx, activityName, in).Get(ctx, &out); err != nil {
		return "", err
	}
	if !out.Known {
		return "ref:" + out.Ref, nil
	}
	return out.Value.MessageID, nil
}

// act is an activity function as the tests register it.
type act = func(context.Context, Receipt) (oncelytemporal.Done[Sent], error)

// sendWithOncely is the activity's effect made once per order and
// workflow: the mail adapter sends with the action's key as reference.
func sendWithOncely(t *testing.T, exec *client.Executor, mailer *mail.Client, opts oncelytemporal.Options[Sent]) act {
	t.Helper()
	opts.Identity = []oncelytemporal.Key{{Expr: "orderId", Norm: client.String}}
	opts.Reconciler = reconcile.New(mailer, nil)
	send, err := oncelytemporal.Activity(exec, "send_receipt", opts, func(ctx context.Context, in Receipt) (Sent, error) {
		m, err := mailer.Send(ctx, oncelytemporal.DownstreamKey(ctx), mail.Message{
			From: "shop@example.com", To: in.To, Subject: "Receipt for " + in.OrderID, Text: in.Text,
		})
		if err != nil {
			return Sent{}, err
		}
		return Sent{MessageID: m.ID}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return send.Execute
}

// sendPlain is the same effect without oncely: one POST per call.
func sendPlain(baseURL string) act {
	send := func(ctx context.Context, in Receipt) (Sent, error) {
		body, _ := json.Marshal(map[string]string{
			"from": "shop@example.com", "to": in.To, "subject": "Receipt for " + in.OrderID, "text": in.Text,
		})
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
		var m struct {
			ID string `json:"id"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
			return Sent{}, err
		}
		return Sent{MessageID: m.ID}, nil
	}
	return func(ctx context.Context, in Receipt) (oncelytemporal.Done[Sent], error) {
		out, err := send(ctx, in)
		return oncelytemporal.Done[Sent]{Value: out, Known: err == nil}, err
	}
}

// lostAfterEffect is an activity whose first attempt makes the effect and
// then fails before Temporal learns of it: the worker lost the attempt
// after the send (a crash, a timeout, a failure in what follows the send).
// Temporal retries the activity.
func lostAfterEffect(send act) act {
	return func(ctx context.Context, in Receipt) (oncelytemporal.Done[Sent], error) {
		out, err := send(ctx, in)
		if err != nil {
			return out, err
		}
		if activity.GetInfo(ctx).Attempt == 1 {
			return oncelytemporal.Done[Sent]{}, errors.New("attempt lost after the effect")
		}
		return out, nil
	}
}

func newEnv(s *testsuite.WorkflowTestSuite, workflowID string, act act) *testsuite.TestWorkflowEnvironment {
	env := s.NewTestWorkflowEnvironment()
	// The workflow code is trivial: a goroutine starved for a second on
	// busy cores under -race is not a deadlock.
	env.SetWorkerOptions(worker.Options{DeadlockDetectionTimeout: time.Minute})
	env.RegisterWorkflow(receiptWorkflow)
	env.RegisterActivityWithOptions(act, activity.RegisterOptions{Name: activityName})
	env.SetStartWorkflowOptions(tclient.StartWorkflowOptions{ID: workflowID})
	return env
}

func suite() *testsuite.WorkflowTestSuite {
	s := &testsuite.WorkflowTestSuite{}
	s.SetLogger(log.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	return s
}

func receiptsSent(srv *mailfake.Server) int { return len(srv.Journal()) }

// An attempt that made the effect and was lost is retried by Temporal:
// two receipts without oncely, one with it, and the retry returns the
// first attempt's message id.
func TestRetryAfterEffect(t *testing.T) {
	t.Parallel()
	in := Receipt{OrderID: "A-1", To: "ada@example.com", Text: "Thank you for your order."}

	t.Run("without oncely", func(t *testing.T) {
		t.Parallel()
		srv := mailfake.NewServer(nil)
		defer srv.Close()
		env := newEnv(suite(), "order-A-1", lostAfterEffect(sendPlain(srv.URL)))
		env.ExecuteWorkflow(receiptWorkflow, in)
		if err := env.GetWorkflowError(); err != nil {
			t.Fatal(err)
		}
		if n := receiptsSent(srv); n != 2 {
			t.Fatalf("receipts sent without oncely = %d, want 2 (the retry repeats the effect)", n)
		}
	})

	t.Run("with oncely", func(t *testing.T) {
		t.Parallel()
		srv := mailfake.NewServer(nil)
		defer srv.Close()
		mailer := mail.New(srv.URL, &mail.Config{IndexLag: time.Hour})
		exec := client.New(ledgermem.New(nil), nil)
		send := sendWithOncely(t, exec, mailer, oncelytemporal.Options[Sent]{})
		env := newEnv(suite(), "order-A-1", lostAfterEffect(send))
		env.ExecuteWorkflow(receiptWorkflow, in)
		if err := env.GetWorkflowError(); err != nil {
			t.Fatal(err)
		}
		var id string
		if err := env.GetWorkflowResult(&id); err != nil {
			t.Fatal(err)
		}
		journal := srv.Journal()
		if len(journal) != 1 {
			t.Fatalf("receipts sent with oncely = %d, want 1", len(journal))
		}
		if id != journal[0].ID {
			t.Fatalf("workflow was told message %q, the provider sent %q", id, journal[0].ID)
		}
	})
}

// The provider commits the send and the connection drops before its
// answer: the attempt fails ambiguously and Temporal retries it. Without
// oncely the retry sends again; with it, the retry reconciles (the
// search finds the first message) and sends nothing.
func TestRetryAfterAmbiguousSend(t *testing.T) {
	t.Parallel()
	in := Receipt{OrderID: "B-2", To: "bob@example.com", Text: "Thank you."}
	dropFirst := fault.Rule{Route: "POST /v1/messages", Attempt: 1, Action: fault.CommitThenDrop}

	t.Run("without oncely", func(t *testing.T) {
		t.Parallel()
		srv := mailfake.NewServer(nil)
		defer srv.Close()
		srv.Faults.Add(dropFirst)
		env := newEnv(suite(), "order-B-2", sendPlain(srv.URL))
		env.ExecuteWorkflow(receiptWorkflow, in)
		if err := env.GetWorkflowError(); err != nil {
			t.Fatal(err)
		}
		if n := receiptsSent(srv); n != 2 {
			t.Fatalf("receipts sent without oncely = %d, want 2", n)
		}
	})

	t.Run("with oncely", func(t *testing.T) {
		t.Parallel()
		srv := mailfake.NewServer(nil)
		defer srv.Close()
		srv.Faults.Add(dropFirst)
		mailer := mail.New(srv.URL, &mail.Config{IndexLag: 0})
		store := ledgermem.New(nil)
		exec := client.New(store, nil)
		send := sendWithOncely(t, exec, mailer, oncelytemporal.Options[Sent]{})
		env := newEnv(suite(), "order-B-2", send)
		env.ExecuteWorkflow(receiptWorkflow, in)
		// The default options complete the workflow: the reconciled send
		// is a Done that says its Sent is unknown and carries the message
		// id the lookup found.
		if err := env.GetWorkflowError(); err != nil {
			t.Fatal(err)
		}
		journal := srv.Journal()
		if len(journal) != 1 {
			t.Fatalf("receipts sent with oncely = %d, want 1", len(journal))
		}
		var got string
		if err := env.GetWorkflowResult(&got); err != nil || got != "ref:"+journal[0].ID {
			t.Fatalf("workflow result %q (%v), want the reconciled reference ref:%s", got, err, journal[0].ID)
		}
		recs, err := store.List(context.Background(), ledger.Filter{})
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) != 1 || recs[0].State != ledger.StateDone || recs[0].Ref != journal[0].ID {
			t.Fatalf("ledger = %+v, want one done record of message %s", recs, journal[0].ID)
		}
		if want := "default-test-namespace/order-B-2"; recs[0].RunID != want {
			t.Fatalf("record's run = %q, want %q (namespace/workflow id)", recs[0].RunID, want)
		}
	})
}

// A workflow reset re-executes the activities after the reset point in a
// new run of the same workflow id, with a new run id and new activity
// ids: here, a second execution of workflow "order-C-3" against the same
// ledger. Without oncely the receipt is sent again; with it, once, and
// the new run is given the first run's message id. (The test environment
// gives every execution the run id "default-test-run-id", so it cannot
// show a reset's new run id; the key does not read it.)
func TestResetRunsAgain(t *testing.T) {
	t.Parallel()
	in := Receipt{OrderID: "C-3", To: "cy@example.com", Text: "Thanks!"}
	rerun := Receipt{OrderID: "C-3", To: "cy@example.com", Text: "Thank you, again."}

	t.Run("without oncely", func(t *testing.T) {
		t.Parallel()
		srv := mailfake.NewServer(nil)
		defer srv.Close()
		for _, r := range []Receipt{in, rerun} {
			env := newEnv(suite(), "order-C-3", sendPlain(srv.URL))
			env.ExecuteWorkflow(receiptWorkflow, r)
			if err := env.GetWorkflowError(); err != nil {
				t.Fatal(err)
			}
		}
		if n := receiptsSent(srv); n != 2 {
			t.Fatalf("receipts sent without oncely = %d, want 2", n)
		}
	})

	t.Run("with oncely", func(t *testing.T) {
		t.Parallel()
		srv := mailfake.NewServer(nil)
		defer srv.Close()
		mailer := mail.New(srv.URL, &mail.Config{IndexLag: time.Hour})
		exec := client.New(ledgermem.New(nil), nil)
		send := sendWithOncely(t, exec, mailer, oncelytemporal.Options[Sent]{})
		var ids []string
		for _, r := range []Receipt{in, rerun} {
			env := newEnv(suite(), "order-C-3", send)
			env.ExecuteWorkflow(receiptWorkflow, r)
			if err := env.GetWorkflowError(); err != nil {
				t.Fatal(err)
			}
			var id string
			if err := env.GetWorkflowResult(&id); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		}
		journal := srv.Journal()
		if len(journal) != 1 {
			t.Fatalf("receipts sent with oncely = %d, want 1", len(journal))
		}
		if ids[0] != journal[0].ID || ids[1] != journal[0].ID {
			t.Fatalf("runs were told %v, the provider sent %s", ids, journal[0].ID)
		}
	})
}

// Outcomes no retry can change stop Temporal's retries: an input without
// its identity is a non-retryable error, and the function never runs.
func TestInvalidInputIsNotRetried(t *testing.T) {
	t.Parallel()
	srv := mailfake.NewServer(nil)
	defer srv.Close()
	mailer := mail.New(srv.URL, &mail.Config{IndexLag: time.Hour})
	exec := client.New(ledgermem.New(nil), nil)
	attempts := 0
	send := sendWithOncely(t, exec, mailer, oncelytemporal.Options[Sent]{})
	env := newEnv(suite(), "order-none", func(ctx context.Context, in Receipt) (oncelytemporal.Done[Sent], error) {
		attempts++
		return send(ctx, in)
	})
	env.ExecuteWorkflow(receiptWorkflow, Receipt{To: "ada@example.com", Text: "no order"})
	err := env.GetWorkflowError()
	var appErr *temporal.ApplicationError
	if !errors.As(err, &appErr) || appErr.Type() != oncelytemporal.ErrTypeInvalidInput || !appErr.NonRetryable() {
		t.Fatalf("workflow error = %v, want a non-retryable %s", err, oncelytemporal.ErrTypeInvalidInput)
	}
	if attempts != 1 || receiptsSent(srv) != 0 {
		t.Fatalf("attempts = %d, receipts = %d; want 1 attempt and no receipt", attempts, receiptsSent(srv))
	}
}

// Outside an activity there is no workflow to scope the action: the
// wrapped function refuses and runs nothing.
func TestOutsideActivity(t *testing.T) {
	t.Parallel()
	exec := client.New(ledgermem.New(nil), nil)
	ran := false
	send, err := oncelytemporal.Activity(exec, "noop", oncelytemporal.Options[Sent]{
		Identity: []oncelytemporal.Key{{Expr: "orderId"}},
	}, func(context.Context, Receipt) (Sent, error) { ran = true; return Sent{}, nil })
	if err != nil {
		t.Fatal(err)
	}
	_, err = send.Execute(context.Background(), Receipt{OrderID: "X"})
	if !errors.Is(err, oncelytemporal.ErrNotActivity) || ran {
		t.Fatalf("err = %v, ran = %v; want ErrNotActivity and nothing run", err, ran)
	}
}

// The same order done earlier in the workflow with another recipient is a
// conflict: a non-retryable error, and no second receipt.
func TestConflictIsNotRetried(t *testing.T) {
	t.Parallel()
	srv := mailfake.NewServer(nil)
	defer srv.Close()
	mailer := mail.New(srv.URL, &mail.Config{IndexLag: time.Hour})
	exec := client.New(ledgermem.New(nil), nil)
	send := sendWithOncely(t, exec, mailer, oncelytemporal.Options[Sent]{
		Validated: []oncelytemporal.Key{{Expr: "to", Norm: client.Email}},
	})
	for i, to := range []string{"ada@example.com", "bob@example.com"} {
		attempts := 0
		env := newEnv(suite(), "order-D-4", func(ctx context.Context, in Receipt) (oncelytemporal.Done[Sent], error) {
			attempts++
			return send(ctx, in)
		})
		env.ExecuteWorkflow(receiptWorkflow, Receipt{OrderID: "D-4", To: to, Text: "Thanks"})
		err := env.GetWorkflowError()
		if i == 0 {
			if err != nil {
				t.Fatal(err)
			}
			continue
		}
		var appErr *temporal.ApplicationError
		if !errors.As(err, &appErr) || appErr.Type() != oncelytemporal.ErrTypeConflict || !appErr.NonRetryable() || attempts != 1 {
			t.Fatalf("second run: error %v after %d attempts, want one non-retryable %s", err, attempts, oncelytemporal.ErrTypeConflict)
		}
	}
	if n := receiptsSent(srv); n != 1 {
		t.Fatalf("receipts sent = %d, want 1", n)
	}
}

type namedActs struct{}

func (*namedActs) Refund(context.Context, Receipt) (Sent, error) { return Sent{MessageID: "re_1"}, nil }

func Notify(context.Context, Receipt) (Sent, error) { return Sent{MessageID: "n_1"}, nil }

// NotifyWorkflow calls the two wrapped activities by function reference:
// a method value of a struct whose methods are activities, and a
// function.
func NotifyWorkflow(ctx workflow.Context, in Receipt) (string, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute})
	var a *namedActs
	var r, n oncelytemporal.Done[Sent]
	if err := workflow.ExecuteActivity(ctx, a.Refund, in).Get(ctx, &r); err != nil {
		return "", err
	}
	if err := workflow.ExecuteActivity(ctx, Notify, in).Get(ctx, &n); err != nil {
		return "", err
	}
	return r.Value.MessageID + " " + n.Value.MessageID, nil
}

// Wrapped activities keep the names Temporal gives the unwrapped
// functions: two register side by side (they were both "func1", and the
// second registration panicked), and the workflow calls them by function
// reference.
func TestActivityNames(t *testing.T) {
	t.Parallel()
	exec := client.New(ledgermem.New(nil), nil)
	opts := oncelytemporal.Options[Sent]{Identity: []oncelytemporal.Key{{Expr: "orderId"}}}
	refund, err := oncelytemporal.Activity(exec, "refund", opts, (&namedActs{}).Refund)
	if err != nil {
		t.Fatal(err)
	}
	notify, err := oncelytemporal.Activity(exec, "notify", opts, Notify)
	if err != nil {
		t.Fatal(err)
	}
	if refund.Name() != "Refund" || notify.Name() != "Notify" {
		t.Fatalf("names %q and %q, want Refund and Notify", refund.Name(), notify.Name())
	}
	env := suite().NewTestWorkflowEnvironment()
	env.SetWorkerOptions(worker.Options{DeadlockDetectionTimeout: time.Minute})
	env.RegisterWorkflow(NotifyWorkflow)
	refund.Register(env)
	notify.Register(env)
	env.SetStartWorkflowOptions(tclient.StartWorkflowOptions{ID: "order-N-1"})
	env.ExecuteWorkflow(NotifyWorkflow, Receipt{OrderID: "N-1"})
	var got string
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if err := env.GetWorkflowResult(&got); err != nil || got != "re_1 n_1" {
		t.Fatalf("result %q, %v", got, err)
	}
}

// The retry budget must outlast a dead attempt's claim.
func TestRetryBudget(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		s2c, sched time.Duration
		rp         *temporal.RetryPolicy
		ok         bool
	}{
		{time.Minute, 0, nil, true},
		{time.Minute, 0, &temporal.RetryPolicy{MaximumAttempts: 3}, true},
		{time.Minute, 0, &temporal.RetryPolicy{MaximumAttempts: 2}, false},
		{time.Minute, 2 * time.Minute, nil, false},
		{time.Minute, 3 * time.Minute, nil, true},
		{0, 0, nil, false},
	} {
		if err := oncelytemporal.RetryBudget(tc.s2c, tc.sched, tc.rp); (err == nil) != tc.ok {
			t.Errorf("RetryBudget(%v, %v, %+v) = %v, want ok %v", tc.s2c, tc.sched, tc.rp, err, tc.ok)
		}
	}
}
