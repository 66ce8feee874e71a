package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	"github.com/mattn/go-isatty"
	"github.com/spf13/cobra"
)

func newDemoCmd() *cobra.Command {
	var (
		o      demoOptions
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run a seeded agent workload under faults, with a plain retrying client and with oncely",
		Long: `Run a seeded agent workload twice against the bundled fake providers
(Stripe payments and refunds, mail replies, CRM contacts, orders through an
IETF Idempotency-Key API), started in-process on loopback, with random
faults: timeouts after success, 5xx before and after the commit, dropped
connections; and the agent's own repeats: crashes and resumes, parallel
resumes, double approvals, the model calling again with rephrased text and
drifted types.

Once with a plain retrying HTTP client (what most agents do today), once
through oncely with a SQLite ledger. Effects, duplicates and lost actions
are counted from the fakes' journals of what they committed; replays,
reconciliations and uncertain records come from oncely's results and
ledger. Once the outage ends, both agents retry what they believe failed,
and oncely's sweeper settles what is stuck.

Exit status 1 if oncely's side shows a duplicate or a lost action, or if
a fake refused a request as invalid on either side (a defect of the demo:
its counts would not show what faults and repeats do).`,
		Args: cobra.NoArgs,
	}
	f := cmd.Flags()
	f.IntVar(&o.runs, "runs", defaultDemo.runs, "agent runs per side")
	f.Int64Var(&o.seed, "seed", defaultDemo.seed, "seed of the workload and of the faults")
	f.Float64Var(&o.faults, "faults", defaultDemo.faults, "fraction (0 to 1) of provider requests that get a random fault")
	f.StringVar(&o.dir, "dir", "", "keep the SQLite ledger oncely.db in this directory, for oncely ledger (its times are the demo's simulated clock); default: a temporary directory, removed afterwards")
	f.BoolVar(&asJSON, "json", false, "print JSON")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if o.runs < 1 {
			return usageErr("--runs is at least 1", "--runs %d", o.runs)
		}
		if o.faults < 0 || o.faults > 1 {
			return usageErr("--faults is a fraction between 0 and 1", "--faults %v", o.faults)
		}
		temporary := o.dir == ""
		if temporary {
			dir, err := os.MkdirTemp("", "oncely-demo-")
			if err != nil {
				return opErr(err, "set --dir")
			}
			defer os.RemoveAll(dir)
			o.dir = dir
		} else if st, err := os.Stat(o.dir); err != nil || !st.IsDir() {
			return usageErr("--dir names an existing directory", "--dir %s is not a directory", o.dir)
		}
		p := newProgress(cmd.ErrOrStderr(), o.runs)
		res, err := runDemo(cmd.Context(), o, p.step)
		if err != nil {
			return opErr(err, "")
		}
		if asJSON {
			if err := writeJSON(cmd.OutOrStdout(), res); err != nil {
				return opErr(err, "")
			}
		} else {
			printDemo(cmd.OutOrStdout(), res, temporary)
		}
		return res.check(o)
	}
	return cmd
}

// check reports what makes a run of the demo wrong: a duplicate or a lost
// action on oncely's side, or a request the fakes refused on either side
// (the workload sends something the provider never accepts, and the
// counts would teach the wrong lesson).
func (r *demoResult) check(o demoOptions) error {
	if n := r.Naive.Refused + r.Oncely.Refused; n > 0 {
		return opErr(fmt.Errorf("demo defect: the fakes refused %d requests; %s", n, strings.Join(r.Refusals, "; ")),
			"the workload sends a request the provider refuses; fix it in cmd/oncely/workload.go")
	}
	if r.Oncely.Duplicates+r.Oncely.Lost > 0 {
		return opErr(fmt.Errorf("oncely's side shows %d duplicates and %d lost actions", r.Oncely.Duplicates, r.Oncely.Lost),
			fmt.Sprintf("rerun with --seed %d --runs %d --dir DIR and inspect the ledger with 'oncely ledger ls'", o.seed, o.runs))
	}
	return nil
}

// demoColumns are the columns of the demo's table, as the README shows it.
var demoColumns = []string{"PROVIDER", "SIDE", "INTENDED", "EFFECTS", "DUPLICATES", "LOST", "REFUSED", "REPLAYS", "RECONCILIATIONS", "UNCERTAIN LEFT"}

// defaultDemo is what 'oncely demo' and 'make demo' run, and the README shows.
var defaultDemo = demoOptions{runs: 200, seed: 1, faults: 0.15}

// printDemo prints the result; temporary: its ledger is removed at exit.
func printDemo(w io.Writer, r *demoResult, temporary bool) {
	fmt.Fprintf(w, "%d agent runs per side, seed %d, %.0f%% of provider requests faulted\n", r.Runs, r.Seed, 100*r.Faults)
	if temporary {
		fmt.Fprintf(w, "oncely's ledger: a temporary SQLite file, removed at exit (--dir DIR keeps it, for 'oncely ledger ls --ledger sqlite://DIR/oncely.db')\n\n")
	} else {
		fmt.Fprintf(w, "oncely's ledger: %s (see it with 'oncely ledger ls --ledger %s')\n\n", r.Ledger, r.Ledger)
	}
	demoTable(w, r)
	fmt.Fprintf(w, "\neffects, duplicates and lost: from the fakes' journals; refused: requests a fake refused as invalid (a defect of the demo);\n"+
		"replays, reconciliations, uncertain: oncely's results and ledger (%.1fs)\n", r.Seconds)
}

// demoTable prints the table of r, as the README shows it.
func demoTable(w io.Writer, r *demoResult) {
	c := coloursFor(w)
	t := newTable(demoColumns...)
	num := func(n int, bad bool) cell {
		cl := cell{text: fmt.Sprint(n)}
		switch {
		case bad && n > 0:
			cl.colour = red
		case bad:
			cl.colour = green
		}
		return cl
	}
	rows := append(r.Rows, demoRow{Provider: "total", Naive: r.Naive, Oncely: r.Oncely})
	for _, row := range rows {
		t.rowCells(cell{text: row.Provider}, cell{text: "naive"}, num(row.Naive.Intended, false), num(row.Naive.Effects, false),
			num(row.Naive.Duplicates, true), num(row.Naive.Lost, true), num(row.Naive.Refused, true), cell{text: "-"}, cell{text: "-"}, cell{text: "-"})
		t.rowCells(cell{text: ""}, cell{text: "oncely", colour: bold}, num(row.Oncely.Intended, false), num(row.Oncely.Effects, false),
			num(row.Oncely.Duplicates, true), num(row.Oncely.Lost, true), num(row.Oncely.Refused, true), num(row.Oncely.Replays, false),
			num(row.Oncely.Reconciled, false), num(row.Oncely.Uncertain, false))
	}
	t.write(w, c)
}

// progress shows the runs done: a bar on a terminal, a line per tenth
// otherwise.
type progress struct {
	mu    sync.Mutex
	w     io.Writer
	tty   bool
	total int
	done  map[string]int
	shown map[string]int
}

func newProgress(w io.Writer, runs int) *progress {
	f, ok := w.(*os.File)
	return &progress{w: w, tty: ok && isatty.IsTerminal(f.Fd()), total: runs, done: map[string]int{}, shown: map[string]int{}}
}

func (p *progress) step(side string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done[side]++
	n := p.done[side]
	if p.tty {
		const width = 30
		fill := width * n / p.total
		fmt.Fprintf(p.w, "\r%-8s [%s%s] %d/%d runs", side, strings.Repeat("#", fill), strings.Repeat(".", width-fill), n, p.total)
		if n == p.total {
			fmt.Fprintln(p.w)
		}
		return
	}
	if tenth := 10 * n / p.total; tenth > p.shown[side] {
		p.shown[side] = tenth
		fmt.Fprintf(p.w, "demo: %s %d/%d runs\n", side, n, p.total)
	}
}
