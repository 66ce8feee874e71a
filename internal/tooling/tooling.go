// Package tooling holds what the test-server helpers of the repository
// share: finding the repository root, installing a pinned tool once when
// several test binaries start at once (npm ci from a committed lockfile,
// go install of a pinned module), a free loopback port, a goroutine-safe
// buffer for a process's output, and skipping the runnable examples when a
// server is missing.
package tooling

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// ErrNoModule is matched by RepoRoot's error when no directory above the
// working directory holds go.mod.
var ErrNoModule = errors.New("no module root")

// RepoRoot returns the repository root: from the working directory up,
// the directory whose go.mod is the module RootModule, or else the first
// that holds a go.mod. The integrations are modules of their own inside
// the repository, and their tests use the tools at its root.
func RepoRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	first := ""
	for dir := wd; ; dir = filepath.Dir(dir) {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil {
			if modulePath(b) == RootModule {
				return dir, nil
			}
			if first == "" {
				first = dir
			}
		}
		if filepath.Dir(dir) == dir {
			if first != "" {
				return first, nil
			}
			return "", fmt.Errorf("%w above %s", ErrNoModule, wd)
		}
	}
}

// RootModule is the module path of the repository's root module.
const RootModule = "github.com/oncely/oncely"

// modulePath returns the path a go.mod's module directive names.
func modulePath(gomod []byte) string {
	for _, line := range strings.Split(string(gomod), "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "module"); ok && (rest == "" || rest[0] == ' ' || rest[0] == '\t') {
			return strings.Trim(strings.TrimSpace(rest), `"`)
		}
	}
	return ""
}

// FreePort returns a loopback port that was free a moment ago.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Buffer collects a process's output; it is safe for concurrent use. With
// Max > 0 it keeps only the first Max bytes: enough for a server's start-up
// lines and an early failure, bounded however much it logs afterwards.
type Buffer struct {
	Max int

	mu sync.Mutex
	b  []byte
}

// Write appends p (up to Max) and reports all of p written.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := len(p)
	if b.Max > 0 {
		n = min(max(b.Max-len(b.b), 0), n)
	}
	b.b = append(b.b, p[:n]...)
	return len(p), nil
}

// String returns what was kept.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.b)
}

// SkipExamples adds ^Example to the -test.skip flag, parsing the flags
// first when they are not: a runnable example cannot skip itself when the
// server it needs is missing. It fails when called outside a test binary.
func SkipExamples() error {
	if !flag.Parsed() {
		flag.Parse()
	}
	f := flag.Lookup("test.skip")
	if f == nil {
		return errors.New("tooling: no -test.skip flag; is Main called from TestMain?")
	}
	skip := "^Example"
	if s := f.Value.String(); s != "" {
		skip = s + "|" + skip
	}
	return flag.Set("test.skip", skip)
}
