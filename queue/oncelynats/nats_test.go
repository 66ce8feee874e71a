package oncelynats

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/ledger/ledgerpg"
	"github.com/oncely/oncely/ledger/ledgerpg/pgtest"
	"github.com/oncely/oncely/oncelyfunc"
)

var natsURL string

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(childMain())
	}
	url, stop, err := server()
	if err != nil {
		fmt.Fprintln(os.Stderr, "oncelynats tests: NATS with JetStream:", err)
		os.Exit(1)
	}
	natsURL = url
	code := pgtest.Main(m.Run)
	stop()
	os.Exit(code)
}

// server returns the URL of a NATS server with JetStream: ONCELY_NATS_URL,
// or the one on 127.0.0.1:4222, or one it starts (nats-server -js on a
// free port, with a temporary store) when none answers.
func server() (string, func(), error) {
	url := orDefault(os.Getenv("ONCELY_NATS_URL"), "nats://127.0.0.1:4222")
	if nc, err := nats.Connect(url, nats.Timeout(2*time.Second)); err == nil {
		js, err := jetstream.New(nc)
		if err == nil {
			_, err = js.AccountInfo(context.Background())
		}
		nc.Close()
		if err == nil {
			return url, func() {}, nil
		}
	}
	bin := "/usr/sbin/nats-server"
	if p, err := exec.LookPath("nats-server"); err == nil {
		bin = p
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	dir, err := os.MkdirTemp("", "oncelynats-")
	if err != nil {
		return "", nil, err
	}
	cmd := exec.Command(bin, "-a", "127.0.0.1", "-p", fmt.Sprint(port), "-js", "-sd", dir)
	if err := cmd.Start(); err != nil {
		return "", nil, fmt.Errorf("start %s: %w", bin, err)
	}
	stop := func() { _ = cmd.Process.Kill(); _ = cmd.Wait(); _ = os.RemoveAll(dir) }
	url = fmt.Sprintf("nats://127.0.0.1:%d", port)
	deadline := time.Now().Add(30 * time.Second)
	for {
		nc, err := nats.Connect(url)
		if err == nil {
			nc.Close()
			return url, stop, nil
		}
		if time.Now().After(deadline) {
			stop()
			return "", nil, fmt.Errorf("%s did not answer on %s: %w", bin, url, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func orDefault(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func suffix() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// env is one test's stream (with a unique name and subject), its
// JetStream, and a ledger and effects table in its own schema.
type env struct {
	nc      *nats.Conn
	js      jetstream.JetStream
	stream  string
	subject string
	pool    *pgxpool.Pool
	schema  string
	store   *ledgerpg.Store
}

func newEnv(t testing.TB) *env {
	t.Helper()
	nc, err := nats.Connect(natsURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	s := suffix()
	e := &env{nc: nc, js: js, stream: "ONCELY_" + strings.ToUpper(s), subject: "oncely.test." + s}
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: e.stream, Subjects: []string{e.subject + ".>"}, Storage: jetstream.MemoryStorage}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = js.DeleteStream(context.Background(), e.stream) })
	e.pool = pgtest.Pool(t)
	e.schema = pgtest.Schema(t, e.pool)
	lcfg := &ledgerpg.Config{Schema: e.schema}
	if err := ledgerpg.Migrate(ctx, e.pool, lcfg); err != nil {
		t.Fatal(err)
	}
	if e.store, err = ledgerpg.New(e.pool, lcfg); err != nil {
		t.Fatal(err)
	}
	if _, err := e.pool.Exec(ctx, "CREATE TABLE "+effects(e.schema)+" (key text, body text)"); err != nil {
		t.Fatal(err)
	}
	return e
}

func effects(schema string) string { return pgx.Identifier{schema, "effects"}.Sanitize() }

func (e *env) consumer(t testing.TB, name string, ackWait time.Duration, maxDeliver int) jetstream.Consumer {
	t.Helper()
	c, err := e.js.CreateOrUpdateConsumer(context.Background(), e.stream, jetstream.ConsumerConfig{
		Durable: name, AckPolicy: jetstream.AckExplicitPolicy, AckWait: ackWait, MaxDeliver: maxDeliver,
		FilterSubject: e.subject + ".orders",
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func (e *env) publish(t testing.TB, body, msgID string) {
	t.Helper()
	m := &nats.Msg{Subject: e.subject + ".orders", Data: []byte(body), Header: nats.Header{}}
	if msgID != "" {
		m.Header.Set(nats.MsgIdHdr, msgID)
	}
	if _, err := e.js.PublishMsg(context.Background(), m); err != nil {
		t.Fatal(err)
	}
}

func (e *env) effects(t *testing.T) int {
	t.Helper()
	var n int
	if err := e.pool.QueryRow(context.Background(), "SELECT count(*) FROM "+effects(e.schema)).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// Sent is the handlers' result.
type Sent struct {
	EmailID string `json:"email_id"`
}

// send makes the effect, one row per downstream key.
func send(pool *pgxpool.Pool, schema string, runs *atomic.Int32) func(context.Context, jetstream.Msg) (Sent, error) {
	return func(ctx context.Context, msg jetstream.Msg) (Sent, error) {
		n := runs.Add(1)
		if _, err := pool.Exec(ctx, "INSERT INTO "+effects(schema)+" VALUES ($1, $2)", oncelyfunc.DownstreamKey(ctx), string(msg.Data())); err != nil {
			return Sent{}, client.Definite(err)
		}
		return Sent{EmailID: fmt.Sprintf("em_%d", n)}, nil
	}
}

var byOrder = Options{Identity: []oncelyfunc.Key{{Expr: "json_parse(data).order_id", Norm: client.String}}}

// fetch delivers up to n messages of cons to h, one at a time.
func fetch[Out any](t *testing.T, cons jetstream.Consumer, h *Handler[Out], n int) []Out {
	t.Helper()
	var outs []Out
	for len(outs) < n {
		batch, err := cons.Fetch(n-len(outs), jetstream.FetchMaxWait(10*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		got := 0
		for msg := range batch.Messages() {
			got++
			out, _, err := h.Process(context.Background(), msg)
			if err != nil && !errors.Is(err, oncelyfunc.ErrResultNotKept) {
				t.Fatalf("Process: %v", err)
			}
			outs = append(outs, out)
		}
		if got == 0 {
			t.Fatalf("no message in 10s after %d", len(outs))
		}
	}
	return outs
}

// pendingZero polls until the consumer has no message to deliver nor
// awaiting an ack: every delivery was acked (or terminated).
func pendingZero(t *testing.T, cons jetstream.Consumer) *jetstream.ConsumerInfo {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		info, err := cons.Info(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if info.NumPending == 0 && info.NumAckPending == 0 && info.NumRedelivered == 0 {
			return info
		}
		if time.Now().After(deadline) {
			t.Fatalf("consumer still has pending %d, ack pending %d, redelivered %d", info.NumPending, info.NumAckPending, info.NumRedelivered)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// The same message delivered 5 times (5 publishes of one order) runs the
// handler once; every delivery is acked and returns the first run's
// result.
func TestNATSFiveDeliveriesOneEffect(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cons := e.consumer(t, "five", 30*time.Second, 5)
	exec := client.New(e.store, &client.Config{NoCounters: true})
	var runs atomic.Int32
	h, err := New(exec, cons, e.js, "send_receipt", byOrder, send(e.pool, e.schema, &runs))
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		e.publish(t, `{"order_id":"ord_5","to":"a@example.com"}`, "")
	}
	outs := fetch(t, cons, h, 5)
	pendingZero(t, cons)
	if got := runs.Load(); got != 1 || e.effects(t) != 1 {
		t.Errorf("handler ran %d times, %d effects, for 5 deliveries; want 1", got, e.effects(t))
	}
	for i, o := range outs {
		if o.EmailID != "em_1" {
			t.Errorf("delivery %d returned %+v, want the first run's em_1", i, o)
		}
	}
}

// A message redelivered after its ack was lost: the redelivery is acked
// with the stored result, the handler does not run again. Keyed by the
// broker's id (Nats-Msg-Id).
func TestNATSAckLostRedeliveryReplays(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cons := e.consumer(t, "acklost", 2*time.Second, 5)
	exec := client.New(e.store, &client.Config{NoCounters: true})
	var runs atomic.Int32
	h, err := New(exec, cons, e.js, "send_receipt", Options{Timeout: time.Second}, send(e.pool, e.schema, &runs))
	if err != nil {
		t.Fatal(err)
	}
	e.publish(t, `{"order_id":"ord_ack"}`, "msg-ack-1")
	// The first delivery runs the action; its ack is lost (never sent).
	batch, err := cons.Fetch(1, jetstream.FetchMaxWait(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	first := <-batch.Messages()
	in, err := input(first)
	if err != nil || in.ID != "msg-ack-1" {
		t.Fatalf("input %+v, %v; want the Nats-Msg-Id as id", in, err)
	}
	if out, res, err := h.once(context.Background(), in); err != nil || res.Outcome != client.Executed || out.EmailID != "em_1" {
		t.Fatalf("first run %+v, %v, %v", out, res.Outcome, err)
	}
	// AckWait later, JetStream redelivers it.
	outs := fetch(t, cons, h, 1)
	pendingZero(t, cons)
	if runs.Load() != 1 || outs[0].EmailID != "em_1" {
		t.Errorf("redelivery ran the handler (%d runs) or returned %+v; want 1 run and em_1", runs.Load(), outs[0])
	}
}

// 8 consumers receive the same message at once: one runs it, the others
// are redelivered while it runs and then ack it without running.
func TestNATSEightConsumersOneRuns(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var runs atomic.Int32
	release := make(chan struct{})
	// 8 consumers, each with its own executor, as 8 processes would be
	// (one executor merges its own concurrent duplicates in memory).
	var conss []jetstream.Consumer
	var hs []*Handler[Sent]
	for i := range 8 {
		cons := e.consumer(t, fmt.Sprintf("eight%d", i), 30*time.Second, 100)
		opts := byOrder
		opts.Delay = 20 * time.Millisecond
		exec := client.New(e.store, &client.Config{NoCounters: true, Wait: -1})
		h, err := New(exec, cons, e.js, "send_receipt", opts, func(ctx context.Context, msg jetstream.Msg) (Sent, error) {
			<-release
			return send(e.pool, e.schema, &runs)(ctx, msg)
		})
		if err != nil {
			t.Fatal(err)
		}
		conss, hs = append(conss, cons), append(hs, h)
	}
	e.publish(t, `{"order_id":"ord_8"}`, "")
	var inProgress atomic.Int32
	errs := make(chan error, 8)
	for i, cons := range conss {
		h := hs[i]
		go func() {
			for {
				batch, err := cons.Fetch(1, jetstream.FetchMaxWait(10*time.Second))
				if err != nil {
					errs <- err
					return
				}
				msg, ok := <-batch.Messages()
				if !ok {
					errs <- errors.New("no delivery in 10s")
					return
				}
				_, res, err := h.Process(context.Background(), msg)
				switch {
				case res.Outcome == client.InProgress:
					inProgress.Add(1)
					continue // naked with a delay: delivered again
				case err != nil:
					errs <- err
				default:
					errs <- nil
				}
				return
			}
		}()
	}
	// Release the one run once all 7 others found it in flight.
	deadline := time.Now().Add(30 * time.Second)
	for inProgress.Load() < 7 {
		if time.Now().After(deadline) {
			t.Fatalf("only %d consumers found the action in flight", inProgress.Load())
		}
		time.Sleep(5 * time.Millisecond)
	}
	close(release)
	for range 8 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for _, cons := range conss {
		pendingZero(t, cons)
	}
	if got := runs.Load(); got != 1 || e.effects(t) != 1 {
		t.Errorf("handler ran %d times (%d effects) for 8 consumers, want 1", got, e.effects(t))
	}
}

// A Timeout not below the consumer's AckWait is refused, naming both.
func TestNATSAckWaitRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cons := e.consumer(t, "refuse", 5*time.Second, 3)
	exec := client.New(e.store, &client.Config{NoCounters: true})
	h := func(context.Context, jetstream.Msg) (Sent, error) { return Sent{}, nil }
	_, err := New(exec, cons, e.js, "refused", Options{Timeout: 5 * time.Second}, h)
	if err == nil || !strings.Contains(err.Error(), "Timeout (5s)") || !strings.Contains(err.Error(), "AckWait (5s)") {
		t.Errorf("Timeout = AckWait: %v; want a refusal naming both", err)
	}
	_, err = New(exec, cons, e.js, "refused2", Options{MaxAttempts: 4}, h)
	if err == nil || !strings.Contains(err.Error(), "MaxAttempts (4)") || !strings.Contains(err.Error(), "MaxDeliver (3)") {
		t.Errorf("MaxAttempts > MaxDeliver: %v; want a refusal naming both", err)
	}
	if _, err := New(exec, cons, e.js, "accepted", Options{Timeout: 4 * time.Second}, h); err != nil {
		t.Errorf("Timeout below AckWait: %v", err)
	}
}

// A handler that always fails is delivered MaxDeliver times; then the
// message is dead-lettered once (hook and DLQ subject) and terminated.
func TestNATSAlwaysFailsDeadLetterOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cons := e.consumer(t, "fails", 30*time.Second, 3)
	exec := client.New(e.store, &client.Config{NoCounters: true})
	var runs, hooks atomic.Int32
	dlqSubject := strings.Replace(e.subject, ".test.", ".dlq.", 1)
	dlq, err := e.nc.SubscribeSync(dlqSubject)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.js.CreateStream(context.Background(), jetstream.StreamConfig{Name: e.stream + "_DLQ", Subjects: []string{dlqSubject}, Storage: jetstream.MemoryStorage}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.js.DeleteStream(context.Background(), e.stream+"_DLQ") })
	opts := byOrder
	opts.DeadLetterSubject = dlqSubject
	opts.OnDeadLetter = func(ctx context.Context, msg jetstream.Msg, err error) { hooks.Add(1) }
	h, err := New(exec, cons, e.js, "send_receipt", opts, func(ctx context.Context, msg jetstream.Msg) (Sent, error) {
		runs.Add(1)
		return Sent{}, client.Definite(errors.New("mail API unavailable"))
	})
	if err != nil {
		t.Fatal(err)
	}
	e.publish(t, `{"order_id":"ord_fail"}`, "")
	for i := 1; i <= 3; i++ {
		batch, err := cons.Fetch(1, jetstream.FetchMaxWait(10*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		msg, ok := <-batch.Messages()
		if !ok {
			t.Fatalf("delivery %d did not come", i)
		}
		if _, res, err := h.Process(context.Background(), msg); err == nil || res.Outcome != client.Failed {
			t.Fatalf("delivery %d: %v, %v; want a failure", i, res.Outcome, err)
		}
	}
	info := pendingZero(t, cons)
	if runs.Load() != 3 || hooks.Load() != 1 {
		t.Errorf("handler ran %d times, hook fired %d times; want 3 and 1", runs.Load(), hooks.Load())
	}
	if info.Delivered.Stream != 1 || info.AckFloor.Stream != 1 {
		t.Errorf("consumer delivered %+v ack floor %+v: the message is not settled", info.Delivered, info.AckFloor)
	}
	if m, err := dlq.NextMsg(10 * time.Second); err != nil || !strings.Contains(m.Header.Get("Oncely-Error"), "mail API unavailable") {
		t.Errorf("dead-letter copy: %v, %v", m, err)
	}
	// Not retried further: no delivery comes back.
	batch, err := cons.Fetch(1, jetstream.FetchMaxWait(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for range batch.Messages() {
		t.Error("the terminated message was delivered again")
	}
}

// The SIGKILL test's child: it consumes one delivery, makes the effect,
// and kills itself before acking.
const (
	childEnv    = "ONCELY_NATS_CHILD"
	childPoint  = "ONCELY_NATS_CHILD_POINT"
	childSchema = "ONCELY_NATS_CHILD_SCHEMA"
	childPG     = "ONCELY_NATS_CHILD_PG"
	childStream = "ONCELY_NATS_CHILD_STREAM"
)

const ackWait = 2 * time.Second

// kill ends the process with SIGKILL, as a crash would.
func kill() {
	fmt.Println("KILLING")
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {}
}

func reconciler(pool *pgxpool.Pool, schema string) client.Reconciler {
	return client.ReconcilerFunc(func(ctx context.Context, inv client.Invocation) (client.Reconciliation, error) {
		var n int
		if err := pool.QueryRow(ctx, "SELECT count(*) FROM "+effects(schema)+" WHERE key = $1", inv.DownstreamKey).Scan(&n); err != nil {
			return client.Reconciliation{}, err
		}
		if n > 0 {
			return client.Reconciliation{Verdict: client.VerdictFound, Effect: client.Effect{Summary: "email found"}}, nil
		}
		return client.Reconciliation{Verdict: client.VerdictAbsent}, nil
	})
}

func childMain() int {
	fail := func(err error) int { fmt.Println(err); return 1 }
	ctx := context.Background()
	faultPoint = func(p string) {
		if p == os.Getenv(childPoint) {
			kill()
		}
	}
	schema := os.Getenv(childSchema)
	pool, err := pgxpool.New(ctx, os.Getenv(childPG))
	if err != nil {
		return fail(err)
	}
	store, err := ledgerpg.New(pool, &ledgerpg.Config{Schema: schema})
	if err != nil {
		return fail(err)
	}
	nc, err := nats.Connect(os.Getenv(childEnv))
	if err != nil {
		return fail(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return fail(err)
	}
	cons, err := js.Consumer(ctx, os.Getenv(childStream), "crash")
	if err != nil {
		return fail(err)
	}
	exec := client.New(store, &client.Config{NoCounters: true})
	var runs atomic.Int32
	opts := byOrder
	opts.Reconciler, opts.Timeout = reconciler(pool, schema), ackWait/2
	h, err := New(exec, cons, js, "send_receipt", opts, func(ctx context.Context, msg jetstream.Msg) (Sent, error) {
		if _, err := send(pool, schema, &runs)(ctx, msg); err != nil {
			return Sent{}, err
		}
		if os.Getenv(childPoint) == "effect" {
			kill()
		}
		return Sent{EmailID: "em_child"}, nil
	})
	if err != nil {
		return fail(err)
	}
	batch, err := cons.Fetch(1, jetstream.FetchMaxWait(10*time.Second))
	if err != nil {
		return fail(err)
	}
	for msg := range batch.Messages() {
		_, _, err := h.Process(ctx, msg)
		return fail(fmt.Errorf("Process returned: %v", err))
	}
	return fail(errors.New("no message"))
}

// A consumer process that claims, makes the effect and is SIGKILLed
// before acking: the redelivery (after AckWait) takes the dead claim
// over, reconciles, finds the effect, and acks; one effect; the dead
// consumer's late completion is refused.
func TestNATSKilledConsumerRedeliverySettlesOnce(t *testing.T) {
	// The points a consumer can die at, in order: after the effect (the
	// record pending: the redelivery comes before the record), and after
	// the record (done: the ack is lost, the redelivery comes after it).
	for _, point := range []string{"effect", "recorded"} {
		t.Run(point, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			cons := e.consumer(t, "crash", ackWait, 5)
			e.publish(t, `{"order_id":"ord_kill"}`, "")
			self, err := os.Executable()
			if err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(self, "-test.run=^$")
			cmd.Env = append(os.Environ(), childEnv+"="+natsURL, childSchema+"="+e.schema, childPG+"="+e.pool.Config().ConnString(), childStream+"="+e.stream, childPoint+"="+point)
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			cmd.Stderr = os.Stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			var lines []string
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				lines = append(lines, sc.Text())
			}
			err = cmd.Wait()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL || !strings.Contains(strings.Join(lines, " "), "KILLING") {
				t.Fatalf("child ended with %v, output %q; want killed by SIGKILL after the effect", err, lines)
			}
			want := map[string]ledger.State{"effect": ledger.StatePending, "recorded": ledger.StateDone}[point]
			recs, err := e.store.List(context.Background(), ledger.Filter{Limit: 10})
			if err != nil || len(recs) != 1 || recs[0].State != want {
				t.Fatalf("records after the kill: %+v, %v; want one %s", recs, err, want)
			}
			dead := recs[0]
			exec := client.New(e.store, &client.Config{NoCounters: true})
			var runs atomic.Int32
			opts := byOrder
			opts.Reconciler, opts.Timeout = reconciler(e.pool, e.schema), ackWait/2
			h, err := New(exec, cons, e.js, "send_receipt", opts, send(e.pool, e.schema, &runs))
			if err != nil {
				t.Fatal(err)
			}
			fetch(t, cons, h, 1)
			pendingZero(t, cons)
			if runs.Load() != 0 || e.effects(t) != 1 {
				t.Errorf("after the redelivery: %d runs, %d effects; want 0 and 1", runs.Load(), e.effects(t))
			}
			rec, err := e.store.Get(context.Background(), dead.Key)
			if err != nil || rec.State != ledger.StateDone {
				t.Fatalf("record after the redelivery: %+v, %v; want done", rec, err)
			}
			if point == "effect" {
				if rec.Owner == dead.Owner {
					t.Fatalf("the record is still the dead consumer's: %+v", rec)
				}
				if err := e.store.Complete(context.Background(), dead.Key, dead.Owner, ledger.Completion{Summary: "late"}); !errors.Is(err, ledger.ErrNotOwner) {
					t.Errorf("the dead consumer's late completion: %v, want ledger.ErrNotOwner", err)
				}
			}
		})
	}
}

// A message whose action ends uncertain is not acked; the operator is told
// what to do, in the log.
func TestNATSUncertainNotAckedLogged(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cons := e.consumer(t, "uncertain", 30*time.Second, 5)
	var logs bytes.Buffer
	opts := byOrder
	opts.Logger = slog.New(slog.NewTextHandler(&syncWriter{w: &logs}, nil))
	h, err := New(client.New(e.store, &client.Config{NoCounters: true}), cons, e.js, "send_receipt", opts,
		func(context.Context, jetstream.Msg) (Sent, error) {
			return Sent{}, errors.New("connection reset after the request was sent")
		})
	if err != nil {
		t.Fatal(err)
	}
	e.publish(t, `{"order_id":"ord_unc"}`, "")
	batch, err := cons.Fetch(1, jetstream.FetchMaxWait(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	msg, ok := <-batch.Messages()
	if !ok {
		t.Fatal("no delivery")
	}
	if _, res, err := h.Process(context.Background(), msg); res.Outcome != client.Uncertain || err == nil {
		t.Fatalf("Process: %v, %v; want uncertain", res.Outcome, err)
	}
	if !strings.Contains(logs.String(), "outcome is unknown") || !strings.Contains(logs.String(), "oncely ledger resolve") {
		t.Errorf("log %q does not tell the operator", logs.String())
	}
	// Naked, not acked: JetStream delivers it again.
	again, err := cons.Fetch(1, jetstream.FetchMaxWait(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	m2, ok := <-again.Messages()
	if !ok {
		t.Fatal("the uncertain message was not delivered again")
	}
	if md, _ := m2.Metadata(); md.NumDelivered != 2 {
		t.Errorf("redelivery count %d, want 2", md.NumDelivered)
	}
	_ = m2.Term()
}

type syncWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}
