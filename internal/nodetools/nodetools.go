// Package nodetools gives tests a Node package pinned in the repository's
// tools/<name> folder (an official client, Stoplight Prism, the MCP
// reference servers), installed with npm ci from its lockfile, and runs
// scripts with it.
//
// Without node or npm the tests that need them are skipped with the
// reason, unless CI=true, where that is a failure.
package nodetools

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/oncely/oncely/internal/tooling"
)

type setup struct {
	once    sync.Once
	dir     string
	node    string
	missing string // why the tools are unavailable
	failure error
}

var (
	mu     sync.Mutex
	setups = map[string]*setup{}
)

// Dir returns tools/<name> with its node_modules installed, and the path
// of node. It skips tb when node or npm is missing (fails it under
// CI=true) and fails it when the install fails.
func Dir(tb testing.TB, name string) (toolsDir, nodePath string) {
	tb.Helper()
	mu.Lock()
	s, ok := setups[name]
	if !ok {
		s = &setup{}
		setups[name] = s
	}
	mu.Unlock()
	s.once.Do(func() { s.run(name) })
	switch {
	case s.failure != nil:
		tb.Fatal(s.failure)
	case s.missing != "" && os.Getenv("CI") == "true":
		tb.Fatalf("nodetools: %s (CI=true: not skipped)", s.missing)
	case s.missing != "":
		tb.Skip("nodetools: " + s.missing)
	}
	return s.dir, s.node
}

func (s *setup) run(name string) {
	root, err := tooling.RepoRoot()
	switch {
	case errors.Is(err, tooling.ErrNoModule):
		s.missing = err.Error()
		return
	case err != nil:
		s.failure = err
		return
	}
	s.dir = filepath.Join(root, "tools", name)
	if s.node, err = exec.LookPath("node"); err != nil {
		s.missing = "node not found; it runs the official Node client in tools/" + name
		return
	}
	if _, err := exec.LookPath("npm"); err != nil {
		if _, serr := os.Stat(filepath.Join(s.dir, "node_modules")); serr != nil {
			s.missing = "npm not found; it installs tools/" + name
			return
		}
	}
	s.failure = tooling.NPMCI(context.Background(), s.dir)
}

// Run runs node on script (a file in tools/<name>) with env added to the
// environment, and returns its combined output. A non-zero exit fails tb
// with the output. The script gets at most a minute.
func Run(tb testing.TB, name, script string, env ...string) string {
	tb.Helper()
	dir, node := Dir(tb, name)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join(dir, script))
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		tb.Fatalf("node %s: %v\n%s", script, err, out)
	}
	return string(out)
}
