package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/oncely/oncely/fakes/fault"
	"github.com/oncely/oncely/internal/tooling"
)

// rieModule is the AWS Lambda Runtime Interface Emulator, pinned: the
// emulator the provided.al2023 base image runs, built from the Go module
// proxy.
const rieModule = "github.com/aws/aws-lambda-runtime-interface-emulator/cmd/aws-lambda-rie@v0.0.0-20261030222936-bef5c4ba774d"

var (
	buildOnce           sync.Once
	rieBin, bootstrap   string
	buildErr            error
	repoRoot, _         = filepath.Abs("../..")
	runtimeTestsTimeout = 2 * time.Minute
)

// binaries builds, once per test binary, the emulator (go install into
// .tmp/bin of the repository when missing, once however many test
// binaries start at once) and the function's
// real bootstrap (-tags lambda.norpc, as deployed; for this machine's
// architecture).
func binaries(t *testing.T) (rie, boot string) {
	t.Helper()
	buildOnce.Do(func() {
		bin := filepath.Join(repoRoot, ".tmp", "bin")
		rieBin = filepath.Join(bin, "aws-lambda-rie")
		if buildErr = tooling.GoInstall(context.Background(), bin, rieModule, "aws-lambda-rie"); buildErr != nil {
			return
		}
		dir, err := os.MkdirTemp("", "oncely-bootstrap-")
		if err != nil {
			buildErr = err
			return
		}
		bootstrap = filepath.Join(dir, "bootstrap")
		cmd := exec.Command("go", "build", "-tags", "lambda.norpc", "-o", bootstrap, ".")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build bootstrap: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return rieBin, bootstrap
}

// freeAddr returns a loopback address no one listens on now.
func freeAddr(t *testing.T) string {
	t.Helper()
	port, err := tooling.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("127.0.0.1:%d", port)
}

// emulator is one execution environment: the real bootstrap under the
// runtime interface emulator, invoked through the Lambda Invoke API.
type emulator struct {
	url string
}

// startEmulator runs the function with the fixture's environment and the
// given function timeout (seconds), and stops it when t ends.
func startEmulator(t *testing.T, f *fixture, timeoutSeconds int) *emulator {
	t.Helper()
	rie, boot := binaries(t)
	addr := freeAddr(t)
	e := &emulator{url: "http://" + addr + "/2015-03-31/functions/function/invocations"}
	cmd := exec.Command(rie, "--runtime-interface-emulator-address", addr, "--runtime-api-address", freeAddr(t), boot)
	cmd.Env = append(os.Environ(),
		"AWS_LAMBDA_FUNCTION_TIMEOUT="+fmt.Sprint(timeoutSeconds),
		"AWS_REGION=us-east-1", "AWS_ACCESS_KEY_ID=local", "AWS_SECRET_ACCESS_KEY=local")
	for k, v := range f.env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // the bootstrap dies with it
	p, err := tooling.StartProcess(cmd, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Stop(syscall.SIGKILL, 0, true)
		if t.Failed() {
			t.Logf("emulator output:\n%s", p.Out)
		}
	})
	err = p.WaitReady(context.Background(), runtimeTestsTimeout, 10*time.Millisecond, func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	if err != nil {
		t.Fatalf("the emulator did not listen on %s: %v", addr, err)
	}
	return e
}

// invoke sends ev through the Invoke API and returns the raw answer.
func (e *emulator) invoke(t *testing.T, ev Event) string {
	t.Helper()
	body, _ := json.Marshal(ev)
	ctx, cancel := context.WithTimeout(context.Background(), runtimeTestsTimeout)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, e.url, bytes.NewReader(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("invoke: %v", err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return string(out)
}

// result decodes the single tool result of an answer.
func result(t *testing.T, answer string) ToolResult {
	t.Helper()
	var r Response
	if err := json.Unmarshal([]byte(answer), &r); err != nil || len(r.ToolResults) != 1 {
		t.Fatalf("answer %q: want one tool result (%v)", answer, err)
	}
	return r.ToolResults[0]
}

// The same event invoked twice in one execution environment: one refund,
// and the second answer says it was done.
func TestRuntimeRepeatedInvocation(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	e := startEmulator(t, f, 30)
	ev := Event{RunID: "run-1", ToolCalls: []ToolUse{f.refundCall("toolu_01", 1000, "requested_by_customer")}}
	r1 := result(t, e.invoke(t, ev))
	ev.ToolCalls[0] = f.refundCall("toolu_02", "1000", "Requested by customer")
	r2 := result(t, e.invoke(t, ev))
	if len(f.refunds()) != 1 {
		t.Fatalf("%d refunds, want 1", len(f.refunds()))
	}
	if r1.IsError.Value || !strings.HasPrefix(text(r1), "Done: refund "+f.refunds()[0].ID) ||
		r2.IsError.Value || !strings.HasPrefix(text(r2), "Already done earlier in this run: refund "+f.refunds()[0].ID) {
		t.Errorf("answers %+v and %+v", r1, r2)
	}
}

// The function times out while Stripe holds the refund (the fake commits
// it when the function's client hangs up at the deadline); the retry, in a
// new execution environment, finds the refund instead of refunding again.
func TestRuntimeTimeoutThenRetry(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.stripe.Faults.Add(fault.Rule{Route: "POST /v1/refunds", Attempt: 1, Action: fault.Delay})
	e1 := startEmulator(t, f, 3)
	ev := Event{RunID: "run-1", ToolCalls: []ToolUse{f.refundCall("toolu_01", 1000, "")}}
	if answer := e1.invoke(t, ev); !strings.Contains(answer, "Task timed out") {
		t.Logf("first invocation answered %q", answer) // the function may answer "uncertain" just before the emulator's deadline
	}
	waitFor(t, "Stripe to commit the held refund", func() bool { return len(f.refunds()) == 1 })

	e2 := startEmulator(t, f, 30) // Lambda's retry lands in a fresh environment
	ev.ToolCalls[0].ID = "toolu_02"
	r2 := result(t, e2.invoke(t, ev))
	if len(f.refunds()) != 1 || r2.IsError.Value || !strings.HasPrefix(text(r2), "Already done earlier in this run: refund "+f.refunds()[0].ID) {
		t.Errorf("retry: %+v, %d refunds; want already done, one refund", r2, len(f.refunds()))
	}
}

// Two execution environments get the same event at once: one refund; one
// answer says done, the other done or in progress, never a second refund.
func TestRuntimeConcurrentInvocations(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	envs := []*emulator{startEmulator(t, f, 30), startEmulator(t, f, 30)}
	ev := Event{RunID: "run-1", ToolCalls: []ToolUse{f.refundCall("toolu_01", 500, "")}}
	answers := make([]string, len(envs))
	var wg sync.WaitGroup
	for i, e := range envs {
		wg.Go(func() { answers[i] = e.invoke(t, ev) })
	}
	wg.Wait()
	if len(f.refunds()) != 1 {
		t.Fatalf("%d refunds, want 1", len(f.refunds()))
	}
	done := 0
	for _, a := range answers {
		r := result(t, a)
		switch {
		case !r.IsError.Value && strings.Contains(text(r), f.refunds()[0].ID):
			done++
		case r.IsError.Value && text(r) == "Already in progress. Do not retry.":
		default:
			t.Errorf("answer %+v", r)
		}
	}
	if done == 0 {
		t.Errorf("no answer says the refund was done: %q", answers)
	}
}
