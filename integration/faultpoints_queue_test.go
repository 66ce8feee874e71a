package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/clock"
	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/oncelyfunc"
	"github.com/oncely/oncely/reconcile"
)

// The fault-point enumeration of a queue consumer. The action arrives as
// a message that the broker delivers at least once, to a consumer
// (oncelyfunc.SQS, a new process per delivery) that deletes (acks) it
// when its action is done and reports it for redelivery otherwise. Every
// operation on the path is a point, as in TestFaultPoints, and so are
// the consumer's ack and nack: an ack refused or never sent (the process
// died first) leaves the message to be redelivered after the record; a
// point delayed past the lease redelivers the message before its record;
// an ack whose reply is lost has deleted it.
//
// The brokers' own consumers (River, RabbitMQ, NATS JetStream) live in
// modules of their own under queue/, so that the root module does not
// depend on their clients; their ack points are enumerated there against
// real servers with processes killed by SIGKILL (TestRiverKillAtEveryPoint,
// TestAMQPKilledConsumerRedeliverySettlesOnce,
// TestNATSKilledConsumerRedeliverySettlesOnce and the ack-lost tests).

// consume is one delivery of the message to a new consumer process.
func (w *fpWorld) consume(ctx context.Context) {
	p := &fpProcess{w: w}
	exec := client.New(&faultStore{Store: w.store, p: p}, &client.Config{
		Clock: w.clock, Liveness: fpLease, Retention: fpRetention, Wait: -1, RecordTimeout: 30 * time.Second, NoCounters: true,
	})
	opts := oncelyfunc.SQSOptions{Retention: fpRetention, Logger: discardLogger()}
	if w.tool != tPlain {
		opts.Reconciler = reconcile.New(fpAdapter{w}, &reconcile.Config{
			Clock: w.clock, InFlight: fpInFlight, MaxWait: 10 * time.Second,
			Sleep: func(ctx context.Context, d time.Duration) error { w.clock.Advance(d); return ctx.Err() },
		})
	}
	h, err := oncelyfunc.SQS(exec, "send", opts, func(ctx context.Context, m events.SQSMessage) error {
		_, err := w.request(p, oncelyfunc.DownstreamKey(ctx))
		return err
	})
	if err != nil {
		w.t.Fatal(err)
	}
	msg := events.SQSMessage{MessageId: "msg-" + w.run, Body: `{"id":"42"}`, EventSourceARN: "arn:aws:sqs:us-east-1:123456789012:orders"}
	resp, _ := h(ctx, events.SQSEvent{Records: []events.SQSMessage{msg}})
	if p.dead.Load() {
		return // the process died: nothing acked, the message comes back
	}
	op := "consumer ack"
	if len(resp.BatchItemFailures) > 0 {
		op = "consumer nack"
	}
	w.clock.Advance(time.Millisecond)
	kind, faulty := w.point(op)
	acked := op == "consumer ack"
	if faulty {
		switch kind {
		case fRefuse, fCrash:
			// Not applied: the broker redelivers the message after the
			// record (ack) or as it would anyway (nack).
			acked = false
		case fDelay:
			// Applied after the visibility timeout: the broker redelivered
			// the message meanwhile.
			w.clock.Advance(fpLease + time.Second)
			w.redeliverInside()
		case fLost, fRepeat:
			// Applied; its reply lost or repeated.
		default:
			w.jump(kind)
		}
	}
	after := w.effectCount()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.told = append(w.told, fmt.Sprintf("%s (acked %v) [effects %d, %d by this delivery]", op, acked, after, p.committed.Load()))
	if acked {
		w.acked = true
		if w.effects == 0 {
			w.problems = append(w.problems, "untruthful: the message was acked with no effect")
		}
	}
}

// queueScenario delivers the message as a broker does: a delivery, a
// duplicate at once, a redelivery after the visibility timeout (and a
// sweep); then, without faults, redeliveries of what was not acked and an
// operator for what no reconciler can settle; then checks the end.
func (w *fpWorld) queueScenario() {
	ctx := context.Background()
	w.consume(ctx)
	w.consume(ctx)
	w.past()
	w.sweep(ctx)
	w.consume(ctx)

	w.mu.Lock()
	w.enumerated, w.faults = w.points, nil
	w.mu.Unlock()
	for range 3 {
		w.past()
		w.sweep(ctx)
		if !w.acked || w.class == oPermanent {
			w.consume(ctx)
		}
		key := w.queueKey()
		rec, err := w.store.Get(ctx, key)
		if err != nil || rec.State != ledger.StateUncertain || w.tool != tPlain {
			continue
		}
		if w.maybeSent == 0 && w.effectCount() == 0 {
			w.problems = append(w.problems, "lost: an operator had to settle the action although no request could have taken effect")
		}
		res := ledger.Resolution{By: "operator", Done: w.effectCount() > 0, Summary: "found in the journal", Reason: "not in the journal", InFlight: fpInFlight}
		if at := ledger.FailableAt(rec, fpInFlight); !res.Done && w.clock.Now().Before(at) {
			w.clock.Set(at)
		}
		if _, err := ledger.Resolve(ctx, w.store, key, res, w.clock.Now()); err != nil {
			w.problems = append(w.problems, "resolve: "+err.Error())
		}
	}
	switch {
	case w.class == oPermanent:
		if w.effectCount() != 0 || w.acked {
			w.problems = append(w.problems, fmt.Sprintf("permanent failure ended with %d effects, acked %v", w.effectCount(), w.acked))
		}
	case w.effectCount() > 1 || w.effects == 0:
		w.problems = append(w.problems, fmt.Sprintf("lost: %d effects at the end (%d in all)", w.effectCount(), w.effects))
	case !w.acked:
		w.problems = append(w.problems, "stuck: the message was never acked")
	}
}

// queueKey is the action key oncelyfunc.SQS derives for the world's
// message: tool "send", global scope, the message id as its one identity
// value (the document oncelyfunc hands the executor names it id0). An
// operator reads it from the consumer's warning.
func (w *fpWorld) queueKey() string {
	t := client.Tool{Name: "send", Scope: client.ScopeGlobal, Identity: []client.Field{{Path: "id0"}}}
	k, err := t.Key("send", client.Call{Tool: "send", Input: json.RawMessage(fmt.Sprintf(`{"id0":%q}`, "msg-"+w.run))}, 0)
	if err != nil {
		w.t.Fatal(err)
	}
	return k
}

// TestFaultPointsQueue enumerates the fault points of a queue consumer on
// the memory and SQLite ledgers and prints one line, as TestFaultPoints.
func TestFaultPointsQueue(t *testing.T) {
	t.Parallel()
	var (
		mu                    sync.Mutex
		runs, points          int
		dup, lost, untruthful int
		ackPoints, nackPoints int
	)
	t.Run("ledgers", func(t *testing.T) {
		for _, b := range backends[:2] { // memory, sqlite
			t.Run(b.name, func(t *testing.T) {
				t.Parallel()
				var n, acks, nacks int
				clock := clock.NewFake(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
				store, _ := b.open(t, clock)
				tally := &fpTally{}
				newWorld := func(tool toolClass, class outcomeClass, faults []fpFault) *fpWorld {
					n++
					return &fpWorld{t: t, store: store, clock: clock, run: fmt.Sprintf("fpq-%s-%d", b.name, n), queue: true,
						tool: tool, class: class, faults: faults, byKey: map[string]bool{}, dedup: map[string]bool{}}
				}
				for tool := tKeyed; tool <= tPlain; tool++ {
					for class := oDone; class <= oUnmarked; class++ {
						dry := newWorld(tool, class, nil)
						dry.queueScenario()
						tally.add(dry, fmt.Sprintf("%s/%s without faults", tool, class))
						tally.points += dry.enumerated
						for p := 0; p < dry.enumerated; p++ {
							switch dry.ops[p] {
							case "consumer ack":
								acks++
							case "consumer nack":
								nacks++
							}
							// The provider's points do not depend on the ledger:
							// SQLite runs the ledger's and the consumer's.
							if b.name != "memory" && strings.HasPrefix(dry.ops[p], "provider ") {
								continue
							}
							for kind := faultKind(0); kind < numFaultKinds; kind++ {
								w := newWorld(tool, class, []fpFault{{p, kind}})
								w.queueScenario()
								tally.add(w, fmt.Sprintf("%s/%s, point %d (%s) %s", tool, class, p, dry.ops[p], kind))
							}
						}
					}
				}
				for _, f := range tally.first {
					t.Error(f)
				}
				mu.Lock()
				ackPoints, nackPoints = max(ackPoints, acks), max(nackPoints, nacks)
				runs += tally.runs
				points = max(points, tally.points)
				dup += tally.duplicates
				lost += tally.lost
				untruthful += tally.untruthful
				mu.Unlock()
			})
		}
	})
	if ackPoints == 0 || nackPoints == 0 {
		t.Errorf("the enumerated paths held %d ack and %d nack points; want both", ackPoints, nackPoints)
	}
	line := fmt.Sprintf("faultpoints (queue consumer): %d runs over %d points (%d acks, %d nacks) × 2 ledgers, %d duplicates, %d lost, %d untruthful",
		runs, points, ackPoints, nackPoints, dup, lost, untruthful)
	t.Log(line)
	fmt.Println(line)
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }
