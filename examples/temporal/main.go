// Command temporal runs a Temporal workflow whose activity sends an email
// receipt, made once per order and workflow with oncely, offline: the
// email API is oncely's fake (fakes/mailfake) and the Temporal SDK's
// in-process test environment stands in for the server and the worker.
//
// The workflow sends a receipt; then it runs again under the same
// workflow id, as after a reset: the receipt is not sent again, and the
// second run gets the first message id. Then a second order's send is
// committed by the provider and its answer lost: Temporal retries the
// activity, oncely reconciles, finds the message, and the workflow
// completes with the provider's message id.
//
//	go run .
package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"os"
	"time"

	tclient "go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/fakes/fault"
	"github.com/oncely/oncely/fakes/mailfake"
	"github.com/oncely/oncely/ledger/ledgermem"
	"github.com/oncely/oncely/providers/mail"
	"github.com/oncely/oncely/reconcile"
	"github.com/oncely/oncely/workflow/oncelytemporal"
)

// Receipt is the activity's input; the order is its identity.
type Receipt struct {
	OrderID string `json:"orderId"`
	To      string `json:"to"`
	Text    string `json:"text"`
}

// Sent is the activity's result.
type Sent struct {
	MessageID string `json:"messageId"`
}

// Activities holds the activity functions; its methods are activities.
type Activities struct{ mailer *mail.Client }

// SendReceipt sends the receipt with the action's key as the provider's
// reference.
func (a *Activities) SendReceipt(ctx context.Context, in Receipt) (Sent, error) {
	m, err := a.mailer.Send(ctx, oncelytemporal.DownstreamKey(ctx), mail.Message{
		From: "shop@example.com", To: in.To, Subject: "Receipt for order " + in.OrderID, Text: in.Text,
	})
	if err != nil {
		return Sent{}, err
	}
	return Sent{MessageID: m.ID}, nil
}

// activityOptions: a dead attempt's claim lasts until its
// StartToCloseTimeout; the retry policy must outlast it
// (oncelytemporal.RetryBudget: at least 3 attempts).
var activityOptions = workflow.ActivityOptions{
	StartToCloseTimeout: time.Minute,
	HeartbeatTimeout:    10 * time.Second,
	RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, MaximumAttempts: 5},
}

// ReceiptWorkflow sends the receipt through the SendReceipt activity,
// which Temporal retries, and returns the message id: the one sent, or,
// when the attempt that sent it died before recording its result, the
// reference the reconciler found at the provider.
func ReceiptWorkflow(ctx workflow.Context, in Receipt) (string, error) {
	ctx = workflow.WithActivityOptions(ctx, activityOptions)
	var a *Activities
	var sent oncelytemporal.Done[Sent]
	if err := workflow.ExecuteActivity(ctx, a.SendReceipt, in).Get(ctx, &sent); err != nil {
		return "", err
	}
	if !sent.Known {
		return sent.Ref, nil // done, found by the reconciler: Sent was not recorded
	}
	return sent.Value.MessageID, nil
}

func main() {
	if err := run(os.Stdout); err != nil {
		log.Fatal(err)
	}
}

func run(w io.Writer) error {
	srv := mailfake.NewServer(nil)
	defer srv.Close()
	mailer := mail.New(srv.URL, &mail.Config{IndexLag: 0})
	// In production a durable ledger the workers share (ledgerpg,
	// ledgerdynamo, ledgerredis; see ledgerurl).
	exec := client.New(ledgermem.New(nil), nil)
	if err := oncelytemporal.RetryBudget(activityOptions.StartToCloseTimeout, activityOptions.ScheduleToCloseTimeout, activityOptions.RetryPolicy); err != nil {
		return err
	}

	acts := &Activities{mailer: mailer}
	sendReceipt, err := oncelytemporal.Activity(exec, "send_receipt", oncelytemporal.Options[Sent]{
		Identity:   []oncelytemporal.Key{{Expr: "orderId", Norm: client.String}},
		Reconciler: reconcile.New(mailer, nil),
		Ref:        func(s Sent) string { return s.MessageID },
	}, acts.SendReceipt)
	if err != nil {
		return err
	}
	// With a server: w := worker.New(c, "receipts", worker.Options{}), then
	// sendReceipt.Register(w): the activity is named "SendReceipt".

	suite := &testsuite.WorkflowTestSuite{}
	suite.SetLogger(tlog.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	for i, order := range []string{"A-1", "A-1", "B-2"} {
		if order == "B-2" {
			// The provider commits the send and the connection drops:
			// the retry reconciles and finds the message.
			srv.Faults.Add(fault.Rule{Route: "POST /v1/messages", Attempt: 1, Action: fault.CommitThenDrop})
		}
		env := suite.NewTestWorkflowEnvironment()
		env.RegisterWorkflow(ReceiptWorkflow)
		sendReceipt.Register(env)
		env.SetStartWorkflowOptions(tclient.StartWorkflowOptions{ID: "receipt-order-" + order})
		env.ExecuteWorkflow(ReceiptWorkflow, Receipt{OrderID: order, To: "ada@example.com", Text: "Thank you for your order."})
		var id string
		if err := env.GetWorkflowError(); err != nil {
			return err
		}
		if err := env.GetWorkflowResult(&id); err != nil {
			return err
		}
		fmt.Fprintf(w, "%s: workflow receipt-order-%s completed with message %s\n",
			[]string{"run", "run again (as after a reset)", "run with the send's answer lost"}[i], order, id)
	}
	fmt.Fprintln(w, "receipts sent:", len(srv.Journal()))
	return nil
}
