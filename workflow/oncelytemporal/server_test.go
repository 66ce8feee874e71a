//go:build temporalserver

// The tests of this file run against a real Temporal dev server and worker
// processes: go test -tags temporalserver, with the Temporal CLI (go
// install github.com/temporalio/cli/cmd/temporal@v1.5.1) on PATH or named
// by ONCELY_TEMPORAL_CLI. TestMain starts the server on free loopback
// ports, in memory, and stops it at the end.

package oncelytemporal_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	tclient "go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/fakes"
	"github.com/oncely/oncely/fakes/mailfake"
	"github.com/oncely/oncely/ledger/ledgersqlite"
	"github.com/oncely/oncely/providers/mail"
	"github.com/oncely/oncely/reconcile"
	"github.com/oncely/oncely/workflow/oncelytemporal"
)

// The worker child's settings (see runWorkerChild).
const (
	envWorker = "ONCELYTEMPORAL_TEST_WORKER" // "1": this process is a worker that dies after the send
	envAddr   = "ONCELYTEMPORAL_TEST_ADDR"
	envQueue  = "ONCELYTEMPORAL_TEST_QUEUE"
	envLedger = "ONCELYTEMPORAL_TEST_LEDGER"
	envMail   = "ONCELYTEMPORAL_TEST_MAIL"
	envRemote = "ONCELYTEMPORAL_TEST_REMOTE" // "1": dead owners are never seen as exited

	workerCrash = 3
)

var serverAddr string

func TestMain(m *testing.M) {
	if os.Getenv(envWorker) == "1" {
		serverAddr = os.Getenv(envAddr)
		os.Exit(runWorkerChild())
	}
	stop, err := startDevServer()
	if err != nil {
		fmt.Fprintln(os.Stderr, "temporal dev server:", err)
		os.Exit(1)
	}
	code := m.Run()
	stop()
	os.Exit(code)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// startDevServer starts `temporal server start-dev` in memory on free
// loopback ports and waits until it serves.
func startDevServer() (func(), error) {
	bin := os.Getenv("ONCELY_TEMPORAL_CLI")
	if bin == "" {
		var err error
		if bin, err = exec.LookPath("temporal"); err != nil {
			return nil, errors.New("the Temporal CLI is neither on PATH nor named by ONCELY_TEMPORAL_CLI (go install github.com/temporalio/cli/cmd/temporal@v1.5.1)")
		}
	}
	var ports [3]int
	for i := range ports {
		p, err := freePort()
		if err != nil {
			return nil, err
		}
		ports[i] = p
	}
	cmd := exec.Command(bin, "server", "start-dev", "--headless", "--ip", "127.0.0.1",
		"--port", fmt.Sprint(ports[0]), "--http-port", fmt.Sprint(ports[1]), "--metrics-port", fmt.Sprint(ports[2]),
		"--log-level", "error")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	stop := func() { cmd.Process.Kill(); cmd.Wait() }
	serverAddr = fmt.Sprintf("127.0.0.1:%d", ports[0])
	deadline := time.Now().Add(60 * time.Second)
	for {
		c, err := dial()
		if err == nil {
			_, err = c.CheckHealth(context.Background(), &tclient.CheckHealthRequest{})
			c.Close()
			if err == nil {
				return stop, nil
			}
		}
		if time.Now().After(deadline) {
			stop()
			return nil, fmt.Errorf("not serving after 60 s: %v %s", err, stderr.String())
		}
		time.Sleep(100 * time.Millisecond) // polling the server's health
	}
}

func dial() (tclient.Client, error) {
	return tclient.Dial(tclient.Options{HostPort: serverAddr, Logger: tlog.NewStructuredLogger(slog.New(slog.DiscardHandler))})
}

// serverActs is a struct whose methods are activities: each is wrapped
// with oncelytemporal.Activity and registered under its own method name.
type serverActs struct {
	mailer *mail.Client
	crash  bool // exit the process right after the send
}

// SendReceipt sends the receipt of an order.
func (a *serverActs) SendReceipt(ctx context.Context, in Receipt) (Sent, error) {
	m, err := a.mailer.Send(ctx, oncelytemporal.DownstreamKey(ctx), mail.Message{
		From: "shop@example.com", To: in.To, Subject: "Receipt for " + in.OrderID, Text: in.Text,
	})
	if a.crash {
		os.Exit(workerCrash)
	}
	if err != nil {
		return Sent{}, err
	}
	return Sent{MessageID: m.ID}, nil
}

// Digest is the input of one iteration of DigestWorkflow.
type Digest struct {
	ListID    string   `json:"listId"`
	To        string   `json:"to"`
	Iteration int      `json:"iteration"`
	Each      bool     `json:"each"` // send through SendDigestEach
	Seen      []string `json:"seen"` // what each earlier iteration was told
}

func (a *serverActs) send(ctx context.Context, in Digest) (Sent, error) {
	m, err := a.mailer.Send(ctx, oncelytemporal.DownstreamKey(ctx), mail.Message{
		From: "news@example.com", To: in.To, Subject: "Digest of " + in.ListID, Text: fmt.Sprint("iteration ", in.Iteration),
	})
	if err != nil {
		return Sent{}, err
	}
	return Sent{MessageID: m.ID}, nil
}

// SendDigest is identified by the list alone: once per workflow id,
// whatever the iteration of a continue-as-new chain.
func (a *serverActs) SendDigest(ctx context.Context, in Digest) (Sent, error) { return a.send(ctx, in) }

// SendDigestEach is identified by the list and the iteration: once per
// iteration.
func (a *serverActs) SendDigestEach(ctx context.Context, in Digest) (Sent, error) {
	return a.send(ctx, in)
}

// serverOptions: a dead attempt's claim lasts its StartToCloseTimeout; a
// missed heartbeat ends the attempt sooner; five attempts a half second
// apart are spent long before the claim ends, unless the in-progress
// attempts wait for it (NextRetryDelay).
var serverOptions = workflow.ActivityOptions{
	StartToCloseTimeout: 20 * time.Second,
	HeartbeatTimeout:    2 * time.Second,
	RetryPolicy:         &temporal.RetryPolicy{InitialInterval: 500 * time.Millisecond, BackoffCoefficient: 1, MaximumAttempts: 5},
}

// ServerReceiptWorkflow sends a receipt and returns "sent:<id>" for a
// known result, "found:<ref>" for one found by the reconciler.
func ServerReceiptWorkflow(ctx workflow.Context, in Receipt) (string, error) {
	ctx = workflow.WithActivityOptions(ctx, serverOptions)
	var a *serverActs
	var d oncelytemporal.Done[Sent]
	if err := workflow.ExecuteActivity(ctx, a.SendReceipt, in).Get(ctx, &d); err != nil {
		return "", err
	}
	if !d.Known {
		return "found:" + d.Ref, nil
	}
	return "sent:" + d.Value.MessageID, nil
}

// DigestWorkflow sends the digest and continues as new, for three
// iterations; it returns what each iteration was told.
func DigestWorkflow(ctx workflow.Context, in Digest) (string, error) {
	ctx = workflow.WithActivityOptions(ctx, serverOptions)
	var a *serverActs
	act := a.SendDigest
	if in.Each {
		act = a.SendDigestEach
	}
	var d oncelytemporal.Done[Sent]
	if err := workflow.ExecuteActivity(ctx, act, in).Get(ctx, &d); err != nil {
		return "", err
	}
	told := "sent:" + d.Value.MessageID
	if d.Replayed {
		told = "already done:" + d.Value.MessageID
	}
	in.Seen = append(in.Seen, told)
	if in.Iteration < 2 {
		in.Iteration++
		return "", workflow.NewContinueAsNewError(ctx, DigestWorkflow, in)
	}
	return strings.Join(in.Seen, " "), nil
}

// newWorker starts a worker on queue with the activities wrapped over the
// SQLite ledger at ledgerPath.
func newWorker(c tclient.Client, queue, ledgerPath, mailURL string, crash, remote bool) (worker.Worker, func(), error) {
	ctx := context.Background()
	store, err := ledgersqlite.Open(ctx, ledgerPath, nil)
	if err != nil {
		return nil, nil, err
	}
	cfg := &client.Config{}
	if remote {
		// The dead owner ran on another machine: its exit is not visible
		// here, so its claim stands until its lease ends.
		cfg.OwnerExited = func(string) bool { return false }
	}
	exec := client.New(store, cfg)
	mailer := mail.New(mailURL, &mail.Config{IndexLag: 0})
	acts := &serverActs{mailer: mailer, crash: crash}
	w := worker.New(c, queue, worker.Options{})
	w.RegisterWorkflow(ServerReceiptWorkflow)
	w.RegisterWorkflow(DigestWorkflow)
	receipt, err := oncelytemporal.Activity(exec, "send_receipt", oncelytemporal.Options[Sent]{
		Identity:   []oncelytemporal.Key{{Expr: "orderId", Norm: client.String}},
		Reconciler: reconcile.New(mailer, nil),
		Ref:        func(s Sent) string { return s.MessageID },
	}, acts.SendReceipt)
	if err != nil {
		store.Close()
		return nil, nil, err
	}
	digest, err := oncelytemporal.Activity(exec, "send_digest", oncelytemporal.Options[Sent]{
		Identity: []oncelytemporal.Key{{Expr: "listId"}},
	}, acts.SendDigest)
	if err != nil {
		store.Close()
		return nil, nil, err
	}
	// Each iteration of the continue-as-new chain is meant to act: the
	// iteration is part of the identity.
	each, err := oncelytemporal.Activity(exec, "send_digest_each", oncelytemporal.Options[Sent]{
		Identity: []oncelytemporal.Key{{Expr: "listId"}, {Expr: "iteration"}},
	}, acts.SendDigestEach)
	if err != nil {
		store.Close()
		return nil, nil, err
	}
	receipt.Register(w)
	digest.Register(w)
	each.Register(w)
	if err := w.Start(); err != nil {
		store.Close()
		return nil, nil, err
	}
	return w, func() { w.Stop(); store.Close() }, nil
}

// runWorkerChild is a worker process that dies right after its first send.
func runWorkerChild() int {
	c, err := dial()
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 1
	}
	defer c.Close()
	_, stop, err := newWorker(c, os.Getenv(envQueue), os.Getenv(envLedger), os.Getenv(envMail), true, os.Getenv(envRemote) == "1")
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 1
	}
	defer stop()
	select {} // until the send ends the process
}

// workerDiesAfterSend starts a workflow whose first attempt runs in a
// worker process that dies right after the send, then runs a worker in
// this process and returns the workflow's result and the receipts sent.
func workerDiesAfterSend(t *testing.T, remote bool) (string, []fakes.Effect, error) {
	t.Helper()
	srv := mailfake.NewServer(nil)
	defer srv.Close()
	c, err := dial()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	queue := "receipts-" + strings.ReplaceAll(t.Name(), "/", "-")
	ledgerPath := filepath.Join(t.TempDir(), "oncely.db")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	run, err := c.ExecuteWorkflow(ctx, tclient.StartWorkflowOptions{ID: "order-" + queue, TaskQueue: queue},
		ServerReceiptWorkflow, Receipt{OrderID: "A-1", To: "ada@example.com", Text: "Thank you."})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	remoteFlag := ""
	if remote {
		remoteFlag = "1"
	}
	cmd.Env = append(os.Environ(), envWorker+"=1", envAddr+"="+serverAddr, envQueue+"="+queue,
		envLedger+"="+ledgerPath, envMail+"="+srv.URL, envRemote+"="+remoteFlag)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err = cmd.Run()
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) || exitErr.ExitCode() != workerCrash {
		t.Fatalf("worker process: %v, want its exit after the send: %s", err, stderr.String())
	}
	if n := len(srv.Journal()); n != 1 {
		t.Fatalf("receipts sent before the worker died = %d, want 1", n)
	}
	_, stop, err := newWorker(c, queue, ledgerPath, srv.URL, false, remote)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	var result string
	err = run.Get(ctx, &result)
	return result, srv.Journal(), err
}

// A worker dies right after the send, before oncely recorded it; the
// claim's owner is a process of this machine that has exited: the next
// attempt takes it over, reconciles and finds the message. With the
// default options the workflow completes with the message id the lookup
// found.
func TestServerWorkerDiesAfterSend(t *testing.T) {
	t.Parallel()
	result, journal, err := workerDiesAfterSend(t, false)
	if err != nil {
		t.Fatalf("workflow failed: %v", err)
	}
	if len(journal) != 1 || result != "found:"+journal[0].ID {
		t.Fatalf("receipts %d, result %q; want 1 and found:<its id>", len(journal), result)
	}
}

// The same with the dead worker on another machine: its exit is not
// visible here, so the claim stands until its lease ends (the attempt's
// StartToCloseTimeout). The next attempt is told "in progress" and
// retries when the claim may be taken over (NextRetryDelay), not when the
// retry policy's five attempts a half second apart are used up: the
// workflow completes with one receipt and its id, 5 runs of 5, within
// the bound (the lease and a second after the dead attempt started, plus
// Temporal's dispatch).
func TestServerRemoteDeadOwner(t *testing.T) {
	t.Parallel()
	for i := range 5 {
		t.Run(fmt.Sprint("run", i+1), func(t *testing.T) {
			t.Parallel()
			result, journal, err := workerDiesAfterSend(t, true)
			if err != nil {
				t.Fatalf("workflow failed: %v", err)
			}
			if len(journal) != 1 || result != "found:"+journal[0].ID {
				t.Fatalf("receipts %d, result %q; want 1 and found:<its id>", len(journal), result)
			}
		})
	}
}

// Continue-as-new: the three iterations of a chain share the workflow id,
// which is the run of the action. An identity without the iteration acts
// once for the chain (the later iterations are told it is already done,
// with the first message id); one with the iteration acts on each.
func TestServerContinueAsNew(t *testing.T) {
	t.Parallel()
	for _, each := range []bool{false, true} {
		t.Run(fmt.Sprint("iteration in the identity ", each), func(t *testing.T) {
			t.Parallel()
			srv := mailfake.NewServer(nil)
			defer srv.Close()
			c, err := dial()
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			queue := "digest-" + strings.ReplaceAll(t.Name(), "/", "-")
			queue = strings.ReplaceAll(queue, " ", "-")
			_, stop, err := newWorker(c, queue, filepath.Join(t.TempDir(), "oncely.db"), srv.URL, false, false)
			if err != nil {
				t.Fatal(err)
			}
			defer stop()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			run, err := c.ExecuteWorkflow(ctx, tclient.StartWorkflowOptions{ID: "digest-" + queue, TaskQueue: queue},
				DigestWorkflow, Digest{ListID: "weekly", To: "ada@example.com", Each: each})
			if err != nil {
				t.Fatal(err)
			}
			var result string
			if err := run.Get(ctx, &result); err != nil {
				t.Fatal(err)
			}
			journal := srv.Journal()
			var want string
			if each {
				if len(journal) != 3 {
					t.Fatalf("digests sent = %d, want 3 (one per iteration)", len(journal))
				}
				want = "sent:" + journal[0].ID + " sent:" + journal[1].ID + " sent:" + journal[2].ID
			} else {
				if len(journal) != 1 {
					t.Fatalf("digests sent = %d, want 1 (one per workflow id)", len(journal))
				}
				id := journal[0].ID
				want = "sent:" + id + " already done:" + id + " already done:" + id
			}
			if result != want {
				t.Fatalf("iterations were told %q, want %q", result, want)
			}
		})
	}
}
