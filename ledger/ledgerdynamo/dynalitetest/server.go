package dynalitetest

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/oncely/oncely/internal/tooling"
)

// Server is a DynamoDB-compatible endpoint for tests: one this process
// started, or the one DYNAMODB_ENDPOINT names.
type Server struct {
	// Endpoint is the base URL of the server, e.g. http://127.0.0.1:41234.
	Endpoint string

	proc      *process // nil for DYNAMODB_ENDPOINT
	closeOnce sync.Once
}

// Close stops the server this process started (its whole process group)
// and waits for it; for DYNAMODB_ENDPOINT it does nothing. It is safe to
// call more than once.
func (s *Server) Close() {
	if s.proc != nil {
		s.closeOnce.Do(s.proc.stop)
	}
}

// StartTimeout bounds how long Start waits for dynalite to answer.
const StartTimeout = 30 * time.Second

// InstallTimeout bounds the npm ci that installs dynalite.
const InstallTimeout = tooling.NPMTimeout

// Start returns the server DYNAMODB_ENDPOINT names when it is set.
// Otherwise it installs dynalite into tools/dynalite when node_modules is
// missing, starts it on a loopback port in its own process group, and
// waits until it answers (StartTimeout). The error matches ErrUnavailable
// when the machine cannot run dynalite.
func Start(ctx context.Context) (*Server, error) {
	if ep := os.Getenv(EnvEndpoint); ep != "" {
		return &Server{Endpoint: ep}, nil
	}
	dir, err := toolsDir()
	if err != nil {
		return nil, err
	}
	p, err := startProcess(ctx, dir)
	if err != nil {
		return nil, err
	}
	return &Server{Endpoint: p.endpoint, proc: p}, nil
}

// toolsDir finds tools/dynalite under the repository root: the first
// directory above the working directory that holds go.mod.
func toolsDir() (string, error) {
	root, err := tooling.RepoRoot()
	if errors.Is(err, tooling.ErrNoModule) {
		return "", &MissingError{What: "go.mod", Why: err.Error()}
	}
	if err != nil {
		return "", err
	}
	tools := filepath.Join(root, "tools", "dynalite")
	if _, err := os.Stat(filepath.Join(tools, "package-lock.json")); err != nil {
		return "", &MissingError{What: "tools/dynalite/package-lock.json", Why: "the module at " + root + " does not pin dynalite"}
	}
	return tools, nil
}

// answers reports whether a DynamoDB-compatible server answers a
// ListTables request at endpoint.
func answers(ctx context.Context, endpoint string) bool {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader("{}"))
	if err != nil {
		return false
	}
	req.Header.Set("X-Amz-Target", "DynamoDB_20120810.ListTables")
	req.Header.Set("Content-Type", "application/x-amz-json-1.0")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	// Unsigned, so the server answers 400 MissingAuthenticationToken: it is up.
	return resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusBadRequest
}
