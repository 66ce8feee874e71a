// Package mcptest gives the gateway's tests the MCP reference servers and
// the TypeScript MCP SDK, installed with npm ci from the lockfile in the
// repository's tools/mcp.
//
// Without node or npm the tests that need them are skipped with the
// reason, unless CI=true, where that is a failure.
package mcptest

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/idemkit/idemkit/internal/tooling"
)

var (
	once    sync.Once
	dir     string
	node    string
	missing string // why the tools are unavailable
	failure error
)

// Dir returns tools/mcp with its node_modules installed, and the path of
// node. It skips tb when node or npm is missing (fails it under CI=true)
// and fails it when the install fails.
func Dir(tb testing.TB) (toolsDir, nodePath string) {
	tb.Helper()
	once.Do(setup)
	switch {
	case failure != nil:
		tb.Fatal(failure)
	case missing != "" && os.Getenv("CI") == "true":
		tb.Fatalf("mcptest: %s (CI=true: not skipped)", missing)
	case missing != "":
		tb.Skip("mcptest: " + missing)
	}
	return dir, node
}

func setup() {
	root, err := tooling.RepoRoot()
	switch {
	case errors.Is(err, tooling.ErrNoModule):
		missing = err.Error()
		return
	case err != nil:
		failure = err
		return
	}
	dir = filepath.Join(root, "tools", "mcp")
	if node, err = exec.LookPath("node"); err != nil {
		missing = "node not found; it runs the MCP reference servers"
		return
	}
	if _, err := exec.LookPath("npm"); err != nil {
		if _, serr := os.Stat(filepath.Join(dir, "node_modules")); serr != nil {
			missing = "npm not found; it installs tools/mcp"
			return
		}
	}
	failure = tooling.NPMCI(context.Background(), dir)
}

// Memory returns the command that runs @modelcontextprotocol/server-memory
// with its knowledge graph in file.
func Memory(tb testing.TB, file string) (command []string, env map[string]string) {
	d, n := Dir(tb)
	return []string{n, filepath.Join(d, "node_modules", "@modelcontextprotocol", "server-memory", "dist", "index.js")},
		map[string]string{"MEMORY_FILE_PATH": file}
}

// Everything returns the command that runs
// @modelcontextprotocol/server-everything over stdio.
func Everything(tb testing.TB) []string {
	d, n := Dir(tb)
	return []string{n, filepath.Join(d, "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js"), "stdio"}
}
