package oncely_test

import (
	"bytes"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// oldNames matches the project's names before it was oncely: the module,
// the command, its packages and its environment variables. Words of the
// same stem (idempotent, idempotency) do not match.
var oldNames = regexp.MustCompile(`(?i)idemkit|\bidem(func|test|_|-)|(otel|temporal|dbos)idem\b|\bidem\b`)

// renameTable bounds the one place that may spell the old names: the
// changelog's table of what was renamed.
const (
	renameTableStart = "<!-- rename table -->"
	renameTableEnd   = "<!-- end of rename table -->"
)

// TestNoOldNames fails on any spelling of the old names in a file the
// repository tracks, outside the changelog's rename table.
func TestNoOldNames(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	files := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
	if len(files) < 100 {
		t.Fatalf("git lists %d files; want the whole repository", len(files))
	}
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			if os.IsNotExist(err) {
				continue // deleted in the working tree
			}
			t.Fatal(err)
		}
		if bytes.IndexByte(b, 0) >= 0 {
			continue // binary
		}
		if name == "names_test.go" {
			continue // the pattern itself
		}
		if name == "CHANGELOG.md" {
			b = withoutRenameTable(t, b)
		}
		for i, line := range strings.Split(string(b), "\n") {
			if m := oldNames.FindString(line); m != "" {
				t.Errorf("%s:%d: old name %q: %s", name, i+1, m, strings.TrimSpace(line))
			}
		}
	}
	if oldNames.FindString("go install github.com/idemkit/idemkit/cmd/idem") == "" || oldNames.FindString("idempotency-key idempotent") != "" {
		t.Fatal("the pattern does not tell old names from their stem")
	}
}

func withoutRenameTable(t *testing.T, b []byte) []byte {
	start := bytes.Index(b, []byte(renameTableStart))
	end := bytes.Index(b, []byte(renameTableEnd))
	if start < 0 || end < start {
		t.Fatalf("CHANGELOG.md: no rename table between %q and %q", renameTableStart, renameTableEnd)
	}
	return append(b[:start:start], b[end:]...)
}
