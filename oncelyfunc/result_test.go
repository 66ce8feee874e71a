package oncelyfunc_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/ledger/ledgermem"
	"github.com/oncely/oncely/oncelyfunc"
)

// An output that does not encode as JSON is returned to the first caller;
// the record says why it was not kept (not that it was too large), and a
// repeat is told it was not kept.
func TestResultThatDoesNotEncode(t *testing.T) {
	t.Parallel()
	store := ledgermem.New(nil)
	exec := client.New(store, nil)
	type measure struct{ Ratio float64 }
	f, err := oncelyfunc.Wrap(exec, "measure", oncelyfunc.Options[measure]{
		Identity: []oncelyfunc.Key{{Expr: "orderId"}},
		Scope:    client.ScopeGlobal,
	}, func(context.Context, order) (measure, error) {
		return measure{Ratio: math.NaN()}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	first, err := f(ctx, order{OrderID: 1})
	if err != nil || !math.IsNaN(first.Ratio) {
		t.Fatalf("first call: %+v, %v", first, err)
	}
	recs, err := store.List(ctx, ledger.Filter{State: ledger.StateDone})
	if err != nil || len(recs) != 1 {
		t.Fatalf("records: %v, %v", recs, err)
	}
	r := recs[0]
	if r.Truncated || len(r.Result) != 0 || !strings.Contains(r.Summary, "result not kept: it does not encode as JSON") ||
		!strings.Contains(r.Summary, "NaN") {
		t.Errorf("record: truncated %v, result %q, summary %q; want the reason in the summary", r.Truncated, r.Result, r.Summary)
	}
	if _, err := f(ctx, order{OrderID: 1}); !errors.Is(err, oncelyfunc.ErrResultNotKept) {
		t.Errorf("repeat: %v, want ErrResultNotKept", err)
	}
}
