package oncely_test

import (
	"go/build"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const module = "github.com/oncely/oncely"

// layers are ARCHITECTURE.md's rules: which of the module's packages a
// package (and every package under it) may not import. Tests are free.
var layers = []struct {
	pkg    string
	forbid []string
	why    string
}{
	{"clock", []string{""}, "a leaf: the time every component reads"},
	{"errclass", []string{""}, "a leaf: the error classes the executor and the HTTP layer share"},
	{"ledger", []string{"client", "providers", "reconcile", "fakes"}, "the ledger contract and its backends know nothing of the executor"},
	{"providers", []string{"client", "reconcile", "ledger"}, "the HTTP layer and the adapters know nothing of the executor or the ledger"},
	{"fakes", []string{"client", "reconcile", "ledger", "providers"}, "the fakes are providers, not clients"},
	{"client", []string{"providers", "reconcile", "ledger/", "fakes"}, "the executor depends on the ledger contract only, never on a backend or a provider"},
	{"reconcile", []string{"ledger/", "fakes", "providers/"}, "the reconcile policy is driven by adapters' declarations, not by per-provider code"},
}

// TestLayers checks the import rules of ARCHITECTURE.md on every non-test
// file of the module.
func TestLayers(t *testing.T) {
	t.Parallel()
	err := filepath.WalkDir(".", func(dir string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		if name := d.Name(); dir != "." && (strings.HasPrefix(name, ".") || name == "node_modules" || name == "testdata" || name == "tools") {
			return filepath.SkipDir
		}
		p, err := build.ImportDir(dir, 0)
		if err != nil {
			return nil // no Go files, or only test files
		}
		rel := filepath.ToSlash(dir)
		for _, l := range layers {
			if rel != l.pkg && !strings.HasPrefix(rel, l.pkg+"/") {
				continue
			}
			for _, imp := range p.Imports {
				if !strings.HasPrefix(imp, module+"/") {
					continue
				}
				dep := strings.TrimPrefix(imp, module+"/")
				for _, f := range l.forbid {
					if within(dep, f) && !within(dep, l.pkg) && !strings.HasPrefix(dep, "internal/") {
						t.Errorf("%s imports %s: %s", rel, dep, l.why)
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// within reports whether pkg is rule, or under it: "" is every package,
// "ledger/" every package under ledger but ledger itself.
func within(pkg, rule string) bool {
	switch {
	case rule == "":
		return true
	case strings.HasSuffix(rule, "/"):
		return strings.HasPrefix(pkg, rule)
	}
	return pkg == rule || strings.HasPrefix(pkg, rule+"/")
}

// frameworks are the module paths of the agent frameworks and model SDKs
// that integrations use: each integration is a module of its own, so the
// core module requires none of them (not even indirectly).
var frameworks = []string{
	"github.com/anthropics/anthropic-sdk-go",
	"github.com/openai/openai-go",
	"github.com/cloudwego/eino",
	"github.com/firebase/genkit",
	"go.temporal.io/sdk",
	"github.com/dbos-inc/dbos-transact-golang",
}

// TestCoreRequiresNoFramework checks the root go.mod: a user of the core
// compiles no framework.
func TestCoreRequiresNoFramework(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("go.mod")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		fields := strings.Fields(strings.TrimPrefix(strings.TrimSpace(line), "require "))
		if len(fields) == 0 {
			continue
		}
		for _, f := range frameworks {
			if fields[0] == f || strings.HasPrefix(fields[0], f+"/") {
				t.Errorf("go.mod requires %s: an integration's dependency belongs in its own module", fields[0])
			}
		}
	}
}
