package ledgerdynamo_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oncely/oncely/clock"
	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/ledger/ledgerdynamo"
	"github.com/oncely/oncely/ledger/ledgerdynamo/dynalitetest"
)

// answerDropper passes requests to dynalite and, once armed, loses the
// answer of the next request whose body contains match: the server applies
// it, and the client sees a broken connection (what a busy dynalite, or a
// network, does now and then).
type answerDropper struct {
	mu    sync.Mutex
	match string // "" when disarmed
	lost  int
}

func (d *answerDropper) arm(match string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.match = match
}

func (d *answerDropper) RoundTrip(r *http.Request) (*http.Response, error) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, err
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	d.mu.Lock()
	drop := d.match != "" && bytes.Contains(body, []byte(d.match))
	if drop {
		d.match = ""
		d.lost++
	}
	d.mu.Unlock()
	resp, err := transport.RoundTrip(r)
	if err != nil || !drop {
		return resp, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return nil, errors.New("connection reset by peer (answer dropped by the test)")
}

// A claim that replaces an expired done record, whose answer is lost after
// DynamoDB applied it, recognises its own pending record in the retry's
// failed condition: it is claimed afresh, with no Previous, and not taken
// over from itself. The regression test of issue 42: the record's lease
// (from the claim parameters) is already past on the Store's clock, so
// before the fix the Store judged its own claim abandoned, took it over
// with a third write and returned its own pending record as Previous (as
// TestReplayConsumesNoWriteUnit did when dynalite dropped a connection).
func TestClaimRecognisesOwnWriteAfterLostAnswer(t *testing.T) {
	t.Parallel()
	endpoint := dynalitetest.Endpoint(t)
	table := dynalitetest.NewTable(t, dynalitetest.NewClient(endpoint))
	dropper := &answerDropper{}
	clk := clock.NewFake(t0)
	for _, mode := range []ledgerdynamo.ReadFirst{ledgerdynamo.ReadFirstSeen, ledgerdynamo.ReadFirstNever} {
		store := ledgerdynamo.New(newClient(endpoint, newCounter(dropper)), table, &ledgerdynamo.Config{
			Clock: clk, InitialBackoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond, ReadFirst: mode})
		ctx := context.Background()
		key := "lost-answer-" + strings.Repeat("x", int(mode))
		p := params(key, "owner-a")
		p.LeaseUntil, p.ExpiresAt = clk.Now().Add(30*time.Second), clk.Now().Add(24*time.Hour)
		if res, err := store.Claim(ctx, p); err != nil || !res.Claimed {
			t.Fatalf("Claim = %+v, %v", res, err)
		}
		if err := store.Complete(ctx, key, p.Owner, ledger.Completion{Summary: "report built"}); err != nil {
			t.Fatal(err)
		}
		clk.Advance(25 * time.Hour)
		// The expired record's replacement (the only condition on
		// expires_at <= now) is applied and its answer lost.
		lost := dropper.lost
		dropper.arm("#expires_at <= :now_s")
		res, err := store.Claim(ctx, params(key, "owner-c"))
		if dropper.lost != lost+1 {
			t.Fatalf("mode %d: %d answers lost, want 1", mode, dropper.lost-lost)
		}
		if err != nil || !res.Claimed || res.Attempt != 1 || res.Previous != nil {
			t.Fatalf("mode %d: Claim after expiry, answer lost = %+v (previous %+v), %v; want claimed afresh", mode, res, res.Previous, err)
		}
		rec, err := store.Get(ctx, key)
		if err != nil || rec.Owner != "owner-c" || rec.State != ledger.StatePending || rec.Attempt != 1 || !rec.AttemptAt.Equal(clk.Now()) {
			t.Fatalf("mode %d: record = %+v, %v; want pending for owner-c, attempt 1 begun now", mode, rec, err)
		}
	}
}
