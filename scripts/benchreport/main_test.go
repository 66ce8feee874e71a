package main

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// canned is benchmark output shaped like make bench's and make
// bench-peers': two runs (-count 2), a floor by name, raw- siblings, a
// paired benchmark, percentiles, requests, notes and lines to ignore.
const canned = `note: How it was measured.
goos: linux
goarch: amd64
pkg: github.com/oncely/oncely/ledger/ledgersqlite
cpu: Some CPU
BenchmarkRawFloor/fresh-2         	     100	   1000 ns/op	  10 B/op	   1 allocs/op
BenchmarkRawFloor/fresh-2         	     100	   3000 ns/op	  30 B/op	   3 allocs/op
BenchmarkExecute/fresh-2          	     100	   4000 ns/op	 100 B/op	  10 allocs/op
BenchmarkExecute/fresh-2          	     100	   2000 ns/op	 100 B/op	  10 allocs/op
BenchmarkConcurrentFresh/raw-FULL-1-2 	  50	   4000 ns/op
BenchmarkConcurrentFresh/raw-NORMAL-1-2	  50	   1000 ns/op
BenchmarkConcurrentFresh/store-FULL-16-2	  50	   2000 ns/op	  7.5 writes/commit
BenchmarkLoneFloor-2   	     100	   1000 ns/op
pkg: github.com/oncely/oncely/ledger/ledgerdynamo
BenchmarkRawFloor-2   	     100	   1000 ns/op
BenchmarkStore/fresh-2   	     100	   1500 ns/op
BenchmarkStore/replay-2   	     100	   500 ns/op
BenchmarkContention-2   	       5	 108114834 ns/op	 0 in-progress/op	  74092767 p50-ns	 107625838 p99-ns	 2.153 p99/tool
BenchmarkContentionProcesses/watch-2   	       5	 90000000 ns/op	 62000000 holder-ns	 0 in-progress/op	 60000000 p50-ns	 80000000 p99-ns	 1.6 p99/tool	 3850000 spread-p50-ns	 16500000 spread-p99-ns
BenchmarkRunning
--- FAIL: BenchmarkSomething
PASS
pkg: peers
BenchmarkPeers/fresh	100	100 oncely-ns/op	90 oncely-p50-ns	300 oncely-p99-ns	2 oncely-requests/op	200 powertools-ns/op	150 powertools-p50-ns	400 powertools-p99-ns	2 powertools-requests/op	0.5 oncely/powertools
BenchmarkPeers/fresh	100	100 oncely-ns/op	90 oncely-p50-ns	300 oncely-p99-ns	2 oncely-requests/op	200 powertools-ns/op	150 powertools-p50-ns	400 powertools-p99-ns	2 powertools-requests/op	0.7 oncely/powertools
`

func TestRows(t *testing.T) {
	res, err := parse(strings.NewReader(canned))
	if err != nil {
		t.Fatal(err)
	}
	if res.cpu != "Some CPU" || len(res.notes) != 1 || res.notes[0] != "How it was measured." {
		t.Errorf("cpu %q, notes %q", res.cpu, res.notes)
	}
	got := map[string]row{}
	for _, r := range rows(res) {
		got[r.name] = r
	}
	for _, want := range []row{
		{name: "RawFloor/fresh", runs: 2, ns: "2 µs", bytes: "20", allocs: "2", ratio: "floor"},
		{name: "Execute/fresh", runs: 2, ns: "3 µs", bytes: "100", allocs: "10", ratio: "1.50× RawFloor/fresh"},
		{name: "ConcurrentFresh/raw-NORMAL-1", runs: 1, ns: "1 µs", ratio: "floor"},
		{name: "LoneFloor", runs: 1, ns: "1 µs", ratio: "floor"},
		{name: "ConcurrentFresh/store-FULL-16", runs: 1, ns: "2 µs",
			ratio: "0.50× ConcurrentFresh/raw-FULL-1, 2.00× ConcurrentFresh/raw-NORMAL-1", other: "7.5 writes/commit"},
		{name: "RawFloor", runs: 1, ns: "1 µs", ratio: "floor"},
		{name: "Store/fresh", runs: 1, ns: "1.5 µs", ratio: "1.50× RawFloor"},
		{name: "Store/replay", runs: 1, ns: "500 ns"},
		{name: "Contention", runs: 1, ns: "108 ms", p50: "74.1 ms", p99: "108 ms", other: "0 in-progress/op, 2.15 p99/tool"},
		{name: "ContentionProcesses/watch", runs: 1, ns: "90 ms", p50: "60 ms", p99: "80 ms",
			other: "62 ms holder, 0 in-progress/op, 1.6 p99/tool, 3.85 ms spread-p50, 16.5 ms spread-p99"},
		{name: "Peers/fresh · oncely", runs: 2, ns: "100 ns", p50: "90 ns", p99: "300 ns", requests: "2",
			ratio: "0.60× powertools (p50 0.60×)"},
		{name: "Peers/fresh · powertools", runs: 2, ns: "200 ns", p50: "150 ns", p99: "400 ns", requests: "2", ratio: "floor"},
	} {
		r, ok := got[want.name]
		if !ok {
			t.Errorf("no row %s", want.name)
			continue
		}
		r.pkg = ""
		if r != want {
			t.Errorf("row %s:\n got %+v\nwant %+v", want.name, r, want)
		}
	}
	if len(got) != 13 {
		t.Errorf("%d rows, want 13: %v", len(got), got)
	}
}

func TestRender(t *testing.T) {
	res, err := parse(strings.NewReader(canned))
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	render(&b, res, "Title", "make bench", machine{GOOS: "linux", GOARCH: "amd64", NProc: 2},
		time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC))
	out := b.String()
	for _, want := range []string{
		"## Title\n",
		"- machine: linux/amd64, Some CPU, 2 CPUs\n", // the output's cpu line when /proc/cpuinfo has none
		"- date: 2026-12-01 08:00 UTC\n",
		"- reproduce: `make bench`\n",
		"How it was measured.\n",
		"| ledger/ledgersqlite | Execute/fresh | 2 | 3 µs |  |  | 100 | 10 |  | 1.50× RawFloor/fresh |  |\n",
		"| peers | Peers/fresh · oncely | 2 | 100 ns | 90 ns | 300 ns |  |  | 2 | 0.60× powertools (p50 0.60×) |  |\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestParseBadValue(t *testing.T) {
	if _, err := parse(strings.NewReader("BenchmarkX-2 10 1x ns/op\n")); err == nil {
		t.Error("parse accepted a value that is not a number")
	}
}

func TestReplaceSection(t *testing.T) {
	doc := replaceSection(nil, "a", []byte("one\n"))
	doc = replaceSection(doc, "b", []byte("two\n"))
	doc = replaceSection(doc, "a", []byte("three\n"))
	s := string(doc)
	if !strings.HasPrefix(s, "# Benchmarks\n") {
		t.Errorf("no heading:\n%s", s)
	}
	if strings.Contains(s, "one") || strings.Count(s, "<!-- begin a -->") != 1 ||
		strings.Index(s, "three") > strings.Index(s, "two") {
		t.Errorf("section a not replaced in place:\n%s", s)
	}
}
