package integration

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/clock"
	"github.com/oncely/oncely/ledger/ledgerdynamo/dynalitetest"
	"github.com/oncely/oncely/ledger/ledgerpg/pgtest"
	"github.com/oncely/oncely/ledger/ledgerredis/redistest"
)

// TestMain runs the tests with a DynamoDB-compatible server (dynalite), a
// PostgreSQL server (pgtest) and a Redis server (redistest), or, in a
// child process started by killed_after_effect, the call that is killed
// instead of any test.
//
// The tests mostly wait — for fakes that hold a request until the client
// gives up, for executors that poll a claim held elsewhere — so unless
// -test.parallel is given, more of them run at once than there are CPUs.
func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		os.Exit(helperProcess())
	}
	flag.Parse()
	parallelSet := false
	flag.Visit(func(f *flag.Flag) { parallelSet = parallelSet || f.Name == "test.parallel" })
	if !parallelSet {
		if err := flag.Set("test.parallel", strconv.Itoa(max(16, runtime.GOMAXPROCS(0)))); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	os.Exit(pgtest.Main(func() int {
		return redistest.Main(func() int { return dynalitetest.Main(m) })
	}))
}

// The child process's environment.
const (
	helperEnv = "ONCELY_HELPER" // the case the child plays
	// killedExit is the child's exit code when it died where it should.
	killedExit = 3
)

// helperProcess is a process of an agent that executes one call and is
// killed right after the provider call returned, before the ledger write.
// Its environment names the ledger (openFromEnv), the fakes, the scenario,
// the run, the call's input and the time its clock reads.
func helperProcess() int {
	ctx := context.Background()
	fail := func(format string, args ...any) int {
		fmt.Fprintf(os.Stderr, "helper: "+format+"\n", args...)
		return 1
	}
	t0, err := strconv.ParseInt(os.Getenv("ONCELY_T0"), 10, 64)
	if err != nil {
		return fail("ONCELY_T0: %v", err)
	}
	clock := clock.NewFake(time.UnixMilli(t0))
	store, closeStore, err := openFromEnv(ctx, os.Getenv, clock)
	if err != nil {
		return fail("open ledger: %v", err)
	}
	defer closeStore()
	s := scenarioByName(os.Getenv("ONCELY_SCENARIO"))
	if s == nil {
		return fail("unknown scenario %q", os.Getenv("ONCELY_SCENARIO"))
	}
	var u urls
	if err := json.Unmarshal([]byte(os.Getenv("ONCELY_URLS")), &u); err != nil {
		return fail("ONCELY_URLS: %v", err)
	}
	tool := kitAt(u, kitOptions{}).tools[s.name]
	run := tool.Run
	tool.Run = func(ctx context.Context, inv client.Invocation) (client.Effect, error) {
		_, err := run(ctx, inv)
		fmt.Fprintf(os.Stderr, "helper: the provider call returned (error: %v); killed before the record\n", err)
		os.Exit(killedExit)
		panic("unreachable")
	}
	exec := client.New(store, &client.Config{Clock: clock, Liveness: lease})
	if err := exec.Register(tool); err != nil {
		return fail("register: %v", err)
	}
	res, err := exec.Execute(ctx, os.Getenv("ONCELY_RUN"), client.Call{Tool: tool.Name, Input: json.RawMessage(os.Getenv("ONCELY_INPUT")), ID: "toolu_killed"})
	return fail("the call returned (%s, %v) instead of dying after the provider call", res.Text, err)
}
