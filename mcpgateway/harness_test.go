package mcpgateway_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/oncely/oncely/internal/tooling"
	"github.com/oncely/oncely/mcpgateway/internal/mcptest"
)

func TestMain(m *testing.M) {
	if dir := os.Getenv(envUpstream); dir != "" {
		os.Exit(upstreamMain(dir))
	}
	code := m.Run()
	if oncelyBin.dir != "" {
		_ = os.RemoveAll(oncelyBin.dir)
	}
	os.Exit(code)
}

var oncelyBin struct {
	once sync.Once
	path string
	err  error
	out  []byte
	dir  string
}

// oncelyBinary builds the oncely command once per test binary: the tests
// drive "oncely mcp" as a client spawns it.
func oncelyBinary(t *testing.T) string {
	t.Helper()
	oncelyBin.once.Do(func() {
		root, err := tooling.RepoRoot()
		if err != nil {
			oncelyBin.err = err
			return
		}
		if oncelyBin.dir, oncelyBin.err = os.MkdirTemp("", "oncely-oncely-"); oncelyBin.err != nil {
			return
		}
		oncelyBin.path = filepath.Join(oncelyBin.dir, "oncely")
		cmd := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-o", oncelyBin.path, "./cmd/oncely")
		cmd.Dir = root
		oncelyBin.out, oncelyBin.err = cmd.CombinedOutput()
	})
	if oncelyBin.err != nil {
		t.Fatalf("building oncely: %v\n%s", oncelyBin.err, oncelyBin.out)
	}
	return oncelyBin.path
}

// setup is one gateway configuration over the purpose-built upstream
// (the test binary), with its journal directory and ledger.
type setup struct {
	dir    string // the upstream's journal, the configuration, the ledger
	config string // the configuration file
	ledger string // the ledger URL
}

// newSetup writes a configuration whose upstream is the purpose-built
// one, with the given tools and top-level fields.
func newSetup(t *testing.T, tools map[string]any, top map[string]any) *setup {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	s := &setup{dir: t.TempDir()}
	cfg := map[string]any{
		"upstream": map[string]any{"command": []string{self}, "env": map[string]string{envUpstream: s.dir}},
		"tools":    tools,
	}
	for k, v := range top {
		cfg[k] = v
	}
	return s.write(t, cfg)
}

// newSetupFor writes a configuration of another upstream.
func newSetupFor(t *testing.T, cfg map[string]any) *setup {
	t.Helper()
	return (&setup{dir: t.TempDir()}).write(t, cfg)
}

func (s *setup) write(t *testing.T, cfg map[string]any) *setup {
	t.Helper()
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	s.config = filepath.Join(s.dir, "gateway.json")
	s.ledger = "sqlite://" + filepath.Join(s.dir, "ledger.db")
	if err := os.WriteFile(s.config, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return s
}

// args are the arguments of oncely that serve this setup over stdio.
func (s *setup) args(extra ...string) []string {
	return append([]string{"mcp", "--config", s.config, "--ledger", s.ledger}, extra...)
}

// env is the environment oncely runs in: PATH and HOME, plus extra.
func env(t *testing.T, extra ...string) []string {
	return append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}, extra...)
}

// stdio spawns oncely mcp for this setup and connects a go-sdk client to it
// over stdio; the session ends with the test.
func (s *setup) stdio(t *testing.T, opts *mcp.ClientOptions, environ []string, extra ...string) *mcp.ClientSession {
	t.Helper()
	cs, _ := s.stdioLog(t, opts, environ, extra...)
	return cs
}

// stdioLog is stdio, with what oncely mcp writes on stderr.
func (s *setup) stdioLog(t *testing.T, opts *mcp.ClientOptions, environ []string, extra ...string) (*mcp.ClientSession, *tooling.Buffer) {
	t.Helper()
	cmd := exec.Command(oncelyBinary(t), s.args(extra...)...)
	cmd.Env = environ
	if cmd.Env == nil {
		cmd.Env = env(t)
	}
	stderr := &tooling.Buffer{Max: 1 << 20}
	cmd.Stderr = stderr
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "go-sdk-test-client", Version: "1"}, opts).
		Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connecting to oncely mcp: %v\n%s", err, stderr)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs, stderr
}

// http starts oncely mcp --http on a loopback port for this setup and
// returns its URL; the process ends with the test.
func (s *setup) http(t *testing.T, environ []string, extra ...string) string {
	t.Helper()
	cmd := exec.Command(oncelyBinary(t), s.args(append([]string{"--http", "127.0.0.1:0"}, extra...)...)...)
	cmd.Env = environ
	if cmd.Env == nil {
		cmd.Env = env(t)
	}
	stderr := &tooling.Buffer{Max: 1 << 20}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
	})
	var url string
	waitFor(t, "oncely mcp to listen", func() bool {
		_, rest, ok := strings.Cut(stderr.String(), "serving streamable HTTP on ")
		if ok {
			url, _, ok = strings.Cut(rest, " ")
		}
		return ok
	})
	return url
}

// tsResult is what the TypeScript client prints per call.
type tsResult struct {
	Content []struct {
		Type, Text string
	} `json:"content"`
	StructuredContent map[string]any `json:"structuredContent"`
	IsError           bool           `json:"isError"`
	Meta              map[string]any `json:"_meta"`
	Error             *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
	Progress []map[string]any `json:"progress"`
}

func (r tsResult) outcome() string { s, _ := r.Meta["oncely/outcome"].(string); return s }

func (r tsResult) text() string {
	var b strings.Builder
	for _, c := range r.Content {
		b.WriteString(c.Text + "\n")
	}
	return b.String()
}

// runTS runs tools/mcp/client.mjs with the plan, against the command
// (or "--url", URL); it returns one raw JSON line per call or list.
func runTS(t *testing.T, plan map[string]any, command ...string) []json.RawMessage {
	t.Helper()
	return startTS(t, plan, command...)()
}

// startTS starts the TypeScript client; the function it returns waits for
// it and returns its lines.
func startTS(t *testing.T, plan map[string]any, command ...string) func() []json.RawMessage {
	t.Helper()
	dir, node := mcptest.Dir(t)
	b, err := json.Marshal(plan)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	cmd := exec.CommandContext(ctx, node, append([]string{filepath.Join(dir, "client.mjs")}, command...)...)
	cmd.Env = env(t)
	cmd.Stdin = bytes.NewReader(b)
	stderr := &tooling.Buffer{Max: 1 << 20}
	var stdout bytes.Buffer
	cmd.Stderr, cmd.Stdout = stderr, &stdout
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	return func() []json.RawMessage {
		t.Helper()
		defer cancel()
		if err := cmd.Wait(); err != nil {
			t.Fatalf("TypeScript client: %v\n%s", err, stderr.String())
		}
		var lines []json.RawMessage
		for _, l := range strings.Split(strings.TrimSpace(stdout.String()), "\n") {
			if l != "" {
				lines = append(lines, json.RawMessage(l))
			}
		}
		return lines
	}
}

// runTSCalls runs a plan of calls and decodes the results.
func runTSCalls(t *testing.T, plan map[string]any, command ...string) []tsResult {
	t.Helper()
	return decodeTS(t, runTS(t, plan, command...))
}

func decodeTS(t *testing.T, lines []json.RawMessage) []tsResult {
	t.Helper()
	var out []tsResult
	for _, l := range lines {
		var r tsResult
		if err := json.Unmarshal(l, &r); err != nil {
			t.Fatalf("TypeScript client printed %s: %v", l, err)
		}
		out = append(out, r)
	}
	return out
}

// tsCall is one step of a TypeScript plan.
func tsCall(name string, args map[string]any, meta map[string]any) map[string]any {
	return map[string]any{"name": name, "arguments": args, "_meta": meta}
}

// rawClient speaks newline-delimited JSON-RPC to an oncely mcp process
// directly, as a hostile client would.
type rawClient struct {
	t      *testing.T
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *bufio.Reader
	stderr *tooling.Buffer
	lines  chan []byte
}

// raw spawns oncely mcp for this setup with raw pipes.
func (s *setup) raw(t *testing.T, environ []string, extra ...string) *rawClient {
	t.Helper()
	cmd := exec.Command(oncelyBinary(t), s.args(extra...)...)
	cmd.Env = environ
	if cmd.Env == nil {
		cmd.Env = env(t)
	}
	return rawCommand(t, cmd)
}

// rawCommand starts cmd, an MCP server over stdio, with raw pipes.
func rawCommand(t *testing.T, cmd *exec.Cmd) *rawClient {
	t.Helper()
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	c := &rawClient{t: t, cmd: cmd, in: in, stderr: &tooling.Buffer{Max: 1 << 20}, lines: make(chan []byte, 64)}
	cmd.Stderr = c.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		br := bufio.NewReaderSize(out, 1<<20)
		for {
			l, err := br.ReadBytes('\n')
			if len(l) > 0 {
				c.lines <- l
			}
			if err != nil {
				close(c.lines)
				return
			}
		}
	}()
	t.Cleanup(func() {
		_ = in.Close()
		if cmd.ProcessState != nil { // the test waited for it
			return
		}
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(time.Minute):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	return c
}

// send writes one line (a newline is added).
func (c *rawClient) send(line string) {
	c.t.Helper()
	if _, err := io.WriteString(c.in, line+"\n"); err != nil {
		c.t.Fatalf("writing to the gateway: %v\n%s", err, c.stderr)
	}
}

// next reads the next message the gateway wrote.
func (c *rawClient) next() map[string]any {
	c.t.Helper()
	select {
	case l, ok := <-c.lines:
		if !ok {
			c.t.Fatalf("the gateway closed its output; exited: %v\n%s", c.cmd.ProcessState, c.stderr)
		}
		var m map[string]any
		if err := json.Unmarshal(l, &m); err != nil {
			c.t.Fatalf("the gateway wrote %q: %v", l, err)
		}
		return m
	case <-time.After(2 * time.Minute):
		c.t.Fatalf("no message from the gateway\n%s", c.stderr)
	}
	return nil
}

// nextRaw reads the next line the gateway wrote, as it is.
func (c *rawClient) nextRaw() []byte {
	c.t.Helper()
	select {
	case l, ok := <-c.lines:
		if !ok {
			c.t.Fatalf("the gateway closed its output\n%s", c.stderr)
		}
		return l
	case <-time.After(2 * time.Minute):
		c.t.Fatalf("no message from the gateway\n%s", c.stderr)
	}
	return nil
}

// initialize performs the handshake at the given protocol version.
func (c *rawClient) initialize(version string) {
	c.t.Helper()
	c.send(`{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"` + version + `","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	if m := c.next(); m["id"] != "init" || m["result"] == nil {
		c.t.Fatalf("initialize: %v", m)
	}
	c.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
}
