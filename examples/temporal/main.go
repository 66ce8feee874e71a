// Command temporal runs a Temporal workflow whose activity sends an email
// receipt, made once per order and workflow with oncely, offline: the
// email API is oncely's fake (fakes/mailfake) and the Temporal SDK's
// in-process test environment stands in for the server and the worker.
//
// The activity's first attempt sends the receipt and is then lost (as when
// its worker dies before reporting): Temporal retries it, and oncely
// answers the retry with the first attempt's result. Then the workflow
// runs again under the same workflow id, as after a reset: the receipt is
// not sent again.
//
//	go run .
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"os"
	"time"

	"go.temporal.io/sdk/activity"
	tclient "go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/oncely/oncely/client"
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

// ReceiptWorkflow sends the receipt through the SendReceipt activity,
// which Temporal retries.
func ReceiptWorkflow(ctx workflow.Context, in Receipt) (string, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, MaximumAttempts: 5},
	})
	var out Sent
	err := workflow.ExecuteActivity(ctx, "SendReceipt", in).Get(ctx, &out)
	return out.MessageID, err
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

	sendReceipt, err := oncelytemporal.Activity(exec, "send_receipt", oncelytemporal.Options[Sent]{
		Identity:   []oncelytemporal.Key{{Expr: "orderId", Norm: client.String}},
		Reconciler: reconcile.New(mailer, nil),
	}, func(ctx context.Context, in Receipt) (Sent, error) {
		m, err := mailer.Send(ctx, oncelytemporal.DownstreamKey(ctx), mail.Message{
			From: "shop@example.com", To: in.To, Subject: "Receipt for order " + in.OrderID, Text: in.Text,
		})
		if err != nil {
			return Sent{}, err
		}
		return Sent{MessageID: m.ID}, nil
	})
	if err != nil {
		return err
	}
	// With a server: w := worker.New(c, "receipts", worker.Options{}), then
	// w.RegisterActivityWithOptions(sendReceipt, activity.RegisterOptions{Name: "SendReceipt"}).

	// The first attempt is lost after the send; Temporal retries it.
	lostOnce := func(ctx context.Context, in Receipt) (Sent, error) {
		out, err := sendReceipt(ctx, in)
		if err == nil && activity.GetInfo(ctx).Attempt == 1 {
			return Sent{}, errors.New("worker lost after the send")
		}
		return out, err
	}
	suite := &testsuite.WorkflowTestSuite{}
	suite.SetLogger(tlog.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	for i, act := range []func(context.Context, Receipt) (Sent, error){lostOnce, sendReceipt} {
		env := suite.NewTestWorkflowEnvironment()
		env.RegisterWorkflow(ReceiptWorkflow)
		env.RegisterActivityWithOptions(act, activity.RegisterOptions{Name: "SendReceipt"})
		env.SetStartWorkflowOptions(tclient.StartWorkflowOptions{ID: "receipt-order-A-1"})
		env.ExecuteWorkflow(ReceiptWorkflow, Receipt{OrderID: "A-1", To: "ada@example.com", Text: "Thank you for your order."})
		var id string
		if err := env.GetWorkflowError(); err != nil {
			return err
		}
		if err := env.GetWorkflowResult(&id); err != nil {
			return err
		}
		fmt.Fprintf(w, "%s: workflow receipt-order-A-1 got message %s\n",
			[]string{"run (attempt 1 lost, retried)", "run again (as after a reset)"}[i], id)
	}
	fmt.Fprintln(w, "receipts sent:", len(srv.Journal()))
	return nil
}
