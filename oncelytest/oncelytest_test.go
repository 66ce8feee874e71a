package oncelytest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/clock"
	"github.com/oncely/oncely/ledger/ledgermem"
	"github.com/oncely/oncely/oncelytest"
	"github.com/oncely/oncely/providers"
)

// outbox is a toy mail provider: no idempotency, a consistent lookup by
// reference, and a switch that makes the next send time out after it was
// accepted.
type outbox struct {
	mu      sync.Mutex
	sent    map[string]string // reference -> message id
	journal int
	timeout bool
}

func newOutbox() *outbox { return &outbox{sent: map[string]string{}} }

func (o *outbox) send(ctx context.Context, ref, to string) (string, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.journal++
	id := fmt.Sprintf("msg_%d", o.journal)
	o.sent[ref] = id
	if o.timeout {
		o.timeout = false
		return "", errors.New("read tcp 127.0.0.1:443: i/o timeout")
	}
	return id, nil
}

func (o *outbox) effects() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.journal
}

func (o *outbox) Capabilities() providers.Capabilities {
	return providers.Capabilities{Lookup: providers.Consistent}
}

func (o *outbox) Lookup(ctx context.Context, ref string) (providers.LookupResult, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if id, ok := o.sent[ref]; ok {
		return providers.LookupResult{Status: providers.Found, Ref: id, Summary: "email " + id + " sent"}, nil
	}
	return providers.LookupResult{Status: providers.NotFound}, nil
}

func emailTool(o *outbox, rec client.Reconciler) client.Tool {
	return client.Tool{
		Name:     "send_email",
		Identity: []client.Field{{Path: "to", Norm: client.Email}, {Path: "ticketId", Norm: client.String}},
		Run: func(ctx context.Context, inv client.Invocation) (client.Effect, error) {
			var in struct {
				To string `json:"to"`
			}
			if err := inv.Bind(&in); err != nil {
				return client.Effect{}, err
			}
			id, err := o.send(ctx, inv.DownstreamKey, in.To)
			if err != nil {
				return client.Effect{}, err // ambiguous: it may have been sent
			}
			return client.Effect{Summary: "email " + id + " sent", Ref: id}, nil
		},
		Reconciler: rec,
	}
}

// emailHarness is the harness for the email tool with the given
// reconciler; it also returns the outbox, for tests of the harness itself.
func emailHarness(clock clock.Clock, rec func(o *outbox) client.Reconciler) (oncelytest.Harness, *outbox) {
	o := newOutbox()
	return oncelytest.Harness{
		Store:               ledgermem.New(&ledgermem.Config{Clock: clock}),
		Tool:                emailTool(o, rec(o)),
		Input:               json.RawMessage(`{"to": "ada@example.com", "ticketId": 42, "text": "Your refund is on its way."}`),
		Recall:              json.RawMessage(`{"to": "Ada@Example.com", "ticketId": "42", "text": "We refunded you!"}`),
		Effects:             o.effects,
		TimeoutAfterSuccess: func() { o.mu.Lock(); o.timeout = true; o.mu.Unlock() },
		Config:              &client.Config{Wait: 5 * time.Second},
	}, o
}

// The cases fail a tool that retries blindly: a reconciler that always
// answers "resend safe" lets the resumed run send the email again.
//
// The cases run in a nested test run whose report goes to a file, not to
// the verbose log: its expected failures are not this test's. The test is
// not parallel, so nothing else writes to os.Stdout meanwhile.
func TestFailureCasesCatchBlindRetry(t *testing.T) {
	blind := client.ReconcilerFunc(func(context.Context, client.Invocation) (client.Reconciliation, error) {
		return client.Reconciliation{Verdict: client.VerdictResendSafe}, nil
	})
	var mu sync.Mutex
	outboxes := map[string]*outbox{}
	report, err := os.CreateTemp(t.TempDir(), "report")
	if err != nil {
		t.Fatal(err)
	}
	stdout := os.Stdout
	os.Stdout = report
	ok := testing.RunTests(func(string, string) (bool, error) { return true, nil }, []testing.InternalTest{{
		Name: "BlindRetry",
		F: func(t *testing.T) {
			oncelytest.FailureCases(t, func(t *testing.T, clock clock.Clock) oncelytest.Harness {
				h, o := emailHarness(clock, func(*outbox) client.Reconciler { return blind })
				mu.Lock()
				defer mu.Unlock()
				outboxes[t.Name()] = o
				return h
			})
		},
	}})
	os.Stdout = stdout
	defer func() {
		if t.Failed() {
			out, _ := os.ReadFile(report.Name())
			t.Logf("nested run:\n%s", out)
		}
	}()
	if ok {
		t.Error("FailureCases passed a tool that sends twice after a crash")
	}
	for name, want := range map[string]int{
		"BlindRetry/same_call_twice":       1,
		"BlindRetry/crash_after_effect":    2,
		"BlindRetry/parallel_resume/8":     2,
		"BlindRetry/timeout_after_success": 2,
	} {
		if o := outboxes[name]; o == nil || o.effects() != want {
			t.Errorf("%s: outbox %v, want %d effects", name, o, want)
		}
	}
}
