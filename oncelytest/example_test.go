package oncelytest_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/clock"
	"github.com/oncely/oncely/ledger/ledgermem"
	"github.com/oncely/oncely/oncelytest"
	"github.com/oncely/oncely/reconcile"
)

// testSendEmail is how a test of your own tool runs the failure cases. The
// harness wires the tool to a fake provider (here a toy outbox; with the
// shipped fakes, a mailfake server and its journal) and says how to make
// the provider time out after it accepted a message.
func testSendEmail(t *testing.T) {
	oncelytest.FailureCases(t, func(t *testing.T, clock clock.Clock) oncelytest.Harness {
		box := newOutbox()
		return oncelytest.Harness{
			Store:               ledgermem.New(&ledgermem.Config{Clock: clock}),
			Tool:                emailTool(box, reconcile.New(box, &reconcile.Config{InFlight: 10 * time.Millisecond})),
			Input:               json.RawMessage(`{"to": "ada@example.com", "ticketId": 42, "text": "Refunded."}`),
			Recall:              json.RawMessage(`{"to": "ADA@example.com", "ticketId": "42", "text": "Your money is back."}`),
			Effects:             box.effects,
			TimeoutAfterSuccess: func() { box.mu.Lock(); box.timeout = true; box.mu.Unlock() },
			Config:              &client.Config{Wait: 5 * time.Second},
		}
	})
}

// In a _test.go file of your own, call FailureCases from a test:
//
//	func TestSendEmail(t *testing.T) { testSendEmail(t) }
//
// Each case is a subtest: TestSendEmail/same_call_twice,
// TestSendEmail/crash_after_effect, TestSendEmail/parallel_resume/8, ...
func ExampleFailureCases() {
	_ = testSendEmail
}

// The example's harness passes every case.
func TestFailureCases(t *testing.T) {
	t.Parallel()
	testSendEmail(t)
}
