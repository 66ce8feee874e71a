package client_test

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/ledger/ledgermem"
)

// The floor on the memory ledger: a claim and a completion issued directly,
// and a claim of a done key.
func BenchmarkMemFloor(b *testing.B) {
	ctx := context.Background()
	s := ledgermem.New(nil)
	params := func(key string) ledger.ClaimParams {
		now := time.Now()
		return ledger.ClaimParams{Key: key, Tool: "send_reply", RunID: "run-1", Owner: "owner",
			LeaseUntil: now.Add(time.Minute), ExpiresAt: now.Add(time.Hour)}
	}
	done := ledger.Completion{Summary: "sent", Ref: "msg_1", Result: []byte(`{"id":"msg_1"}`)}
	if _, err := s.Claim(ctx, params("replay")); err != nil {
		b.Fatal(err)
	}
	if err := s.Complete(ctx, "replay", "owner", done); err != nil {
		b.Fatal(err)
	}
	i := 0
	b.Run("fresh", func(b *testing.B) {
		for b.Loop() {
			i++
			p := params("fresh-" + strconv.Itoa(i))
			if _, err := s.Claim(ctx, p); err != nil {
				b.Fatal(err)
			}
			if err := s.Complete(ctx, p.Key, p.Owner, done); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("replay", func(b *testing.B) {
		for b.Loop() {
			if r, err := s.Claim(ctx, params("replay")); err != nil || r.Claimed {
				b.Fatal(r, err)
			}
		}
	})
}

// The executor on the memory ledger: key derivation, merge, claim, run and
// record; and a replay. Compare with BenchmarkMemFloor.
func BenchmarkExecuteMem(b *testing.B) {
	ctx := context.Background()
	exec := client.New(ledgermem.New(nil), nil)
	if err := exec.Register(client.Tool{
		Name:     "send_reply",
		Identity: []client.Field{{Path: "ticketId", Norm: client.String}},
		Run: func(context.Context, client.Invocation) (client.Effect, error) {
			return client.Effect{Summary: "sent", Ref: "msg_1", Result: json.RawMessage(`{"id":"msg_1"}`)}, nil
		},
	}); err != nil {
		b.Fatal(err)
	}
	call := func(ticket string) client.Call {
		return client.Call{Tool: "send_reply", Input: json.RawMessage(`{"ticketId":"` + ticket + `","text":"Your refund is on its way."}`)}
	}
	if _, err := exec.Execute(ctx, "run-1", call("replay")); err != nil {
		b.Fatal(err)
	}
	i := 0
	b.Run("fresh", func(b *testing.B) {
		for b.Loop() {
			i++
			if r, err := exec.Execute(ctx, "run-1", call(strconv.Itoa(i))); err != nil || r.Outcome != client.Executed {
				b.Fatal(r, err)
			}
		}
	})
	b.Run("replay", func(b *testing.B) {
		for b.Loop() {
			if r, err := exec.Execute(ctx, "run-1", call("replay")); err != nil || r.Outcome != client.AlreadyDone {
				b.Fatal(r, err)
			}
		}
	})
}

// A replay on the memory ledger with the counter records on (the default:
// the replay is counted in memory) and off (Config.NoCounters), paired in
// every iteration; reported: on/off.
func BenchmarkReplayCounters(b *testing.B) {
	ctx := context.Background()
	call := client.Call{Tool: "send_reply", Input: json.RawMessage(`{"ticketId":"t-1","text":"Your refund is on its way."}`)}
	var execs [2]*client.Executor
	for i, off := range []bool{false, true} {
		execs[i] = client.New(ledgermem.New(nil), &client.Config{NoCounters: off})
		if err := execs[i].Register(client.Tool{
			Name:     "send_reply",
			Identity: []client.Field{{Path: "ticketId", Norm: client.String}},
			Run: func(context.Context, client.Invocation) (client.Effect, error) {
				return client.Effect{Summary: "sent", Ref: "msg_1"}, nil
			},
		}); err != nil {
			b.Fatal(err)
		}
		if _, err := execs[i].Execute(ctx, "run-1", call); err != nil {
			b.Fatal(err)
		}
	}
	var took [2]time.Duration
	for b.Loop() {
		for i, e := range execs {
			t0 := time.Now()
			if r, err := e.Execute(ctx, "run-1", call); err != nil || r.Outcome != client.AlreadyDone {
				b.Fatal(r, err)
			}
			took[i] += time.Since(t0)
		}
	}
	b.ReportMetric(float64(took[0])/float64(b.N), "on-ns/op")
	b.ReportMetric(float64(took[1])/float64(b.N), "off-ns/op")
	b.ReportMetric(float64(took[0])/float64(took[1]), "on/off")
}
