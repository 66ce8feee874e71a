//go:build unix

// Package githubspec gives tests GitHub's published OpenAPI description,
// from the npm package @octokit/openapi pinned in the repository's
// tools/octokit (installed with npm ci from its lockfile), cut to the
// operations the fake GitHub and oncely's GitHub adapter use by the
// committed script tools/octokit/cut-openapi.mjs: the whole description
// (13 MB) is more than Stoplight Prism starts on in reasonable time and
// memory. Components are kept, with one rewrite: an untyped nullable
// schema ("oneOf: [string, integer], nullable: true"), which Prism's
// schema compiler refuses and then validates nothing of the operation,
// becomes the equivalent anyOf of nullable alternatives. Pass the path to
// prismtest.Start.
//
// Without node (or npm, when an install is needed) the tests that need it
// are skipped with the reason, unless CI=true, where that is a failure.
package githubspec

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/oncely/oncely/internal/tooling"
)

var cut struct {
	once sync.Once
	path string
	err  error
	skip bool
}

// Path returns the path of the cut description, made once per test
// binary in a new directory under the system's temporary directory.
func Path(tb testing.TB) string {
	tb.Helper()
	cut.once.Do(func() { cut.path, cut.skip, cut.err = build() })
	switch {
	case cut.err != nil && cut.skip && os.Getenv("CI") != "true":
		tb.Skip(cut.err)
	case cut.err != nil:
		tb.Fatal(cut.err)
	}
	return cut.path
}

// Dir returns tools/octokit with its node_modules installed; skip tells a
// missing tool from a failure.
func Dir() (dir string, skip bool, err error) {
	root, err := tooling.RepoRoot()
	if err != nil {
		return "", false, err
	}
	dir = filepath.Join(root, "tools", "octokit")
	if _, err := exec.LookPath("node"); err != nil {
		return "", true, fmt.Errorf("githubspec: node not found (Debian package nodejs): %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), tooling.NPMTimeout)
	defer cancel()
	if err := tooling.NPMCI(ctx, dir); err != nil {
		return "", errors.Is(err, tooling.ErrNoNPM), fmt.Errorf("githubspec: %w", err)
	}
	return dir, false, nil
}

func build() (string, bool, error) {
	dir, skip, err := Dir()
	if err != nil {
		return "", skip, err
	}
	tmp, err := os.MkdirTemp("", "oncely-githubspec-")
	if err != nil {
		return "", false, err
	}
	out := filepath.Join(tmp, "github-issues.openapi.json")
	cmd := exec.Command("node", filepath.Join(dir, "cut-openapi.mjs"), out)
	cmd.Dir = dir
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", false, fmt.Errorf("githubspec: node cut-openapi.mjs: %v\n%s", err, b)
	}
	return out, false, nil
}
