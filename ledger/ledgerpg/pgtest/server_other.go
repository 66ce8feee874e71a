//go:build !unix

package pgtest

import (
	"context"
	"errors"
)

// Server is a PostgreSQL server that Start started. Starting one needs a
// unix system; elsewhere set ONCELY_POSTGRES_URL.
type Server struct {
	// URL reaches the server.
	URL string
}

// Start fails: starting a server needs a unix system.
func Start(context.Context) (*Server, error) {
	return nil, errors.New("pgtest: starting a PostgreSQL server needs a unix system; set " + EnvURL)
}

// Stop does nothing.
func (*Server) Stop() error { return nil }

// Bouncer is a PgBouncer that StartPgBouncer started. Starting one needs
// a unix system.
type Bouncer struct {
	// URL reaches the target's database through PgBouncer.
	URL string
}

// StartPgBouncer fails: starting PgBouncer needs a unix system.
func StartPgBouncer(context.Context, string) (*Bouncer, error) {
	return nil, errors.New("pgtest: starting PgBouncer needs a unix system")
}

// Stop does nothing.
func (*Bouncer) Stop() error { return nil }
