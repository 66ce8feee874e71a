// Command testsummary reads `go test -json` events on standard input,
// writes the plain verbose log to the file named by its argument, and
// prints a short report. While the tests run: a line per package as it
// finishes, with its time, and the lines tests address to the reader
// ("chaos:", "faultpoints:", "bench:"). At the end: each failing leaf test with its own
// first error lines, the skipped tests with their reason, the packages
// that failed without a failing test, the whole run's time, and a closing
// "N passed, N failed, N skipped". It exits 1 when any test or package
// failed.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"
)

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Action  string
	Package string
	Test    string
	Output  string
	Elapsed float64 // seconds, on a package's or test's pass, fail or skip
}

type test struct {
	pkg, name string
	action    string // pass, fail, skip ("" while running)
	output    []string
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: go test -json ... | testsummary LOGFILE")
		os.Exit(2)
	}
	log, err := os.Create(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "testsummary:", err)
		os.Exit(2)
	}
	code := summarize(os.Stdin, os.Stdout, log, os.Args[1], time.Now)
	if err := log.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "testsummary:", err)
		code = max(code, 1)
	}
	os.Exit(code)
}

// summarize reads the events from in, writes the verbose log to logFile
// (named logName in the report) and the report to out, and returns the
// exit status. Each line of the report is written as soon as it is known.
func summarize(in io.Reader, out io.Writer, logFile io.Writer, logName string, now func() time.Time) int {
	start := now()
	w := bufio.NewWriter(logFile)
	defer w.Flush()

	tests := map[string]*test{}
	var order []string
	var pkgFailed []string
	pkgOut := map[string][]string{}
	packages := 0
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var ev event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			// Not an event (a build error printed by go test): keep it.
			fmt.Fprintln(w, sc.Text())
			fmt.Fprintln(out, sc.Text())
			continue
		}
		if ev.Output != "" {
			w.WriteString(ev.Output)
		}
		if ev.Test == "" {
			switch ev.Action {
			case "output":
				line := strings.TrimRight(ev.Output, "\n")
				pkgOut[ev.Package] = append(pkgOut[ev.Package], line)
				if strings.HasPrefix(line, "panic:") {
					fmt.Fprintln(out, line)
				}
			case "pass", "fail":
				// A package finished: say so now, with its time.
				packages++
				result := "ok  "
				if ev.Action == "fail" {
					result = "FAIL"
					pkgFailed = append(pkgFailed, ev.Package)
				}
				fmt.Fprintf(out, "%s %-44s %7.1fs\n", result, short(ev.Package), ev.Elapsed)
			}
			continue
		}
		id := ev.Package + " " + ev.Test
		t := tests[id]
		if t == nil {
			t = &test{pkg: ev.Package, name: ev.Test}
			tests[id] = t
			order = append(order, id)
		}
		switch ev.Action {
		case "output":
			line := strings.TrimRight(ev.Output, "\n")
			t.output = append(t.output, line)
			if trimmed := strings.TrimSpace(line); strings.HasPrefix(trimmed, "chaos:") || strings.HasPrefix(trimmed, "faultpoints:") || strings.HasPrefix(trimmed, "bench:") {
				fmt.Fprintln(out, trimmed)
			}
		case "pass", "fail", "skip":
			t.action = ev.Action
		}
	}

	// A leaf test has no subtests; its failure carries the real cause.
	parent := map[string]bool{}
	for _, id := range order {
		t := tests[id]
		if i := strings.LastIndex(t.name, "/"); i >= 0 {
			parent[t.pkg+" "+t.name[:i]] = true
		}
	}
	var passed, failed, skipped int
	var failures, skips []string
	for _, id := range order {
		t := tests[id]
		switch t.action {
		case "pass":
			passed++
		case "fail":
			failed++
			if !parent[id] {
				failures = append(failures, fmt.Sprintf("  %s %s:\n%s", short(t.pkg), t.name, own(t.output, 8)))
			}
		case "skip":
			skipped++
			skips = append(skips, fmt.Sprintf("  %s %s:\n%s", short(t.pkg), t.name, own(t.output, 2)))
		}
	}
	if len(skips) > 0 {
		fmt.Fprintln(out, "skipped tests:")
		fmt.Fprintln(out, strings.Join(skips, "\n"))
	}
	if len(failures) > 0 {
		fmt.Fprintf(out, "failing tests (full log: %s):\n%s\n", logName, strings.Join(failures, "\n"))
	}
	sort.Strings(pkgFailed)
	for _, p := range pkgFailed {
		if failed == 0 || !hasFailure(tests, p) {
			// A package that failed without a failing test: a build error,
			// a panic in TestMain, a timeout. Show its own last lines.
			lines := pkgOut[p]
			fmt.Fprintf(out, "package %s failed:\n  %s\n", p, strings.Join(lines[max(0, len(lines)-20):], "\n  "))
		}
	}
	fmt.Fprintf(out, "%d packages in %s\n", packages, now().Sub(start).Round(time.Second))
	fmt.Fprintf(out, "%d passed, %d failed, %d skipped\n", passed, failed, skipped)
	if failed > 0 || len(pkgFailed) > 0 {
		return 1
	}
	return 0
}

func hasFailure(tests map[string]*test, pkg string) bool {
	for _, t := range tests {
		if t.pkg == pkg && t.action == "fail" {
			return true
		}
	}
	return false
}

// own returns up to n lines a test printed itself (t.Error, t.Log, a
// panic), without the runner's framing lines, so that a failure's cause
// is shown under its own test even when parallel tests interleave.
// test2json does not tell t.Log from t.Error; a failing test's own lines
// are few and the error is among them.
func own(lines []string, n int) string {
	var b strings.Builder
	for _, l := range lines {
		s := strings.TrimSpace(l)
		if s == "" || strings.HasPrefix(s, "=== ") || strings.HasPrefix(s, "--- ") {
			continue
		}
		if n == 0 {
			b.WriteString("      ...\n")
			break
		}
		n--
		b.WriteString("      " + s + "\n")
	}
	if b.Len() == 0 {
		return "      (no output)"
	}
	return strings.TrimRight(b.String(), "\n")
}

func short(pkg string) string {
	return strings.TrimPrefix(pkg, "github.com/oncely/oncely/")
}
