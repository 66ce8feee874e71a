//go:build unix

package stripemocktest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"syscall"
	"time"

	"github.com/idemkit/idemkit/internal/tooling"
)

// process is a stripe-mock this process started.
type process struct {
	url, httpsURL string
	cmd           *exec.Cmd
	exited        chan struct{}
	out           *tooling.Buffer
}

var (
	httpRE  = regexp.MustCompile(`Listening for HTTP at address: (127\.0\.0\.1:\d+)`)
	httpsRE = regexp.MustCompile(`Listening for HTTPS at address: (127\.0\.0\.1:\d+)`)
)

// binName is the name go install gives the binary.
const binName = "stripe-mock"

// ensureInstalled returns the path of the stripe-mock binary, installing
// it first when it is missing.
func ensureInstalled(ctx context.Context) (string, error) {
	dir, err := BinDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, binName), install(ctx, dir)
}

// install installs stripe-mock into dir (tooling.GoInstall), within
// InstallTimeout.
func install(ctx context.Context, dir string) error {
	ctx, cancel := context.WithTimeout(ctx, InstallTimeout)
	defer cancel()
	err := tooling.GoInstall(ctx, dir, Module+"@"+Version, binName)
	if errors.Is(err, tooling.ErrNoGo) {
		return &MissingError{What: "go", Why: "needed to install " + Module + "@" + Version}
	}
	return err
}

// startProcess runs bin on kernel-chosen 127.0.0.1 ports and waits until
// its HTTP listener answers.
func startProcess(ctx context.Context, bin string) (*process, error) {
	p := &process{exited: make(chan struct{}), out: &tooling.Buffer{Max: 64 << 10}}
	p.cmd = exec.Command(bin, "-http-addr", "127.0.0.1:0", "-https-addr", "127.0.0.1:0")
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	p.cmd.SysProcAttr = sysProcAttr()
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("stripemocktest: start stripe-mock: %w", err)
	}
	go func() { p.cmd.Wait(); close(p.exited) }()

	deadline := time.NewTimer(StartTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if p.url == "" {
			out := p.out.String()
			h, hs := httpRE.FindStringSubmatch(out), httpsRE.FindStringSubmatch(out)
			if h != nil && hs != nil {
				p.url, p.httpsURL = "http://"+h[1], "https://"+hs[1]
			}
		}
		if p.url != "" && answers(ctx, p.url) {
			return p, nil
		}
		select {
		case <-p.exited:
			return nil, fmt.Errorf("stripemocktest: stripe-mock exited before it answered: %s", p.out)
		case <-deadline.C:
			p.stop()
			return nil, fmt.Errorf("stripemocktest: stripe-mock did not answer within %v: %s", StartTimeout, p.out)
		case <-ctx.Done():
			p.stop()
			return nil, ctx.Err()
		case <-tick.C:
		}
	}
}

// stop ends the process by its id and waits for it: SIGTERM, then SIGKILL
// after 5 s.
func (p *process) stop() {
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		p.cmd.Process.Kill()
	}
	t := time.NewTimer(5 * time.Second)
	defer t.Stop()
	select {
	case <-p.exited:
	case <-t.C:
		p.cmd.Process.Kill()
		<-p.exited
	}
}
