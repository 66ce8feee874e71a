package oncelyamqp

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
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/ledger/ledgerpg"
	"github.com/oncely/oncely/ledger/ledgerpg/pgtest"
	"github.com/oncely/oncely/oncelyfunc"
)

var amqpURL string

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(childMain())
	}
	url, stop, err := server()
	if err != nil {
		fmt.Fprintln(os.Stderr, "oncelyamqp tests: RabbitMQ:", err)
		os.Exit(1)
	}
	amqpURL = url
	code := pgtest.Main(m.Run)
	stop()
	os.Exit(code)
}

// server returns the URL of a RabbitMQ broker: ONCELY_AMQP_URL, or the one
// on 127.0.0.1:5672 (guest/guest), or a node it starts (rabbitmq-server on
// free ports, with a temporary data directory) when none answers.
func server() (string, func(), error) {
	url := os.Getenv("ONCELY_AMQP_URL")
	if url == "" {
		url = "amqp://guest:guest@127.0.0.1:5672/"
	}
	if conn, err := amqp.Dial(url); err == nil {
		conn.Close()
		return url, func() {}, nil
	}
	// The package's own script, not /usr/sbin's wrapper, which switches
	// to the rabbitmq user and drops the environment that places the node.
	bin := "/usr/lib/rabbitmq/bin/rabbitmq-server"
	if _, err := os.Stat(bin); err != nil {
		if bin, err = exec.LookPath("rabbitmq-server"); err != nil {
			return "", nil, fmt.Errorf("no RabbitMQ answers on %s and rabbitmq-server is not installed", url)
		}
	}
	port, err := freePort()
	if err != nil {
		return "", nil, err
	}
	dist, err := freePort()
	if err != nil {
		return "", nil, err
	}
	dir, err := os.MkdirTemp("", "oncelyamqp-")
	if err != nil {
		return "", nil, err
	}
	if err := os.WriteFile(dir+"/enabled_plugins", []byte("[].\n"), 0o644); err != nil {
		return "", nil, err
	}
	// A configuration of its own: the system's (/etc/rabbitmq) may name
	// the listener of the node that did not answer.
	if err := os.WriteFile(dir+"/rabbitmq.conf", fmt.Appendf(nil, "listeners.tcp.default = 127.0.0.1:%d\n", port), 0o644); err != nil {
		return "", nil, err
	}
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(),
		fmt.Sprintf("RABBITMQ_NODE_PORT=%d", port), "RABBITMQ_NODE_IP_ADDRESS=127.0.0.1",
		fmt.Sprintf("RABBITMQ_DIST_PORT=%d", dist), fmt.Sprintf("RABBITMQ_NODENAME=oncely%d@localhost", port),
		"RABBITMQ_MNESIA_BASE="+dir+"/mnesia", "RABBITMQ_LOG_BASE="+dir+"/log",
		"RABBITMQ_ENABLED_PLUGINS_FILE="+dir+"/enabled_plugins", "RABBITMQ_CONFIG_FILE="+dir+"/rabbitmq.conf",
		"HOME="+dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return "", nil, fmt.Errorf("start %s: %w", bin, err)
	}
	stop := func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		_ = cmd.Wait()
		_ = os.RemoveAll(dir)
	}
	url = fmt.Sprintf("amqp://guest:guest@127.0.0.1:%d/", port)
	deadline := time.Now().Add(90 * time.Second)
	for {
		conn, err := amqp.Dial(url)
		if err == nil {
			conn.Close()
			return url, stop, nil
		}
		if time.Now().After(deadline) {
			stop()
			return "", nil, fmt.Errorf("%s did not answer on %s: %w", bin, url, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func suffix() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// env is one test's queue and dead-letter queue (unique names), a
// channel, and a ledger and effects table in its own schema.
type env struct {
	conn   *amqp.Connection
	ch     *amqp.Channel
	queue  string
	dlq    string
	pool   *pgxpool.Pool
	schema string
	store  *ledgerpg.Store
}

func newEnv(t testing.TB) *env {
	t.Helper()
	conn, err := amqp.Dial(amqpURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	s := suffix()
	e := &env{conn: conn, ch: ch, queue: "oncely.test." + s, dlq: "oncely.test." + s + ".dlq"}
	if _, err := ch.QueueDeclare(e.dlq, false, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := ch.QueueDeclare(e.queue, false, false, false, false, amqp.Table{
		"x-dead-letter-exchange": "", "x-dead-letter-routing-key": e.dlq,
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if c, err := amqp.Dial(amqpURL); err == nil {
			if ch, err := c.Channel(); err == nil {
				_, _ = ch.QueueDelete(e.queue, false, false, false)
				_, _ = ch.QueueDelete(e.dlq, false, false, false)
			}
			c.Close()
		}
	})
	ctx := context.Background()
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

func (e *env) publish(t testing.TB, body, id string) {
	t.Helper()
	if err := e.ch.PublishWithContext(context.Background(), "", e.queue, false, false,
		amqp.Publishing{ContentType: "application/json", MessageId: id, Body: []byte(body)}); err != nil {
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

// get polls the queue for one delivery.
func get(t *testing.T, ch *amqp.Channel, queue string) amqp.Delivery {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		d, ok, err := ch.Get(queue, false)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			return d
		}
		if time.Now().After(deadline) {
			t.Fatalf("no delivery on %s in 30s", queue)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// settled polls until the queue holds no message, ready or unacked.
func (e *env) settled(t *testing.T, queue string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ch, err := e.conn.Channel()
		if err != nil {
			t.Fatal(err)
		}
		q, err := ch.QueueDeclarePassive(queue, false, false, false, false, nil)
		ch.Close()
		if err != nil {
			t.Fatal(err)
		}
		if q.Messages == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("queue %s still holds %d messages", queue, q.Messages)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Sent is the handlers' result.
type Sent struct {
	EmailID string `json:"email_id"`
}

func send(pool *pgxpool.Pool, schema string, runs *atomic.Int32) func(context.Context, amqp.Delivery) (Sent, error) {
	return func(ctx context.Context, d amqp.Delivery) (Sent, error) {
		n := runs.Add(1)
		if _, err := pool.Exec(ctx, "INSERT INTO "+effects(schema)+" VALUES ($1, $2)", oncelyfunc.DownstreamKey(ctx), string(d.Body)); err != nil {
			return Sent{}, client.Definite(err)
		}
		return Sent{EmailID: fmt.Sprintf("em_%d", n)}, nil
	}
}

var byOrder = Options{Identity: []oncelyfunc.Key{{Expr: "json_parse(body).order_id", Norm: client.String}}}

// The same message delivered 5 times (by its message-id) runs the
// handler once; every delivery is acked and returns the first run's
// result.
func TestAMQPFiveDeliveriesOneEffect(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	exec := client.New(e.store, &client.Config{NoCounters: true})
	var runs atomic.Int32
	h, err := New(exec, e.ch, e.queue, "send_receipt", Options{}, send(e.pool, e.schema, &runs))
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		e.publish(t, `{"order_id":"ord_5"}`, "msg-5")
	}
	for i := range 5 {
		out, res, err := h.Process(context.Background(), get(t, e.ch, e.queue))
		if err != nil || out.EmailID != "em_1" {
			t.Errorf("delivery %d: %+v %v %v; want em_1", i, out, res.Outcome, err)
		}
	}
	e.settled(t, e.queue)
	if runs.Load() != 1 || e.effects(t) != 1 {
		t.Errorf("handler ran %d times (%d effects) for 5 deliveries, want 1", runs.Load(), e.effects(t))
	}
}

// 8 consumers (8 executors, as 8 processes) receive copies of one message
// at once: one runs, the others are requeued while it runs, then acked
// without running.
func TestAMQPEightConsumersOneRuns(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var runs atomic.Int32
	release := make(chan struct{})
	var inProgress atomic.Int32
	errs := make(chan error, 8)
	for i := range 8 {
		e.publish(t, `{"order_id":"ord_8"}`, fmt.Sprint("copy-", i))
	}
	for range 8 {
		ch, err := e.conn.Channel()
		if err != nil {
			t.Fatal(err)
		}
		exec := client.New(e.store, &client.Config{NoCounters: true, Wait: -1})
		opts := byOrder
		opts.Delay = 20 * time.Millisecond
		h, err := New(exec, ch, e.queue, "send_receipt", opts, func(ctx context.Context, d amqp.Delivery) (Sent, error) {
			<-release
			return send(e.pool, e.schema, &runs)(ctx, d)
		})
		if err != nil {
			t.Fatal(err)
		}
		d := get(t, ch, e.queue)
		go func() {
			for {
				_, res, err := h.Process(context.Background(), d)
				if res.Outcome != client.InProgress {
					errs <- err
					return
				}
				inProgress.Add(1)
				deadline := time.Now().Add(30 * time.Second)
				for {
					var ok bool
					d, ok, err = ch.Get(e.queue, false)
					if err != nil {
						errs <- err
						return
					}
					if ok {
						break
					}
					if time.Now().After(deadline) {
						errs <- errors.New("the requeued copy did not come back")
						return
					}
					time.Sleep(5 * time.Millisecond)
				}
			}
		}()
	}
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
	e.settled(t, e.queue)
	if runs.Load() != 1 || e.effects(t) != 1 {
		t.Errorf("handler ran %d times (%d effects) for 8 consumers, want 1", runs.Load(), e.effects(t))
	}
}

// A Timeout not below the consumer timeout is refused, naming both.
func TestAMQPConsumerTimeoutRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	exec := client.New(e.store, &client.Config{NoCounters: true})
	h := func(context.Context, amqp.Delivery) (Sent, error) { return Sent{}, nil }
	_, err := New(exec, e.ch, e.queue, "refused", Options{ConsumerTimeout: time.Minute, Timeout: 2 * time.Minute}, h)
	if err == nil || !strings.Contains(err.Error(), "Timeout (2m0s)") || !strings.Contains(err.Error(), "consumer timeout (1m0s)") {
		t.Errorf("Timeout above the consumer timeout: %v; want a refusal naming both", err)
	}
	_, err = New(exec, e.ch, e.queue, "refused2", Options{Timeout: time.Hour}, h)
	if err == nil || !strings.Contains(err.Error(), "(30m0s)") {
		t.Errorf("Timeout above RabbitMQ's default consumer timeout: %v; want a refusal naming 30m0s", err)
	}
	if _, err := New(exec, e.ch, e.queue, "accepted", Options{Timeout: time.Minute}, h); err != nil {
		t.Errorf("Timeout below the consumer timeout: %v", err)
	}
}

// A handler that always fails is tried MaxAttempts times; the message is
// then dead-lettered once (hook, and the queue's dead-letter exchange)
// and not retried further.
func TestAMQPAlwaysFailsDeadLetterOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	exec := client.New(e.store, &client.Config{NoCounters: true})
	var runs, hooks atomic.Int32
	opts := byOrder
	opts.MaxAttempts = 3
	opts.OnDeadLetter = func(ctx context.Context, d amqp.Delivery, err error) { hooks.Add(1) }
	h, err := New(exec, e.ch, e.queue, "send_receipt", opts, func(ctx context.Context, d amqp.Delivery) (Sent, error) {
		runs.Add(1)
		return Sent{}, client.Definite(errors.New("mail API unavailable"))
	})
	if err != nil {
		t.Fatal(err)
	}
	e.publish(t, `{"order_id":"ord_fail"}`, "m-fail")
	for i := 1; i <= 3; i++ {
		d := get(t, e.ch, e.queue)
		if Attempt(d) != i {
			t.Errorf("delivery %d has attempt %d", i, Attempt(d))
		}
		if _, res, err := h.Process(context.Background(), d); err == nil || res.Outcome != client.Failed {
			t.Fatalf("delivery %d: %v, %v; want a failure", i, res.Outcome, err)
		}
	}
	e.settled(t, e.queue)
	if runs.Load() != 3 || hooks.Load() != 1 {
		t.Errorf("handler ran %d times, hook fired %d times; want 3 and 1", runs.Load(), hooks.Load())
	}
	dead := get(t, e.ch, e.dlq)
	if dead.MessageId != "m-fail" {
		t.Errorf("dead-lettered message %q, want m-fail", dead.MessageId)
	}
	_ = dead.Ack(false)
}

const (
	childEnv    = "ONCELY_AMQP_CHILD"
	childPoint  = "ONCELY_AMQP_CHILD_POINT"
	childSchema = "ONCELY_AMQP_CHILD_SCHEMA"
	childPG     = "ONCELY_AMQP_CHILD_PG"
	childQueue  = "ONCELY_AMQP_CHILD_QUEUE"
)

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

// childMain takes one delivery, makes the effect and kills itself with
// SIGKILL before acking.
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
	conn, err := amqp.Dial(os.Getenv(childEnv))
	if err != nil {
		return fail(err)
	}
	ch, err := conn.Channel()
	if err != nil {
		return fail(err)
	}
	queue := os.Getenv(childQueue)
	exec := client.New(store, &client.Config{NoCounters: true})
	var runs atomic.Int32
	opts := byOrder
	opts.Reconciler = reconciler(pool, schema)
	h, err := New(exec, ch, queue, "send_receipt", opts, func(ctx context.Context, d amqp.Delivery) (Sent, error) {
		if _, err := send(pool, schema, &runs)(ctx, d); err != nil {
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
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		d, ok, err := ch.Get(queue, false)
		if err != nil {
			return fail(err)
		}
		if ok {
			_, _, err := h.Process(ctx, d)
			return fail(fmt.Errorf("Process returned: %v", err))
		}
		time.Sleep(10 * time.Millisecond)
	}
	return fail(errors.New("no message"))
}

// A consumer process that claims, makes the effect and is SIGKILLed
// before acking: RabbitMQ requeues the message when its connection
// drops; the redelivery takes the dead claim over, reconciles, finds the
// effect and acks; one effect; the dead consumer's late completion is
// refused.
func TestAMQPKilledConsumerRedeliverySettlesOnce(t *testing.T) {
	// The points a consumer can die at, in order: after the effect (the
	// record pending: the redelivery comes before the record), and after
	// the record (done: the ack is lost, the redelivery comes after it).
	for _, point := range []string{"effect", "recorded"} {
		t.Run(point, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			e.publish(t, `{"order_id":"ord_kill"}`, "m-kill")
			self, err := os.Executable()
			if err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(self, "-test.run=^$")
			cmd.Env = append(os.Environ(), childEnv+"="+amqpURL, childSchema+"="+e.schema, childPG+"="+e.pool.Config().ConnString(), childQueue+"="+e.queue, childPoint+"="+point)
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
			opts.Reconciler = reconciler(e.pool, e.schema)
			h, err := New(exec, e.ch, e.queue, "send_receipt", opts, send(e.pool, e.schema, &runs))
			if err != nil {
				t.Fatal(err)
			}
			d := get(t, e.ch, e.queue)
			if !d.Redelivered {
				t.Errorf("the delivery after the kill is not marked redelivered")
			}
			if _, res, err := h.Process(context.Background(), d); err != nil && !errors.Is(err, oncelyfunc.ErrResultNotKept) {
				t.Fatalf("redelivery: %v, %v", res.Outcome, err)
			}
			e.settled(t, e.queue)
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

// A delivery whose ack is lost (its channel closes after the action was
// recorded): RabbitMQ redelivers it, and the redelivery is acked with the
// stored result without running the handler again.
func TestAMQPAckLostRedeliveryReplays(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	exec := client.New(e.store, &client.Config{NoCounters: true})
	var runs atomic.Int32
	h, err := New(exec, e.ch, e.queue, "send_receipt", Options{}, send(e.pool, e.schema, &runs))
	if err != nil {
		t.Fatal(err)
	}
	e.publish(t, `{"order_id":"ord_ack"}`, "m-ack")
	lost, err := e.conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	d := get(t, lost, e.queue)
	in := Input{ID: d.MessageId, Body: string(d.Body), d: d}
	if out, res, err := h.once(context.Background(), in); err != nil || res.Outcome != client.Executed || out.EmailID != "em_1" {
		t.Fatalf("first run %+v, %v, %v", out, res.Outcome, err)
	}
	if err := lost.Close(); err != nil { // the ack is never sent
		t.Fatal(err)
	}
	re := get(t, e.ch, e.queue)
	if !re.Redelivered {
		t.Error("the delivery after the lost ack is not marked redelivered")
	}
	out, res, err := h.Process(context.Background(), re)
	if err != nil || res.Outcome != client.AlreadyDone || out.EmailID != "em_1" {
		t.Errorf("redelivery: %+v, %v, %v; want the stored em_1, already done", out, res.Outcome, err)
	}
	e.settled(t, e.queue)
	if runs.Load() != 1 || e.effects(t) != 1 {
		t.Errorf("%d runs, %d effects; want 1", runs.Load(), e.effects(t))
	}
}

// A message whose action ends uncertain is not acked silently: it is
// retried, and the operator is told what to do, in the log.
func TestAMQPUncertainNotAckedLogged(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var logs bytes.Buffer
	opts := byOrder
	opts.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	h, err := New(client.New(e.store, &client.Config{NoCounters: true}), e.ch, e.queue, "send_receipt", opts,
		func(context.Context, amqp.Delivery) (Sent, error) {
			return Sent{}, errors.New("connection reset after the request was sent")
		})
	if err != nil {
		t.Fatal(err)
	}
	e.publish(t, `{"order_id":"ord_unc"}`, "m-unc")
	if _, res, err := h.Process(context.Background(), get(t, e.ch, e.queue)); res.Outcome != client.Uncertain || err == nil {
		t.Fatalf("Process: %v, %v; want uncertain", res.Outcome, err)
	}
	if !strings.Contains(logs.String(), "outcome is unknown") || !strings.Contains(logs.String(), "oncely ledger resolve") {
		t.Errorf("log %q does not tell the operator", logs.String())
	}
	again := get(t, e.ch, e.queue)
	if Attempt(again) != 2 || again.MessageId != "m-unc" {
		t.Errorf("retry: attempt %d id %q, want attempt 2 of m-unc", Attempt(again), again.MessageId)
	}
	_ = again.Ack(false)
}
