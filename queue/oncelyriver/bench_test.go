package oncelyriver

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/ledger/ledgermem"
)

type plainWorker struct {
	river.WorkerDefaults[RefundArgs]
}

func (plainWorker) Work(context.Context, *river.Job[RefundArgs]) error { return nil }

// BenchmarkRiver works b.N jobs (distinct orders, inserted before the
// timer) with 4 workers: plain, a worker that does nothing; oncely-mem,
// the same work through New on the memory ledger; oncely-pg-tx, through
// New with a TxStore on ledgerpg (the claim, then the record and the
// job's completion in one transaction). msgs/s is jobs completed per
// second; the ratio to plain is what the ledger costs.
func BenchmarkRiver(b *testing.B) {
	for _, mode := range []string{"plain", "oncely-mem", "oncely-pg-tx"} {
		b.Run(mode, func(b *testing.B) {
			e := newEnv(b)
			workers := river.NewWorkers()
			cfg := e.config(workers, 4)
			switch mode {
			case "plain":
				river.AddWorker(workers, plainWorker{})
			default:
				exec := client.New(ledgermem.New(nil), &client.Config{NoCounters: true})
				if mode == "oncely-pg-tx" {
					exec = client.New(NewTxStore(e.store, e.pool), &client.Config{NoCounters: true})
				}
				w, err := New(exec, cfg, byOrder, func(context.Context, *river.Job[RefundArgs]) (struct{}, error) { return struct{}{}, nil })
				if err != nil {
					b.Fatal(err)
				}
				river.AddWorker(workers, w)
			}
			ins, err := river.NewClient(riverpgxv5.New(e.pool), &river.Config{Schema: e.schema})
			if err != nil {
				b.Fatal(err)
			}
			var params []river.InsertManyParams
			for i := range b.N {
				params = append(params, river.InsertManyParams{Args: RefundArgs{OrderID: fmt.Sprint("o", i), Amount: 1}})
			}
			ctx := context.Background()
			if _, err := ins.InsertMany(ctx, params); err != nil {
				b.Fatal(err)
			}
			rc, err := river.NewClient(riverpgxv5.New(e.pool), cfg)
			if err != nil {
				b.Fatal(err)
			}
			completed, cancel := rc.Subscribe(river.EventKindJobCompleted)
			defer cancel()
			b.ResetTimer()
			start := time.Now()
			if err := rc.Start(ctx); err != nil {
				b.Fatal(err)
			}
			for range b.N {
				select {
				case <-completed:
				case <-time.After(time.Minute):
					b.Fatal("no job completed in a minute")
				}
			}
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "msgs/s")
			b.StopTimer()
			sctx, scancel := context.WithTimeout(ctx, 10*time.Second)
			defer scancel()
			_ = rc.Stop(sctx)
		})
	}
}
