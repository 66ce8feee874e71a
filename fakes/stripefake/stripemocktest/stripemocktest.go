package stripemocktest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/oncely/oncely/internal/tooling"
)

// Version is the stripe-mock release the tests run against.
const Version = "v0.203.0"

// Module is stripe-mock's Go module path.
const Module = "github.com/stripe/stripe-mock"

// EnvURL is the environment variable that names a running stripe-mock
// ("http://127.0.0.1:12111") to use instead of starting one.
const EnvURL = "STRIPE_MOCK_URL"

// TestKey is a test-mode secret key stripe-mock accepts.
const TestKey = "sk_test_stripemocktest"

// StartTimeout bounds how long Start waits for stripe-mock to answer.
const StartTimeout = 30 * time.Second

// InstallTimeout bounds the go install of stripe-mock: about 16 s with a
// warm build cache, minutes on a busy machine with empty caches.
const InstallTimeout = 15 * time.Minute

// ErrUnavailable is matched by the error of Start when this machine cannot
// install or run stripe-mock.
var ErrUnavailable = errors.New("stripemocktest: stripe-mock unavailable")

// MissingError says what the machine lacks to run stripe-mock. It matches
// ErrUnavailable.
type MissingError struct {
	What string // "go", ...
	Why  string
}

// Error says what is missing and how to provide it.
func (e *MissingError) Error() string {
	return fmt.Sprintf("stripemocktest: %s not found (%s); or set %s", e.What, e.Why, EnvURL)
}

// Unwrap returns ErrUnavailable.
func (e *MissingError) Unwrap() error { return ErrUnavailable }

// Server is a stripe-mock for tests: one this process started, or the one
// STRIPE_MOCK_URL names.
type Server struct {
	// URL is the base URL of its HTTP listener ("http://127.0.0.1:port").
	URL string
	// HTTPSURL is the base URL of its HTTPS listener (a self-signed
	// certificate); empty for STRIPE_MOCK_URL.
	HTTPSURL string

	proc      *process // nil for STRIPE_MOCK_URL
	closeOnce sync.Once
}

// Close stops the server this process started and waits for it; for
// STRIPE_MOCK_URL it does nothing. It is safe to call more than once.
func (s *Server) Close() {
	if s.proc != nil {
		s.closeOnce.Do(s.proc.stop)
	}
}

// Start returns the server STRIPE_MOCK_URL names when it is set.
// Otherwise it installs stripe-mock when its binary is missing, starts it
// on loopback ports and waits until it answers (StartTimeout). The error
// matches ErrUnavailable when the machine cannot run stripe-mock.
func Start(ctx context.Context) (*Server, error) {
	if u := os.Getenv(EnvURL); u != "" {
		return &Server{URL: u}, nil
	}
	bin, err := ensureInstalled(ctx)
	if err != nil {
		return nil, err
	}
	p, err := startProcess(ctx, bin)
	if err != nil {
		return nil, err
	}
	return &Server{URL: p.url, HTTPSURL: p.httpsURL, proc: p}, nil
}

// BinDir is the directory stripe-mock is installed into: .tmp/stripe-mock/
// <Version> under the repository root, or under the user cache directory
// when the working directory is in no module.
func BinDir() (string, error) {
	root, err := tooling.RepoRoot()
	if err == nil {
		return filepath.Join(root, ".tmp", "stripe-mock", Version), nil
	}
	if !errors.Is(err, tooling.ErrNoModule) {
		return "", err
	}
	cache, err2 := os.UserCacheDir()
	if err2 != nil {
		return "", &MissingError{What: "a directory to install into", Why: err.Error() + " and no user cache directory"}
	}
	return filepath.Join(cache, "oncely", "stripe-mock", Version), nil
}

// answers reports whether stripe-mock answers an authenticated list
// request at url.
func answers(ctx context.Context, url string) bool {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/v1/charges", nil)
	if err != nil {
		return false
	}
	req.Header.Set("Authorization", "Bearer "+TestKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// shared is the server Main started for the test binary. It is written
// before m.Run and only read afterwards.
var shared struct {
	started     bool
	url         string
	unavailable string // why there is no server (Main ran without one)
}

// Main starts the server for the test binary (Start), runs the tests and
// stops the server. Call it from TestMain: os.Exit(stripemocktest.Main(m)).
//
// When the machine cannot run stripe-mock (ErrUnavailable) and CI is not
// "true", Main says so on stderr and runs the tests without a server: URL
// skips those that need one. With CI=true, or on any other error, Main
// reports it and returns 1 without running the tests.
func Main(m *testing.M) int {
	srv, err := Start(context.Background())
	switch {
	case errors.Is(err, ErrUnavailable) && os.Getenv("CI") != "true":
		shared.unavailable = err.Error()
		fmt.Fprintf(os.Stderr, "%v: the tests that need stripe-mock are skipped\n", err)
	case err != nil:
		fmt.Fprintf(os.Stderr, "stripemocktest: FAIL: %v\n", err)
		return 1
	default:
		shared.url = srv.URL
		defer srv.Close()
	}
	shared.started = true
	return m.Run()
}

// URL returns the base URL of the server Main started. It skips tb, with
// the reason, when Main found no way to run one, and fails tb when
// TestMain did not call Main.
func URL(tb testing.TB) string {
	tb.Helper()
	switch {
	case !shared.started:
		tb.Fatal("stripemocktest: URL needs the server of stripemocktest.Main; call it from TestMain")
	case shared.unavailable != "":
		tb.Skip(shared.unavailable)
	}
	return shared.url
}
