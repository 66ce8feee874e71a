package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/oncely/oncely/clock"
	"github.com/oncely/oncely/internal/counters"
	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/ledger/ledgerpg/pgtest"
	"github.com/oncely/oncely/ledger/ledgerurl"
)

// screenshots, when set, is the directory the browser test writes the
// screenshots of docs/operating.md to (make screenshots).
var screenshots = flag.String("screenshots", "", "write the console's screenshots (overview, an action's page) to this directory")

// chromium returns the path of a Chromium (Debian's package chromium,
// which .ci/run installs). Without one the test fails under CI=true and
// is skipped elsewhere.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("no chromium on PATH: .ci/run installs Debian's package chromium")
	}
	t.Skip("no chromium on PATH (apt-get install chromium)")
	return ""
}

// browser returns a context of a fresh headless Chromium tab, closed when
// t ends, bounded by a deadline so that a lost wait fails the test.
func browser(t *testing.T) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(t)),
		chromedp.NoSandbox, // root in CI containers
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1400, 1000),
	)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	actx, acancel := chromedp.NewExecAllocator(ctx, opts...)
	t.Cleanup(acancel)
	bctx, bcancel := chromedp.NewContext(actx)
	t.Cleanup(bcancel)
	if err := chromedp.Do(bctx); err != nil {
		t.Fatalf("starting chromium: %v", err)
	}
	return bctx
}

// demoFilled fills the ledger raw by running the demo (40 runs a seed,
// half the provider requests faulted), seed after seed from 4, until it
// holds two uncertain orders: orders of the IETF-key API that a fault
// committed and that nothing can prove, which the demo leaves for an
// operator. It returns their keys, oldest first. open opens the ledger
// with a worker's clock (nil: the demo's own SQLite file in dir).
func demoFilled(t *testing.T, raw, dir string, open func(context.Context, clock.Clock) (ledger.Store, func() error, error)) []string {
	t.Helper()
	ctx := context.Background()
	for seed := int64(4); seed < 16; seed++ {
		res, err := runDemo(ctx, demoOptions{runs: 40, seed: seed, faults: 0.5, dir: dir, open: open}, func(string) {})
		if err != nil {
			t.Fatal(err)
		}
		if err := res.check(demoOptions{}); err != nil {
			t.Fatalf("the demo, seed %d: %v", seed, err)
		}
		l, err := ledgerurl.Open(ctx, raw, nil)
		if err != nil {
			t.Fatal(err)
		}
		recs, err := l.List(ctx, ledger.Filter{State: ledger.StateUncertain})
		l.Close()
		if err != nil {
			t.Fatal(err)
		}
		var orders []string
		for _, r := range recs {
			if r.Tool == "place_order" {
				orders = append(orders, r.Key)
			}
		}
		if len(orders) >= 2 {
			return orders
		}
	}
	t.Fatal("12 runs of the demo left fewer than two uncertain orders")
	return nil
}

// ratesIn sums the counter records of the ledger raw per tool, as the
// overview's rates must show them.
func ratesIn(t *testing.T, raw string) map[string]counters.Counts {
	t.Helper()
	ctx := context.Background()
	l, err := ledgerurl.Open(ctx, raw, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	out := map[string]counters.Counts{}
	err = ledger.Walk(ctx, l, ledger.Filter{State: ledger.StateDone, RunID: ledger.CountersRun}, func(r *ledger.Record) error {
		c, ok := counters.Decode(r)
		if !ok {
			return fmt.Errorf("counter record %s does not decode: %q", r.Key, r.Result)
		}
		sum := out[c.Tool]
		sum.Tool = c.Tool
		sum.Add(c)
		out[c.Tool] = sum
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// testConsoleBrowser opens the console over raw, a ledger the demo filled,
// in Chromium: it finds the uncertain order in the attention list,
// resolves it with a note, and sees it leave the list; then sees the list
// refresh by itself when the other uncertain order is resolved elsewhere;
// and reads the overview's replay and reconcile rates, which must be the
// counts the demo's executors and sweeps wrote.
func testConsoleBrowser(t *testing.T, raw string, env []string, shots string, orders []string) {
	base := startConsole(t, env, "--ledger", raw, "--refresh", "300ms")
	ctx := browser(t)
	want := decodeJSON[recordJSON](t, runCLI(t, env, "ledger", "show", orders[0], "--ledger", raw, "--json").wantOK(t).stdout)
	// The list refreshes itself in place, so what the test reads of it is
	// read in one evaluation in the page, and it waits on the DOM by
	// polling on its mutations.
	order := `tr[data-key="` + orders[0] + `"]`
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/"), waitFor(order, true)); err != nil {
		t.Fatalf("the uncertain order is not listed: %v", err)
	}
	row, err := chromedp.Run(ctx, chromedp.Evaluate[struct{ Tool, Reason, Href string }](`(() => {
		const r = document.querySelector('`+order+`');
		return {Tool: r.textContent, Reason: r.querySelector('td.outcome').textContent, Href: r.querySelector('a.key').href};
	})()`))
	if err != nil {
		t.Fatalf("reading the order's row: %v", err)
	}
	if !strings.Contains(row.Tool, "place_order") || !strings.Contains(row.Reason, want.Reason[:min(len(want.Reason), 30)]) {
		t.Errorf("the list shows the order as %q with reason %q; the ledger's reason is %q", row.Tool, row.Reason, want.Reason)
	}
	// Follow the row's link.
	if err := chromedp.Do(ctx, chromedp.Navigate(row.Href), chromedp.WaitVisible(chromedp.CSS(`#resolve-form`))); err != nil {
		t.Fatalf("opening the order: %v", err)
	}
	if shots != "" {
		shoot(t, ctx, filepath.Join(shots, "console-action.png"))
	}
	if err := chromedp.Do(ctx,
		chromedp.SendKeys(chromedp.CSS(`#note`), "order ord_77 is in the shop's admin, placed at the time of the run"),
		chromedp.SendKeys(chromedp.CSS(`#ref`), "ord_77"),
		chromedp.Click(chromedp.CSS(`#mark-done`)),
		chromedp.WaitVisible(chromedp.CSS(`#message`)),
	); err != nil {
		t.Fatalf("resolving the order: %v", err)
	}
	state, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`#state`)))
	if err != nil {
		t.Fatal(err)
	}
	by, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`#resolved-by`)))
	if err != nil {
		t.Fatal(err)
	}
	if state != "done" || by != "alice" {
		t.Errorf("after mark done the page shows state %q, resolved by %q", state, by)
	}
	rec := decodeJSON[recordJSON](t, runCLI(t, env, "ledger", "show", orders[0], "--ledger", raw, "--json").wantOK(t).stdout)
	if rec.State != ledger.StateDone || rec.Ref != "ord_77" || rec.ResolvedBy != "alice" || !strings.Contains(rec.Summary, "shop's admin") {
		t.Errorf("the ledger's record after the browser resolved it: %+v", rec)
	}
	other := `tr[data-key="` + orders[1] + `"]`
	if err := chromedp.Do(ctx,
		chromedp.Navigate(base+"/"),
		waitFor(other, true),
		waitFor(order, false),
	); err != nil {
		t.Fatalf("the resolved order is still listed: %v", err)
	}
	// Resolved elsewhere (the CLI), the other uncertain order leaves the
	// open page by the live refresh, without a reload.
	runCLI(t, env, "ledger", "resolve", orders[1], "--ledger", raw, "--done", "--summary", "found by hand").wantOK(t)
	if err := chromedp.Do(ctx, waitFor(other, false)); err != nil {
		t.Fatalf("the list did not refresh: %v", err)
	}
	// The rates: every tool the demo's counter records name, with their
	// sums; two orders resolved by hand.
	rates := ratesIn(t, raw)
	if len(rates) == 0 {
		t.Fatal("the demo wrote no counter records")
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/overview?range=24h"), chromedp.WaitVisible(chromedp.CSS(`#rates`))); err != nil {
		t.Fatal(err)
	}
	shown, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]map[string]string](`(() => {
		const out = {};
		for (const r of document.querySelectorAll('#rates tr[data-tool]')) {
			const m = {};
			for (const c of r.querySelectorAll('td[class]')) m[c.className] = c.textContent;
			out[r.dataset.tool] = m;
		}
		return out;
	})()`))
	if err != nil {
		t.Fatal(err)
	}
	var replays int64
	for tool, c := range rates {
		got := shown[tool]
		w := map[string]string{"executed": fmt.Sprint(c.Executed), "replayed": fmt.Sprint(c.Replayed),
			"merged": fmt.Sprint(c.Merged), "reconciled": fmt.Sprint(c.Reconciled)}
		for k, v := range w {
			if got[k] != v {
				t.Errorf("rates of %s: %s is %q on the page, %s in the counter records", tool, k, got[k], v)
			}
		}
		replays += c.Replayed + c.Merged
	}
	if replays == 0 || shown["place_order"]["hand"] != "2" {
		t.Errorf("the demo's rates: %d replays counted, place_order resolved by hand %q (want 2)", replays, shown["place_order"]["hand"])
	}
	if shots != "" {
		shoot(t, ctx, filepath.Join(shots, "console-overview.png"))
	}
}

// waitFor waits until an element matches the CSS selector sel (present)
// or none does, polling on every change of the DOM.
func waitFor(sel string, present bool) chromedp.Action[chromedp.Void] {
	cond := "document.querySelector(%q) !== null"
	if !present {
		cond = "document.querySelector(%q) === null"
	}
	return func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		_, err := chromedp.Poll[bool](fmt.Sprintf(cond, sel), chromedp.WithPollingMutation(), chromedp.WithPollingTimeout(2*time.Minute))(ctx, t)
		return chromedp.Void{}, err
	}
}

// shoot writes a screenshot of the whole page as PNG (quality 100).
func shoot(t *testing.T, ctx context.Context, path string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestConsoleBrowserSQLite(t *testing.T) {
	chromium(t)
	dir := t.TempDir()
	raw := "sqlite://" + filepath.Join(dir, "oncely.db")
	orders := demoFilled(t, raw, dir, nil)
	testConsoleBrowser(t, raw, nil, *screenshots, orders)
}

func TestConsoleBrowserPostgres(t *testing.T) {
	chromium(t)
	schema := pgtest.Schema(t, pgtest.Pool(t))
	raw := pgURL(t, "schema="+schema+"&table=ledger")
	orders := demoFilled(t, raw, t.TempDir(), func(ctx context.Context, clk clock.Clock) (ledger.Store, func() error, error) {
		l, err := ledgerurl.Open(ctx, raw, &ledgerurl.Config{Create: true, Clock: clk})
		if err != nil {
			return nil, nil, err
		}
		return l, l.Close, nil
	})
	testConsoleBrowser(t, raw, nil, "", orders)
}
