package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/clock"
	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/ledger/ledgermem"
)

// events decodes the JSON log lines in buf.
func events(t *testing.T, buf *bytes.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for line := range strings.SplitSeq(strings.TrimSpace(buf.String()), "\n") {
		if line == "" {
			continue
		}
		var ev map[string]any
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		out = append(out, ev)
	}
	return out
}

func find(evs []map[string]any, msg string) map[string]any {
	for _, ev := range evs {
		if ev["msg"] == msg {
			return ev
		}
	}
	return nil
}

// Each step of a call is a structured event with the tool, run, key and
// attempt; the input is logged only when Config.LogInput asks for it.
func TestLogEvents(t *testing.T) {
	t.Parallel()
	const secret = "my card is 4242"
	for _, logInput := range []bool{false, true} {
		var buf bytes.Buffer
		var runs atomic.Int64
		tool := counted("send_reply", &runs, func(context.Context, client.Invocation) (client.Effect, error) {
			if runs.Load() == 1 {
				return client.Effect{}, errors.New("timeout")
			}
			return client.Effect{Summary: "sent", Ref: "msg_1"}, nil
		})
		tool.Reconciler = &verdicts{v: client.Reconciliation{Verdict: client.VerdictResendSafe}}
		f := newFixture(t, &client.Config{LogInput: logInput,
			Logger: slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))}, tool)
		in := `{"ticketId":"5","text":"` + secret + `"}`
		r := f.call(t, "run-1", "send_reply", in)
		f.call(t, "run-1", "send_reply", in)
		evs := events(t, &buf)
		for _, msg := range []string{"oncely claim", "oncely reconcile", "oncely call", "oncely replay"} {
			ev := find(evs, msg)
			if ev == nil {
				t.Fatalf("no %q event in %s", msg, buf.String())
			}
			if ev["tool"] != "send_reply" || ev["run"] != "run-1" || ev["key"] != r.Key || ev["attempt"] == nil {
				t.Errorf("%s: attrs %v", msg, ev)
			}
		}
		if ev := find(evs, "oncely reconcile"); ev["verdict"] != "resend safe" || ev["latency"] == nil {
			t.Errorf("reconcile event %v", ev)
		}
		if ev := find(evs, "oncely call"); ev["outcome"] != "executed" || ev["latency"] == nil {
			t.Errorf("call event %v", ev)
		}
		if strings.Contains(buf.String(), secret) != logInput {
			t.Errorf("LogInput %v, but the input was logged: %v", logInput, !logInput)
		}
	}
}

// A record write fenced off by a newer owner is a warning: the call's lease
// ran out while its tool ran and another caller took the record over.
func TestLogWarnings(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	var runs atomic.Int64
	var f *fixture
	in := `{"ticketId":"5"}`
	tool := counted("send_reply", &runs, func(ctx context.Context, inv client.Invocation) (client.Effect, error) {
		f.clock.Advance(3 * f.lease())
		if _, err := f.store.Claim(context.Background(), ledger.ClaimParams{Key: inv.Key, Tool: "send_reply", RunID: "run", Owner: "owner-b",
			LeaseUntil: f.clock.Now().Add(f.lease()), ExpiresAt: f.clock.Now().Add(100 * f.lease()), Fingerprint: fingerprintOf(t, f.tool(t), in)}); err != nil {
			t.Error(err)
		}
		return client.Effect{}, client.Definite(errors.New("declined"))
	})
	f = newFixture(t, &client.Config{Logger: slog.New(slog.NewJSONHandler(&buf, nil))}, tool)
	f.call(t, "run", "send_reply", in)
	evs := events(t, &buf)
	if ev := find(evs, "oncely fenced write"); ev == nil || ev["level"] != "WARN" || ev["write"] != "failed" {
		t.Errorf("no fenced write warning: %s", buf.String())
	}
	// The call's latency is read from the Executor's clock, which only the
	// tool moved.
	if ev := find(evs, "oncely call"); ev == nil || ev["latency"] != float64(3*f.lease()) {
		t.Errorf("call event %v, want a latency of %v", ev, 3*f.lease())
	}
}

// lease is the fixture's lease (the default).
func (f *fixture) lease() time.Duration { return 2 * time.Minute }

// Disabled runs the tool directly: repeats are not deduplicated, the
// ledger is not touched, and the logs say so loudly.
func TestDisabled(t *testing.T) {
	for _, viaEnv := range []bool{false, true} {
		var buf bytes.Buffer
		var runs atomic.Int64
		store := &flaky{Store: ledgermem.New(nil), claimErr: errors.New("the ledger must not be used")}
		cfg := &client.Config{Clock: clock.NewFake(t0), Logger: slog.New(slog.NewJSONHandler(&buf, nil)), Disabled: !viaEnv}
		if viaEnv {
			t.Setenv(client.DisabledEnv, " True")
		}
		exec := client.New(store, cfg)
		if err := exec.Register(counted("send_reply", &runs, nil)); err != nil {
			t.Fatal(err)
		}
		for range 2 {
			r, err := exec.Execute(context.Background(), "run", client.Call{Tool: "send_reply", Input: json.RawMessage(`{"ticketId":"1"}`)})
			if err != nil || r.Outcome != client.Executed {
				t.Fatalf("env %v: %+v %v", viaEnv, r, err)
			}
		}
		if runs.Load() != 2 {
			t.Errorf("env %v: runs %d, want 2 (nothing is deduplicated)", viaEnv, runs.Load())
		}
		evs := events(t, &buf)
		warnings := 0
		for _, ev := range evs {
			if ev["level"] == "WARN" && strings.Contains(ev["msg"].(string), "DISABLED") {
				warnings++
			}
		}
		if warnings != 3 {
			t.Errorf("env %v: %d DISABLED warnings, want one at New and one per call: %s", viaEnv, warnings, buf.String())
		}
	}
}

// Calls merged in process are logged at Debug, each with the attributes
// of every event of a call, and not at all above Debug.
func TestLogMerge(t *testing.T) {
	t.Parallel()
	for _, level := range []slog.Level{slog.LevelDebug, slog.LevelInfo} {
		var buf bytes.Buffer
		var runs atomic.Int64
		release := make(chan struct{})
		tool := counted("send_reply", &runs, func(context.Context, client.Invocation) (client.Effect, error) {
			<-release
			return client.Effect{Summary: "sent", Ref: "msg_1"}, nil
		})
		logger := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: level}))
		f := newFixture(t, &client.Config{Logger: logger}, tool)
		results := make(chan client.Result, 2)
		call := func() {
			r, err := f.exec.Execute(context.Background(), "run", client.Call{Tool: "send_reply", Input: json.RawMessage(`{"ticketId":"7"}`)})
			if err != nil {
				t.Error(err)
			}
			results <- r
		}
		go call()
		for runs.Load() == 0 { // the first call holds the flight
			runtime.Gosched()
		}
		go call()
		for mergeWaiters("client_test.TestLogMerge") == 0 {
			runtime.Gosched()
		}
		close(release)
		first, second := <-results, <-results
		if !first.Shared || !second.Shared || runs.Load() != 1 {
			t.Fatalf("%v: not merged: %+v %+v, runs %d", level, first, second, runs.Load())
		}
		var merges []map[string]any
		for _, ev := range events(t, &buf) {
			if ev["msg"] == "oncely merge" {
				merges = append(merges, ev)
			}
		}
		switch {
		case level > slog.LevelDebug && len(merges) != 0:
			t.Errorf("%v: merge logged: %v", level, merges)
		case level == slog.LevelDebug && len(merges) != 2: // both calls share the Result
			t.Errorf("%v: merge events %v, want one per call", level, merges)
		}
		for _, ev := range merges {
			if ev["level"] != "DEBUG" || ev["tool"] != "send_reply" || ev["run"] != "run" || ev["key"] != first.Key || ev["attempt"] != 1.0 {
				t.Errorf("%v: merge event %v", level, ev)
			}
		}
	}
}
