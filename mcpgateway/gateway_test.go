package mcpgateway_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/mcpgateway"
	"github.com/oncely/oncely/mcpgateway/internal/mcptest"
)

// The same add_observations twice, and again through a new gateway on the
// same ledger: one observation in server-memory's graph, and the repeats
// replay the first result. Another observation of the same entity is
// another action: it is stored.
func TestDuplicateAndRestart(t *testing.T) {
	t.Parallel()
	mem, db := tempFile(t, "memory.jsonl"), tempFile(t, "ledger.db")
	cfg := memoryConfig(t, mem)
	run := mcp.Meta{mcpgateway.DefaultRunMeta: "run-1"}

	_, url := startGateway(t, openLedger(t, db), cfg)
	cs := connect(t, url)
	if res := call(t, cs, "create_entities", entity("alice"), nil); res.IsError || outcome(res) != "" {
		t.Fatalf("create_entities did not pass through: %+v", res)
	}
	first := call(t, cs, "add_observations", observe("alice", "wants a refund for order 7"), run)
	if first.IsError || outcome(first) != "executed" {
		t.Fatalf("first call: %s %v", outcome(first), texts(first))
	}
	again := call(t, cs, "add_observations", observe(" alice", "wants a refund for order 7 "), run)
	if again.IsError || outcome(again) != "already done" {
		t.Fatalf("repeat: %s %v", outcome(again), texts(again))
	}
	if got, want := texts(again)[0], texts(first)[0]; got != want {
		t.Errorf("the repeat does not replay the first result:\n%s\nwant\n%s", got, want)
	}
	if !hasPrefix(lastText(again), "Already done earlier in this run: add_observations: ") {
		t.Errorf("repeat text: %q", lastText(again))
	}
	if obs := observations(t, mem, "alice"); len(obs) != 1 {
		t.Fatalf("observations: %q, want one", obs)
	}

	// A new gateway process on the same ledger file: still one.
	_, url2 := startGateway(t, openLedger(t, db), cfg)
	cs2 := connect(t, url2)
	if res := call(t, cs2, "add_observations", observe("alice", "wants a refund for order 7"), run); outcome(res) != "already done" {
		t.Fatalf("after the restart: %s %v", outcome(res), texts(res))
	}
	if obs := observations(t, mem, "alice"); len(obs) != 1 {
		t.Fatalf("observations after the restart: %q, want one", obs)
	}

	// Another observation of the same entity is another action.
	second := call(t, cs2, "add_observations", observe("alice", "prefers store credit"), run)
	if outcome(second) != "executed" || len(observations(t, mem, "alice")) != 2 {
		t.Fatalf("another observation: %s %v, observations %q", outcome(second), texts(second), observations(t, mem, "alice"))
	}

	// Another run is another action: the effect is real (server-memory
	// itself keeps one copy of an observation it already has).
	other := call(t, cs2, "add_observations", observe("alice", "second run"), mcp.Meta{mcpgateway.DefaultRunMeta: "run-2"})
	if outcome(other) != "executed" || len(observations(t, mem, "alice")) != 3 {
		t.Fatalf("another run: %s %v", outcome(other), texts(other))
	}
}

// readerOf returns the process, other than this one, that has path open.
func readerOf(t *testing.T, path string) (int, bool) {
	t.Helper()
	procs, err := filepath.Glob("/proc/[0-9]*/fd/*")
	if err != nil {
		t.Fatal(err)
	}
	for _, fd := range procs {
		if target, err := os.Readlink(fd); err == nil && target == path {
			pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(fd))))
			if pid != os.Getpid() {
				return pid, true
			}
		}
	}
	return 0, false
}

// The upstream is killed while add_observations is running (server-memory
// blocks reading its graph from a FIFO): the call is uncertain, and a
// repeat is answered uncertain without reaching the upstream again.
func TestUpstreamKilledMidCall(t *testing.T) {
	t.Parallel()
	fifo := tempFile(t, "memory.fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	store := openLedger(t, tempFile(t, "ledger.db"))
	cfg := memoryConfig(t, fifo)
	cfg.CallTimeout = mcpgateway.Duration(10 * time.Minute) // a forwarded repeat would hang, not time out
	_, url := startGateway(t, store, cfg)
	cs := connect(t, url)
	run := mcp.Meta{mcpgateway.DefaultRunMeta: "run-1"}

	done := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "add_observations", Arguments: observe("bob", "refund"), Meta: run})
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	// The upstream is inside the call once it has the FIFO open to read.
	var w *os.File
	deadline := time.Now().Add(time.Minute)
	for {
		f, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0)
		if err == nil {
			w = f
			break
		}
		if !errors.Is(err, syscall.ENXIO) || time.Now().After(deadline) {
			t.Fatalf("the upstream never read its graph: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	pid, ok := readerOf(t, fifo)
	if !ok {
		t.Fatal("no reader of the FIFO")
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	res := <-done
	w.Close()
	if res == nil || !res.IsError || outcome(res) != "uncertain" || !hasPrefix(lastText(res), "Outcome unknown") {
		t.Fatalf("killed mid-call: %+v", res)
	}
	key, _ := res.Meta[mcpgateway.KeyMeta].(string)

	again := call(t, cs, "add_observations", observe("bob", "refund"), run)
	if !again.IsError || outcome(again) != "uncertain" {
		t.Fatalf("repeat: %s %v", outcome(again), texts(again))
	}
	if pid, ok := readerOf(t, fifo); ok {
		t.Fatalf("the repeat reached the upstream (process %d reads the graph)", pid)
	}
	rec, err := store.Get(context.Background(), key)
	if err != nil || rec.State != ledger.StateUncertain {
		t.Fatalf("record: %+v, %v", rec, err)
	}
	// The upstream is started again for what passes through.
	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil || len(tools.Tools) == 0 {
		t.Fatalf("tools after the restart of the upstream: %v", err)
	}
}

// Everything the configuration does not mention passes through:
// server-everything's tools, resources and prompts are listed as it lists
// them, and called and read through the gateway.
func TestPassthrough(t *testing.T) {
	t.Parallel()
	cmd := mcptest.Everything(t)
	cfg := &mcpgateway.Config{Upstream: mcpgateway.Upstream{Command: cmd}}
	_, url := startGateway(t, openLedger(t, tempFile(t, "ledger.db")), cfg)
	via := connect(t, url)
	ctx := context.Background()
	direct, err := mcp.NewClient(&mcp.Implementation{Name: "direct", Version: "1"}, nil).
		Connect(ctx, &mcp.CommandTransport{Command: exec.Command(cmd[0], cmd[1:]...)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = direct.Close() })

	names := func(cs *mcp.ClientSession) (tools, resources, prompts []string) {
		for tl, err := range cs.Tools(ctx, nil) {
			if err != nil {
				t.Fatal(err)
			}
			tools = append(tools, tl.Name)
		}
		r, err := cs.ListResources(ctx, nil) // first page
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range r.Resources {
			resources = append(resources, x.URI)
		}
		for p, err := range cs.Prompts(ctx, nil) {
			if err != nil {
				t.Fatal(err)
			}
			prompts = append(prompts, p.Name)
		}
		return
	}
	t1, r1, p1 := names(direct)
	t2, r2, p2 := names(via)
	if fmt.Sprint(t1) != fmt.Sprint(t2) || fmt.Sprint(r1) != fmt.Sprint(r2) || fmt.Sprint(p1) != fmt.Sprint(p2) {
		t.Fatalf("listings differ:\n%v %v %v\n%v %v %v", t1, r1, p1, t2, r2, p2)
	}
	if len(t2) == 0 || len(r2) == 0 || len(p2) == 0 {
		t.Fatalf("nothing listed: %v %v %v", t2, r2, p2)
	}
	echo := call(t, via, "echo", map[string]any{"message": "hello"}, nil)
	if echo.IsError || len(texts(echo)) == 0 || texts(echo)[0] != "Echo: hello" {
		t.Errorf("echo: %+v", texts(echo))
	}
	rr, err := via.ReadResource(ctx, &mcp.ReadResourceParams{URI: r2[0]})
	if err != nil || len(rr.Contents) == 0 {
		t.Errorf("read %s: %v", r2[0], err)
	}
	tmpl, err := via.ListResourceTemplates(ctx, nil)
	if err != nil || len(tmpl.ResourceTemplates) == 0 {
		t.Errorf("resource templates: %v", err)
	}
}
