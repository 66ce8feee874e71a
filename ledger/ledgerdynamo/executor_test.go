package ledgerdynamo_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/ledger/ledgerdynamo"
	"github.com/oncely/oncely/ledger/ledgerdynamo/dynalitetest"
)

// newExecutor returns an Executor on store with a send_reply tool whose
// runs it counts.
func newExecutor(t testing.TB, store ledger.Store) (*client.Executor, *atomic.Int64) {
	t.Helper()
	exec := client.New(store, nil)
	var runs atomic.Int64
	err := exec.Register(client.Tool{
		Name:     "send_reply",
		Identity: []client.Field{{Path: "ticketId", Norm: client.String}},
		Run: func(ctx context.Context, inv client.Invocation) (client.Effect, error) {
			runs.Add(1)
			return client.Effect{Summary: "replied to ticket 42", Ref: "msg_1"}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return exec, &runs
}

func reply(ticket any, text string) client.Call {
	in, _ := json.Marshal(map[string]any{"ticketId": ticket, "text": text})
	return client.Call{Tool: "send_reply", Input: in, ID: "toolu_" + text[:4]}
}

// execute runs call and checks its outcome and the summary it reports.
func execute(t *testing.T, exec *client.Executor, call client.Call, want client.Outcome) {
	t.Helper()
	res, err := exec.Execute(context.Background(), "run-1", call)
	if err != nil || res.Outcome != want || res.Summary != "replied to ticket 42" {
		t.Fatalf("Execute = %v %q, %v; want %v", res.Outcome, res.Text, err, want)
	}
}

// Requests on the wire for a call through the Executor: a fresh action
// costs 2 (claim, record), and the first of its run in a Store one more,
// an eventually consistent GetItem (ReadFirstSeen: the run may be resumed
// by another process, replaying what it did); a replay 1, that GetItem,
// both in the process that completed it and in another that resumes the
// run. A replay in another process that acted anew in the run claims: 1
// request where the server returns the blocking item with the failed
// condition and 2 where it does not (dynalite).
func TestExecutorRequests(t *testing.T) {
	t.Parallel()
	want := func(t *testing.T, c *counter, what string, counts map[string]int) {
		t.Helper()
		if got := c.take(); fmt.Sprint(got) != fmt.Sprint(counts) {
			t.Errorf("%s: requests %v, want %v", what, got, counts)
		}
	}

	t.Run("dynalite", func(t *testing.T) {
		t.Parallel()
		c := newCounter(nil)
		api := newClient(dynalitetest.Endpoint(t), c)
		table := dynalitetest.NewTable(t, api)
		exec, runs := newExecutor(t, ledgerdynamo.New(api, table, nil))
		c.take()

		execute(t, exec, reply(42, "first reply"), client.Executed)
		want(t, c, "fresh action, the first of its run", map[string]int{"GetItem": 1, "UpdateItem": 2})
		execute(t, exec, reply(43, "second reply"), client.Executed)
		want(t, c, "fresh action", map[string]int{"UpdateItem": 2})
		execute(t, exec, reply("42", "reworded reply"), client.AlreadyDone)
		want(t, c, "replay", map[string]int{"GetItem": 1})
		if n := runs.Load(); n != 2 {
			t.Errorf("tool ran %d times, want 2", n)
		}

		// Another process resumes the run: its replays are reads.
		other, otherRuns := newExecutor(t, ledgerdynamo.New(api, table, nil))
		execute(t, other, reply("42", "reworded reply"), client.AlreadyDone)
		want(t, c, "replay in another process", map[string]int{"GetItem": 1})
		// Once it acted anew in the run, a replay it has not seen claims.
		execute(t, other, reply(44, "third reply"), client.Executed)
		want(t, c, "fresh action in another process", map[string]int{"GetItem": 1, "UpdateItem": 2})
		execute(t, other, reply("43", "reworded reply"), client.AlreadyDone)
		want(t, c, "replay in another process that acted anew", map[string]int{"UpdateItem": 1, "GetItem": 1})
		if n := otherRuns.Load(); n != 1 {
			t.Errorf("tool ran %d times in the other process, want 1", n)
		}
	})

	t.Run("old item returned", func(t *testing.T) {
		t.Parallel()
		store, c, si := newStandInWith(t, func(cfg *ledgerdynamo.Config) { cfg.ReadFirst = ledgerdynamo.ReadFirstSeen }, nil, ok, ok)
		exec, runs := newExecutor(t, store)

		execute(t, exec, reply(42, "first reply"), client.Executed)
		want(t, c, "fresh action, the first of its run", map[string]int{"GetItem": 1, "UpdateItem": 2})

		// The server now holds the done record the first call wrote, and
		// returns it with the failed condition of the next claim.
		claim := si.bodies()[1]
		values := claim["ExpressionAttributeValues"].(map[string]any)
		p := params(claim["Key"].(map[string]any)["pk"].(map[string]any)["S"].(string), "owner-a")
		p.Fingerprint = values[":fp"].(map[string]any)["S"].(string)
		done := record(p, ledger.StateDone)
		done.Summary, done.Ref = "replied to ticket 42", "msg_1"
		si.mu.Lock()
		si.updates = []answer{conditionFailed(wireItem(done))}
		si.getItem = wireItem(done)
		si.mu.Unlock()

		// The Store completed the action (ReadFirstSeen): it reads, and
		// eventually consistent reads suffice for a done record.
		execute(t, exec, reply("42", "reworded reply"), client.AlreadyDone)
		want(t, c, "replay", map[string]int{"GetItem": 1})
		if get := si.bodies()[3]; get["ConsistentRead"] == true {
			t.Errorf("replay read %v is consistent, want eventually consistent", get)
		}
		if n := runs.Load(); n != 1 {
			t.Errorf("tool ran %d times, want 1", n)
		}
	})
}
