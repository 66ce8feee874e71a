package ledgerredis_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/oncely/oncely/clock"
	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/ledger/ledgerredis"
	"github.com/oncely/oncely/ledger/ledgerredis/redistest"
)

// scaleServer is a redis-server of the scale benchmarks' own (started once
// per test binary): they change its slowlog settings, which a shared
// server's other users should not see. Its main thread runs under
// SCHED_FIFO where this process may set it (realtime), so that SLOWLOG
// measures scripts and not a busy machine's scheduling; pid is 0 when the
// server's process id is unknown.
var scaleServer struct {
	once     sync.Once
	url      string
	pid      int
	realtime bool
	err      error
}

func ownServer(b *testing.B) string {
	b.Helper()
	scaleServer.once.Do(func() {
		srv, err := redistest.StartBinary(context.Background(), "redis-server", "redis-server")
		if err != nil {
			scaleServer.err = err
			return
		}
		stopAtExit(srv)
		scaleServer.url = srv.URL
		info, err := redistest.NewClient(b, srv.URL).Info(context.Background(), "server").Result()
		if err != nil {
			scaleServer.err = err
			return
		}
		for _, line := range strings.Split(info, "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "process_id:"); ok {
				scaleServer.pid, _ = strconv.Atoi(v)
			}
		}
		if scaleServer.pid != 0 {
			scaleServer.realtime = realtime(scaleServer.pid) == nil
		}
	})
	if scaleServer.err != nil {
		b.Skip(scaleServer.err)
	}
	return scaleServer.url
}

// slowlog records every command slower than 200 µs on the server of rc,
// from now on, and returns a function that reports, by script, the
// longest run recorded since and how many took more than 5 ms.
func slowlog(b *testing.B, rc *redis.Client) func() map[string]scriptTimes {
	ctx := context.Background()
	for _, kv := range [][2]string{{"slowlog-log-slower-than", "200"}, {"slowlog-max-len", "100000"}} {
		if err := rc.ConfigSet(ctx, kv[0], kv[1]).Err(); err != nil {
			b.Fatal(err)
		}
	}
	if err := rc.SlowLogReset(ctx).Err(); err != nil {
		b.Fatal(err)
	}
	names := ledgerredis.ScriptNames()
	names[busyScript.Hash()] = "busy"
	names[probeScript.Hash()] = "probe"
	return func() map[string]scriptTimes {
		logs, err := rc.SlowLogGet(ctx, -1).Result()
		if err != nil {
			b.Fatal(err)
		}
		times := map[string]scriptTimes{}
		for _, l := range logs {
			if len(l.Args) < 2 || !strings.HasPrefix(strings.ToLower(l.Args[0]), "eval") {
				continue
			}
			name := names[l.Args[1]]
			if name == "" {
				name = "other"
			}
			t := times[name]
			if f := os.Getenv("ONCELY_BENCH_SLOWLOG"); l.Duration > 5*time.Millisecond && f != "" {
				// The slow runs, for a look at when they came.
				if w, err := os.OpenFile(f, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
					fmt.Fprintf(w, "%s %s %d\n", l.Time.Format("15:04:05"), name, l.Duration.Microseconds())
					_ = w.Close()
				}
			}
			t.longest = max(t.longest, l.Duration)
			if l.Duration > 5*time.Millisecond {
				t.over5ms++
			}
			times[name] = t
		}
		return times
	}
}

// busyScript is the floor of Purge's scripts: it touches no key and only
// counts to ARGV[1], which busyFloor sets so that a run costs the server
// as much time as one of Purge's scripts on average. Run as often and sent
// the same way, it is as exposed as they are to whatever the machine does
// to the server (an interrupt, a preempted virtual CPU): what SLOWLOG
// records of it over 5 ms is the machine's, not a script's work.
var busyScript = redis.NewScript(`local x = 0 for i = 1, tonumber(ARGV[1]) do x = x + i end return 1`)

// probeScript is a script that does nothing, run every millisecond beside
// Purge.
var probeScript = redis.NewScript(`return 2`)

// busyFloor runs busyScript n times, pipelined in pages of 256 as Purge's
// scripts are, each counting as far as makes its mean time on the server
// meanUS µs (found first with two rounds of 2,000 runs), and returns the
// mean it took.
func busyFloor(b *testing.B, rc *redis.Client, n int, meanUS float64) float64 {
	ctx := context.Background()
	if err := busyScript.Load(ctx, rc).Err(); err != nil {
		b.Fatal(err)
	}
	run := func(n, count int) float64 {
		calls0, usec0 := evalStats(b, rc)
		for n > 0 {
			page := min(n, 256)
			n -= page
			if _, err := rc.Pipelined(ctx, func(p redis.Pipeliner) error {
				for range page {
					busyScript.EvalSha(ctx, p, nil, count)
				}
				return nil
			}); err != nil {
				b.Fatal(err)
			}
		}
		calls, usec := evalStats(b, rc)
		return float64(usec-usec0) / float64(calls-calls0)
	}
	count := 1000
	for range 2 { // a run's time is nearly linear in the count
		count = max(1, int(float64(count)*meanUS/run(2000, count)))
	}
	return run(n, count)
}

// scriptTimes are the longest run of a script and how many runs took over
// 5 ms.
type scriptTimes struct {
	longest time.Duration
	over5ms int
}

// The longest Redis script at 10^6 records (all done, settled an hour ago
// and kept for a day), read from the server's SLOWLOG: fresh actions
// (Claim and Complete, each a script) while nothing has expired (steady),
// and the same after a quiet period of 25 hours, when every record has
// expired by the store's clock and a claim's clean-up finds a whole
// bucket's index to trim (quiet), followed by a Purge of the expired
// records (a scan of a page of an index and one script per record, some
// 4,000 and 10^6 runs). mean-write-script-µs is the server's time per
// claim or complete script (INFO commandstats), max-write-script-µs is the longest claim or
// complete script seen in the sub-benchmark's runs so far, and
// write-scripts>5ms how many took longer than 5 ms; the purge-script
// metrics are the same for Purge's scripts.
//
// A script's run in SLOWLOG is the time from its start to its end, also
// when the server was not running meanwhile. Two measures keep the machine
// apart from the scripts, in the same run. The server's main thread runs
// under SCHED_FIFO where this process may set it (server-realtime 1): on a
// machine whose CPUs other processes keep busy, the scheduler otherwise
// preempts a server that runs pipelined scripts back to back, as Purge
// does, for tens of milliseconds now and then (server-runqueue-ms: how
// long the server waited for a CPU while Purge ran, from its schedstat).
// And the floors: busy-scripts, as many scripts as Purge ran, sent the
// same way after it, each taking as long on average but touching no key
// (what they record over 5 ms is the machine's); probe-scripts, a script
// that does nothing, every millisecond beside Purge. With
// ONCELY_BENCH_SLOWLOG naming a file, each run over 5 ms is appended to
// it (second, script, µs).
func BenchmarkScriptsAt1M(b *testing.B) {
	ctx := context.Background()
	url := ownServer(b)
	rc := redistest.NewClient(b, url)
	prefix := redistest.Prefix(b, url)
	t0 := time.Now()
	clk := clock.NewFake(t0)
	store := ledgerredis.New(rc, &ledgerredis.Config{Clock: clk, Prefix: prefix})
	keys := make([]string, 1_000_000)
	for i := range keys {
		keys[i] = fmt.Sprintf("done-%07d", i)
	}
	if err := ledgerredis.FillDone(ctx, store, keys, t0.Add(-time.Hour)); err != nil {
		b.Fatal(err)
	}
	done := ledger.Completion{Summary: "sent", Ref: "msg_1", Result: []byte(`{"id":"msg_1"}`)}
	fresh := 0
	phase := func(name string, at time.Time, purge bool) {
		var read func() map[string]scriptTimes
		longest := map[string]scriptTimes{}
		purged := false
		var meanPurge, meanBusy, purgeWait float64
		b.Run(name, func(b *testing.B) {
			if read == nil {
				read = slowlog(b, rc)
			}
			clk.Set(at)
			calls0, usec0 := evalStats(b, rc)
			for range b.N {
				fresh++
				now := clk.Now()
				p := ledger.ClaimParams{Key: fmt.Sprintf("fresh-%d", fresh), Tool: "send_reply", RunID: "run-1", Owner: "owner",
					LeaseUntil: now.Add(time.Minute), Fingerprint: "fp", ExpiresAt: now.Add(time.Hour)}
				if res, err := store.Claim(ctx, p); err != nil || !res.Claimed {
					b.Fatal(res, err)
				}
				if err := store.Complete(ctx, p.Key, p.Owner, done); err != nil {
					b.Fatal(err)
				}
			}
			calls, usec := evalStats(b, rc)
			b.ReportMetric(float64(usec-usec0)/float64(calls-calls0), "mean-write-script-µs")
			if pg, ok := any(store).(ledger.Purger); ok && purge && !purged {
				b.StopTimer()
				purged = true
				calls0, usec0 := evalStats(b, rc)
				wait0, _ := runqueueWait(scaleServer.pid)
				t := time.Now()
				// A probe beside Purge: a script that does nothing, every
				// millisecond, on a connection of its own. What SLOWLOG
				// records of it in the same seconds as Purge's slow
				// scripts is the machine's, not the scripts' work.
				stop := make(chan struct{})
				probed := make(chan struct{})
				go func() {
					defer close(probed)
					tick := time.NewTicker(time.Millisecond)
					defer tick.Stop()
					for {
						select {
						case <-stop:
							return
						case <-tick.C:
							_ = probeScript.Run(ctx, rc, nil).Err()
						}
					}
				}()
				n, err := pg.Purge(ctx, clk.Now())
				close(stop)
				<-probed
				if err != nil {
					b.Fatal(err)
				}
				calls, usec := evalStats(b, rc)
				meanPurge = float64(usec-usec0) / float64(calls-calls0)
				if wait, err := runqueueWait(scaleServer.pid); err == nil {
					purgeWait = float64(wait-wait0) / 1e6
				}
				b.Logf("Purge deleted %d records in %v: %d scripts, %.1f µs each on average", n, time.Since(t), calls-calls0, meanPurge)
				// The floor, in the same run: as many scripts that take as
				// long, sent the same way.
				meanBusy = busyFloor(b, rc, int(calls-calls0), meanPurge)
				b.StartTimer()
			}
			for name, t := range read() {
				l := longest[name]
				longest[name] = scriptTimes{longest: max(l.longest, t.longest), over5ms: max(l.over5ms, t.over5ms)}
			}
			// The writes' scripts (claim, complete) apart from Purge's steps.
			var writes scriptTimes
			for _, name := range []string{"claim", "complete"} {
				writes.longest = max(writes.longest, longest[name].longest)
				writes.over5ms += longest[name].over5ms
			}
			rt := 0.0
			if scaleServer.realtime {
				rt = 1
			}
			b.ReportMetric(rt, "server-realtime")
			b.ReportMetric(float64(writes.longest.Microseconds()), "max-write-script-µs")
			b.ReportMetric(float64(writes.over5ms), "write-scripts>5ms")
			if purged {
				var steps scriptTimes
				for _, name := range []string{"scan", "purge"} {
					steps.longest = max(steps.longest, longest[name].longest)
					steps.over5ms += longest[name].over5ms
				}
				b.ReportMetric(float64(steps.longest.Microseconds()), "max-purge-script-µs")
				b.ReportMetric(float64(steps.over5ms), "purge-scripts>5ms")
				b.ReportMetric(meanPurge, "mean-purge-script-µs")
				b.ReportMetric(purgeWait, "server-runqueue-ms")
				b.ReportMetric(float64(longest["busy"].longest.Microseconds()), "max-busy-script-µs")
				b.ReportMetric(float64(longest["busy"].over5ms), "busy-scripts>5ms")
				b.ReportMetric(meanBusy, "mean-busy-script-µs")
				b.ReportMetric(float64(longest["probe"].longest.Microseconds()), "max-probe-script-µs")
				b.ReportMetric(float64(longest["probe"].over5ms), "probe-scripts>5ms")
			}
		})
	}
	phase("steady", t0, false)
	phase("quiet", t0.Add(25*time.Hour), true)
}

// evalStats returns the server's count of EVALSHA calls and the
// microseconds they took in all (INFO commandstats).
func evalStats(b *testing.B, rc *redis.Client) (calls, usec int64) {
	info, err := rc.Info(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_evalsha:")
		if !ok {
			continue
		}
		for _, kv := range strings.Split(rest, ",") {
			k, v, _ := strings.Cut(kv, "=")
			n, _ := strconv.ParseInt(v, 10, 64)
			switch k {
			case "calls":
				calls = n
			case "usec":
				usec = n
			}
		}
	}
	return calls, usec
}

// The server's memory per record (used_memory before and after writing
// 10^4 done records through Claim and Complete, on a server of the
// benchmark's own), with a result of 14 bytes and of 1 KiB, at the
// server's default hash-max-listpack-value (64: a hash with a longer value
// leaves the compact encoding) and at 2048. Each run writes its records
// once, whatever b.N.
func BenchmarkMemoryPerRecord(b *testing.B) {
	ctx := context.Background()
	url := ownServer(b)
	rc := redistest.NewClient(b, url)
	for _, listpack := range []int{64, 2048} {
		for _, result := range []int{14, 1024} {
			b.Run(fmt.Sprintf("listpack=%d/result=%d", listpack, result), func(b *testing.B) {
				if err := rc.ConfigSet(ctx, "hash-max-listpack-value", strconv.Itoa(listpack)).Err(); err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { rc.ConfigSet(ctx, "hash-max-listpack-value", "64") })
				store := ledgerredis.New(rc, &ledgerredis.Config{Prefix: redistest.Prefix(b, url)})
				done := ledger.Completion{Summary: "Reply sent to ticket 4711", Ref: "msg_01HZX3K9", Result: []byte(strings.Repeat("r", result))}
				const n = 10_000
				used := func() int64 {
					info, err := rc.Info(ctx, "memory").Result()
					if err != nil {
						b.Fatal(err)
					}
					for _, line := range strings.Split(info, "\n") {
						if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
							n, _ := strconv.ParseInt(v, 10, 64)
							return n
						}
					}
					b.Fatal("INFO memory has no used_memory")
					return 0
				}
				before := used()
				var wg sync.WaitGroup
				for w := range 8 {
					wg.Go(func() {
						for i := w; i < n; i += 8 {
							now := time.Now()
							key := fmt.Sprintf("%064x", i) // as long as an action key
							p := ledger.ClaimParams{Key: key, Tool: "send_reply", RunID: "run-0123456789", Owner: "owner-0123456789abcdef",
								LeaseUntil: now.Add(time.Minute), Fingerprint: strings.Repeat("f", 64), ExpiresAt: now.Add(24 * time.Hour)}
							if _, err := store.Claim(ctx, p); err != nil {
								b.Error(err)
								return
							}
							if err := store.Complete(ctx, p.Key, p.Owner, done); err != nil {
								b.Error(err)
								return
							}
						}
					})
				}
				wg.Wait()
				for range b.N {
				}
				b.ReportMetric(float64(used()-before)/n, "B/record")
			})
		}
	}
}
