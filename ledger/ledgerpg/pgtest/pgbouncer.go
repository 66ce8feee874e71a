//go:build unix

package pgtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// Bouncer is a PgBouncer that StartPgBouncer started.
type Bouncer struct {
	// URL reaches the target's database through PgBouncer.
	URL string

	dir    string
	cmd    *exec.Cmd
	exited chan struct{}
	out    *lockedBuffer
	once   sync.Once
	err    error
}

// StartPgBouncer starts a PgBouncer in transaction pooling mode (at most 8
// server connections per database and user, trust authentication for the
// user postgres) on a free loopback port in front of the server that
// target names, installing the Debian pgbouncer package when it is
// missing (apt-get, as root), and waits until it answers (StartTimeout).
// Run as root, it runs as the user postgres.
func StartPgBouncer(ctx context.Context, target string) (*Bouncer, error) {
	cfg, err := pgx.ParseConfig(target)
	if err != nil {
		return nil, err
	}
	bin, err := pgbouncerBin(ctx)
	if err != nil {
		return nil, err
	}
	cred, err := credential()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "pgtest-bouncer-")
	if err != nil {
		return nil, err
	}
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	port, err := freePort()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	ini := fmt.Sprintf(`[databases]
* = host=%s port=%d

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = trust
auth_file = %s
pool_mode = transaction
default_pool_size = 8
max_client_conn = 500
ignore_startup_parameters = extra_float_digits
`, cfg.Host, cfg.Port, port, filepath.Join(dir, "users.txt"))
	for name, body := range map[string]string{"pgbouncer.ini": ini, "users.txt": `"postgres" ""` + "\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	b := &Bouncer{
		URL:    fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", port, cfg.Database),
		dir:    dir,
		exited: make(chan struct{}),
		out:    &lockedBuffer{},
	}
	b.cmd = exec.Command(bin, filepath.Join(dir, "pgbouncer.ini"))
	b.cmd.Stdout, b.cmd.Stderr = b.out, b.out
	b.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: cred}
	if err := b.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("start pgbouncer: %w", err)
	}
	go func() { _ = b.cmd.Wait(); close(b.exited) }()
	deadline := time.Now().Add(StartTimeout)
	for {
		err := ping(ctx, b.URL)
		if err == nil {
			return b, nil
		}
		select {
		case <-b.exited:
			os.RemoveAll(dir)
			return nil, fmt.Errorf("pgbouncer exited: %s", b.out.String())
		default:
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			b.Stop()
			return nil, fmt.Errorf("pgbouncer did not answer within %v: %w\n%s", StartTimeout, err, b.out.String())
		}
		time.Sleep(50 * time.Millisecond) // poll interval
	}
}

// Stop ends PgBouncer (SIGINT, a safe shutdown), waits for it and
// removes its directory; after 30 s it kills it. It is safe to call more
// than once.
func (b *Bouncer) Stop() error {
	b.once.Do(func() {
		_ = b.cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-b.exited:
		case <-time.After(30 * time.Second):
			_ = syscall.Kill(-b.cmd.Process.Pid, syscall.SIGKILL)
			<-b.exited
			b.err = fmt.Errorf("pgbouncer (pid %d) ignored SIGINT for 30 s and was killed", b.cmd.Process.Pid)
		}
		b.err = errors.Join(b.err, os.RemoveAll(b.dir))
	})
	return b.err
}

// pgbouncerBin finds pgbouncer, installing the Debian package when it is
// missing.
func pgbouncerBin(ctx context.Context) (string, error) {
	find := func() (string, error) {
		if p, err := exec.LookPath("pgbouncer"); err == nil {
			return p, nil
		}
		if isFile("/usr/sbin/pgbouncer") {
			return "/usr/sbin/pgbouncer", nil
		}
		return "", errors.New("pgbouncer not found")
	}
	if p, err := find(); err == nil {
		return p, nil
	}
	if err := aptInstall(ctx, "pgbouncer"); err != nil {
		return "", err
	}
	return find()
}
