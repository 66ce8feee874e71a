package oncelynats

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/ledger/ledgermem"
)

// BenchmarkNATS consumes b.N messages (distinct orders, published before
// the timer) with Fetch in batches of 100: plain acks each one; oncely
// handles each through a Handler on the memory ledger and on ledgerpg
// (a claim and a completion per message). msgs/s is the throughput; the
// ratio to plain, and the difference per message, is what the ledger
// costs.
func BenchmarkNATS(b *testing.B) {
	for _, mode := range []string{"plain", "oncely-mem", "oncely-pg"} {
		b.Run(mode, func(b *testing.B) {
			e := newEnv(b)
			cons := e.consumer(b, "bench", 30*time.Second, 5)
			var h *Handler[struct{}]
			if mode != "plain" {
				var store ledger.Store = e.store
				if mode == "oncely-mem" {
					store = ledgermem.New(nil)
				}
				var err error
				h, err = New(client.New(store, &client.Config{NoCounters: true}), cons, e.js, "bench", byOrder,
					func(context.Context, jetstream.Msg) (struct{}, error) { return struct{}{}, nil })
				if err != nil {
					b.Fatal(err)
				}
			}
			ctx := context.Background()
			for i := range b.N {
				if _, err := e.js.PublishAsync(e.subject+".orders", fmt.Appendf(nil, `{"order_id":"o%d"}`, i)); err != nil {
					b.Fatal(err)
				}
			}
			select {
			case <-e.js.PublishAsyncComplete():
			case <-time.After(time.Minute):
				b.Fatal("publishes not acknowledged in a minute")
			}
			b.ResetTimer()
			start := time.Now()
			for n := 0; n < b.N; {
				batch, err := cons.Fetch(min(100, b.N-n), jetstream.FetchMaxWait(10*time.Second))
				if err != nil {
					b.Fatal(err)
				}
				for msg := range batch.Messages() {
					n++
					if h == nil {
						err = msg.Ack()
					} else {
						_, _, err = h.Process(ctx, msg)
					}
					if err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "msgs/s")
		})
	}
}
