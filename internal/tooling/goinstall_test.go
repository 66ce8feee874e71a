//go:build unix

package tooling

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// fakeGo puts on PATH a go command that logs each run and, for install,
// writes $GOBIN/tool (then fails when fail is set).
func fakeGo(t *testing.T, fail bool) (log string) {
	t.Helper()
	bin := t.TempDir()
	log = filepath.Join(bin, "runs.log")
	exit := "0"
	if fail {
		exit = "1"
	}
	script := `#!/bin/sh
echo "$* GOFLAGS=$GOFLAGS" >> '` + log + `'
[ "$1" = install ] && [ -n "$GOBIN" ] || exit 2
mkdir -p "$GOBIN" && echo binary > "$GOBIN/tool"
exit ` + exit + "\n"
	if err := os.WriteFile(filepath.Join(bin, "go"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	return log
}

const testPkg = "example.com/tool@v1.2.3"

// Test binaries starting at once install the tool once, each finding the
// whole binary afterwards.
func TestGoInstallOnce(t *testing.T) {
	log := fakeGo(t, false)
	dir := filepath.Join(t.TempDir(), "tool", "v1.2.3")
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Go(func() { errs[i] = GoInstall(context.Background(), dir, testPkg, "tool") })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatalf("install: %v", err)
		}
	}
	if r := runs(t, log); len(r) != 1 || r[0] != "install "+testPkg+" GOFLAGS=" {
		t.Fatalf("go runs = %q, want one install of %s with GOFLAGS cleared", r, testPkg)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "tool")); err != nil || string(b) != "binary\n" {
		t.Fatalf("installed binary = %q, %v", b, err)
	}
	if _, err := os.Stat(dir + ".staging"); !os.IsNotExist(err) {
		t.Fatalf("staging directory left behind: %v", err)
	}
}

// A failed install leaves no binary, so the next start installs again.
func TestGoInstallFailure(t *testing.T) {
	log := fakeGo(t, true)
	dir := filepath.Join(t.TempDir(), "tool", "v1.2.3")
	err := GoInstall(context.Background(), dir, testPkg, "tool")
	if err == nil || !strings.Contains(err.Error(), "go install") {
		t.Fatalf("install err = %v, want the go install failure", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "tool")); !os.IsNotExist(err) {
		t.Fatalf("binary after a failed install: %v", err)
	}
	if err := GoInstall(context.Background(), dir, testPkg, "tool"); err == nil {
		t.Fatal("second install succeeded with a failing go")
	}
	if r := runs(t, log); len(r) != 2 {
		t.Fatalf("go runs = %q, want the failed install tried again", r)
	}
}

// Without a go command the error matches ErrNoGo; an installed binary
// needs no go command.
func TestGoInstallWithoutGo(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	dir := filepath.Join(t.TempDir(), "v1")
	if err := GoInstall(context.Background(), dir, testPkg, "tool"); !errors.Is(err, ErrNoGo) {
		t.Fatalf("err = %v, want ErrNoGo", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tool"), []byte("binary\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := GoInstall(context.Background(), dir, testPkg, "tool"); err != nil {
		t.Fatalf("installed binary, no go: %v", err)
	}
}
