//go:build unix

package dynalitetest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"syscall"
	"time"
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
	out      *lockedBuffer
}

func startProcess(ctx context.Context, dir string) (*process, error) {
	node, err := exec.LookPath("node")
	if err != nil {
		return nil, &MissingError{What: "node", Why: "needed to run dynalite, the DynamoDB-compatible test server"}
	}
	pkg := filepath.Join(dir, "node_modules", "dynalite")
	if _, err := os.Stat(filepath.Join(pkg, "index.js")); errors.Is(err, os.ErrNotExist) {
		npm, err := exec.LookPath("npm")
		if err != nil {
			return nil, &MissingError{What: "npm", Why: "needed to install dynalite from " + dir + "/package-lock.json"}
		}
		if err := install(ctx, dir, npm); err != nil {
			return nil, err
		}
	}

	p := &process{exited: make(chan struct{}), out: &lockedBuffer{}}
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

// install runs npm ci for the lockfile in dir, unless another process did
// it meanwhile. Installs are serialised by an flock on a lock file in the
// temporary directory, and npm works in a staging directory inside dir
// whose node_modules is renamed into place when complete: a test binary
// that finds dir/node_modules finds it whole.
func install(ctx context.Context, dir, npm string) error {
	sum := sha256.Sum256([]byte(dir))
	lockPath := filepath.Join(os.TempDir(), fmt.Sprintf("idemkit-dynalite-%d-%s.lock", os.Getuid(), hex.EncodeToString(sum[:8])))
	lock, err := os.OpenFile(lockPath, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return fmt.Errorf("dynalitetest: install lock: %w", err)
	}
	defer lock.Close() // releases the flock
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("dynalitetest: install lock %s: %w", lockPath, err)
	}

	target := filepath.Join(dir, "node_modules")
	if _, err := os.Stat(target); err == nil {
		return nil // installed while we waited for the lock
	}
	staging := filepath.Join(dir, ".node_modules.staging")
	if err := os.RemoveAll(staging); err != nil { // left by a crash
		return err
	}
	if err := os.Mkdir(staging, 0o755); err != nil {
		return err
	}
	defer os.RemoveAll(staging)
	for _, name := range []string{"package.json", "package-lock.json", ".npmrc"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if errors.Is(err, os.ErrNotExist) && name == ".npmrc" {
			continue
		}
		if err != nil {
			return fmt.Errorf("dynalitetest: install: %w", err)
		}
		if err := os.WriteFile(filepath.Join(staging, name), b, 0o644); err != nil {
			return err
		}
	}
	ictx, cancel := context.WithTimeout(ctx, InstallTimeout)
	defer cancel()
	cmd := exec.CommandContext(ictx, npm, "ci", "--no-audit", "--no-fund", "--loglevel=error")
	cmd.Dir = staging
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("dynalitetest: npm ci for %s: %v\n%s", dir, err, out)
	}
	if err := os.Rename(filepath.Join(staging, "node_modules"), target); err != nil {
		return fmt.Errorf("dynalitetest: install: %w", err)
	}
	return nil
}
