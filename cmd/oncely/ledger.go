//go:build !oncely_demo

package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/user"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/oncely/oncely/internal/clip"
	"github.com/oncely/oncely/internal/listmerge"
	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/ledger/ledgerpg"
	"github.com/oncely/oncely/ledger/ledgerurl"
)

// EnvLedger names the default ledger URL.
const EnvLedger = "ONCELY_LEDGER"

// ledgerFlag adds --ledger to cmd and returns where its value lands.
func ledgerFlag(cmd *cobra.Command) *string {
	var url string
	envString(cmd.Flags(), &url, "ledger", EnvLedger, ledgerurl.Default, "ledger URL: "+urlForms) // a URL may carry a password
	return &url
}

// urlForms are the forms of a ledger URL.
const urlForms = "sqlite://path/oncely.db, dynamodb://TABLE?region=R[&endpoint=URL], postgres://user@host/db[?schema=S&table=T] or redis://host:6379/0[?prefix=P&wait=N&durability=D]"

// openLedger opens the ledger at raw; create lets a SQLite file be made.
func openLedger(ctx context.Context, raw string, create bool) (*ledgerurl.Ledger, error) {
	l, err := ledgerurl.Open(ctx, raw, &ledgerurl.Config{Create: create})
	if err != nil {
		return nil, ledgerErr(err)
	}
	return l, nil
}

// ledgerErr classifies an error of a ledger operation.
func ledgerErr(err error) error {
	switch {
	case errors.As(err, new(*ledgerpg.TableError)):
		return &cliError{code: exitUsage, err: err, hint: "check ?schema= and ?table=; 'oncely ledger init --ledger URL' creates the table"}
	case errors.Is(err, ledgerurl.ErrConfig):
		return &cliError{code: exitUsage, err: err, hint: "a ledger URL is " + urlForms}
	case errors.Is(err, ledger.ErrInvalid):
		return &cliError{code: exitUsage, err: err, hint: "check the arguments"}
	case errors.Is(err, ledger.ErrNotFound):
		return opErr(err, "list the records with 'oncely ledger ls'")
	case errors.Is(err, ledger.ErrNotResolvable):
		return opErr(err, "only an uncertain record, or a pending one whose lease ran out, can be resolved")
	case errors.Is(err, ledger.ErrTooEarly):
		return opErr(err, "wait until then and check the provider again; --force settles it failed now, and if the request does commit the next call acts a second time")
	case errors.Is(err, ledger.ErrNotOwner):
		return opErr(err, "someone else acted on the record meanwhile; look at it again with 'oncely ledger show'")
	case errors.Is(err, ledger.ErrUnavailable):
		return opErr(err, "check that the ledger is reachable and the credentials are valid")
	}
	return opErr(err, "check the ledger URL, and that the backend is reachable and the credentials are valid")
}

// withLedger runs fn on the ledger named by *url, closing it afterwards.
func withLedger(cmd *cobra.Command, url string, create bool, fn func(ctx context.Context, l *ledgerurl.Ledger) error) error {
	ctx := cmd.Context()
	l, err := openLedger(ctx, url, create)
	if err != nil {
		return err
	}
	defer l.Close()
	err = fn(ctx, l)
	// Name the ledger in every error of an operation on it.
	var ce *cliError
	if errors.As(err, &ce) && !strings.Contains(ce.err.Error(), l.URL) {
		ce.err = fmt.Errorf("ledger %s: %w", l.URL, ce.err)
	}
	return err
}

func newLedgerCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "ledger",
		Short: "Inspect and settle the records of a ledger",
		RunE:  groupRunE,
	}
	cmd.AddCommand(newLedgerInitCmd(), newLedgerLsCmd(), newLedgerShowCmd(), newLedgerStuckCmd(), newLedgerPurgeCmd(), newLedgerResolveCmd())
	return cmd
}

func newLedgerInitCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "init",
		Short: "Create the ledger: SQLite file, PostgreSQL schema and table, or DynamoDB table (Redis needs none)",
		Long: `Create the ledger the URL names, or bring it to this version, and say
what was done: the SQLite file and its schema, the PostgreSQL schema and
table (migrated), or the DynamoDB table with its index and TTL. Redis needs
nothing. It is idempotent. Every other command refuses a ledger that does
not exist.

A dynamodb:// URL's index is write-sharded (64 shards; shards=N for
another number): an existing table made with the unsharded index
(shards=unsharded) gets the sharded one and its records are filed under
it; the unsharded index stays until you delete it (init says how), and
processes on the unsharded layout keep working.`,
		Args: cobra.NoArgs,
	}
	url := ledgerFlag(cmd)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		return withLedger(cmd, *url, true, func(ctx context.Context, l *ledgerurl.Ledger) error {
			did, err := l.Init(ctx)
			if err != nil {
				return ledgerErr(err)
			}
			if did != "" {
				fmt.Fprintln(cmd.OutOrStdout(), did)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "ledger %s is ready\n", l.URL)
			return nil
		})
	}
	return cmd
}

// recordJSON is a record as --json prints it.
type recordJSON struct {
	Key         string          `json:"key"`
	Tool        string          `json:"tool"`
	RunID       string          `json:"run_id"`
	State       ledger.State    `json:"state"`
	Attempt     int             `json:"attempt"`
	AttemptAt   *time.Time      `json:"attempt_at,omitempty"`
	LeaseUntil  time.Time       `json:"lease_until"`
	ExpiresAt   time.Time       `json:"expires_at"`
	UpdatedAt   time.Time       `json:"updated_at"`
	Fingerprint string          `json:"fingerprint,omitempty"`
	Owner       string          `json:"owner"`
	ResolvedBy  string          `json:"resolved_by,omitempty"`
	Summary     string          `json:"summary,omitempty"`
	Ref         string          `json:"ref,omitempty"`
	Reason      string          `json:"reason,omitempty"`
	Result      json.RawMessage `json:"result,omitempty"`
	Truncated   bool            `json:"truncated,omitempty"`
}

func toJSON(r *ledger.Record) recordJSON {
	j := recordJSON{
		Key: r.Key, Tool: r.Tool, RunID: r.RunID, State: r.State, Attempt: r.Attempt,
		LeaseUntil: r.LeaseUntil, ExpiresAt: r.ExpiresAt, UpdatedAt: r.UpdatedAt,
		Fingerprint: r.Fingerprint, Owner: r.Owner, ResolvedBy: r.ResolvedBy(),
		Summary: r.Summary, Ref: r.Ref, Reason: r.Reason, Truncated: r.Truncated,
	}
	if !r.AttemptAt.IsZero() {
		at := r.AttemptAt
		j.AttemptAt = &at
	}
	if json.Valid(r.Result) {
		j.Result = r.Result
	}
	return j
}

// prefixScan bounds the records read to find the key a prefix names.
const prefixScan = 100_000

// findRecord returns the one record whose key is arg or starts with it,
// as git finds a commit from an abbreviated hash: a key printed by 'oncely
// ledger ls' (shortKey) names its record. A prefix of several keys is
// refused, naming them.
func findRecord(ctx context.Context, s ledger.Store, arg string) (*ledger.Record, error) {
	if arg == "" {
		return nil, usageErr("give a key, or the start of one as 'oncely ledger ls' prints it", "empty key")
	}
	switch r, err := s.Get(ctx, arg); {
	case err == nil:
		return r, nil
	case !errors.Is(err, ledger.ErrNotFound):
		return nil, ledgerErr(err)
	}
	recs, err := s.List(ctx, ledger.Filter{Limit: prefixScan})
	if err != nil {
		return nil, ledgerErr(err)
	}
	var found *ledger.Record
	var matches []string
	for i := range recs {
		if strings.HasPrefix(recs[i].Key, arg) {
			found = &recs[i]
			matches = append(matches, recs[i].Key)
		}
	}
	switch len(matches) {
	case 0:
		err := fmt.Errorf("%w: no record has key %s or a key starting with it", ledger.ErrNotFound, arg)
		if len(recs) == prefixScan {
			err = fmt.Errorf("%w (of the first %d records read)", err, prefixScan)
		}
		return nil, ledgerErr(err)
	case 1:
		return found, nil
	}
	slices.Sort(matches)
	shown := matches[:min(len(matches), 5)]
	more := ""
	if len(matches) > len(shown) {
		more = fmt.Sprintf(" and %d more", len(matches)-len(shown))
	}
	return nil, usageErr("give more of the key", "key prefix %s is ambiguous: it starts %d keys: %s%s",
		arg, len(matches), strings.Join(shown, ", "), more)
}

// shortKey abbreviates an action key for tables.
func shortKey(k string) string {
	if len(k) <= 16 {
		return k
	}
	return k[:16]
}

// recordTable prints records as a table: the outcome column is the
// summary of a done record and the reason of the others.
func recordTable(cmd *cobra.Command, recs []ledger.Record, now time.Time) {
	c := coloursFor(cmd.OutOrStdout())
	t := newTable("KEY", "STATE", "TOOL", "RUN", "ATTEMPT", "UPDATED", "OUTCOME")
	for i := range recs {
		r := &recs[i]
		outcome := r.Summary
		if r.State != ledger.StateDone {
			outcome = r.Reason
		}
		if r.State == ledger.StatePending {
			outcome = "lease " + relative(r.LeaseUntil, now)
		}
		if by := r.ResolvedBy(); by != "" {
			outcome += " [resolved by " + by + "]"
		}
		t.rowCells(cell{text: shortKey(r.Key)}, cell{text: string(r.State), colour: stateColour(string(r.State))},
			cell{text: r.Tool}, cell{text: r.RunID}, cell{text: fmt.Sprint(r.Attempt)},
			cell{text: relative(r.UpdatedAt, now)}, cell{text: clip.String(oneLine(outcome), 80)})
	}
	t.write(cmd.OutOrStdout(), c)
}

// printRecords prints records as JSON or a table.
func printRecords(cmd *cobra.Command, recs []ledger.Record, asJSON bool) error {
	if asJSON {
		out := make([]recordJSON, len(recs))
		for i := range recs {
			out[i] = toJSON(&recs[i])
		}
		return writeJSON(cmd.OutOrStdout(), out)
	}
	if len(recs) == 0 {
		fmt.Fprintln(cmd.OutOrStdout(), "no records")
		return nil
	}
	recordTable(cmd, recs, time.Now())
	return nil
}

func parseState(s string) (ledger.State, error) {
	st := ledger.State(strings.ToLower(s))
	if s != "" && !st.Valid() {
		return "", usageErr("a state is pending, done, failed or uncertain", "unknown state %q", s)
	}
	return st, nil
}

func newLedgerLsCmd() *cobra.Command {
	var (
		state, run, tool string
		olderThan        time.Duration
		limit, page      int
		asJSON           bool
	)
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List records, newest first",
		Long: "List records, newest first, a page at a time. It reads the whole ledger (or the records of\n" +
			"--state or --run), a page of the ledger at a time, keeping only the records of the page it\n" +
			"prints, and says how many records matched in all.",
		Args: cobra.NoArgs,
	}
	url := ledgerFlag(cmd)
	f := cmd.Flags()
	f.StringVar(&state, "state", "", "only records in this state (pending, done, failed, uncertain)")
	f.StringVar(&run, "run", "", "only records of this run")
	f.StringVar(&tool, "tool", "", "only records of this tool (the counter records of executors and sweeps are listed only with --tool "+ledger.CountersRun+")")
	f.DurationVar(&olderThan, "older-than", 0, "only records last written more than this long ago")
	f.IntVar(&limit, "limit", 50, "records per page")
	f.IntVar(&page, "page", 1, "page to print (1 is the newest)")
	f.BoolVar(&asJSON, "json", false, "print JSON")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		st, err := parseState(state)
		if err != nil {
			return err
		}
		if limit < 1 || page < 1 || olderThan < 0 {
			return usageErr("--limit and --page are positive, --older-than is not negative", "invalid paging or age")
		}
		return withLedger(cmd, *url, false, func(ctx context.Context, l *ledgerurl.Ledger) error {
			now := time.Now()
			// The newest page*limit records matched, newest first.
			var (
				top   []ledger.Record
				total int
			)
			newer := func(a, b ledger.Record) int {
				return cmp.Or(b.UpdatedAt.Compare(a.UpdatedAt), strings.Compare(a.Key, b.Key))
			}
			err := ledger.Walk(ctx, l, ledger.Filter{State: st, RunID: run, Limit: listPage}, func(r *ledger.Record) error {
				if (tool != "" && r.Tool != tool) || (tool == "" && r.Tool == ledger.CountersRun) ||
					(olderThan > 0 && !r.UpdatedAt.Before(now.Add(-olderThan))) {
					return nil
				}
				total++
				i, _ := slices.BinarySearchFunc(top, *r, newer)
				if i < page*limit {
					top = slices.Insert(top, i, *r)
					top = top[:min(len(top), page*limit)]
				}
				return nil
			})
			if err != nil {
				return ledgerErr(err)
			}
			from := min((page-1)*limit, len(top))
			if !asJSON && total > 0 && (from > 0 || len(top) < total) {
				defer fmt.Fprintf(cmd.ErrOrStderr(), "oncely: records %d to %d of %d, newest first%s\n",
					min(from+1, total), len(top), total, morePages(len(top) < total, page))
			}
			return printRecords(cmd, top[from:], asJSON)
		})
	}
	return cmd
}

// morePages says how to see the next page, if there is one.
func morePages(more bool, page int) string {
	if !more {
		return ""
	}
	return fmt.Sprintf("; --page %d for the next", page+1)
}

// listPage is how many records the listing commands read from the ledger
// at a time.
const listPage = 1000

func newLedgerStuckCmd() *cobra.Command {
	var (
		asJSON, all bool
		limit       int
	)
	cmd := &cobra.Command{
		Use:   "stuck",
		Short: "List pending records past their lease, and uncertain ones, oldest first",
		Long: "List pending records past their lease, and uncertain ones, oldest lease first: the first\n" +
			"--limit of them, with how many there are in all, or every one with --all (read and printed a\n" +
			"page at a time, in tables of 1000 rows).",
		Args: cobra.NoArgs,
	}
	url := ledgerFlag(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().BoolVar(&all, "all", false, "print every stuck record")
	cmd.Flags().IntVar(&limit, "limit", 1000, "print at most this many records")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if limit < 1 {
			return usageErr("--limit is positive", "invalid limit")
		}
		return withLedger(cmd, *url, false, func(ctx context.Context, l *ledgerurl.Ledger) error {
			out := &recordStream{cmd: cmd, asJSON: asJSON, now: time.Now()}
			total := 0
			err := stuck(ctx, l, out.now, func(r *ledger.Record) error {
				total++
				if all || total <= limit {
					return out.add(r)
				}
				return nil
			})
			if err := errors.Join(err, out.close()); err != nil {
				return ledgerErr(err)
			}
			if !all && total > limit {
				fmt.Fprintf(cmd.ErrOrStderr(), "oncely: %d of %d stuck records, oldest first; --all for every one, or a higher --limit\n",
					limit, total)
			}
			return nil
		})
	}
	return cmd
}

// stuck calls fn with the records a sweep would examine (pending past its
// lease at now, and uncertain), oldest lease first, the two states merged
// a page at a time.
func stuck(ctx context.Context, s ledger.Store, now time.Time, fn func(*ledger.Record) error) error {
	states := []ledger.Filter{{State: ledger.StatePending, LeaseBefore: now}, {State: ledger.StateUncertain}}
	fetch := func(ctx context.Context, reqs []listmerge.Request) ([]listmerge.Reply, error) {
		out := make([]listmerge.Reply, len(reqs))
		for i, r := range reqs {
			f := states[r.Source]
			f.After, f.Limit = r.After, r.N
			recs, err := s.List(ctx, f)
			if err != nil {
				return nil, err
			}
			out[i] = listmerge.Reply{Records: recs, Next: r.After, Done: len(recs) < r.N}
			if len(recs) > 0 {
				out[i].Next = ledger.CursorOf(&recs[len(recs)-1])
			}
		}
		return out, nil
	}
	after := ledger.Cursor{}
	for {
		page, err := listmerge.Merge(ctx, len(states), after, listPage, fetch)
		if err != nil {
			return err
		}
		for i := range page {
			if err := fn(&page[i]); err != nil {
				return err
			}
		}
		if len(page) < listPage {
			return nil
		}
		after = ledger.CursorOf(&page[len(page)-1])
	}
}

// recordStream prints records as they come: a JSON array written element
// by element, or tables of up to listPage rows.
type recordStream struct {
	cmd    *cobra.Command
	asJSON bool
	now    time.Time
	n      int
	rows   []ledger.Record
}

func (w *recordStream) add(r *ledger.Record) error {
	w.n++
	if !w.asJSON {
		w.rows = append(w.rows, *r)
		if len(w.rows) == listPage {
			recordTable(w.cmd, w.rows, w.now)
			w.rows = w.rows[:0]
		}
		return nil
	}
	b, err := json.MarshalIndent(toJSON(r), "  ", "  ")
	if err != nil {
		return err
	}
	sep := ",\n  "
	if w.n == 1 {
		sep = "[\n  "
	}
	_, err = fmt.Fprint(w.cmd.OutOrStdout(), sep+string(b))
	return err
}

func (w *recordStream) close() error {
	out := w.cmd.OutOrStdout()
	switch {
	case w.asJSON && w.n == 0:
		_, err := fmt.Fprintln(out, "[]")
		return err
	case w.asJSON:
		_, err := fmt.Fprintln(out, "\n]")
		return err
	case w.n == 0:
		_, err := fmt.Fprintln(out, "no records")
		return err
	case len(w.rows) > 0:
		recordTable(w.cmd, w.rows, w.now)
	}
	return nil
}

func newLedgerShowCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "show KEY",
		Short: "Print every stored field of one record",
		Args:  cobra.ExactArgs(1),
	}
	url := ledgerFlag(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		return withLedger(cmd, *url, false, func(ctx context.Context, l *ledgerurl.Ledger) error {
			r, err := findRecord(ctx, l, args[0])
			if err != nil {
				return err
			}
			return printRecord(cmd, r, asJSON)
		})
	}
	return cmd
}

// printRecord prints every field of r, one per line, or as JSON.
func printRecord(cmd *cobra.Command, r *ledger.Record, asJSON bool) error {
	if asJSON {
		return writeJSON(cmd.OutOrStdout(), toJSON(r))
	}
	now := time.Now()
	c := coloursFor(cmd.OutOrStdout())
	t := newTable("FIELD", "VALUE")
	lease := "lease until"
	if r.State != ledger.StatePending {
		lease = "settled at"
	}
	for _, f := range [][2]string{
		{"key", r.Key}, {"state", string(r.State)}, {"tool", r.Tool}, {"run", r.RunID},
		{"attempt", fmt.Sprint(r.Attempt)}, {"attempt began", when(r.AttemptAt, now)},
		{lease, when(r.LeaseUntil, now)}, {"updated", when(r.UpdatedAt, now)}, {"expires", when(r.ExpiresAt, now)},
		{"owner", r.Owner}, {"resolved by", r.ResolvedBy()}, {"fingerprint", r.Fingerprint},
		{"summary", r.Summary}, {"ref", r.Ref}, {"reason", r.Reason},
		{"result", resultText(r)},
	} {
		if f[1] == "" {
			f[1] = "-"
		}
		colour := ""
		if f[0] == "state" {
			colour = stateColour(f[1])
		}
		t.rowCells(cell{text: f[0]}, cell{text: oneLine(f[1]), colour: colour})
	}
	t.write(cmd.OutOrStdout(), c)
	return nil
}

func resultText(r *ledger.Record) string {
	s := fmt.Sprintf("%d bytes", len(r.Result))
	if len(r.Result) == 0 {
		s = ""
	}
	if r.Truncated {
		s += " (truncated: too large to keep)"
	}
	return strings.TrimSpace(s)
}

func newLedgerPurgeCmd() *cobra.Command {
	var before time.Duration
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "purge",
		Short: "Delete expired records (SQLite, PostgreSQL, Redis; DynamoDB expires them itself)",
		Long: `Delete the records whose retention ended more than --before ago (0: every
expired record). Expired records already read as absent; purging reclaims
their space. Run it on a schedule next to a SQLite or PostgreSQL ledger
(cron, a systemd timer, or oncely reconcile --purge). Redis deletes an
expired record's key itself a minute after its retention; purge deletes
them sooner and drops their entries from its indexes, in bounded steps.
DynamoDB deletes expired records itself through its TTL.`,
		Args: cobra.NoArgs,
	}
	url := ledgerFlag(cmd)
	cmd.Flags().DurationVar(&before, "before", 0, "only records that expired at least this long ago")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if before < 0 {
			return usageErr("--before is a duration like 24h", "--before is negative")
		}
		return withLedger(cmd, *url, false, func(ctx context.Context, l *ledgerurl.Ledger) error {
			p, ok := l.Store.(ledger.Purger)
			if !ok {
				if asJSON {
					return writeJSON(cmd.OutOrStdout(), map[string]any{"purged": 0, "ttl": true})
				}
				fmt.Fprintf(cmd.OutOrStdout(), "ledger %s deletes expired records itself (TTL); nothing to purge\n", l.URL)
				return nil
			}
			n, err := p.Purge(ctx, time.Now().Add(-before))
			if err != nil {
				return ledgerErr(err)
			}
			if asJSON {
				return writeJSON(cmd.OutOrStdout(), map[string]any{"purged": n})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "purged %d expired records from %s\n", n, l.URL)
			return nil
		})
	}
	return cmd
}

func newLedgerResolveCmd() *cobra.Command {
	var (
		done, failed         bool
		ref, summary, reason string
		by                   string
		asJSON, force        bool
		inFlight             time.Duration
	)
	cmd := &cobra.Command{
		Use:   "resolve KEY (--done --summary TEXT [--ref REF] | --failed --reason TEXT)",
		Short: "Settle an uncertain record by hand, after checking the provider",
		Long: `Settle an uncertain record, or a pending one whose lease ran out, after
checking the provider by hand: --done when the effect exists (a repeat of
the action is then answered "already done"), --failed when it definitely
does not (a repeat then performs it). The write is conditional: a record
that is pending with a live lease, or that someone settles meanwhile, is
refused. The record keeps who resolved it (--by).

--failed is refused until --in-flight has passed since the record's lease
ended: a request sent before then may still commit at the provider, and the
next call would then act a second time under a new downstream key. --force
settles it failed at once; use it only when the provider confirmed that the
request will never take effect.`,
		Args: cobra.ExactArgs(1),
	}
	url := ledgerFlag(cmd)
	f := cmd.Flags()
	f.BoolVar(&done, "done", false, "the effect exists")
	f.BoolVar(&failed, "failed", false, "the effect definitely does not exist")
	f.StringVar(&ref, "ref", "", "the provider's object reference (--done)")
	f.StringVar(&summary, "summary", "", "what a repeat of the action is told (required with --done)")
	f.StringVar(&reason, "reason", "", "why it failed (required with --failed)")
	f.StringVar(&by, "by", currentUser(), "who resolves it")
	f.BoolVar(&asJSON, "json", false, "print JSON")
	f.DurationVar(&inFlight, "in-flight", ledger.DefaultInFlight, "how long a provider may still commit a request after it was sent (--failed); add the provider's search lag")
	f.BoolVar(&force, "force", false, "settle --failed before the in-flight bound (a request that still commits is then acted on twice)")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		switch {
		case force && !failed:
			return usageErr("--force goes with --failed", "only settling failed waits for requests in flight")
		case done == failed:
			return usageErr("give --done or --failed", "resolve needs exactly one of --done and --failed")
		case failed && (ref != "" || summary != ""):
			return usageErr("--ref and --summary go with --done", "--failed takes --reason only")
		case done && reason != "":
			return usageErr("--reason goes with --failed", "--done takes --ref and --summary")
		case failed && reason == "":
			return usageErr("say why with --reason", "--failed needs --reason")
		case done && summary == "":
			return usageErr("say what happened with --summary, e.g. --summary 'refund re_123 of 10.00 EUR'", "--done needs --summary")
		}
		return withLedger(cmd, *url, false, func(ctx context.Context, l *ledgerurl.Ledger) error {
			found, err := findRecord(ctx, l, args[0])
			if err != nil {
				return err
			}
			r, err := ledger.Resolve(ctx, l, found.Key, ledger.Resolution{Done: done, Ref: ref, Summary: summary, Reason: reason, By: by,
				InFlight: inFlight, Force: force}, time.Now())
			if err != nil {
				return ledgerErr(err)
			}
			return printRecord(cmd, r, asJSON)
		})
	}
	return cmd
}

func currentUser() string {
	if u, err := user.Current(); err == nil && u.Username != "" && !strings.Contains(u.Username, ":") {
		return u.Username
	}
	return "operator"
}
