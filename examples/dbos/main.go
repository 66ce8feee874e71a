// Command dbos runs a DBOS workflow whose step sends an email receipt,
// made once per order and workflow with oncely, offline: the email API is
// oncely's fake (fakes/mailfake).
//
// The provider commits the first send and the connection drops before its
// answer; DBOS retries the step (WithStepMaxRetries), and oncely
// reconciles instead of sending again.
//
// By default DBOS and the ledger keep their state in SQLite files in a
// temporary directory. With -postgres URL both live in that PostgreSQL
// database: DBOS's system tables (schema dbos) and oncely's ledger
// (ledgerpg, public.oncely_records).
//
//	go run .
//	go run . -postgres 'postgres://postgres@127.0.0.1:5432/receipts?sslmode=disable'
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/dbos-inc/dbos-transact-golang/dbos"
	_ "github.com/dbos-inc/dbos-transact-golang/dbos/driver/sqlite"

	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/fakes/fault"
	"github.com/oncely/oncely/fakes/mailfake"
	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/ledger/ledgerpg"
	"github.com/oncely/oncely/ledger/ledgersqlite"
	"github.com/oncely/oncely/providers/mail"
	"github.com/oncely/oncely/reconcile"
	"github.com/oncely/oncely/workflow/oncelydbos"
)

// Receipt is the step's input; the order is its identity.
type Receipt struct {
	OrderID string `json:"orderId"`
	To      string `json:"to"`
	Text    string `json:"text"`
}

// Sent is the step's result.
type Sent struct {
	MessageID string `json:"messageId"`
}

func main() {
	pg := flag.String("postgres", "", "a PostgreSQL URL for DBOS and the ledger (default: SQLite files in a temporary directory)")
	flag.Parse()
	if err := run(context.Background(), os.Stdout, *pg); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, w io.Writer, pgURL string) error {
	srv := mailfake.NewServer(nil)
	defer srv.Close()
	// The first send is committed, then its connection drops.
	srv.Faults.Add(fault.Rule{Route: "POST /v1/messages", Attempt: 1, Action: fault.CommitThenDrop})
	mailer := mail.New(srv.URL, &mail.Config{IndexLag: 0})

	cfg := dbos.Config{AppName: "receipts", Logger: slog.New(slog.DiscardHandler)}
	dir, err := os.MkdirTemp("", "receipts-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	cfg.DatabaseURL = "sqlite:" + filepath.Join(dir, "dbos.db")
	if pgURL != "" {
		cfg.DatabaseURL = pgURL
	}
	// DBOS creates the database when it is missing.
	dctx, err := dbos.NewContext(ctx, cfg)
	if err != nil {
		return err
	}
	defer dbos.Shutdown(dctx, 5*time.Second)
	var store ledger.Store
	if pgURL != "" {
		s, err := ledgerpg.OpenURL(ctx, pgURL, nil) // the same database as DBOS
		if err != nil {
			return err
		}
		defer s.Close()
		store = s
	} else {
		s, err := ledgersqlite.Open(ctx, filepath.Join(dir, "oncely.db"), nil)
		if err != nil {
			return err
		}
		defer s.Close()
		store = s
	}
	exec := client.New(store, nil)
	sends := 0 // runs of the step's function, each a send

	sendReceipt, err := oncelydbos.Step(exec, "send_receipt", oncelydbos.Options[Sent]{
		Identity:   []oncelydbos.Key{{Expr: "orderId", Norm: client.String}},
		Reconciler: reconcile.New(mailer, nil),
		Ref:        func(s Sent) string { return s.MessageID },
	}, func(ctx context.Context, in Receipt) (Sent, error) {
		sends++
		m, err := mailer.Send(ctx, oncelydbos.DownstreamKey(ctx), mail.Message{
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
	receiptWorkflow := func(ctx dbos.Context, in Receipt) (string, error) {
		d, err := sendReceipt(ctx, in, dbos.WithStepMaxRetries(3), dbos.WithStepBaseInterval(10*time.Millisecond))
		if err != nil {
			return "", err
		}
		if !d.Known {
			// Done, found by the reconciler: Sent was never recorded, the
			// provider's message id is the reference it found.
			return d.Ref, nil
		}
		return d.Value.MessageID, nil
	}
	dbos.RegisterWorkflow(dctx, receiptWorkflow, dbos.WithWorkflowName("receipt"))
	if err := dbos.Launch(dctx); err != nil {
		return err
	}
	h, err := dbos.RunWorkflow(dctx, receiptWorkflow, Receipt{OrderID: "A-1", To: "ada@example.com", Text: "Thank you for your order."},
		dbos.WithWorkflowID(fmt.Sprintf("receipt-order-A-1-%d", time.Now().UnixNano())))
	if err != nil {
		return err
	}
	id, err := h.GetResult()
	if err != nil {
		return err
	}
	recs, err := store.List(ctx, ledger.Filter{})
	if err != nil {
		return err
	}
	fmt.Fprintln(w, "sends attempted:", sends)
	fmt.Fprintln(w, "receipts sent:", len(srv.Journal()))
	fmt.Fprintln(w, "the workflow got the message sent:", id != "" && len(srv.Journal()) == 1 && id == srv.Journal()[0].ID)
	for _, r := range recs {
		fmt.Fprintf(w, "ledger: %s %s, the message sent: %v\n", r.Tool, r.State, len(srv.Journal()) == 1 && r.Ref == srv.Journal()[0].ID)
	}
	return nil
}
