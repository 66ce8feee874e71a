//go:build unix

package dynalitetest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/oncely/oncely/internal/tooling"
)

// launcher runs dynalite on 127.0.0.1 with a port the kernel picks and
// prints that port. It exits when its standard input closes: the test
// binary that started it is gone, even if it could not stop it.
const launcher = `
const server = require(process.argv[1])({createTableMs: 0, deleteTableMs: 0, updateTableMs: 0});
server.listen(0, '127.0.0.1', () => console.log('dynalitetest: listening on port ' + server.address().port));
process.stdin.on('end', () => process.exit(0));
process.stdin.on('error', () => process.exit(0));
process.stdin.resume();
`

var listeningRE = regexp.MustCompile(`dynalitetest: listening on port (\d+)`)

// process is a dynalite this process started.
type process struct {
	*tooling.Process
	endpoint string
	stdin    io.Closer
	stopping atomic.Bool
}

func startProcess(ctx context.Context, dir string) (*process, error) {
	node, err := exec.LookPath("node")
	if err != nil {
		return nil, &MissingError{What: "node", Why: "needed to run dynalite, the DynamoDB-compatible test server"}
	}
	pkg := filepath.Join(dir, "node_modules", "dynalite")
	if _, err := os.Stat(filepath.Join(pkg, "index.js")); errors.Is(err, os.ErrNotExist) {
		err := tooling.NPMCI(ctx, dir)
		if errors.Is(err, tooling.ErrNoNPM) {
			return nil, &MissingError{What: "npm", Why: "needed to install dynalite from " + dir + "/package-lock.json"}
		}
		if err != nil {
			return nil, err
		}
	}

	cmd := exec.Command(node, "-e", launcher, pkg)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	proc, err := tooling.StartProcess(cmd, 0)
	if err != nil {
		return nil, fmt.Errorf("dynalitetest: start dynalite: %w", err)
	}
	p := &process{Process: proc, stdin: stdin}
	err = p.WaitReady(ctx, StartTimeout, 10*time.Millisecond, func() bool {
		if p.endpoint == "" {
			if m := listeningRE.FindStringSubmatch(p.Out.String()); m != nil {
				p.endpoint = "http://127.0.0.1:" + m[1]
			}
		}
		return p.endpoint != "" && answers(ctx, p.endpoint)
	})
	switch {
	case errors.Is(err, tooling.ErrExited):
		return nil, fmt.Errorf("dynalitetest: dynalite exited before it answered: %s", p.Out)
	case err != nil:
		p.stop()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("dynalitetest: dynalite %v: %s", err, p.Out)
	}
	// A server that ends before the tests stop it leaves them waiting on
	// a dead port: say why it ended.
	go func() {
		<-p.Exited()
		if !p.stopping.Load() {
			fmt.Fprintf(os.Stderr, "dynalitetest: dynalite exited while the tests ran (%v): %s\n", p.Cmd.ProcessState, p.Out)
		}
	}()
	return p, nil
}

// stop ends the process group of the server and waits for it.
func (p *process) stop() {
	p.stopping.Store(true)
	p.stdin.Close()
	p.Stop(syscall.SIGTERM, 5*time.Second, true)
}
