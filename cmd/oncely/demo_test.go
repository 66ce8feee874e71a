package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

var updateReadme = flag.Bool("update-readme", false, "run the default demo and write its table into the README (make readme-demo)")

// readmePath is the repository's README, from this package's directory.
var readmePath = filepath.Join("..", "..", "README.md")

// TestREADMEDemoTable checks the README's demo table against the demo:
// its columns and providers, the intended actions of the default seed,
// and the invariants every run keeps (oncely: no duplicate, nothing
// lost; no refusal on either side; the naive side duplicates). With
// -update-readme it first writes the table of a run of the current code.
func TestREADMEDemoTable(t *testing.T) {
	if *updateReadme {
		writeReadmeTable(t)
	}
	b, err := os.ReadFile(readmePath)
	if err != nil {
		t.Fatal(err)
	}
	rows := readmeTable(t, string(b))

	// The intended actions come from the plan alone.
	intended := map[string]int{}
	for _, acts := range plan(defaultDemo.seed, defaultDemo.runs) {
		for _, a := range acts {
			intended[a.sc.label]++
			intended["total"]++
		}
	}
	var labels []string
	for _, sc := range scenarios {
		labels = append(labels, sc.label)
	}
	labels = append(labels, "total")
	if len(rows) != 2*len(labels) {
		t.Fatalf("the README's table has %d rows, want naive and oncely for %v", len(rows), labels)
	}
	sums := map[string][]int{}
	for i, label := range labels {
		for j, side := range sides {
			row := rows[2*i+j]
			want := []string{label, side}
			if j == 1 {
				want[0] = ""
			}
			if row[0] != want[0] || row[1] != want[1] {
				t.Errorf("row %d is %q %q, want %q %q", 2*i+j+1, row[0], row[1], want[0], want[1])
				continue
			}
			n := func(col string) int {
				v, err := strconv.Atoi(row[slices.Index(demoColumns, col)])
				if err != nil {
					t.Errorf("%s %s %s: %v", label, side, col, err)
				}
				return v
			}
			name := label + " " + side
			if got := n("INTENDED"); got != intended[label] {
				t.Errorf("%s: intended %d, the plan of seed %d has %d", name, got, defaultDemo.seed, intended[label])
			}
			if e, in, l, d := n("EFFECTS"), n("INTENDED"), n("LOST"), n("DUPLICATES"); e != in-l+d {
				t.Errorf("%s: %d effects, but %d intended - %d lost + %d duplicates", name, e, in, l, d)
			}
			if n("REFUSED") != 0 {
				t.Errorf("%s: refusals in the README's table", name)
			}
			if side == "naive" {
				if n("DUPLICATES") == 0 {
					t.Errorf("%s: no duplicates", name)
				}
				for _, col := range demoColumns[slices.Index(demoColumns, "REPLAYS"):] {
					if row[slices.Index(demoColumns, col)] != "-" {
						t.Errorf("%s: %s is %q, want -", name, col, row[slices.Index(demoColumns, col)])
					}
				}
			} else if n("DUPLICATES") != 0 || n("LOST") != 0 {
				t.Errorf("%s: duplicates or lost actions", name)
			}
			// The total row is the sum of the others.
			for c, col := range demoColumns[2:] {
				if row[c+2] == "-" {
					continue
				}
				v := n(col)
				if label == "total" {
					if s := sums[side][c]; s != v {
						t.Errorf("total %s %s is %d, the rows sum to %d", side, col, v, s)
					}
					continue
				}
				if sums[side] == nil {
					sums[side] = make([]int, len(demoColumns)-2)
				}
				sums[side][c] += v
			}
		}
	}
}

// readmeTable returns the cells of the README's demo table, a row per
// line, cut at the header's column starts.
func readmeTable(t *testing.T, readme string) [][]string {
	t.Helper()
	header := strings.Join(demoColumns, "")
	lines := strings.Split(readme, "\n")
	start := slices.IndexFunc(lines, func(l string) bool { return strings.ReplaceAll(l, " ", "") == strings.ReplaceAll(header, " ", "") })
	if start < 0 {
		t.Fatalf("the README has no demo table with the columns %q", demoColumns)
	}
	var cols []int
	for _, c := range demoColumns {
		i := strings.Index(lines[start], c)
		if i < 0 || (len(cols) > 0 && i <= cols[len(cols)-1]) {
			t.Fatalf("README table header %q: column %q out of place", lines[start], c)
		}
		cols = append(cols, i)
	}
	var rows [][]string
	for _, l := range lines[start+1:] {
		if strings.HasPrefix(l, "```") {
			return rows
		}
		row := make([]string, len(cols))
		for i, from := range cols {
			to := len(l)
			if i+1 < len(cols) {
				to = min(cols[i+1], len(l))
			}
			if from < to {
				row[i] = strings.TrimSpace(l[from:to])
			}
		}
		rows = append(rows, row)
	}
	t.Fatal("the README's demo table does not end")
	return nil
}

// writeReadmeTable runs the default demo and writes its table, and its
// time, into the README.
func writeReadmeTable(t *testing.T) {
	t.Helper()
	o := defaultDemo
	o.dir = t.TempDir()
	res, err := runDemo(context.Background(), o, func(string) {})
	if err != nil {
		t.Fatal(err)
	}
	if err := res.check(o); err != nil {
		t.Fatal(err)
	}
	var table bytes.Buffer
	demoTable(&table, res)
	b, err := os.ReadFile(readmePath)
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	old := readmeTable(t, readme) // checks that the table is there
	lines := strings.Split(readme, "\n")
	start := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, "PROVIDER ") })
	out := slices.Concat(lines[:start], strings.Split(strings.TrimSuffix(table.String(), "\n"), "\n"), lines[start+1+len(old):])
	readme = strings.Join(out, "\n")
	// The demo's own time, in the sentence that introduces the table.
	secs := regexp.MustCompile(`\(the demo itself \d+(\s+)s`)
	if !secs.MatchString(readme) {
		t.Fatal("the README does not say how long the demo takes ('(the demo itself N s')")
	}
	readme = secs.ReplaceAllString(readme, fmt.Sprintf("(the demo itself %d${1}s", int(res.Seconds+0.5)))
	if err := os.WriteFile(readmePath, []byte(readme), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote the table of a %.1fs run into %s", res.Seconds, readmePath)
}

// TestNaiveRefusalIsADefect sends a request the fake Stripe refuses (a
// confirmed PaymentIntent without automatic_payment_methods or
// return_url) through the naive client, and checks that the demo names
// such a refusal and fails.
func TestNaiveRefusalIsADefect(t *testing.T) {
	t.Parallel()
	conns := newConnTracker()
	set, err := startFakes(fakeConfig{seed: 1, conns: conns})
	if err != nil {
		t.Fatal(err)
	}
	defer set.close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	nc := newNaiveClient(set, conns, recoveryTimeout).on("stripe")
	err = nc.form(ctx, "/v1/payment_intents", url.Values{
		"amount": {"1000"}, "currency": {"eur"}, "payment_method": {"pm_card_visa"}, "confirm": {"true"},
	})
	var r *refusal
	if !errors.As(err, &r) || !strings.Contains(err.Error(), "return_url") {
		t.Fatalf("naive request without automatic_payment_methods: %v, want a refusal naming return_url", err)
	}

	res := &demoResult{Naive: tally{Refused: 1}, Refusals: []string{"naive stripe payments: " + err.Error()}}
	cerr := res.check(defaultDemo)
	var ce *cliError
	if !errors.As(cerr, &ce) || ce.code != exitOperational || !strings.Contains(cerr.Error(), "demo defect") ||
		!strings.Contains(cerr.Error(), "naive stripe payments: fake stripe refused POST /v1/payment_intents") {
		t.Errorf("check of a run with a refusal: %v", cerr)
	}
	if err := (&demoResult{}).check(defaultDemo); err != nil {
		t.Errorf("check of a clean run: %v", err)
	}
}

// TestDemoBuild builds oncely as make demo does (the tag oncely_demo): it
// links no backend but SQLite, nor the MCP SDK, and its demo runs and
// says how to keep the ledger it removes at exit.
func TestDemoBuild(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-tags", "oncely_demo", "-deps", ".").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, heavy := range []string{"github.com/aws/", "github.com/jackc/pgx", "github.com/redis/go-redis", "github.com/modelcontextprotocol/", "anthropic"} {
		if strings.Contains(string(out), heavy) {
			t.Errorf("the demo's build links %s", heavy)
		}
	}
	demoBin := filepath.Join(t.TempDir(), "oncely-demo")
	if out, err := exec.Command("go", "build", "-tags", "oncely_demo", "-o", demoBin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build -tags oncely_demo: %v\n%s", err, out)
	}
	r := runProgram(t, demoBin, nil, "demo", "--runs", "2", "--seed", "3")
	if r.code != 0 || !strings.Contains(r.stdout, "removed at exit (--dir DIR keeps it") {
		t.Errorf("demo: exit %d, stdout:\n%s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	dir := t.TempDir()
	r = runProgram(t, demoBin, nil, "demo", "--runs", "1", "--dir", dir)
	if want := "'oncely ledger ls --ledger sqlite://" + filepath.Join(dir, "oncely.db") + "'"; r.code != 0 || !strings.Contains(r.stdout, want) {
		t.Errorf("demo --dir: exit %d, want %s in:\n%s", r.code, want, r.stdout)
	}
	runProgram(t, demoBin, nil, "ledger", "ls").wantError(t, exitUsage, `unknown command "ledger"`)
}
