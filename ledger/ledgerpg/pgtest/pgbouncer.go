//go:build unix

package pgtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/jackc/pgx/v5"

	"github.com/oncely/oncely/internal/tooling"
)

// Bouncer is a PgBouncer that StartPgBouncer started.
type Bouncer struct {
	// URL reaches the target's database through PgBouncer.
	URL string

	proc *process
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
	dir, err := tempDir("pgtest-bouncer-", cred)
	if err != nil {
		return nil, err
	}
	port, err := tooling.FreePort()
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
	url := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", port, cfg.Database)
	p, err := startProcess(ctx, "pgbouncer", dir, exec.Command(bin, filepath.Join(dir, "pgbouncer.ini")), cred, url)
	if err != nil {
		return nil, err
	}
	return &Bouncer{URL: url, proc: p}, nil
}

// Stop ends PgBouncer (SIGINT: a safe shutdown), waits for it and removes
// its directory; after 30 s it kills it. It is safe to call more than
// once.
func (b *Bouncer) Stop() error { return b.proc.stop() }

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
