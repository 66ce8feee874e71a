//go:build !unix

package pgtest

import (
	"context"
	"errors"
)

// Server is a PostgreSQL server that Start started. Starting one needs a
// unix system; elsewhere set IDEMKIT_POSTGRES_URL.
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
