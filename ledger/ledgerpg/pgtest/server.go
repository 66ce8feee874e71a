//go:build unix

package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// StartTimeout bounds how long Start waits for the new server to answer.
const StartTimeout = time.Minute

// Server is a PostgreSQL server that Start started: a fresh cluster in a
// temporary directory, listening on 127.0.0.1 only, trust authentication.
type Server struct {
	// URL reaches database postgres as user postgres.
	URL string

	dir    string
	cmd    *exec.Cmd
	exited chan struct{}
	out    *lockedBuffer
	once   sync.Once
	err    error
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
	dir, err := os.MkdirTemp("", "pgtest-")
	if err != nil {
		return nil, err
	}
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	data := filepath.Join(dir, "data")
	initdb := exec.CommandContext(ctx, filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres",
		"--auth=trust", "--encoding=UTF8", "--locale=C", "--no-sync")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("initdb: %w\n%s", err, out)
	}
	port, err := freePort()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	s := &Server{
		URL:    fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port),
		dir:    dir,
		exited: make(chan struct{}),
		out:    &lockedBuffer{},
	}
	s.cmd = exec.Command(filepath.Join(bin, "postgres"), "-D", data, "-p", strconv.Itoa(port),
		"-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories="+dir,
		"-c", "max_connections=200", "-c", "fsync=off")
	s.cmd.Stdout, s.cmd.Stderr = s.out, s.out
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: cred}
	if err := s.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("start postgres: %w", err)
	}
	go func() { _ = s.cmd.Wait(); close(s.exited) }()

	deadline := time.Now().Add(StartTimeout)
	for {
		err := ping(ctx, s.URL)
		if err == nil {
			return s, nil
		}
		select {
		case <-s.exited:
			os.RemoveAll(dir)
			return nil, fmt.Errorf("postgres exited: %s", s.out.String())
		default:
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			s.Stop()
			return nil, fmt.Errorf("postgres did not answer within %v: %w\n%s", StartTimeout, err, s.out.String())
		}
		time.Sleep(50 * time.Millisecond) // poll interval
	}
}

// Stop shuts the server down (SIGINT, a fast shutdown, to its process),
// waits for it to exit, and removes its directory. After 30 s it kills
// the process group. It is safe to call more than once.
func (s *Server) Stop() error {
	s.once.Do(func() {
		_ = s.cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-s.exited:
		case <-time.After(30 * time.Second):
			_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
			<-s.exited
			s.err = fmt.Errorf("postgres (pid %d) ignored SIGINT for 30 s and was killed", s.cmd.Process.Pid)
		}
		s.err = errors.Join(s.err, os.RemoveAll(s.dir))
	})
	return s.err
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

// freePort returns a loopback port that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// lockedBuffer collects a process's output.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
