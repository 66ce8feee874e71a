//go:build unix

package ledgerdynamo_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// missingTool says which program the tests need and the machine lacks.
type missingTool struct{ name, why string }

func (m *missingTool) Error() string { return fmt.Sprintf("%s not found (%s)", m.name, m.why) }

// dynalite is a dynalite server this process started.
type dynalite struct {
	endpoint string
	cmd      *exec.Cmd
	exited   chan struct{}
	out      *lockedBuffer
}

// toolsDir is tools/dynalite of the repository, whose lockfile pins dynalite.
func toolsDir() (string, error) {
	return filepath.Abs(filepath.Join("..", "..", "tools", "dynalite"))
}

// startDynalite installs dynalite from the lockfile when node_modules is
// missing, starts it on a free loopback port in its own process group and
// waits until it answers.
func startDynalite(ctx context.Context) (*dynalite, error) {
	node, err := exec.LookPath("node")
	if err != nil {
		return nil, &missingTool{"node", "needed to run dynalite, the DynamoDB-compatible test server; or set DYNAMODB_ENDPOINT"}
	}
	dir, err := toolsDir()
	if err != nil {
		return nil, err
	}
	cli := filepath.Join(dir, "node_modules", "dynalite", "cli.js")
	if _, err := os.Stat(cli); errors.Is(err, os.ErrNotExist) {
		npm, err := exec.LookPath("npm")
		if err != nil {
			return nil, &missingTool{"npm", "needed to install dynalite from " + dir + "/package-lock.json"}
		}
		ictx, cancel := context.WithTimeout(ctx, 5*time.Minute)
		defer cancel()
		install := exec.CommandContext(ictx, npm, "ci", "--no-audit", "--no-fund", "--loglevel=error")
		install.Dir = dir
		if out, err := install.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("npm ci in %s: %v\n%s", dir, err, out)
		}
	}
	// A port that was free a moment ago may be taken by the time dynalite
	// binds it; try a few.
	var lastErr error
	for range 3 {
		d, err := launch(ctx, node, cli)
		if err == nil {
			return d, nil
		}
		lastErr = err
	}
	return nil, lastErr
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func launch(ctx context.Context, node, cli string) (*dynalite, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	d := &dynalite{endpoint: "http://127.0.0.1:" + strconv.Itoa(port), exited: make(chan struct{}), out: &lockedBuffer{}}
	d.cmd = exec.Command(node, cli, "--port", strconv.Itoa(port), "--host", "127.0.0.1",
		"--createTableMs", "0", "--deleteTableMs", "0", "--updateTableMs", "0")
	d.cmd.Stdout, d.cmd.Stderr = d.out, d.out
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := d.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start dynalite: %w", err)
	}
	go func() { d.cmd.Wait(); close(d.exited) }()

	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	for {
		if d.answers(ctx) {
			return d, nil
		}
		select {
		case <-d.exited:
			return nil, fmt.Errorf("dynalite exited before answering: %s", d.out)
		case <-deadline.C:
			d.stop()
			return nil, fmt.Errorf("dynalite did not answer on %s within 30s: %s", d.endpoint, d.out)
		case <-tick.C:
		}
	}
}

// answers reports whether the server answers a ListTables request.
func (d *dynalite) answers(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.endpoint, strings.NewReader("{}"))
	if err != nil {
		return false
	}
	req.Header.Set("X-Amz-Target", "DynamoDB_20120810.ListTables")
	req.Header.Set("Content-Type", "application/x-amz-json-1.0")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	// Unsigned, so dynalite answers 400 MissingAuthenticationToken: it is up.
	return resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusBadRequest
}

// stop ends the process group of the server and waits for it.
func (d *dynalite) stop() {
	pgid := d.cmd.Process.Pid
	syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-d.exited:
	case <-time.After(5 * time.Second):
		syscall.Kill(-pgid, syscall.SIGKILL)
		<-d.exited
	}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
