package oncelyamqp

import (
	"context"
	"fmt"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/ledger/ledgermem"
)

// BenchmarkAMQP consumes b.N messages (distinct orders, published before
// the timer) from one consumer with a prefetch of 100: plain acks each
// one; oncely handles each through a Handler on the memory ledger and on
// ledgerpg (a claim and a completion per message). msgs/s is the
// throughput; the ratio to plain, and the difference per message, is
// what the ledger costs.
func BenchmarkAMQP(b *testing.B) {
	for _, mode := range []string{"plain", "oncely-mem", "oncely-pg"} {
		b.Run(mode, func(b *testing.B) {
			e := newEnv(b)
			var h *Handler[struct{}]
			if mode != "plain" {
				var store ledger.Store = e.store
				if mode == "oncely-mem" {
					store = ledgermem.New(nil)
				}
				var err error
				h, err = New(client.New(store, &client.Config{NoCounters: true}), e.ch, e.queue, "bench", byOrder,
					func(context.Context, amqp.Delivery) (struct{}, error) { return struct{}{}, nil })
				if err != nil {
					b.Fatal(err)
				}
			}
			ctx := context.Background()
			for i := range b.N {
				if err := e.ch.PublishWithContext(ctx, "", e.queue, false, false, amqp.Publishing{Body: fmt.Appendf(nil, `{"order_id":"o%d"}`, i)}); err != nil {
					b.Fatal(err)
				}
			}
			if err := e.ch.Qos(100, 0, false); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			start := time.Now()
			deliveries, err := e.ch.Consume(e.queue, "", false, false, false, false, nil)
			if err != nil {
				b.Fatal(err)
			}
			for range b.N {
				d := <-deliveries
				if h == nil {
					err = d.Ack(false)
				} else {
					_, _, err = h.Process(ctx, d)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "msgs/s")
		})
	}
}
