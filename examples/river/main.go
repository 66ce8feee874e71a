// Command river runs a River worker that refunds part of an order's
// payment through Stripe, once per order, although the job is inserted
// twice: oncely's ledger (ledgerpg) lives in River's database, and each
// job completes in the transaction that records its action. Stripe is
// oncely's fake (fakes/stripefake); only PostgreSQL is real.
//
// The program uses the PostgreSQL database of ONCELY_POSTGRES_URL (by
// default postgres://postgres@127.0.0.1:5432/test), in a schema of its
// own that it drops when it ends. It prints the number of refunds made
// and exits 0 only when that is 1.
//
//	go run .
//	ONCELY_POSTGRES_URL='postgres://postgres@db.example:5432/shop' go run .
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/fakes/stripefake"
	"github.com/oncely/oncely/ledger/ledgerpg"
	"github.com/oncely/oncely/oncelyfunc"
	"github.com/oncely/oncely/providers/stripe"
	"github.com/oncely/oncely/queue/oncelyriver"
	"github.com/oncely/oncely/reconcile"
)

// DefaultURL is the PostgreSQL database used when ONCELY_POSTGRES_URL is
// not set.
const DefaultURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// RefundOrder is a River job: refund part of an order's payment.
type RefundOrder struct {
	OrderID       string `json:"order_id"`
	PaymentIntent string `json:"payment_intent"`
	Amount        int64  `json:"amount"`
}

// Kind is the job's kind in River.
func (RefundOrder) Kind() string { return "refund_order" }

func main() {
	url := os.Getenv("ONCELY_POSTGRES_URL")
	if url == "" {
		url = DefaultURL
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := run(ctx, os.Stdout, url, Schema()); err != nil {
		log.Fatal(err)
	}
}

// Schema returns a schema name of its own for a run, for River's tables
// and the ledger's; yours has a fixed name.
func Schema() string {
	b := make([]byte, 6)
	rand.Read(b)
	return "oncely_river_example_" + hex.EncodeToString(b)
}

// run inserts the same refund job twice into River on the database of
// pgURL, in schema (which it creates, then drops with everything in it),
// works both, and fails unless exactly one refund was made.
func run(ctx context.Context, w io.Writer, pgURL, schema string) (err error) {
	srv := stripefake.NewServer(&stripefake.Config{Seed: 1}) // or https://api.stripe.com
	defer srv.Close()
	st := stripe.New(srv.URL, &stripe.Config{APIKey: "sk_test_example"})
	pi, err := st.PaymentIntents.Create(ctx, "order-7-payment", stripe.PaymentIntentParams{
		Amount: 2500, Currency: "eur", PaymentMethod: "pm_card_visa", Confirm: true,
	})
	if err != nil {
		return err
	}

	pool, err := pgxpool.New(ctx, pgURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()); err != nil {
		return fmt.Errorf("create schema: %w", err)
	}
	defer func() {
		if _, derr := pool.Exec(context.WithoutCancel(ctx), "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); derr != nil && err == nil {
			err = fmt.Errorf("drop schema: %w", derr)
		}
	}()

	migrator, err := rivermigrate.New(riverpgxv5.New(pool), &rivermigrate.Config{Schema: schema})
	if err != nil {
		return err
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return err
	}
	lcfg := &ledgerpg.Config{Schema: schema}
	if err := ledgerpg.Migrate(ctx, pool, lcfg); err != nil {
		return err
	}
	store, err := ledgerpg.New(pool, lcfg)
	if err != nil {
		return err
	}
	exec := client.New(oncelyriver.NewTxStore(store, pool), nil)

	workers := river.NewWorkers()
	cfg := &river.Config{Schema: schema, Workers: workers,
		Queues: map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 4}}}
	refunds, err := oncelyriver.New(exec, cfg, oncelyriver.Options{
		// Two inserts for one order are one refund.
		Identity:   []oncelyfunc.Key{{Expr: "args.order_id", Norm: client.String}},
		Reconciler: reconcile.New(st.Refunds, nil),
	}, func(ctx context.Context, job *river.Job[RefundOrder]) (string, error) {
		re, err := st.Refunds.Create(ctx, oncelyfunc.DownstreamKey(ctx), stripe.RefundParams{
			PaymentIntent: job.Args.PaymentIntent, Amount: job.Args.Amount,
		})
		if err != nil {
			return "", err // a *providers.ProviderError knows its class
		}
		return re.ID, nil
	})
	if err != nil {
		return err
	}
	river.AddWorker(workers, refunds)

	rc, err := river.NewClient(riverpgxv5.New(pool), cfg)
	if err != nil {
		return err
	}
	completed, cancel := rc.Subscribe(river.EventKindJobCompleted)
	defer cancel()
	if err := rc.Start(ctx); err != nil {
		return err
	}
	defer rc.Stop(context.WithoutCancel(ctx))
	job := RefundOrder{OrderID: "order-7", PaymentIntent: pi.ID, Amount: 1000}
	for range 2 {
		if _, err := rc.Insert(ctx, job, nil); err != nil {
			return err
		}
	}
	for range 2 {
		select {
		case ev := <-completed:
			fmt.Fprintf(w, "job completed, output is a refund id: %v\n", strings.HasPrefix(string(ev.Job.Output()), `"re_`))
		case <-ctx.Done():
			return fmt.Errorf("waiting for the jobs to complete: %w", ctx.Err())
		}
	}
	n := 0
	for _, e := range srv.Journal() {
		if strings.HasPrefix(e.ID, "re_") {
			n++
		}
	}
	fmt.Fprintln(w, "refunds:", n)
	if n != 1 {
		return fmt.Errorf("%d refunds made for one order, want 1", n)
	}
	return nil
}
