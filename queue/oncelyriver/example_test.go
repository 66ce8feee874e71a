package oncelyriver_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/fakes/stripefake"
	"github.com/oncely/oncely/ledger/ledgerpg"
	"github.com/oncely/oncely/ledger/ledgerpg/pgtest"
	"github.com/oncely/oncely/oncelyfunc"
	"github.com/oncely/oncely/providers/stripe"
	"github.com/oncely/oncely/queue/oncelyriver"
	"github.com/oncely/oncely/reconcile"
)

// RefundOrder is a River job: refund part of an order's payment.
type RefundOrder struct {
	OrderID       string `json:"order_id"`
	PaymentIntent string `json:"payment_intent"`
	Amount        int64  `json:"amount"`
}

func (RefundOrder) Kind() string { return "refund_order" }

// A River worker that refunds through Stripe, once per order, although
// the job is inserted twice: the ledger lives in River's database, and
// each job completes in the transaction that records its action.
func Example() {
	srv := stripefake.NewServer(&stripefake.Config{Seed: 1}) // or https://api.stripe.com
	defer srv.Close()
	st := stripe.New(srv.URL, &stripe.Config{APIKey: "sk_test_example"})
	ctx := context.Background()
	pi, err := st.PaymentIntents.Create(ctx, "order-7-payment", stripe.PaymentIntentParams{
		Amount: 2500, Currency: "eur", PaymentMethod: "pm_card_visa", Confirm: true,
	})
	if err != nil {
		panic(err)
	}

	pool, schema := pgtest.ForExamples() // your *pgxpool.Pool and River's schema
	migrator, err := rivermigrate.New(riverpgxv5.New(pool), &rivermigrate.Config{Schema: schema})
	if err != nil {
		panic(err)
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		panic(err)
	}
	lcfg := &ledgerpg.Config{Schema: schema}
	if err := ledgerpg.Migrate(ctx, pool, lcfg); err != nil {
		panic(err)
	}
	store, err := ledgerpg.New(pool, lcfg)
	if err != nil {
		panic(err)
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
		panic(err)
	}
	river.AddWorker(workers, refunds)

	rc, err := river.NewClient(riverpgxv5.New(pool), cfg)
	if err != nil {
		panic(err)
	}
	completed, cancel := rc.Subscribe(river.EventKindJobCompleted)
	defer cancel()
	if err := rc.Start(ctx); err != nil {
		panic(err)
	}
	defer rc.Stop(ctx)
	job := RefundOrder{OrderID: "order-7", PaymentIntent: pi.ID, Amount: 1000}
	for range 2 {
		if _, err := rc.Insert(ctx, job, nil); err != nil {
			panic(err)
		}
	}
	for range 2 {
		ev := <-completed
		fmt.Printf("job completed, output is a refund id: %v\n", strings.HasPrefix(string(ev.Job.Output()), `"re_`))
	}
	n := 0
	for _, e := range srv.Journal() {
		if strings.HasPrefix(e.ID, "re_") {
			n++
		}
	}
	fmt.Println("refunds made:", n)
	// Output:
	// job completed, output is a refund id: true
	// job completed, output is a refund id: true
	// refunds made: 1
}
