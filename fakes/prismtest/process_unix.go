//go:build unix

package prismtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/oncely/oncely/internal/tooling"
)

// launcher runs Prism (argv[1] is its entry script, the rest its
// arguments) as a child and kills it when its own standard input closes:
// the test binary that started it is gone, even if it could not stop it.
const launcher = `
const {spawn} = require('child_process');
const child = spawn(process.execPath, process.argv.slice(1), {stdio: ['ignore', 'inherit', 'inherit']});
const stop = () => { child.kill('SIGKILL'); process.exit(0); };
process.stdin.on('end', stop);
process.stdin.on('error', stop);
process.stdin.resume();
child.on('exit', (code) => process.exit(code === null ? 1 : code));
`

// process is a Prism this test binary started.
type process struct {
	*tooling.Process
	proxy    *Proxy
	stdin    io.Closer
	stopOnce sync.Once
}

// start runs Prism on a free loopback port, trying another port when the
// one picked was taken meanwhile.
func start(ctx context.Context, dir, node, spec, upstream string) (*process, error) {
	entry := filepath.Join(dir, "node_modules", "@stoplight", "prism-cli", "dist", "index.js")
	if _, err := os.Stat(entry); err != nil {
		return nil, fmt.Errorf("prismtest: Prism is not installed in %s: %v", dir, err)
	}
	var last error
	for range 3 {
		port, err := tooling.FreePort()
		if err != nil {
			return nil, err
		}
		p, err := startOn(ctx, node, entry, spec, upstream, port)
		if err == nil {
			return p, nil
		}
		last = err
		if !strings.Contains(err.Error(), "EADDRINUSE") {
			break
		}
	}
	return nil, last
}

func startOn(ctx context.Context, node, entry, spec, upstream string, port int) (*process, error) {
	cmd := exec.Command(node, "-e", launcher, entry, "proxy", spec, upstream,
		"--errors", "--host", "127.0.0.1", "--port", strconv.Itoa(port))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	proc, err := tooling.StartProcess(cmd, 64<<10)
	if err != nil {
		return nil, fmt.Errorf("prismtest: start Prism: %w", err)
	}
	p := &process{Process: proc, stdin: stdin, proxy: &Proxy{URL: "http://127.0.0.1:" + strconv.Itoa(port)}}
	err = p.WaitReady(ctx, StartTimeout, 20*time.Millisecond, func() bool {
		return strings.Contains(p.Out.String(), "Prism is listening") && answers(ctx, p.proxy.URL)
	})
	switch {
	case errors.Is(err, tooling.ErrExited):
		return nil, fmt.Errorf("prismtest: Prism exited before it answered: %s", p.Out)
	case err != nil:
		p.stop()
		return nil, fmt.Errorf("prismtest: Prism %v: %s", err, p.Out)
	}
	return p, nil
}

// answers reports whether something answers HTTP at url.
func answers(ctx context.Context, url string) bool {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodOptions, url+"/", nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return true
}

// stop ends Prism's process group and waits for it.
func (p *process) stop() {
	p.stopOnce.Do(func() {
		p.stdin.Close()
		p.Stop(syscall.SIGTERM, 5*time.Second, true)
	})
}
