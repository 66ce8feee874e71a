// Command testsummary reads `go test -json` events on standard input,
// writes the plain verbose log to the file named by its argument, and
// prints a short report: package results, the lines tests address to the
// reader ("chaos:", "faultpoints:", "bench:"), each failing leaf test with its own first
// error line, the skipped tests with their reason, and a closing
// "N passed, N failed, N skipped". It exits 1 when any test or package
// failed.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
)

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Action  string
	Package string
	Test    string
	Output  string
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
	defer log.Close()
	w := bufio.NewWriter(log)
	defer w.Flush()

	tests := map[string]*test{}
	var order []string
	var pkgFailed []string
	var notes []string // package lines and reader-addressed lines
	pkgOut := map[string][]string{}
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 64<<20)
	for in.Scan() {
		var ev event
		if err := json.Unmarshal(in.Bytes(), &ev); err != nil {
			// Not an event (a build error printed by go test): keep it.
			fmt.Fprintln(w, in.Text())
			notes = append(notes, in.Text())
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
				if strings.HasPrefix(line, "ok ") || strings.HasPrefix(line, "FAIL") ||
					strings.HasPrefix(line, "panic:") {
					notes = append(notes, line)
				}
			case "fail":
				pkgFailed = append(pkgFailed, ev.Package)
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
				notes = append(notes, trimmed)
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
	for _, n := range notes {
		fmt.Println(n)
	}
	if len(skips) > 0 {
		fmt.Println("skipped tests:")
		fmt.Println(strings.Join(skips, "\n"))
	}
	if len(failures) > 0 {
		fmt.Printf("failing tests (full log: %s):\n%s\n", os.Args[1], strings.Join(failures, "\n"))
	}
	sort.Strings(pkgFailed)
	for _, p := range pkgFailed {
		if failed == 0 || !hasFailure(tests, p) {
			// A package that failed without a failing test: a build error,
			// a panic in TestMain, a timeout. Show its own last lines.
			out := pkgOut[p]
			fmt.Printf("package %s failed:\n  %s\n", p, strings.Join(out[max(0, len(out)-20):], "\n  "))
		}
	}
	fmt.Printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped)
	if failed > 0 || len(pkgFailed) > 0 {
		w.Flush()
		os.Exit(1)
	}
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
	return strings.TrimPrefix(pkg, "github.com/idemkit/idemkit/")
}
