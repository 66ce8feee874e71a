//go:build !idem_demo

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/user"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/idemkit/idemkit/ledger"
	"github.com/idemkit/idemkit/ledger/ledgerpg"
	"github.com/idemkit/idemkit/ledger/ledgerurl"
)

// EnvLedger names the default ledger URL.
const EnvLedger = "IDEM_LEDGER"

// ledgerFlag adds --ledger to cmd and returns where its value lands.
func ledgerFlag(cmd *cobra.Command) *string {
	def := os.Getenv(EnvLedger)
	if def == "" {
		def = ledgerurl.Default
	}
	return cmd.Flags().String("ledger", def, "ledger URL: "+urlForms+" (env "+EnvLedger+")")
}

// urlForms are the forms of a ledger URL.
const urlForms = "sqlite://path/idem.db, dynamodb://TABLE?region=R[&endpoint=URL], postgres://user@host/db[?schema=S&table=T] or redis://host:6379/0[?prefix=P&wait=N]"

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
		return &cliError{code: exitUsage, err: err, hint: "check ?schema= and ?table=; 'idem ledger init --ledger URL' creates the table"}
	case errors.Is(err, ledgerurl.ErrConfig):
		return &cliError{code: exitUsage, err: err, hint: "a ledger URL is " + urlForms}
	case errors.Is(err, ledger.ErrInvalid):
		return &cliError{code: exitUsage, err: err, hint: "check the arguments"}
	case errors.Is(err, ledger.ErrNotFound):
		return opErr(err, "list the records with 'idem ledger ls'")
	case errors.Is(err, ledger.ErrNotResolvable):
		return opErr(err, "only an uncertain record, or a pending one whose lease ran out, can be resolved")
	case errors.Is(err, ledger.ErrNotOwner):
		return opErr(err, "someone else acted on the record meanwhile; look at it again with 'idem ledger show'")
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
		Long: `Create the ledger the URL names, or bring it to this version: the SQLite
file and its schema, the PostgreSQL schema and table (migrated), or the
DynamoDB table with its index and TTL. Redis needs nothing. It is
idempotent. Every other command refuses a ledger that does not exist.`,
		Args: cobra.NoArgs,
	}
	url := ledgerFlag(cmd)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		return withLedger(cmd, *url, true, func(ctx context.Context, l *ledgerurl.Ledger) error {
			if err := l.Init(ctx); err != nil {
				return ledgerErr(err)
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
// as git finds a commit from an abbreviated hash: a key printed by 'idem
// ledger ls' (shortKey) names its record. A prefix of several keys is
// refused, naming them.
func findRecord(ctx context.Context, s ledger.Store, arg string) (*ledger.Record, error) {
	if arg == "" {
		return nil, usageErr("give a key, or the start of one as 'idem ledger ls' prints it", "empty key")
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
			cell{text: relative(r.UpdatedAt, now)}, cell{text: ledger.Clip(oneLine(outcome), 80)})
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
		scan             int
		asJSON           bool
	)
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List records, newest first",
		Args:  cobra.NoArgs,
	}
	url := ledgerFlag(cmd)
	f := cmd.Flags()
	f.StringVar(&state, "state", "", "only records in this state (pending, done, failed, uncertain)")
	f.StringVar(&run, "run", "", "only records of this run")
	f.StringVar(&tool, "tool", "", "only records of this tool")
	f.DurationVar(&olderThan, "older-than", 0, "only records last written more than this long ago")
	f.IntVar(&limit, "limit", 50, "records per page")
	f.IntVar(&page, "page", 1, "page to print (1 is the newest)")
	f.IntVar(&scan, "scan", 10000, "read at most this many records from the ledger")
	f.BoolVar(&asJSON, "json", false, "print JSON")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		st, err := parseState(state)
		if err != nil {
			return err
		}
		if limit < 1 || page < 1 || scan < 1 || olderThan < 0 {
			return usageErr("--limit, --page and --scan are positive, --older-than is not negative", "invalid paging or age")
		}
		return withLedger(cmd, *url, false, func(ctx context.Context, l *ledgerurl.Ledger) error {
			recs, err := l.List(ctx, ledger.Filter{State: st, RunID: run, Limit: scan})
			if err != nil {
				return ledgerErr(err)
			}
			if len(recs) == scan {
				fmt.Fprintf(cmd.ErrOrStderr(), "idem: read the first %d records only; narrow with --state or --run, or raise --scan\n", scan)
			}
			now := time.Now()
			recs = slices.DeleteFunc(recs, func(r ledger.Record) bool {
				return (tool != "" && r.Tool != tool) || (olderThan > 0 && !r.UpdatedAt.Before(now.Add(-olderThan)))
			})
			slices.SortStableFunc(recs, func(a, b ledger.Record) int { return b.UpdatedAt.Compare(a.UpdatedAt) })
			from := min((page-1)*limit, len(recs))
			to := min(from+limit, len(recs))
			if to < len(recs) && !asJSON {
				defer fmt.Fprintf(cmd.ErrOrStderr(), "idem: %d more; see --page %d\n", len(recs)-to, page+1)
			}
			return printRecords(cmd, recs[from:to], asJSON)
		})
	}
	return cmd
}

func newLedgerStuckCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "stuck",
		Short: "List pending records past their lease, and uncertain ones, oldest first",
		Args:  cobra.NoArgs,
	}
	url := ledgerFlag(cmd)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		return withLedger(cmd, *url, false, func(ctx context.Context, l *ledgerurl.Ledger) error {
			recs, err := stuck(ctx, l, time.Now())
			if err != nil {
				return ledgerErr(err)
			}
			return printRecords(cmd, recs, asJSON)
		})
	}
	return cmd
}

// stuck lists the records a sweep would examine, oldest first.
func stuck(ctx context.Context, s ledger.Store, now time.Time) ([]ledger.Record, error) {
	pending, err := s.List(ctx, ledger.Filter{State: ledger.StatePending, LeaseBefore: now})
	if err != nil {
		return nil, err
	}
	uncertain, err := s.List(ctx, ledger.Filter{State: ledger.StateUncertain})
	if err != nil {
		return nil, err
	}
	recs := append(pending, uncertain...)
	slices.SortStableFunc(recs, func(a, b ledger.Record) int { return a.UpdatedAt.Compare(b.UpdatedAt) })
	return recs, nil
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
		Short: "Delete expired records (SQLite, PostgreSQL; DynamoDB and Redis expire them themselves)",
		Long: `Delete the records whose retention ended more than --before ago (0: every
expired record). Expired records already read as absent; purging reclaims
their space. Run it on a schedule next to a SQLite or PostgreSQL ledger
(cron, a systemd timer, or idem reconcile --purge). DynamoDB deletes
expired records itself through its TTL, Redis through its keys' expiry.`,
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
		asJSON               bool
	)
	cmd := &cobra.Command{
		Use:   "resolve KEY (--done --summary TEXT [--ref REF] | --failed --reason TEXT)",
		Short: "Settle an uncertain record by hand, after checking the provider",
		Long: `Settle an uncertain record, or a pending one whose lease ran out, after
checking the provider by hand: --done when the effect exists (a repeat of
the action is then answered "already done"), --failed when it definitely
does not (a repeat then performs it). The write is conditional: a record
that is pending with a live lease, or that someone settles meanwhile, is
refused. The record keeps who resolved it (--by).`,
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
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		switch {
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
			r, err := ledger.Resolve(ctx, l, found.Key, ledger.Resolution{Done: done, Ref: ref, Summary: summary, Reason: reason, By: by}, time.Now())
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
