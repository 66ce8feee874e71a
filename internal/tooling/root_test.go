package tooling

import (
	"os"
	"path/filepath"
	"testing"
)

// From a nested module's directory, RepoRoot finds the root module's
// directory, not the nested go.mod's.
func TestRepoRootFromNestedModule(t *testing.T) {
	root := t.TempDir()
	nested := filepath.Join(root, "agent", "x")
	if err := os.MkdirAll(nested, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(dir, text string) {
		if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(root, "// the root\nmodule "+RootModule+"\n\ngo 1.26.0\n")
	write(nested, "module "+RootModule+"/agent/x\n\ngo 1.26.0\n")
	t.Chdir(nested)
	if got, err := RepoRoot(); err != nil || got != root {
		t.Fatalf("RepoRoot() = %q, %v; want %q", got, err, root)
	}
	// Without the root module above, the nearest go.mod.
	write(root, "module example.com/other\n")
	if got, err := RepoRoot(); err != nil || got != nested {
		t.Fatalf("RepoRoot() = %q, %v; want %q", got, err, nested)
	}
}
