package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/oncely/oncely/ledger/ledgerdynamo/dynalitetest"
	"github.com/oncely/oncely/ledger/ledgerpg/pgtest"
	"github.com/oncely/oncely/ledger/ledgerredis/redistest"
)

// bin is the oncely binary the tests drive, built once by TestMain.
var bin string

func TestMain(m *testing.M) {
	if journal := os.Getenv(envUpstream); journal != "" {
		os.Exit(upstreamMain(journal))
	}
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "oncely-cli-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	bin = filepath.Join(dir, "oncely")
	// Without the race detector: an instrumented binary starts several
	// times slower, and the tests start it often. TestRunDemo runs the
	// concurrent part, the demo, in this process, under -race when the
	// tests are.
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build: %v\n%s", err, out)
		return 1
	}
	return pgtest.Main(func() int { return redistest.Main(func() int { return dynalitetest.Main(m) }) })
}

// result is what one run of the binary did.
type result struct {
	stdout, stderr string
	code           int
}

// runCLI runs the binary with args, in a clean environment plus env.
func runCLI(t *testing.T, env []string, args ...string) result {
	t.Helper()
	return runProgram(t, bin, env, args...)
}

// runProgram runs prog with args, in a clean environment plus env.
func runProgram(t *testing.T, prog string, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, prog, args...)
	cmd.Env = append(baseEnv(t), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("%s %s: %v", filepath.Base(prog), strings.Join(args, " "), err)
	}
	return result{stdout.String(), stderr.String(), code}
}

// baseEnv is a minimal environment: no AWS configuration or ledger from
// the machine running the tests.
func baseEnv(t *testing.T) []string {
	home := t.TempDir()
	return []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "AWS_EC2_METADATA_DISABLED=true",
		"AWS_CONFIG_FILE=" + filepath.Join(home, "none"), "AWS_SHARED_CREDENTIALS_FILE=" + filepath.Join(home, "none")}
}

// wantOK checks a successful run: exit 0 and nothing on stderr.
func (r result) wantOK(t *testing.T) result {
	t.Helper()
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("exit %d, stderr %q, stdout:\n%s", r.code, r.stderr, r.stdout)
	}
	return r
}

// wantError checks a failed run: the exit status, one line on stderr
// that contains each of parts and a hint, and no stack trace.
func (r result) wantError(t *testing.T, code int, parts ...string) {
	t.Helper()
	if r.code != code {
		t.Errorf("exit %d, want %d; stderr %q", r.code, code, r.stderr)
	}
	lines := strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n")
	if len(lines) != 1 || !strings.HasPrefix(lines[0], "oncely: ") || !strings.Contains(lines[0], "(hint: ") {
		t.Errorf("stderr is not one 'oncely: ... (hint: ...)' line: %q", r.stderr)
	}
	for _, p := range parts {
		if !strings.Contains(r.stderr, p) {
			t.Errorf("stderr %q does not contain %q", r.stderr, p)
		}
	}
	if strings.Contains(r.stderr, "goroutine ") || strings.Contains(r.stderr, "panic") {
		t.Errorf("stderr has a stack trace: %q", r.stderr)
	}
}

func decodeJSON[T any](t *testing.T, s string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("not JSON (%v): %s", err, s)
	}
	return v
}

// lines returns the non-empty lines of s.
func lines(s string) []string {
	var out []string
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) != "" {
			out = append(out, sc.Text())
		}
	}
	return out
}

func TestVersion(t *testing.T) {
	t.Parallel()
	r := runCLI(t, nil, "version").wantOK(t)
	if r.stdout != versionLine+"\n" || !strings.HasPrefix(r.stdout, "oncely ") {
		t.Errorf("version printed %q", r.stdout)
	}
	if flag := runCLI(t, nil, "--version").wantOK(t); flag.stdout != r.stdout {
		t.Errorf("oncely --version printed %q, oncely version %q", flag.stdout, r.stdout)
	}
	v := decodeJSON[map[string]string](t, runCLI(t, nil, "version", "--json").wantOK(t).stdout)
	if v["version"] == "" || v["user_agent"] != "oncely/"+v["version"] {
		t.Errorf("version --json: %v", v)
	}
}

func TestUsageErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args  []string
		parts []string
	}{
		{[]string{"frobnicate"}, []string{"unknown command"}},
		{[]string{"ledgr"}, []string{`unknown command "ledgr" for "oncely"`, "ledger"}},
		{[]string{"ledger", "lss"}, []string{`unknown command "lss" for "oncely ledger"`, "Did you mean this? ls"}},
		{[]string{"ledger", "frobnicate"}, []string{`unknown command "frobnicate" for "oncely ledger"`}},
		{[]string{"ledger", "ls", "--no-such-flag"}, []string{"unknown flag"}},
		{[]string{"ledger", "show"}, []string{"accepts 1 arg"}},
		{[]string{"ledger", "ls", "--state", "sleeping"}, []string{"unknown state"}},
		{[]string{"demo", "--runs", "0"}, []string{"--runs"}},
		{[]string{"reconcile"}, []string{"--tool"}},
		{[]string{"reconcile", "--tool", "send_reply=carrier-pigeon"}, []string{"unknown adapter"}},
		{[]string{"reconcile", "--tool", "send_reply=mail"}, []string{"--mail-url"}},
	} {
		t.Run(strings.Join(tc.args, "_"), func(t *testing.T) {
			t.Parallel()
			runCLI(t, nil, tc.args...).wantError(t, exitUsage, tc.parts...)
		})
	}
	// A group without a subcommand prints its help.
	if r := runCLI(t, nil, "ledger").wantOK(t); !strings.Contains(r.stdout, "Available Commands") {
		t.Errorf("oncely ledger: %q", r.stdout)
	}
}

// TestHelpTexts: the help says what the commands require and which
// ledgers they act on.
func TestHelpTexts(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args  []string
		parts []string
	}{
		{[]string{"ledger", "resolve", "--help"}, []string{"--done --summary TEXT [--ref REF]", "--failed --reason TEXT", "required with --done"}},
		{[]string{"ledger", "init", "--help"}, []string{"SQLite", "PostgreSQL", "DynamoDB", "Redis"}},
		{[]string{"ledger", "purge", "--help"}, []string{"SQLite", "PostgreSQL", "DynamoDB", "Redis"}},
		{[]string{"ledger", "--help"}, []string{"PostgreSQL", "Redis"}},
		{[]string{"ledger", "ls", "--help"}, []string{"postgres://", "redis://"}},
	} {
		r := runCLI(t, nil, tc.args...).wantOK(t)
		for _, p := range tc.parts {
			if !strings.Contains(r.stdout, p) {
				t.Errorf("oncely %s does not say %q:\n%s", strings.Join(tc.args, " "), p, r.stdout)
			}
		}
	}
	// Resolving done without a summary is refused, as the usage says.
	runCLI(t, nil, "ledger", "resolve", "k", "--done", "--ref", "re_1").wantError(t, exitUsage, "--summary")
}

// TestHelpShowsNoSecrets sets every environment variable a flag reads
// (provider keys, the console's token, a ledger URL with a password) and
// runs every command's --help: each must name its variable and print none
// of their values. The variables still give the flags their values.
func TestHelpShowsNoSecrets(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	secrets := map[string]string{
		"STRIPE_API_KEY":       "sk_test_secret-stripe-4242",
		"ONCELY_MAIL_KEY":      "secret-mail-key-4242",
		"ONCELY_CRM_KEY":       "secret-crm-key-4242",
		EnvConsoleToken:        "secret-console-token-4242",
		"ONCELY_STRIPE_URL":    "http://secret-stripe-url-4242.invalid",
		"ONCELY_MAIL_URL":      "http://secret-mail-url-4242.invalid",
		"ONCELY_CRM_URL":       "http://secret-crm-url-4242.invalid",
		"ONCELY_KEYHEADER_URL": "http://secret-keyheader-url-4242.invalid",
		EnvLedger:              "sqlite://" + filepath.Join(dir, "secret-password-4242.db"),
	}
	var env []string
	for k, v := range secrets {
		env = append(env, k+"="+v)
	}
	var paths [][]string
	var walk func(c *cobra.Command, path []string)
	walk = func(c *cobra.Command, path []string) {
		paths = append(paths, path)
		for _, sub := range c.Commands() {
			walk(sub, append(slices.Clone(path), sub.Name()))
		}
	}
	walk(newRoot(io.Discard, io.Discard), nil)
	if len(paths) < 12 {
		t.Fatalf("found %d commands: %v", len(paths), paths)
	}
	named := map[string]bool{}
	for _, p := range paths {
		r := runCLI(t, env, append(p, "--help")...).wantOK(t)
		for k, v := range secrets {
			if strings.Contains(r.stdout+r.stderr, v) {
				t.Errorf("oncely %s --help prints the value of %s:\n%s", strings.Join(p, " "), k, r.stdout)
			}
			if strings.Contains(r.stdout, "env "+k) {
				named[k] = true
			}
		}
	}
	for k := range secrets {
		if !named[k] {
			t.Errorf("no command's --help names %s", k)
		}
	}
	// The variable still sets the flag: ONCELY_LEDGER names the file that
	// oncely ledger init creates.
	runCLI(t, env, "ledger", "init").wantOK(t)
	if _, err := os.Stat(filepath.Join(dir, "secret-password-4242.db")); err != nil {
		t.Errorf("oncely ledger init did not use %s: %v", EnvLedger, err)
	}
}
