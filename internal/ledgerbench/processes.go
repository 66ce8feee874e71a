package ledgerbench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/ledger"
)

// Environment of a process started by ContentionProcesses.
const (
	childEnv = "LEDGERBENCH_CONTENTION_CHILD" // the tool's time, in ns
	// childRunEnv is the run id every process of one benchmark shares.
	childRunEnv = "LEDGERBENCH_CONTENTION_RUN"
	// childPollEnv, set to 1, hides the Store's Watch: waiters poll.
	childPollEnv = "LEDGERBENCH_CONTENTION_POLL"
)

// Child makes this process one caller of ContentionProcesses, when it was
// started as one, and never returns then; otherwise it returns at once.
// A backend's TestMain calls it first, with a function that opens the
// backend's Store from the environment the benchmark gave the children.
func Child(open func() (ledger.Store, error)) {
	took, err := strconv.ParseInt(os.Getenv(childEnv), 10, 64)
	if os.Getenv(childEnv) == "" {
		return
	}
	if err == nil {
		err = child(open, time.Duration(took), os.Getenv(childRunEnv), os.Getenv(childPollEnv) == "1", os.Stdin, os.Stdout)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "ledgerbench child:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// child answers the lines of ContentionProcesses: "GO ticket start" makes
// the call for ticket at start (Unix ns) and answers "DONE outcome ns end"
// (the client.Outcome as a number), ns the call's latency from when this
// process began it, end when the call returned (Unix ns).
func child(open func() (ledger.Store, error), took time.Duration, run string, poll bool, in io.Reader, out io.Writer) error {
	s, err := open()
	if err != nil {
		return err
	}
	if c, ok := s.(io.Closer); ok {
		defer c.Close()
	}
	var store ledger.Store = s
	if poll {
		store = struct{ ledger.Store }{s} // no Watch: the waiters poll
	} else if w, ok := s.(ledger.Watcher); ok {
		// A process that waits now and then has its listener up (a
		// PostgreSQL connection, a Redis subscription): the first Watch
		// opens it, here rather than in a timed round. Under load, a
		// process's first wait may come rounds after the start, when the
		// others answered it from the done record before.
		_, stop, err := w.Watch(context.Background(), "ledgerbench-prime")
		if err != nil {
			return fmt.Errorf("watch: %w", err)
		}
		stop()
	}
	exec := client.New(store, nil)
	if err := exec.Register(sendReply(took, nil)); err != nil {
		return err
	}
	fmt.Fprintln(out, "READY")
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 3 || f[0] != "GO" {
			return fmt.Errorf("unexpected line %q", sc.Text())
		}
		start, err := strconv.ParseInt(f[2], 10, 64)
		if err != nil {
			return err
		}
		time.Sleep(time.Until(time.Unix(0, start)))
		t0 := time.Now()
		r, err := exec.Execute(context.Background(), run, call(f[1]))
		t1 := time.Now()
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "DONE %d %d %d\n", int(r.Outcome), t1.Sub(t0).Nanoseconds(), t1.UnixNano())
	}
	return sc.Err()
}

// sendReply is the benchmarks' send_reply tool: it takes took and counts
// its runs in runs (when not nil).
func sendReply(took time.Duration, runs interface{ Add(int64) int64 }) client.Tool {
	return client.Tool{
		Name:     "send_reply",
		Identity: []client.Field{{Path: "ticketId", Norm: client.String}},
		Run: func(ctx context.Context, _ client.Invocation) (client.Effect, error) {
			if runs != nil {
				runs.Add(1)
			}
			if took > 0 {
				t := time.NewTimer(took)
				defer t.Stop()
				select {
				case <-t.C:
				case <-ctx.Done():
					return client.Effect{}, ctx.Err()
				}
			}
			return client.Effect{Summary: "sent", Ref: "msg_1", Result: []byte(`{"id":"msg_1"}`)}, nil
		},
	}
}

// childProc is one caller process.
type childProc struct {
	cmd   *exec.Cmd
	in    io.WriteCloser
	lines *bufio.Scanner
}

// ContentionProcesses is Contention with every caller in an OS process of
// its own, as callers on several hosts or in several worker processes of
// one host are: this test binary started again, callers times, with env
// added to its environment (what the backend's open function in Child
// reads). Nothing is shared between the callers but the ledger: a waiter
// learns that the holder settled through the ledger alone (a
// ledger.Watcher's signal, or its polls). In every iteration each process
// makes the same call, for a new ticket, at one moment set 20 ms ahead;
// latencies are taken in each process from when it began its call (ns/op
// includes the 20 ms). The metrics are Contention's, and three that split
// a waiter's latency: holder-ns, the median time of the call that ran the
// tool (its claim among all the others, the tool, its record), and
// spread-p50-ns and spread-p99-ns, how long after the round's first
// answer (the holder's, or that of a waiter woken by its settle, when the
// holder was descheduled after its record) the callers were answered: the
// wake path (the signal, each waiter's read) and the scheduling of all
// the processes on the machine's cores. The clocks of one host are
// compared. callers-cpu-ns is the CPU time the caller processes spent
// per round, all of them together (Linux: their threads' schedstat), a
// figure the machine's load does not change: on a machine of n cores
// their answers cannot spread over less than it divided by n. With poll
// set the
// processes hide their Store's Watch, so that their waiters poll (with
// the executor's backoff, at most 25 ms apart), as before the ledgers
// watched.
func ContentionProcesses(b *testing.B, env []string, callers int, took time.Duration, poll bool) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	run := "run-procs-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	procs := make([]*childProc, callers)
	var wg sync.WaitGroup
	defer func() {
		for _, p := range procs {
			if p != nil {
				p.in.Close()
			}
		}
		wg.Wait()
	}()
	for i := range procs {
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$", "-test.bench=^$")
		cmd.Env = append(append(os.Environ(), env...), childEnv+"="+strconv.FormatInt(int64(took), 10), childRunEnv+"="+run, childPollEnv+"="+map[bool]string{true: "1"}[poll])
		cmd.Stderr = os.Stderr
		in, err := cmd.StdinPipe()
		if err != nil {
			b.Fatal(err)
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			b.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		wg.Go(func() { _ = cmd.Wait() })
		procs[i] = &childProc{cmd: cmd, in: in, lines: bufio.NewScanner(out)}
	}
	for i, p := range procs {
		if !p.lines.Scan() || p.lines.Text() != "READY" {
			b.Fatalf("caller process %d did not start: %q %v", i, p.lines.Text(), p.lines.Err())
		}
	}
	round := func() (answered, holder, spread []time.Duration, inProgress int) {
		ticket := "contended-procs-" + strconv.FormatInt(seq.Add(1), 10) + "-" + run
		start := time.Now().Add(20 * time.Millisecond).UnixNano()
		for i, p := range procs {
			if _, err := fmt.Fprintf(p.in, "GO %s %d\n", ticket, start); err != nil {
				b.Fatalf("caller process %d: %v", i, err)
			}
		}
		executed := 0
		ends := make([]int64, len(procs))
		for i, p := range procs {
			if !p.lines.Scan() {
				b.Fatalf("caller process %d ended: %v", i, p.lines.Err())
			}
			var outcome, ns int64
			if _, err := fmt.Sscanf(p.lines.Text(), "DONE %d %d %d", &outcome, &ns, &ends[i]); err != nil {
				b.Fatalf("caller process %d: %q: %v", i, p.lines.Text(), err)
			}
			switch client.Outcome(outcome) {
			case client.Executed:
				executed++
				holder = append(holder, time.Duration(ns))
			case client.AlreadyDone:
			case client.InProgress:
				inProgress++
			default:
				b.Fatalf("caller process %d: outcome %v", i, client.Outcome(outcome))
			}
			answered = append(answered, time.Duration(ns))
		}
		if executed != 1 {
			b.Fatalf("the tool ran %d times for one action", executed)
		}
		first := slices.Min(ends)
		for _, end := range ends {
			spread = append(spread, time.Duration(end-first))
		}
		return answered, holder, spread, inProgress
	}
	// One round first, untimed and unreported: the stores' connections
	// and watches are opened there, once.
	round()
	var (
		lat, holders, spread []time.Duration
		inProgress           int
	)
	cpu0, cpuOK := callersCPU(procs)
	b.ResetTimer()
	for b.Loop() {
		answered, holder, s, n := round()
		lat = append(lat, answered...)
		holders = append(holders, holder...)
		spread = append(spread, s...)
		inProgress += n
	}
	b.StopTimer()
	if cpu1, ok := callersCPU(procs); ok && cpuOK {
		b.ReportMetric(float64(cpu1-cpu0)/float64(b.N), "callers-cpu-ns")
	}
	reportLatency(b, lat)
	if len(lat) > 0 && took > 0 {
		b.ReportMetric(float64(Quantile(lat, 0.99))/float64(took), "p99/tool")
	}
	if len(holders) > 0 {
		b.ReportMetric(float64(Quantile(holders, 0.50)), "holder-ns")
	}
	if len(spread) > 0 {
		b.ReportMetric(float64(Quantile(spread, 0.50)), "spread-p50-ns")
		b.ReportMetric(float64(Quantile(spread, 0.99)), "spread-p99-ns")
	}
	b.ReportMetric(float64(inProgress)/float64(b.N), "in-progress/op")
}

// callersCPU is the CPU time the processes have spent so far, the sum of
// their threads' (the first field of /proc/PID/task/TID/schedstat, in
// ns), and false where the system has no such files.
func callersCPU(procs []*childProc) (time.Duration, bool) {
	var sum time.Duration
	for _, p := range procs {
		tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", p.cmd.Process.Pid))
		if err != nil {
			return 0, false
		}
		for _, t := range tasks {
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/schedstat", p.cmd.Process.Pid, t.Name()))
			if err != nil {
				continue // a thread that ended meanwhile
			}
			f := strings.Fields(string(b))
			if len(f) == 0 {
				return 0, false
			}
			ns, err := strconv.ParseInt(f[0], 10, 64)
			if err != nil {
				return 0, false
			}
			sum += time.Duration(ns)
		}
	}
	return sum, true
}
