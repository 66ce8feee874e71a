//go:build unix

package tooling

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// fakeNPM writes an npm that logs each run (with the .npmrc it found) to a
// file and, for "ci", writes node_modules/dynalite/index.js (then fails when
// fail is set).
func fakeNPM(t *testing.T, fail bool) (npm, log string) {
	t.Helper()
	bin := t.TempDir()
	log = filepath.Join(bin, "runs.log")
	exit := "0"
	if fail {
		exit = "1"
	}
	script := `#!/bin/sh
PATH=/bin:/usr/bin
echo "$PWD $* npmrc=$(cat .npmrc 2>/dev/null)" >> '` + log + `'
[ "$1" = ci ] && [ -f package-lock.json ] && [ -f package.json ] || exit 2
mkdir -p node_modules/dynalite node_modules/other
echo 'module.exports = 1' > node_modules/dynalite/index.js
echo 'module.exports = 2' > node_modules/other/index.js
exit ` + exit + "\n"
	npm = filepath.Join(bin, "npm")
	if err := os.WriteFile(npm, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return npm, log
}

// toolsCopy is a directory holding what a tools/ directory holds.
func toolsCopy(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range map[string]string{"package.json": "{}", "package-lock.json": "{}", ".npmrc": "fund=false\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func runs(t *testing.T, log string) []string {
	t.Helper()
	b, err := os.ReadFile(log)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

// Concurrent installs into one folder (as from several test binaries; a
// separate open file per install, so the flocks conflict as across
// processes) run npm once, in the staging folder, and leave a whole tree.
func TestNPMCIConcurrent(t *testing.T) {
	t.Parallel()
	npm, log := fakeNPM(t, false)
	dir := toolsCopy(t)
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() { errs[i] = npmCI(context.Background(), dir, npm) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("install %d: %v", i, err)
		}
	}
	if got := runs(t, log); len(got) != 1 || !strings.HasPrefix(got[0], filepath.Join(dir, ".node_modules.staging")+" ci ") ||
		!strings.HasSuffix(got[0], " npmrc=fund=false") {
		t.Errorf("npm runs = %q, want one npm ci in the staging folder, with the .npmrc", got)
	}
	for _, f := range []string{"node_modules/dynalite/index.js", "node_modules/other/index.js"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("after install: %v", err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, ".node_modules.staging")); !os.IsNotExist(err) {
		t.Errorf("staging folder left behind: %v", err)
	}
}

// A failed npm ci leaves no node_modules, even though it wrote part of one,
// nor a staging folder; the next install starts over.
func TestNPMCIFailed(t *testing.T) {
	t.Parallel()
	npm, log := fakeNPM(t, true)
	dir := toolsCopy(t)
	if err := npmCI(context.Background(), dir, npm); err == nil {
		t.Fatal("install with a failing npm succeeded")
	}
	for _, f := range []string{"node_modules", ".node_modules.staging"} {
		if _, err := os.Stat(filepath.Join(dir, f)); !os.IsNotExist(err) {
			t.Errorf("%s after a failed install: %v", f, err)
		}
	}
	good, _ := fakeNPM(t, false)
	if err := npmCI(context.Background(), dir, good); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules/dynalite/index.js")); err != nil {
		t.Error(err)
	}
	if got := runs(t, log); len(got) != 1 {
		t.Errorf("failing npm ran %d times, want 1", len(got))
	}
}

// A staging folder left by a crash is replaced.
func TestNPMCIAfterCrash(t *testing.T) {
	t.Parallel()
	npm, _ := fakeNPM(t, false)
	dir := toolsCopy(t)
	stale := filepath.Join(dir, ".node_modules.staging", "node_modules", "half")
	if err := os.MkdirAll(stale, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := npmCI(context.Background(), dir, npm); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "half")); !os.IsNotExist(err) {
		t.Errorf("the crashed install's files reached node_modules: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules/dynalite/index.js")); err != nil {
		t.Error(err)
	}
}
