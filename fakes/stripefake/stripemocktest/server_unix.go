//go:build unix

package stripemocktest

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"syscall"
	"time"

	"github.com/oncely/oncely/internal/tooling"
)

// process is a stripe-mock this process started.
type process struct {
	*tooling.Process
	url, httpsURL string
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
	cmd := exec.Command(bin, "-http-addr", "127.0.0.1:0", "-https-addr", "127.0.0.1:0")
	cmd.SysProcAttr = sysProcAttr()
	proc, err := tooling.StartProcess(cmd, 64<<10)
	if err != nil {
		return nil, fmt.Errorf("stripemocktest: start stripe-mock: %w", err)
	}
	p := &process{Process: proc}
	err = p.WaitReady(ctx, StartTimeout, 10*time.Millisecond, func() bool {
		if p.url == "" {
			out := p.Out.String()
			h, hs := httpRE.FindStringSubmatch(out), httpsRE.FindStringSubmatch(out)
			if h != nil && hs != nil {
				p.url, p.httpsURL = "http://"+h[1], "https://"+hs[1]
			}
		}
		return p.url != "" && answers(ctx, p.url)
	})
	switch {
	case errors.Is(err, tooling.ErrExited):
		return nil, fmt.Errorf("stripemocktest: stripe-mock exited before it answered: %s", p.Out)
	case err != nil:
		p.stop()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("stripemocktest: stripe-mock %v: %s", err, p.Out)
	}
	return p, nil
}

// stop ends the process by its id and waits for it: SIGTERM, then SIGKILL
// after 5 s.
func (p *process) stop() { p.Stop(syscall.SIGTERM, 5*time.Second, false) }
