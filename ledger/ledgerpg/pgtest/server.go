//go:build unix

package pgtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/oncely/oncely/internal/tooling"
)

// StartTimeout bounds how long Start waits for the new server to answer.
const StartTimeout = time.Minute

// Server is a PostgreSQL server that Start started: a fresh cluster in a
// temporary directory, listening on 127.0.0.1 only, trust authentication.
type Server struct {
	// URL reaches database postgres as user postgres.
	URL string

	proc *process
}

// Start installs the Debian postgresql package when no initdb is found
// (apt-get, as root), creates a cluster in a temporary directory and
// starts postgres on a free loopback port in its own process group, and
// waits until it answers (StartTimeout). Run as root, the server runs as
// the user postgres, since PostgreSQL refuses to run as root.
func Start(ctx context.Context) (*Server, error) {
	bin, err := binDir(ctx)
	if err != nil {
		return nil, err
	}
	cred, err := credential()
	if err != nil {
		return nil, err
	}
	dir, err := tempDir("pgtest-", cred)
	if err != nil {
		return nil, err
	}
	data := filepath.Join(dir, "data")
	initdb := exec.CommandContext(ctx, filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres",
		"--auth=trust", "--encoding=UTF8", "--locale=C", "--no-sync")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("initdb: %w\n%s", err, out)
	}
	port, err := tooling.FreePort()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	url := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
	cmd := exec.Command(filepath.Join(bin, "postgres"), "-D", data, "-p", strconv.Itoa(port),
		"-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories="+dir,
		"-c", "max_connections=200", "-c", "fsync=off")
	p, err := startProcess(ctx, "postgres", dir, cmd, cred, url)
	if err != nil {
		return nil, err
	}
	return &Server{URL: url, proc: p}, nil
}

// Stop shuts the server down (SIGINT: a fast shutdown), waits for it to
// exit, and removes its directory. After 30 s it kills the process group.
// It is safe to call more than once.
func (s *Server) Stop() error { return s.proc.stop() }

// process is a server this package started: a command in its own process
// group, running from a temporary directory.
type process struct {
	*tooling.Process
	name string
	dir  string
	once sync.Once
	err  error
}

// tempDir makes a temporary directory that cred (nil: this process's
// user) owns.
func tempDir(prefix string, cred *syscall.Credential) (string, error) {
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		return "", err
	}
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			os.RemoveAll(dir)
			return "", err
		}
	}
	return dir, nil
}

// startProcess starts cmd as cred in its own process group, and waits
// until url answers (StartTimeout). The process owns dir: stop removes
// it, and so does a failed start.
func startProcess(ctx context.Context, name, dir string, cmd *exec.Cmd, cred *syscall.Credential, url string) (*process, error) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: cred}
	proc, err := tooling.StartProcess(cmd, 0)
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &process{Process: proc, name: name, dir: dir}
	var pingErr error
	err = p.WaitReady(ctx, StartTimeout, 50*time.Millisecond, func() bool {
		pingErr = ping(ctx, url)
		return pingErr == nil
	})
	switch {
	case errors.Is(err, tooling.ErrExited):
		os.RemoveAll(dir)
		return nil, fmt.Errorf("%s exited: %s", name, p.Out)
	case err != nil:
		p.stop()
		return nil, fmt.Errorf("%s did not answer within %v: %w\n%s", name, StartTimeout, errors.Join(pingErr, ctx.Err()), p.Out)
	}
	return p, nil
}

// stop sends SIGINT to the process, waits for it to exit, and removes its
// directory; after 30 s it kills the process group. It is safe to call
// more than once.
func (p *process) stop() error {
	p.once.Do(func() {
		if p.Stop(syscall.SIGINT, 30*time.Second, false) {
			p.err = fmt.Errorf("%s (pid %d) ignored SIGINT for 30 s and was killed", p.name, p.Cmd.Process.Pid)
		}
		p.err = errors.Join(p.err, os.RemoveAll(p.dir))
	})
	return p.err
}

// binDir finds the directory of initdb and postgres, installing the
// Debian package when there is none.
func binDir(ctx context.Context) (string, error) {
	if dir := findBin(); dir != "" {
		return dir, nil
	}
	if err := aptInstall(ctx, "postgresql"); err != nil {
		return "", fmt.Errorf("initdb not found: %w", err)
	}
	if dir := findBin(); dir != "" {
		return dir, nil
	}
	return "", errors.New("postgresql was installed but no initdb was found")
}

// aptInstall installs a Debian package, updating the package lists first
// when the install fails without them. It needs root.
func aptInstall(ctx context.Context, pkg string) error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("install the Debian package %s (apt-get install %s) or set %s", pkg, pkg, EnvURL)
	}
	apt := func(args ...string) ([]byte, error) {
		cmd := exec.CommandContext(ctx, "apt-get", args...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		return cmd.CombinedOutput()
	}
	if _, err := apt("install", "-y", "--no-install-recommends", pkg); err == nil {
		return nil
	}
	if out, err := apt("update"); err != nil {
		return fmt.Errorf("apt-get update: %w\n%s", err, out)
	}
	if out, err := apt("install", "-y", "--no-install-recommends", pkg); err != nil {
		return fmt.Errorf("apt-get install %s: %w\n%s", pkg, err, out)
	}
	return nil
}

// findBin returns the directory that holds initdb and postgres: the one
// of initdb on PATH, else the newest /usr/lib/postgresql/*/bin.
func findBin() string {
	var dirs []string
	if p, err := exec.LookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			dirs = append(dirs, filepath.Dir(real))
		}
	}
	debian, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(debian, func(a, b string) int { return version(b) - version(a) })
	for _, dir := range append(dirs, debian...) {
		if isFile(filepath.Join(dir, "initdb")) && isFile(filepath.Join(dir, "postgres")) {
			return dir
		}
	}
	return ""
}

// version is the major version in /usr/lib/postgresql/<version>/bin.
func version(dir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
	return n
}

func isFile(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && !fi.IsDir()
}

// credential is the user the server runs as: postgres when this process
// runs as root, nil (this process's user) otherwise.
func credential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("running as root, the server needs the user postgres: %w", err)
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, err
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, err
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}
