//go:build unix

package stripemocktest

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

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
