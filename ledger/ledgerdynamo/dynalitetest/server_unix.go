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
	"syscall"
	"time"

	"github.com/idemkit/idemkit/internal/tooling"
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
	endpoint string
	cmd      *exec.Cmd
	stdin    io.Closer
	exited   chan struct{}
	out      *tooling.Buffer
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

	p := &process{exited: make(chan struct{}), out: &tooling.Buffer{}}
	p.cmd = exec.Command(node, "-e", launcher, pkg)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("dynalitetest: start dynalite: %w", err)
	}
	go func() { p.cmd.Wait(); close(p.exited) }()

	deadline := time.NewTimer(StartTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if p.endpoint == "" {
			if m := listeningRE.FindStringSubmatch(p.out.String()); m != nil {
				p.endpoint = "http://127.0.0.1:" + m[1]
			}
		}
		if p.endpoint != "" && answers(ctx, p.endpoint) {
			return p, nil
		}
		select {
		case <-p.exited:
			return nil, fmt.Errorf("dynalitetest: dynalite exited before it answered: %s", p.out)
		case <-deadline.C:
			p.stop()
			return nil, fmt.Errorf("dynalitetest: dynalite did not answer within %v: %s", StartTimeout, p.out)
		case <-ctx.Done():
			p.stop()
			return nil, ctx.Err()
		case <-tick.C:
		}
	}
}

// stop ends the process group of the server and waits for it.
func (p *process) stop() {
	p.stdin.Close()
	pgid := p.cmd.Process.Pid
	syscall.Kill(-pgid, syscall.SIGTERM)
	t := time.NewTimer(5 * time.Second)
	defer t.Stop()
	select {
	case <-p.exited:
	case <-t.C:
		syscall.Kill(-pgid, syscall.SIGKILL)
		<-p.exited
	}
}
