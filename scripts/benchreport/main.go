// Command benchreport turns Go benchmark output (go test -bench, any
// -count) into a section of BENCHMARKS.md: one table row per benchmark
// with the median over its runs of ns/op, p50 and p99 where the benchmark
// reports them, B/op and allocs/op, ledger requests per action where
// reported, and the ratio to its raw floor measured in the same run; above
// the table, the machine, the date (of the input file) and the command that
// reproduces it.
//
//	benchreport -in .tmp/bench.txt -out BENCHMARKS.md -section ledgers \
//	    -title "Ledgers and executor" -cmd "make bench"
//
// The section is written between <!-- begin NAME --> and <!-- end NAME -->
// markers; a section already there is replaced, and the rest of the file is
// kept, so that several programs can each own a section of one file.
//
// Floors are found by the benchmarks' own naming:
//   - a paired benchmark reports each part's time as PART-ns/op and ratios
//     as PART/FLOOR (store/raw, large/small, oncely/powertools); each part
//     becomes a row, with its ratio to the floor part. PART-p50-ns,
//     PART-p99-ns and PART-requests/op fill that row's other columns.
//   - BenchmarkXFloor/SUB is the floor of every BenchmarkY/SUB of the same
//     package (BenchmarkRawFloor/fresh for BenchmarkExecute/fresh); a
//     BenchmarkXFloor without sub-benchmarks is the floor of a fresh
//     action, BenchmarkY/fresh, where no BenchmarkXFloor/fresh is.
//   - a sub-benchmark named raw-... is a floor of its siblings.
//
// Other metrics go to the last column; those in ns (NAME-ns) are shown as
// times (holder-ns as "66.5 ms holder").
//
// Lines starting with "note:" become the section's notes.
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"
)

func main() {
	in := flag.String("in", "", "benchmark output to read (default: standard input)")
	out := flag.String("out", "BENCHMARKS.md", "markdown file whose section is written")
	section := flag.String("section", "benchmarks", "name of the section in the file")
	title := flag.String("title", "Benchmarks", "heading of the section")
	cmd := flag.String("cmd", "", "the command that reproduces the section")
	flag.Parse()
	log.SetFlags(0)
	log.SetPrefix("benchreport: ")

	r, date := io.Reader(os.Stdin), time.Now()
	if *in != "" {
		f, err := os.Open(*in)
		if err != nil {
			log.Fatal(err)
		}
		defer f.Close()
		if st, err := f.Stat(); err == nil {
			date = st.ModTime() // when the benchmarks wrote it
		}
		r = f
	}
	run, err := parse(r)
	if err != nil {
		log.Fatal(err)
	}
	if len(run.benchmarks) == 0 {
		log.Fatal("no benchmark results in the input")
	}
	var body bytes.Buffer
	render(&body, run, *title, *cmd, thisMachine(), date.UTC())
	old, err := os.ReadFile(*out)
	if err != nil && !os.IsNotExist(err) {
		log.Fatal(err)
	}
	if err := os.WriteFile(*out, replaceSection(old, *section, body.Bytes()), 0o644); err != nil {
		log.Fatal(err)
	}
}

// machine describes where the benchmarks ran.
type machine struct {
	GOOS, GOARCH, CPU string
	NProc             int
}

// thisMachine is the machine benchreport runs on, which is the one the
// benchmarks ran on: the model name of /proc/cpuinfo where it exists.
func thisMachine() machine {
	m := machine{GOOS: runtime.GOOS, GOARCH: runtime.GOARCH, NProc: runtime.NumCPU()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	return m
}

// benchmark is one benchmark's results: every metric's values, one per
// run (-count), by unit.
type benchmark struct {
	pkg, name string // name without the Benchmark prefix and the -GOMAXPROCS suffix
	runs      int
	units     []string // in the order of the first run's report
	values    map[string][]float64
}

// median is the median of the benchmark's values of unit, and whether it
// reported that unit.
func (b *benchmark) median(unit string) (float64, bool) {
	v := b.values[unit]
	if len(v) == 0 {
		return 0, false
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if n := len(s); n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2, true
	}
	return s[len(s)/2], true
}

// results is a parsed benchmark output.
type results struct {
	cpu        string // the "cpu:" line of the output
	notes      []string
	benchmarks []*benchmark // in order of first appearance
}

// parse reads Go benchmark output.
func parse(r io.Reader) (*results, error) {
	res := &results{}
	byKey := map[string]*benchmark{}
	pkg := ""
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "pkg: "):
			pkg = strings.TrimSpace(strings.TrimPrefix(line, "pkg: "))
		case strings.HasPrefix(line, "cpu: "):
			res.cpu = strings.TrimSpace(strings.TrimPrefix(line, "cpu: "))
		case strings.HasPrefix(line, "note: "):
			res.notes = append(res.notes, strings.TrimSpace(strings.TrimPrefix(line, "note: ")))
		case strings.HasPrefix(line, "Benchmark"):
			f := strings.Fields(line)
			if len(f) < 4 || len(f)%2 != 0 {
				continue // a benchmark's name printed before its result, or a log line
			}
			if _, err := strconv.Atoi(f[1]); err != nil {
				continue
			}
			name := strings.TrimPrefix(f[0], "Benchmark")
			if i := strings.LastIndexByte(name, '-'); i > 0 {
				if _, err := strconv.Atoi(name[i+1:]); err == nil {
					name = name[:i]
				}
			}
			b := byKey[pkg+" "+name]
			if b == nil {
				b = &benchmark{pkg: pkg, name: name, values: map[string][]float64{}}
				byKey[pkg+" "+name] = b
				res.benchmarks = append(res.benchmarks, b)
			}
			b.runs++
			for i := 2; i < len(f); i += 2 {
				v, err := strconv.ParseFloat(f[i], 64)
				if err != nil {
					return nil, fmt.Errorf("%s: value %q: %v", f[0], f[i], err)
				}
				if _, seen := b.values[f[i+1]]; !seen {
					b.units = append(b.units, f[i+1])
				}
				b.values[f[i+1]] = append(b.values[f[i+1]], v)
			}
		}
	}
	return res, sc.Err()
}

// row is one line of the table.
type row struct {
	pkg, name                             string
	ns, p50, p99, bytes, allocs, requests string
	ratio                                 string
	other                                 string
	runs                                  int
}

// parts returns the parts of a paired benchmark (PART-ns/op), in the
// order the benchmark reported them.
func (b *benchmark) parts() []string {
	var ps []string
	for _, u := range b.units {
		if p, ok := strings.CutSuffix(u, "-ns/op"); ok && !strings.HasSuffix(p, "-p50") && !strings.HasSuffix(p, "-p99") {
			ps = append(ps, p)
		}
	}
	return ps
}

// rows builds the table of res.
func rows(res *results) []row {
	byName := map[string]*benchmark{}
	for _, b := range res.benchmarks {
		byName[b.pkg+" "+b.name] = b
	}
	var out []row
	for _, b := range res.benchmarks {
		if parts := b.parts(); len(parts) >= 2 {
			out = append(out, pairedRows(b, parts)...)
			continue
		}
		r := row{pkg: b.pkg, name: b.name, runs: b.runs}
		r.ns = b.format("ns/op", duration)
		r.p50 = b.format("p50-ns", duration)
		r.p99 = b.format("p99-ns", duration)
		r.bytes = b.format("B/op", count)
		r.allocs = b.format("allocs/op", count)
		r.requests = b.format("requests/op", ratio)
		var other []string
		for _, u := range b.units {
			switch u {
			case "ns/op", "p50-ns", "p99-ns", "B/op", "allocs/op", "requests/op":
			default:
				if name, ok := strings.CutSuffix(u, "-ns"); ok { // a time: holder-ns, spread-p99-ns
					other = append(other, b.format(u, duration)+" "+name)
					continue
				}
				other = append(other, b.format(u, ratio)+" "+u)
			}
		}
		r.other = strings.Join(other, ", ")
		var ratios []string
		for _, f := range floors(b, byName) {
			if f == b {
				ratios = []string{"floor"}
				break
			}
			x, ok1 := b.median("ns/op")
			y, ok2 := f.median("ns/op")
			if ok1 && ok2 && y > 0 {
				ratios = append(ratios, fmt.Sprintf("%.2f× %s", x/y, f.name))
			}
		}
		r.ratio = strings.Join(ratios, ", ")
		out = append(out, r)
	}
	return out
}

// floors returns the floors of b in byName: b itself when it is one.
func floors(b *benchmark, byName map[string]*benchmark) []*benchmark {
	if strings.HasSuffix(b.name, "Floor") {
		return []*benchmark{b}
	}
	parent, sub, ok := cutLast(b.name)
	if !ok {
		return nil
	}
	if strings.HasSuffix(parent, "Floor") || strings.HasPrefix(sub, "raw-") {
		return []*benchmark{b}
	}
	var fs, lone []*benchmark
	for _, f := range byName {
		if f.pkg != b.pkg {
			continue
		}
		fp, fsub, ok := cutLast(f.name)
		switch {
		case ok && ((strings.HasSuffix(fp, "Floor") && fsub == sub) || (fp == parent && strings.HasPrefix(fsub, "raw-"))):
			fs = append(fs, f)
		case !ok && strings.HasSuffix(f.name, "Floor") && sub == "fresh":
			lone = append(lone, f)
		}
	}
	if len(fs) == 0 {
		fs = lone
	}
	sort.Slice(fs, func(i, j int) bool { return fs[i].name < fs[j].name })
	return fs
}

// cutLast splits a benchmark name at its last "/".
func cutLast(name string) (parent, sub string, ok bool) {
	i := strings.LastIndexByte(name, '/')
	if i < 0 {
		return name, "", false
	}
	return name[:i], name[i+1:], true
}

// pairedRows is one row per part of a paired benchmark.
func pairedRows(b *benchmark, parts []string) []row {
	var out []row
	for _, p := range parts {
		r := row{pkg: b.pkg, name: b.name + " · " + p, runs: b.runs}
		r.ns = b.format(p+"-ns/op", duration)
		r.p50 = b.format(p+"-p50-ns", duration)
		r.p99 = b.format(p+"-p99-ns", duration)
		r.requests = b.format(p+"-requests/op", ratio)
		var ratios []string
		for _, f := range parts {
			x, ok := b.median(p + "/" + f)
			if !ok {
				continue
			}
			s := fmt.Sprintf("%.2f× %s", x, f)
			p50, ok1 := b.median(p + "-p50-ns")
			f50, ok2 := b.median(f + "-p50-ns")
			if ok1 && ok2 && f50 > 0 {
				s += fmt.Sprintf(" (p50 %.2f×)", p50/f50)
			}
			ratios = append(ratios, s)
		}
		if len(ratios) == 0 && isFloorPart(b, p, parts) {
			ratios = []string{"floor"}
		}
		r.ratio = strings.Join(ratios, ", ")
		out = append(out, r)
	}
	return out
}

// isFloorPart reports whether another part of b is measured against p.
func isFloorPart(b *benchmark, p string, parts []string) bool {
	for _, o := range parts {
		if _, ok := b.values[o+"/"+p]; ok {
			return true
		}
	}
	return false
}

// Formats of a value in the table.
const (
	duration = iota
	count
	ratio
)

// format is the median of unit in the given format, or "" when b did not
// report it.
func (b *benchmark) format(unit string, kind int) string {
	v, ok := b.median(unit)
	if !ok {
		return ""
	}
	switch kind {
	case duration:
		return formatDuration(v)
	case count:
		return strconv.FormatFloat(v, 'f', 0, 64)
	default:
		return strconv.FormatFloat(v, 'g', 3, 64)
	}
}

// formatDuration writes ns with three significant digits in ns, µs or ms.
func formatDuration(ns float64) string {
	switch {
	case ns >= 1e6:
		return strconv.FormatFloat(ns/1e6, 'g', 3, 64) + " ms"
	case ns >= 1e3:
		return strconv.FormatFloat(ns/1e3, 'g', 3, 64) + " µs"
	default:
		return strconv.FormatFloat(ns, 'g', 3, 64) + " ns"
	}
}

// render writes the section: heading, machine, command, notes, table.
func render(w io.Writer, res *results, title, cmd string, m machine, now time.Time) {
	fmt.Fprintf(w, "## %s\n\n", title)
	cpu := m.CPU
	if cpu == "" {
		cpu = res.cpu
	}
	fmt.Fprintf(w, "- machine: %s/%s, %s, %d CPUs\n", m.GOOS, m.GOARCH, cpu, m.NProc)
	fmt.Fprintf(w, "- date: %s\n", now.Format("2006-01-02 15:04 MST"))
	if cmd != "" {
		fmt.Fprintf(w, "- reproduce: `%s`\n", cmd)
	}
	fmt.Fprintln(w)
	for _, n := range res.notes {
		fmt.Fprintf(w, "%s\n\n", n)
	}
	fmt.Fprintln(w, "Every figure is the median of the benchmark's runs (`runs`). A ratio compares with a floor measured in the same run: `floor` marks the floor itself; a row named `X · part` is one part of a paired benchmark, which times every part within each iteration so that the load of the machine cancels out of its ratios; its ratio is the median of the runs' ratios, not the ratio of the medians shown. On a shared machine read the ratios, not the absolute times, and prefer the paired rows: a ratio between two separate benchmarks (`0.9× Name`) drifts with the load between them.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| package | benchmark | runs | ns/op | p50 | p99 | B/op | allocs/op | requests/op | vs floor | other |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range rows(res) {
		fmt.Fprintf(w, "| %s | %s | %d | %s | %s | %s | %s | %s | %s | %s | %s |\n",
			shortPkg(r.pkg), r.name, r.runs, r.ns, r.p50, r.p99, r.bytes, r.allocs, r.requests, r.ratio, r.other)
	}
}

// shortPkg drops the module path from a package path.
func shortPkg(pkg string) string {
	return strings.TrimPrefix(strings.TrimPrefix(pkg, "github.com/oncely/oncely"), "/")
}

// replaceSection returns doc with section name set to body: in place of
// the section's markers and what is between them, or appended.
func replaceSection(doc []byte, name string, body []byte) []byte {
	begin := []byte("<!-- begin " + name + " -->\n")
	end := []byte("<!-- end " + name + " -->\n")
	section := append(append(append([]byte{}, begin...), body...), end...)
	i := bytes.Index(doc, begin)
	j := bytes.Index(doc, end)
	if i >= 0 && j > i {
		return append(append(append([]byte{}, doc[:i]...), section...), doc[j+len(end):]...)
	}
	if len(doc) == 0 {
		doc = []byte("# Benchmarks\n\nWritten by `make bench` and `make bench-peers` (scripts/benchreport); do not edit the sections by hand.\n")
	}
	out := append([]byte{}, doc...)
	if !bytes.HasSuffix(out, []byte("\n")) {
		out = append(out, '\n')
	}
	return append(append(out, '\n'), section...)
}
