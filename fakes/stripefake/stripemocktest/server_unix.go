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
)

// process is a stripe-mock this process started.
type process struct {
	url, httpsURL string
	cmd           *exec.Cmd
	exited        chan struct{}
	out           *cappedBuffer
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
	bin := filepath.Join(dir, binName)
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	return bin, install(ctx, dir)
}

// install runs go install for stripe-mock with GOBIN in a staging
// directory, then renames the binary into dir, under an flock on dir's
// lock file, unless another process installed it meanwhile.
func install(ctx context.Context, dir string) error {
	goCmd, err := exec.LookPath("go")
	if err != nil {
		return &MissingError{What: "go", Why: "needed to install " + Module + "@" + Version}
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return fmt.Errorf("stripemocktest: install: %w", err)
	}
	lock, err := os.OpenFile(dir+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return fmt.Errorf("stripemocktest: install lock: %w", err)
	}
	defer lock.Close() // releases the flock
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("stripemocktest: install lock %s: %w", lock.Name(), err)
	}
	bin := filepath.Join(dir, binName)
	if _, err := os.Stat(bin); err == nil {
		return nil // installed while we waited for the lock
	}
	staging := dir + ".staging"
	if err := os.RemoveAll(staging); err != nil { // left by a crash
		return err
	}
	defer os.RemoveAll(staging)
	ictx, cancel := context.WithTimeout(ctx, InstallTimeout)
	defer cancel()
	cmd := exec.CommandContext(ictx, goCmd, "install", Module+"@"+Version)
	cmd.Dir = filepath.Dir(dir)
	cmd.Env = append(os.Environ(), "GOBIN="+staging)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("stripemocktest: go install %s@%s: %v\n%s", Module, Version, err, out)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("stripemocktest: install: %w", err)
	}
	if err := os.Rename(filepath.Join(staging, binName), bin); err != nil {
		return fmt.Errorf("stripemocktest: install: %w", err)
	}
	return nil
}

// startProcess runs bin on kernel-chosen 127.0.0.1 ports and waits until
// its HTTP listener answers.
func startProcess(ctx context.Context, bin string) (*process, error) {
	p := &process{exited: make(chan struct{}), out: &cappedBuffer{max: 64 << 10}}
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
