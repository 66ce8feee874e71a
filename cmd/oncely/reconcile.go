//go:build !oncely_demo

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/internal/clip"
	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/ledger/ledgerurl"
	"github.com/oncely/oncely/providers"
	"github.com/oncely/oncely/providers/crm"
	"github.com/oncely/oncely/providers/keyheader"
	"github.com/oncely/oncely/providers/mail"
	"github.com/oncely/oncely/providers/stripe"
	"github.com/oncely/oncely/reconcile"
)

// providerFlags configure the bundled adapters for reconcile.
type providerFlags struct {
	stripeKey, stripeURL string
	mailKey, mailURL     string
	crmKey, crmURL       string
	keyheaderURL         string
}

// adapterNames are the adapters --tool may name.
var adapterNames = []string{"stripe-payment-intents", "stripe-refunds", "mail", "crm", "keyheader"}

// adapter returns the adapter called name, configured by the flags.
func (p *providerFlags) adapter(name string) (providers.Adapter, error) {
	need := func(flag, value string) error {
		if value == "" {
			return usageErr("set --"+flag+" (or its environment variable)", "adapter %s needs --%s", name, flag)
		}
		return nil
	}
	switch name {
	case "stripe-payment-intents", "stripe-refunds":
		if err := need("stripe-key", p.stripeKey); err != nil {
			return nil, err
		}
		st := stripe.New(p.stripeURL, &stripe.Config{APIKey: p.stripeKey})
		if name == "stripe-refunds" {
			return st.Refunds, nil
		}
		return st.PaymentIntents, nil
	case "mail":
		if err := need("mail-url", p.mailURL); err != nil {
			return nil, err
		}
		return mail.New(p.mailURL, &mail.Config{APIKey: p.mailKey}), nil
	case "crm":
		if err := need("crm-url", p.crmURL); err != nil {
			return nil, err
		}
		return crm.New(p.crmURL, &crm.Config{APIKey: p.crmKey}), nil
	case "keyheader":
		if err := need("keyheader-url", p.keyheaderURL); err != nil {
			return nil, err
		}
		return keyheader.New(p.keyheaderURL, nil), nil
	}
	return nil, usageErr("adapters: "+strings.Join(adapterNames, ", "), "unknown adapter %q", name)
}

// observed reports the settlements a sweeper writes, record by record.
type observed struct {
	ledger.Store
	mu     sync.Mutex
	report func(resolution)
}

// resolution is what a sweep did to one record.
type resolution struct {
	Key    string       `json:"key"`
	State  ledger.State `json:"state"`
	Ref    string       `json:"ref,omitempty"`
	Detail string       `json:"detail"`
}

func (o *observed) emit(r resolution) {
	if strings.HasPrefix(r.Key, ledger.CountersRun+"/") {
		return // the sweep's counter record, not a resolution
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.report(r)
}

func (o *observed) Complete(ctx context.Context, key, owner string, c ledger.Completion) error {
	err := o.Store.Complete(ctx, key, owner, c)
	if err == nil {
		o.emit(resolution{Key: key, State: ledger.StateDone, Ref: c.Ref, Detail: c.Summary})
	}
	return err
}

func (o *observed) Fail(ctx context.Context, key, owner string, f ledger.Failure) error {
	err := o.Store.Fail(ctx, key, owner, f)
	if err == nil {
		st := ledger.StateUncertain
		if f.Definite {
			st = ledger.StateFailed
		}
		o.emit(resolution{Key: key, State: st, Detail: f.Reason})
	}
	return err
}

// Purge, Watch and RunsIndexed pass the wrapped store's optional
// interfaces through (ledger.RunIndexer), so that the sweeper's view hides
// none of them.
func (o *observed) Purge(ctx context.Context, before time.Time) (int, error) {
	p, ok := o.Store.(ledger.Purger)
	if !ok {
		return 0, fmt.Errorf("%T does not purge: %w", o.Store, errors.ErrUnsupported)
	}
	return p.Purge(ctx, before)
}

func (o *observed) Watch(ctx context.Context, key string) (<-chan struct{}, func(), error) {
	w, ok := o.Store.(ledger.Watcher)
	if !ok {
		return nil, nil, fmt.Errorf("%T: %w", o.Store, ledger.ErrNoWatch)
	}
	return w.Watch(ctx, key)
}

func (o *observed) RunsIndexed() bool { return ledger.RunsIndexed(o.Store) }

func newReconcileCmd() *cobra.Command {
	var (
		p        providerFlags
		toolMap  []string
		watch    bool
		interval time.Duration
		minAge   time.Duration
		run      string
		purge    bool
		asJSON   bool
	)
	cmd := &cobra.Command{
		Use:   "reconcile --tool NAME=ADAPTER ...",
		Short: "Settle stuck records (abandoned pending, uncertain) by asking the providers",
		Long: `Run the sweeper: for every pending record whose lease ran out and every
uncertain record, ask the provider whether the effect exists, and settle
the record (done when found; failed when the provider conclusively has no
such effect and no earlier request can still create it; otherwise it stays
uncertain). Each record's resolution is printed.

The sweeper needs the providers' credentials. Records of tools not mapped
with --tool are left alone. Adapters: ` + strings.Join(adapterNames, ", ") + `.

Once by default; with --watch every --interval until SIGINT or SIGTERM.
Several sweepers may run at once: each claims a record before acting.`,
		Example: `  oncely reconcile --ledger dynamodb://oncely-ledger?region=eu-west-1 \
    --tool refund_order=stripe-refunds --tool send_reply=mail --mail-url https://mail.example.com --watch`,
		Args: cobra.NoArgs,
	}
	url := ledgerFlag(cmd)
	f := cmd.Flags()
	f.StringArrayVar(&toolMap, "tool", nil, "tool name and its adapter, NAME=ADAPTER (repeatable)")
	p.define(f)
	f.BoolVar(&watch, "watch", false, "sweep every --interval until SIGINT or SIGTERM")
	f.DurationVar(&interval, "interval", time.Minute, "time between sweeps with --watch")
	f.DurationVar(&minAge, "min-age", 0, "leave alone uncertain records settled less than this long ago")
	f.StringVar(&run, "run", "", "only the records of this run")
	f.BoolVar(&purge, "purge", false, "after each sweep, delete expired records (SQLite, PostgreSQL, Redis; DynamoDB expires them itself)")
	f.BoolVar(&asJSON, "json", false, "print one JSON object per line: each resolution, then the sweep's report")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if len(toolMap) == 0 {
			return usageErr("map each tool to its adapter, e.g. --tool refund_order=stripe-refunds", "reconcile needs at least one --tool")
		}
		if watch && interval <= 0 {
			return usageErr("--interval is a duration like 30s", "--interval must be positive")
		}
		var tools []client.Tool
		for _, m := range toolMap {
			name, adapter, ok := strings.Cut(m, "=")
			if !ok || name == "" {
				return usageErr("--tool is NAME=ADAPTER", "--tool %q", m)
			}
			a, err := p.adapter(adapter)
			if err != nil {
				return err
			}
			tools = append(tools, client.Tool{Name: name, Reconciler: reconcile.New(a, nil)})
		}
		return withLedger(cmd, *url, false, func(ctx context.Context, l *ledgerurl.Ledger) error {
			out := cmd.OutOrStdout()
			store := &observed{Store: l, report: func(r resolution) { printResolution(out, r, asJSON) }}
			sw := reconcile.NewSweeper(store, tools, &reconcile.SweeperConfig{MinAge: minAge, RunID: run})
			purger, _ := l.Store.(ledger.Purger)
			purgeExpired := func(ctx context.Context) error {
				if !purge || purger == nil {
					return nil
				}
				n, err := purger.Purge(ctx, time.Now())
				if err == nil {
					printPurged(out, n, asJSON)
				}
				return err
			}
			report := func(rep reconcile.Report, err error) {
				printReport(cmd, rep, err, asJSON)
				if err := purgeExpired(ctx); err != nil && ctx.Err() == nil {
					fmt.Fprintln(cmd.ErrOrStderr(), "oncely: purge: "+oneLine(err.Error()))
				}
			}
			if !watch {
				rep, err := sw.Sweep(ctx)
				printReport(cmd, rep, nil, asJSON)
				if err == nil {
					err = purgeExpired(ctx)
				}
				if err != nil {
					return ledgerErr(err)
				}
				return nil
			}
			ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
			defer stop()
			if err := sw.Run(ctx, interval, report); err != nil && !errors.Is(err, context.Canceled) {
				return opErr(err, "")
			}
			return nil
		})
	}
	return cmd
}

// define adds the adapters' flags to f: their URLs and keys, each
// defaulting to its environment variable (which --help names, never shows).
func (p *providerFlags) define(f *pflag.FlagSet) {
	envString(f, &p.stripeKey, "stripe-key", "STRIPE_API_KEY", "", "Stripe secret key")
	envString(f, &p.stripeURL, "stripe-url", "ONCELY_STRIPE_URL", "https://api.stripe.com", "Stripe API base URL")
	envString(f, &p.mailURL, "mail-url", "ONCELY_MAIL_URL", "", "mail API base URL")
	envString(f, &p.mailKey, "mail-key", "ONCELY_MAIL_KEY", "", "mail API key")
	envString(f, &p.crmURL, "crm-url", "ONCELY_CRM_URL", "", "CRM API base URL")
	envString(f, &p.crmKey, "crm-key", "ONCELY_CRM_KEY", "", "CRM API key")
	envString(f, &p.keyheaderURL, "keyheader-url", "ONCELY_KEYHEADER_URL", "", "base URL of an IETF Idempotency-Key API")
}

func printResolution(w io.Writer, r resolution, asJSON bool) {
	if asJSON {
		_ = json.NewEncoder(w).Encode(map[string]any{"resolution": r})
		return
	}
	c := coloursFor(w)
	detail := clip.String(oneLine(r.Detail), 120)
	if r.Ref != "" {
		detail = r.Ref + ": " + detail
	}
	fmt.Fprintf(w, "%s  %s  %s\n", shortKey(r.Key), c.paint(stateColour(string(r.State)), fmt.Sprintf("%-9s", r.State)), detail)
}

func printPurged(w io.Writer, n int, asJSON bool) {
	if asJSON {
		_ = json.NewEncoder(w).Encode(map[string]int{"purged": n})
		return
	}
	fmt.Fprintf(w, "purged %d expired records\n", n)
}

func printReport(cmd *cobra.Command, rep reconcile.Report, err error, asJSON bool) {
	out := cmd.OutOrStdout()
	if asJSON {
		m := map[string]any{"sweep": rep}
		if err != nil {
			m["error"] = err.Error()
		}
		_ = json.NewEncoder(out).Encode(m)
		return
	}
	fmt.Fprintf(out, "%s sweep: %d examined, %d done, %d failed, %d uncertain, %d skipped\n",
		time.Now().Format("15:04:05"), rep.Examined, rep.Done, rep.Failed, rep.Uncertain, rep.Skipped)
	if err != nil {
		fmt.Fprintln(cmd.ErrOrStderr(), "oncely: sweep: "+oneLine(err.Error()))
	}
}
