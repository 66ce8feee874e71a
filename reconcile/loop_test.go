package reconcile_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/ledger/ledgermem"
	"github.com/oncely/oncely/reconcile"
)

// failingList makes every listing fail, so each sweep reports an error.
type failingList struct{ ledger.Store }

var errOutage = errors.New("outage")

func (failingList) List(context.Context, ledger.Filter) ([]ledger.Record, error) {
	return nil, errOutage
}

func TestRunSweepsUntilCancelledAndSurvivesFailedSweeps(t *testing.T) {
	t.Parallel()
	sw := reconcile.NewSweeper(failingList{ledgermem.New(nil)}, nil, nil)
	ctx, cancel := context.WithCancelCause(context.Background())
	stop := errors.New("stopped by the test")
	sweeps := 0
	err := sw.Run(ctx, time.Millisecond, func(_ reconcile.Report, err error) {
		if !errors.Is(err, errOutage) {
			t.Errorf("sweep %d: error %v, want the listing's", sweeps, err)
		}
		if sweeps++; sweeps == 3 {
			cancel(stop)
		}
	})
	if !errors.Is(err, stop) {
		t.Errorf("Run returned %v, want the context's cause", err)
	}
	if sweeps != 3 {
		t.Errorf("%d sweeps reported, want 3 (a failed sweep must not end the loop)", sweeps)
	}
}

func TestRunRejectsNonPositiveInterval(t *testing.T) {
	t.Parallel()
	sw := reconcile.NewSweeper(ledgermem.New(nil), nil, nil)
	if err := sw.Run(context.Background(), 0, nil); err == nil {
		t.Fatal("Run with interval 0 returned nil")
	}
}
