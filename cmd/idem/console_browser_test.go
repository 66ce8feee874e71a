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

	"github.com/idemkit/idemkit/clock"
	"github.com/idemkit/idemkit/ledger"
	"github.com/idemkit/idemkit/ledger/ledgerpg/pgtest"
	"github.com/idemkit/idemkit/ledger/ledgersqlite"
)

// screenshots, when set, is the directory the browser test writes the
// README's screenshots to (make screenshots).
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

// seedOrder adds to a seeded ledger the uncertain order of an agent run: a
// place_order call whose request timed out after it was sent.
func seedOrder(t *testing.T, s ledger.Store, clk *clock.Fake) {
	t.Helper()
	ctx := context.Background()
	now := clk.Now()
	clk.Set(now.Add(-20 * time.Minute))
	if _, err := s.Claim(ctx, ledger.ClaimParams{Key: "k-order", Tool: "place_order", RunID: "run-order", Owner: "owner-k-order",
		LeaseUntil: clk.Now().Add(time.Minute), Fingerprint: "fp", ExpiresAt: clk.Now().Add(24 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if err := s.Fail(ctx, "k-order", "owner-k-order", ledger.Failure{Reason: "timeout after the order request was sent"}); err != nil {
		t.Fatal(err)
	}
	clk.Set(now)
}

// testConsoleBrowser opens the console over raw in Chromium, finds the
// uncertain order, resolves it with a note, and sees it leave the list;
// then sees the list refresh by itself when another action is resolved
// elsewhere.
func testConsoleBrowser(t *testing.T, raw string, env []string, shots string) {
	base := startConsole(t, env, "--ledger", raw, "--refresh", "300ms")
	ctx := browser(t)
	// The list refreshes itself in place, so what the test reads of it is
	// read in one evaluation in the page, and it waits on the DOM by
	// polling on its mutations.
	order := `tr[data-key="k-order"]`
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/"), waitFor(order, true)); err != nil {
		t.Fatalf("the uncertain order is not listed: %v", err)
	}
	row, err := chromedp.Run(ctx, chromedp.Evaluate[struct{ Reason, Href string }](`(() => {
		const r = document.querySelector('`+order+`');
		return {Reason: r.querySelector('td.outcome').textContent, Href: r.querySelector('a.key').href};
	})()`))
	if err != nil {
		t.Fatalf("reading the order's row: %v", err)
	}
	if !strings.Contains(row.Reason, "timeout after the order request was sent") {
		t.Errorf("the list shows %q as the order's reason", row.Reason)
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
	rec := decodeJSON[recordJSON](t, idem(t, env, "ledger", "show", "k-order", "--ledger", raw, "--json").wantOK(t).stdout)
	if rec.State != ledger.StateDone || rec.Ref != "ord_77" || rec.ResolvedBy != "alice" || !strings.Contains(rec.Summary, "shop's admin") {
		t.Errorf("the ledger's record after the browser resolved it: %+v", rec)
	}
	if err := chromedp.Do(ctx,
		chromedp.Navigate(base+"/"),
		waitFor(`tr[data-key="k-uncertain"]`, true),
		waitFor(order, false),
	); err != nil {
		t.Fatalf("the resolved order is still listed: %v", err)
	}
	// Resolved elsewhere (the CLI), the other uncertain action leaves the
	// open page by the live refresh, without a reload.
	idem(t, env, "ledger", "resolve", "k-uncertain", "--ledger", raw, "--done", "--summary", "found by hand").wantOK(t)
	if err := chromedp.Do(ctx, waitFor(`tr[data-key="k-uncertain"]`, false)); err != nil {
		t.Fatalf("the list did not refresh: %v", err)
	}
	if shots != "" {
		if err := chromedp.Do(ctx, chromedp.Navigate(base+"/overview?range=1h"), chromedp.WaitVisible(chromedp.CSS(`svg.chart`))); err != nil {
			t.Fatal(err)
		}
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
	raw := newSQLiteLedger(t)
	clk := clock.NewFake(time.Now())
	s, err := ledgersqlite.Open(context.Background(), strings.TrimPrefix(raw, "sqlite://"), &ledgersqlite.Config{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	seedOrder(t, s, clk)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	testConsoleBrowser(t, raw, nil, *screenshots)
}

func TestConsoleBrowserPostgres(t *testing.T) {
	schema := pgtest.Schema(t, pgtest.Pool(t))
	raw := pgURL(t, "schema="+schema+"&table=ledger")
	seedURL(t, raw, seedOrder)
	testConsoleBrowser(t, raw, nil, "")
}
