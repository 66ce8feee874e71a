//go:build unix

package stripemocktest

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// fakeGo puts on PATH a go command that logs each run and, for install,
// writes $GOBIN/stripe-mock (then fails when fail is set).
func fakeGo(t *testing.T, fail bool) (log string) {
	t.Helper()
	bin := t.TempDir()
	log = filepath.Join(bin, "runs.log")
	exit := "0"
	if fail {
		exit = "1"
	}
	script := `#!/bin/sh
echo "$*" >> '` + log + `'
[ "$1" = install ] && [ -n "$GOBIN" ] || exit 2
mkdir -p "$GOBIN" && echo binary > "$GOBIN/stripe-mock"
exit ` + exit + "\n"
	if err := os.WriteFile(filepath.Join(bin, "go"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	return log
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

// Test binaries starting at once install stripe-mock once, each finding
// the whole binary afterwards.
func TestInstallOnce(t *testing.T) {
	log := fakeGo(t, false)
	dir := filepath.Join(t.TempDir(), "stripe-mock", Version)
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Go(func() { errs[i] = install(context.Background(), dir) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatalf("install: %v", err)
		}
	}
	if r := runs(t, log); len(r) != 1 || r[0] != "install "+Module+"@"+Version {
		t.Fatalf("go runs = %q, want one install of %s@%s", r, Module, Version)
	}
	if b, err := os.ReadFile(filepath.Join(dir, binName)); err != nil || string(b) != "binary\n" {
		t.Fatalf("installed binary = %q, %v", b, err)
	}
	if _, err := os.Stat(dir + ".staging"); !os.IsNotExist(err) {
		t.Fatalf("staging directory left behind: %v", err)
	}
}

// A failed install leaves no binary, so the next start installs again.
func TestInstallFailure(t *testing.T) {
	log := fakeGo(t, true)
	dir := filepath.Join(t.TempDir(), "stripe-mock", Version)
	err := install(context.Background(), dir)
	if err == nil || !strings.Contains(err.Error(), "go install") {
		t.Fatalf("install err = %v, want the go install failure", err)
	}
	if _, err := os.Stat(filepath.Join(dir, binName)); !os.IsNotExist(err) {
		t.Fatalf("binary after a failed install: %v", err)
	}
	if err := install(context.Background(), dir); err == nil {
		t.Fatal("second install succeeded with a failing go")
	}
	if r := runs(t, log); len(r) != 2 {
		t.Fatalf("go runs = %q, want the failed install tried again", r)
	}
}

// Without a go command the error says what is missing and matches
// ErrUnavailable.
func TestInstallWithoutGo(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	err := install(context.Background(), filepath.Join(t.TempDir(), Version))
	if me, ok := err.(*MissingError); !ok || me.What != "go" {
		t.Fatalf("err = %v, want a MissingError for go", err)
	}
}

// A binary that exits before it listens is reported with its output.
func TestStartExits(t *testing.T) {
	t.Parallel()
	bin := filepath.Join(t.TempDir(), binName)
	if err := os.WriteFile(bin, []byte("#!/bin/sh\necho broken spec >&2\nexit 3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := startProcess(context.Background(), bin)
	if err == nil || !strings.Contains(err.Error(), "exited before it answered") || !strings.Contains(err.Error(), "broken spec") {
		t.Fatalf("err = %v, want the exit with its output", err)
	}
}
