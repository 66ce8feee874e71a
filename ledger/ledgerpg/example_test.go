package ledgerpg_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"

	"github.com/jackc/pgx/v5"

	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/ledger/ledgerpg"
	"github.com/oncely/oncely/ledger/ledgerpg/pgtest"
)

// The ledger in the database that already holds the agent's runs: create
// (or upgrade) its table once, then hand the store to the executor. The
// pool is the application's own, sized by it.
func Example() {
	ctx := context.Background()
	pool, schema := pgtest.ForExamples() // your *pgxpool.Pool; "public" by default
	cfg := &ledgerpg.Config{Schema: schema}
	if err := ledgerpg.Migrate(ctx, pool, cfg); err != nil {
		panic(err)
	}
	store, err := ledgerpg.New(pool, cfg)
	if err != nil {
		panic(err)
	}
	exec := client.New(store, nil)
	sent := 0
	if err := exec.Register(client.Tool{
		Name:     "send_reply",
		Identity: []client.Field{{Path: "ticketId", Norm: client.String}},
		Run: func(ctx context.Context, inv client.Invocation) (client.Effect, error) {
			sent++ // send the reply here, passing inv.DownstreamKey to the provider
			return client.Effect{Summary: "reply sent on ticket 42", Ref: "msg_1"}, nil
		},
	}); err != nil {
		panic(err)
	}
	for _, input := range []string{`{"ticketId": 42}`, `{"ticketId": "42"}`} {
		res, err := exec.Execute(ctx, "run-1", client.Call{Tool: "send_reply", Input: json.RawMessage(input)})
		if err != nil {
			panic(err)
		}
		fmt.Println(res.Text)
	}
	fmt.Println("replies sent:", sent)
	// Output:
	// Done: reply sent on ticket 42
	// Already done earlier in this run: reply sent on ticket 42. Do not repeat it.
	// replies sent: 1
}

// OpenURL is how programs that choose their ledger by URL open this one.
func ExampleOpenURL() {
	ctx := context.Background()
	pool, schema := pgtest.ForExamples()
	u, err := url.Parse(pool.Config().ConnString()) // e.g. postgres://app@db.internal:5432/agents
	if err != nil {
		panic(err)
	}
	q := u.Query()
	q.Set("schema", schema)
	q.Set("pool_max_conns", "4")
	u.RawQuery = q.Encode()
	store, err := ledgerpg.OpenURL(ctx, u.String(), nil)
	if err != nil {
		panic(err)
	}
	defer store.Close()
	_, err = store.Get(ctx, "no-such-key")
	fmt.Println(err)
	// Output: ledger: not found
}

// Right: the effect is a row in the same database. The claim, the credit
// and the record commit together or not at all, so the action happens
// exactly once without any reconciliation: a crash before the commit
// leaves neither the credit nor the claim.
func ExampleStore_InTx() {
	ctx := context.Background()
	pool, schema := pgtest.ForExamples()
	cfg := &ledgerpg.Config{Schema: schema}
	if err := ledgerpg.Migrate(ctx, pool, cfg); err != nil {
		panic(err)
	}
	store, err := ledgerpg.New(pool, cfg)
	if err != nil {
		panic(err)
	}
	credits := pgx.Identifier{schema, "credits"}.Sanitize()
	if _, err := pool.Exec(ctx, "CREATE TABLE "+credits+" (order_id bigint PRIMARY KEY, cents bigint NOT NULL)"); err != nil {
		panic(err)
	}

	credit := func(input string) string {
		tx, err := pool.Begin(ctx)
		if err != nil {
			panic(err)
		}
		defer tx.Rollback(ctx) // after Commit, a no-op
		exec := client.New(store.InTx(tx), nil)
		if err := exec.Register(client.Tool{
			Name:     "credit_order",
			Identity: []client.Field{{Path: "orderId", Norm: client.Integer}, {Path: "cents", Norm: client.Integer}},
			Run: func(ctx context.Context, inv client.Invocation) (client.Effect, error) {
				var order, cents int64
				if err := json.Unmarshal(inv.Input, &struct {
					OrderID *int64 `json:"orderId"`
					Cents   *int64 `json:"cents"`
				}{&order, &cents}); err != nil {
					return client.Effect{}, err
				}
				// The effect, on the same transaction as the claim.
				if _, err := tx.Exec(ctx, "INSERT INTO "+credits+" VALUES ($1, $2)", order, cents); err != nil {
					return client.Effect{}, err
				}
				return client.Effect{Summary: fmt.Sprintf("credited %d cents to order %d", cents, order)}, nil
			},
		}); err != nil {
			panic(err)
		}
		res, err := exec.Execute(ctx, "run-1", client.Call{Tool: "credit_order", Input: json.RawMessage(input)})
		if err != nil {
			panic(err)
		}
		if err := tx.Commit(ctx); err != nil {
			panic(err)
		}
		return res.Text
	}
	fmt.Println(credit(`{"orderId": 7, "cents": 500}`))
	fmt.Println(credit(`{"orderId": "7", "cents": 500}`))
	var n int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM "+credits).Scan(&n); err != nil {
		panic(err)
	}
	fmt.Println("credits:", n)
	// Output:
	// Done: credited 500 cents to order 7
	// Already done earlier in this run: credited 500 cents to order 7. Do not repeat it.
	// credits: 1
}

// Wrong: an external API call inside the transaction that holds the
// claim. The email leaves at once, but the claim and its record exist only
// if the transaction commits; here a later statement of the same
// transaction fails, everything rolls back, and the retry sends the email
// again. For effects outside the database, claim through the pool (the
// store itself), so that the claim is committed before the call and a
// retry finds it.
func ExampleStore_InTx_externalCall() {
	ctx := context.Background()
	pool, schema := pgtest.ForExamples()
	cfg := &ledgerpg.Config{Schema: schema}
	if err := ledgerpg.Migrate(ctx, pool, cfg); err != nil {
		panic(err)
	}
	store, err := ledgerpg.New(pool, cfg)
	if err != nil {
		panic(err)
	}
	sent := 0 // the mail provider's count
	tool := client.Tool{
		Name:     "send_invoice",
		Identity: []client.Field{{Path: "invoiceId", Norm: client.String}},
		Run: func(ctx context.Context, inv client.Invocation) (client.Effect, error) {
			sent++ // the provider's API call
			return client.Effect{Summary: "invoice mailed"}, nil
		},
	}
	call := client.Call{Tool: "send_invoice", Input: json.RawMessage(`{"invoiceId": "inv-9"}`)}

	for attempt := 1; attempt <= 2; attempt++ {
		tx, err := pool.Begin(ctx)
		if err != nil {
			panic(err)
		}
		exec := client.New(store.InTx(tx), nil)
		if err := exec.Register(tool); err != nil {
			panic(err)
		}
		if _, err := exec.Execute(ctx, "run-1", call); err != nil {
			panic(err)
		}
		// The run's checkpoint write fails: the transaction rolls back.
		_, err = tx.Exec(ctx, "SELECT 1/0")
		fmt.Println("attempt", attempt, "rolled back:", err != nil)
		_ = tx.Rollback(ctx)
	}
	fmt.Println("emails sent inside transactions:", sent)

	sent = 0
	exec := client.New(store, nil) // the claim commits before the call
	if err := exec.Register(tool); err != nil {
		panic(err)
	}
	for range 2 {
		if _, err := exec.Execute(ctx, "run-2", call); err != nil {
			panic(err)
		}
	}
	fmt.Println("emails sent with the store on the pool:", sent)
	// Output:
	// attempt 1 rolled back: true
	// attempt 2 rolled back: true
	// emails sent inside transactions: 2
	// emails sent with the store on the pool: 1
}
