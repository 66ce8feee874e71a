// Package mcptest gives the gateway's tests the MCP reference servers and
// the TypeScript MCP SDK, installed with npm ci from the lockfile in the
// repository's tools/mcp.
//
// Without node or npm the tests that need them are skipped with the
// reason, unless CI=true, where that is a failure.
package mcptest

import (
	"path/filepath"
	"testing"

	"github.com/oncely/oncely/internal/nodetools"
)

// Dir returns tools/mcp with its node_modules installed, and the path of
// node. It skips tb when node or npm is missing (fails it under CI=true)
// and fails it when the install fails.
func Dir(tb testing.TB) (toolsDir, nodePath string) {
	tb.Helper()
	return nodetools.Dir(tb, "mcp")
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
