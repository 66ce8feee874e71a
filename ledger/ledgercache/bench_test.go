package ledgercache_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/middleware"

	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/ledger/ledgercache"
	"github.com/oncely/oncely/ledger/ledgerdynamo"
	"github.com/oncely/oncely/ledger/ledgerdynamo/dynalitetest"
)

// BenchmarkReplayDynamo measures a repeat of a done action through
// Execute on DynamoDB (dynalite, started by the benchmark), without and
// with the cache, and reports the DynamoDB requests per replay.
func BenchmarkReplayDynamo(b *testing.B) {
	ctx := context.Background()
	srv, err := dynalitetest.Start(ctx)
	if err != nil {
		b.Skip(err) // a benchmark, not a test: nothing is counted as passing
	}
	b.Cleanup(srv.Close) // after the table's own cleanup
	var requests atomic.Int64
	api := dynalitetest.NewClient(srv.Endpoint, func(o *dynamodb.Options) {
		o.APIOptions = append(o.APIOptions, func(s *middleware.Stack) error {
			return s.Finalize.Add(middleware.FinalizeMiddlewareFunc("count", func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
				requests.Add(1)
				return next.HandleFinalize(ctx, in)
			}), middleware.After)
		})
	})
	table := dynalitetest.NewTable(b, api)
	for _, bc := range []struct {
		name  string
		store func() ledger.Store
	}{
		{"dynamodb", func() ledger.Store { return ledgerdynamo.New(api, table, nil) }},
		{"cached", func() ledger.Store { return ledgercache.New(ledgerdynamo.New(api, table, nil), nil) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			exec := client.New(bc.store(), nil)
			err := exec.Register(client.Tool{
				Name:     "send_reply",
				Identity: []client.Field{{Path: "ticketId", Norm: client.Integer}},
				Run: func(context.Context, client.Invocation) (client.Effect, error) {
					return client.Effect{Summary: "reply sent", Ref: "msg_1"}, nil
				},
			})
			if err != nil {
				b.Fatal(err)
			}
			call := client.Call{Tool: "send_reply", Input: json.RawMessage(`{"ticketId": 42}`)}
			if _, err := exec.Execute(ctx, "bench-"+bc.name, call); err != nil {
				b.Fatal(err)
			}
			requests.Store(0)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				res, err := exec.Execute(ctx, "bench-"+bc.name, call)
				if err != nil || res.Outcome != client.AlreadyDone {
					b.Fatalf("%+v, %v", res, err)
				}
			}
			b.ReportMetric(float64(requests.Load())/float64(b.N), "requests/op")
		})
	}
}
