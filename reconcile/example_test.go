package reconcile_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/clock"
	"github.com/oncely/oncely/ledger/ledgermem"
	"github.com/oncely/oncely/providers"
	"github.com/oncely/oncely/reconcile"
)

// mailbox is a toy mail provider with no idempotency, whose messages can
// be fetched by client reference right after they were accepted.
type mailbox struct {
	mu   sync.Mutex
	sent map[string]string // reference -> message id
}

func (m *mailbox) send(ref string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	id := fmt.Sprintf("msg_%d", len(m.sent)+1)
	m.sent[ref] = id
	return id
}

func (m *mailbox) Capabilities() providers.Capabilities {
	return providers.Capabilities{Lookup: providers.Consistent}
}

func (m *mailbox) Lookup(ctx context.Context, ref string) (providers.LookupResult, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if id, ok := m.sent[ref]; ok {
		return providers.LookupResult{Status: providers.Found, Ref: id, Summary: "reply " + id + " sent"}, nil
	}
	return providers.LookupResult{Status: providers.NotFound}, nil
}

// The first send is accepted but its answer is lost. Before anything is
// sent again, the policy asks the provider, finds the message, and the
// executor records the action as done: one message.
func Example() {
	ctx := context.Background()
	mail := &mailbox{sent: map[string]string{}}
	exec := client.New(ledgermem.New(nil), nil)
	lost := true
	err := exec.Register(client.Tool{
		Name:     "send_reply",
		Identity: []client.Field{{Path: "ticketId", Norm: client.String}},
		Run: func(ctx context.Context, inv client.Invocation) (client.Effect, error) {
			id := mail.send(inv.DownstreamKey)
			if lost {
				lost = false
				return client.Effect{}, errors.New("read tcp: i/o timeout")
			}
			return client.Effect{Summary: "reply " + id + " sent", Ref: id}, nil
		},
		Reconciler: reconcile.New(mail, &reconcile.Config{MaxWait: time.Second}),
	})
	if err != nil {
		panic(err)
	}
	res, err := exec.Execute(ctx, "run-1", client.Call{Tool: "send_reply", Input: json.RawMessage(`{"ticketId": 42}`)})
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Text)
	fmt.Println("messages:", len(mail.sent))
	// Output:
	// Done: reply msg_1 sent
	// messages: 1
}

// A process crashed between the provider call and the ledger write,
// leaving a pending record. Once its lease has run out, a sweeper finds
// the effect at the provider and records it; the resumed run is told the
// action was already done.
func ExampleSweeper() {
	ctx := context.Background()
	clock := clock.NewFake(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	store := ledgermem.New(&ledgermem.Config{Clock: clock})
	mail := &mailbox{sent: map[string]string{}}
	crash := true
	tool := client.Tool{
		Name:     "send_reply",
		Identity: []client.Field{{Path: "ticketId", Norm: client.String}},
		Run: func(ctx context.Context, inv client.Invocation) (client.Effect, error) {
			id := mail.send(inv.DownstreamKey)
			if crash {
				runtime.Goexit() // the process dies here
			}
			return client.Effect{Summary: "reply " + id + " sent", Ref: id}, nil
		},
		Reconciler: reconcile.New(mail, &reconcile.Config{Clock: clock, InFlight: time.Second}),
	}
	exec := client.New(store, &client.Config{Clock: clock, Liveness: time.Minute})
	if err := exec.Register(tool); err != nil {
		panic(err)
	}
	call := client.Call{Tool: "send_reply", Input: json.RawMessage(`{"ticketId": 42}`)}
	died := make(chan struct{})
	go func() {
		defer close(died)
		_, _ = exec.Execute(ctx, "run-1", call)
	}()
	<-died
	crash = false

	clock.Advance(2 * time.Minute) // the lease runs out
	sweeper := reconcile.NewSweeper(store, []client.Tool{tool}, &reconcile.SweeperConfig{Clock: clock})
	report, err := sweeper.Sweep(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Printf("%+v\n", report)

	res, err := exec.Execute(ctx, "run-1", call)
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Text)
	fmt.Println("messages:", len(mail.sent))
	// Output:
	// {Examined:1 Done:1 Failed:0 Uncertain:0 Skipped:0 Errors:0}
	// Already done earlier in this run: reply msg_1 sent. Do not repeat it.
	// messages: 1
}
