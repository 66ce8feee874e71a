package client_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/ledger/ledgersqlite"
)

// agentEnv makes the test binary an agent process: it runs the refund
// tool of exitedTool on the SQLite ledger the variable names, and stops
// for good right after the tool ran, before anything is recorded.
const agentEnv = "ONCELY_TEST_AGENT_LEDGER"

func TestMain(m *testing.M) {
	if path := os.Getenv(agentEnv); path != "" {
		agent(path)
		return
	}
	os.Exit(m.Run())
}

// exitedTool is a refund whose effects are lines of the file effects (its
// downstream keys), and whose reconciler looks there.
func exitedTool(effects string, after func()) client.Tool {
	return client.Tool{
		Name:     "refund",
		Identity: []client.Field{{Path: "order", Norm: client.String}},
		Run: func(ctx context.Context, inv client.Invocation) (client.Effect, error) {
			f, err := os.OpenFile(effects, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
			if err != nil {
				return client.Effect{}, err
			}
			_, err = fmt.Fprintln(f, inv.DownstreamKey)
			if err2 := f.Close(); err == nil {
				err = err2
			}
			if err != nil {
				return client.Effect{}, client.Ambiguous(err)
			}
			after()
			return client.Effect{Summary: "refunded", Ref: inv.DownstreamKey}, nil
		},
		Reconciler: client.ReconcilerFunc(func(ctx context.Context, inv client.Invocation) (client.Reconciliation, error) {
			b, err := os.ReadFile(effects)
			if err != nil && !os.IsNotExist(err) {
				return client.Reconciliation{}, err
			}
			if bytes.Contains(b, []byte(inv.DownstreamKey+"\n")) {
				return client.Reconciliation{Verdict: client.VerdictFound, Effect: client.Effect{Summary: "refunded", Ref: inv.DownstreamKey}}, nil
			}
			return client.Reconciliation{Verdict: client.VerdictAbsent}, nil
		}),
	}
}

const exitedInput = `{"order":"ord_1"}`

// agent is the agent process: it says "ran" once the tool ran, and waits
// to be killed.
func agent(path string) {
	store, err := ledgersqlite.Open(context.Background(), path, nil)
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	exec := client.New(store, &client.Config{Liveness: 2 * time.Minute})
	err = exec.Register(exitedTool(filepath.Join(filepath.Dir(path), "effects"), func() {
		fmt.Println("ran")
		select {} // killed here
	}))
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	_, err = exec.Execute(context.Background(), "run-1", client.Call{Tool: "refund", Input: json.RawMessage(exitedInput), ID: "toolu_1"})
	fmt.Println("error: Execute returned:", err)
	os.Exit(1)
}

// The agent is killed right after its tool ran, and the run resumes in
// another process on the same machine: while the agent lives, the call is
// in progress; once it is dead, the call takes its claim over at once
// (well inside the 2-minute lease), reconciles, and is told the refund was
// already done. The refund happened once.
func TestOwnerKilledTakenOverAtOnce(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("owner tokens name their process on Linux only")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "ledger.db")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), agentEnv+"="+path)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "ran\n" {
		t.Fatalf("agent said %q (%v), want ran", line, err)
	}

	store, err := ledgersqlite.Open(context.Background(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	var ran int
	exec := client.New(store, &client.Config{Liveness: 2 * time.Minute, Wait: -1})
	if err := exec.Register(exitedTool(filepath.Join(dir, "effects"), func() { ran++ })); err != nil {
		t.Fatal(err)
	}
	call := func() client.Result {
		res, err := exec.Execute(context.Background(), "run-1", client.Call{Tool: "refund", Input: json.RawMessage(exitedInput), ID: "toolu_2"})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	wantOutcome(t, call(), client.InProgress, "Already in progress. Do not retry.")

	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait() // killed
	res := call()
	wantOutcome(t, res, client.AlreadyDone, "Already done earlier in this run: refunded")
	effects, err := os.ReadFile(filepath.Join(dir, "effects"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(effects), "\n"); n != 1 || ran != 0 {
		t.Fatalf("%d refunds (%d by the resumed run), want 1 by the killed agent", n, ran)
	}
	if s := exec.Stats(); s.Takeovers != 1 || s.Reconciled != 1 {
		t.Errorf("stats %+v: want one takeover, reconciled", s)
	}
}

// A caller waiting for an action in flight looks at its owner at each
// poll: once the owner has exited, it takes the claim over, reconciles at
// once (the exited owner sent nothing after the claim, whatever its
// lease said), and is told the effect the owner made.
func TestOwnerExitsWhileWaited(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	effects := filepath.Join(dir, "effects")
	var exited atomic.Bool
	ran, stop := make(chan struct{}), make(chan struct{})
	f := newFixture(t, &client.Config{Liveness: 2 * time.Minute, Wait: time.Hour, RecordTimeout: time.Minute,
		OwnerExited: func(owner string) bool { return owner == "owner-1" && exited.Load() },
		NewOwner:    counter("owner-")},
		exitedTool(effects, func() { close(ran); <-stop }))
	var sentBy time.Time
	tool := exitedTool(effects, func() {})
	rec := tool.Reconciler
	tool.Reconciler = client.ReconcilerFunc(func(ctx context.Context, inv client.Invocation) (client.Reconciliation, error) {
		sentBy = inv.SentBy
		return rec.Reconcile(ctx, inv)
	})
	second := client.New(f.store, &client.Config{Clock: f.clock, Liveness: 2 * time.Minute, Wait: time.Hour, RecordTimeout: time.Minute,
		OwnerExited: func(owner string) bool { return owner == "owner-1" && exited.Load() },
		NewOwner:    counter("second-")})
	if err := second.Register(tool); err != nil {
		t.Fatal(err)
	}
	first := make(chan client.Result, 1)
	go func() { first <- f.call(t, "run-1", "refund", exitedInput) }()
	<-ran
	f.clock.Advance(time.Second) // well inside the lease
	exited.Store(true)
	res, err := second.Execute(context.Background(), "run-1", client.Call{Tool: "refund", Input: json.RawMessage(exitedInput), ID: "toolu_2"})
	if err != nil {
		t.Fatal(err)
	}
	wantOutcome(t, res, client.AlreadyDone, "Already done earlier in this run: refunded")
	if !sentBy.Equal(f.clock.Now()) {
		t.Errorf("reconciled with SentBy %v, want the takeover's time %v (not the lease's end)", sentBy, f.clock.Now())
	}
	close(stop)
	<-first // (here its process lives on: its tool did refund, and it is told so)
	if b, _ := os.ReadFile(effects); strings.Count(string(b), "\n") != 1 {
		t.Fatalf("effects %q, want one", b)
	}
}

// counter returns owner tokens prefix1, prefix2, ...
func counter(prefix string) func() string {
	var n atomic.Int64
	return func() string { return fmt.Sprint(prefix, n.Add(1)) }
}
