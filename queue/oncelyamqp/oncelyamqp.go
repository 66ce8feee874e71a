// Package oncelyamqp makes a RabbitMQ (AMQP 0-9-1) consumer's side
// effects happen once per action, across redeliveries (a consumer that
// died before acking, a channel closed by the consumer timeout) and
// duplicate publishes.
//
// New wraps a delivery handler. Each message is one oncely action, keyed
// by its message-id property, or by identity fields of its body
// (Options.Identity, JMESPath over the Input document, such as
// json_parse(body).order_id). The handler runs once per action, with the
// action's downstream key (oncelyfunc.DownstreamKey) for the provider; a
// redelivery or a duplicate finds the action done, is acked, and gets the
// first run's result back.
//
// What happens to a delivery:
//   - its action is done (now, earlier, by a reconciler or an operator),
//     with or without a stored result: Ack;
//   - in flight in another consumer: held for Options.Delay, then
//     Nack(requeue), so that it comes back after the holder settled it;
//   - failed (retryable) or uncertain: published again to the queue with
//     its attempt count in the x-oncely-attempt header, and acked, until
//     its attempt reaches Options.MaxAttempts; an uncertain one is logged
//     with what an operator must do, never acked silently;
//   - failed permanently, conflicting with a done action, without a usable
//     identity, or at its last attempt: rejected without requeue, which
//     routes it to the queue's dead-letter exchange
//     (x-dead-letter-exchange), and Options.OnDeadLetter is called once.
//
// A claim lives no longer than the handler's context, which ends after
// Options.Timeout; New refuses a Timeout that is not below the broker's
// consumer timeout (Options.ConsumerTimeout), since RabbitMQ would close
// the channel and redeliver a message whose claim is live.
package oncelyamqp

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/oncelyfunc"
)

// AttemptHeader carries a message's attempt number when it is published
// again after a failed attempt.
const AttemptHeader = "x-oncely-attempt"

// Options describe a consumer made exactly-once.
type Options struct {
	// Identity selects what makes two messages the same action, over the
	// JSON form of Input (default: "id", the message-id property).
	Identity []oncelyfunc.Key
	// Validated, Retention and Reconciler are as in oncelyfunc.Options.
	Validated  []oncelyfunc.Key
	Retention  time.Duration
	Reconciler client.Reconciler
	// ConsumerTimeout is the broker's consumer timeout for the queue
	// (consumer_timeout, or the queue's x-consumer-timeout; default 30
	// minutes, RabbitMQ's default).
	ConsumerTimeout time.Duration
	// Timeout bounds one delivery's handling, and so its claim (default:
	// half the ConsumerTimeout). It must be below ConsumerTimeout.
	Timeout time.Duration
	// Delay is how long a delivery whose action is in flight elsewhere is
	// held before it is requeued (default 1 second).
	Delay time.Duration
	// MaxAttempts is the attempt at which a failing message is
	// dead-lettered (default 5).
	MaxAttempts int
	// OnDeadLetter is called once for each dead-lettered message. Optional.
	OnDeadLetter func(ctx context.Context, d amqp.Delivery, err error)
	// Logger receives a warning, saying what an operator must do, for a
	// message whose action is uncertain or that is dead-lettered (default:
	// slog.Default()).
	Logger *slog.Logger
}

// Input is the JSON document the identity expressions select from.
type Input struct {
	// ID is the message-id property.
	ID         string `json:"id"`
	Exchange   string `json:"exchange"`
	RoutingKey string `json:"routing_key"`
	// Header holds the message's string-valued headers.
	Header map[string]string `json:"header"`
	Body   string            `json:"body"`

	d amqp.Delivery
}

// Handler handles a queue's deliveries once per action.
type Handler[Out any] struct {
	once    func(context.Context, Input) (Out, client.Result, error)
	ch      *amqp.Channel
	queue   string
	opts    Options
	log     *slog.Logger
	timeout time.Duration
	max     int
}

// New registers a tool named name with exec and returns a Handler that
// runs handle once per action for the deliveries of queue. ch publishes
// the retries of failed messages to queue (through the default exchange).
//
// handle's errors are classified as in oncelyfunc.Wrap: an unmarked error
// leaves the action uncertain (retried and reconciled), client.Definite
// marks one that did nothing (retried and run again), client.Permanent
// one that never will succeed (dead-lettered at once).
func New[Out any](exec *client.Executor, ch *amqp.Channel, queue, name string, opts Options,
	handle func(context.Context, amqp.Delivery) (Out, error)) (*Handler[Out], error) {
	if handle == nil {
		return nil, fmt.Errorf("oncelyamqp: %s: nil handler", name)
	}
	if ch == nil || queue == "" {
		return nil, fmt.Errorf("oncelyamqp: %s: a channel and a queue are needed", name)
	}
	ct := cmp.Or(opts.ConsumerTimeout, 30*time.Minute)
	timeout := cmp.Or(opts.Timeout, ct/2)
	if timeout < 0 || timeout >= ct {
		return nil, fmt.Errorf("oncelyamqp: %s: Timeout (%v) is not below the consumer timeout (%v): RabbitMQ would redeliver a message while its claim is live; lower Timeout or raise consumer_timeout", name, timeout, ct)
	}
	if opts.MaxAttempts < 0 {
		return nil, fmt.Errorf("oncelyamqp: %s: MaxAttempts %d is negative", name, opts.MaxAttempts)
	}
	identity := opts.Identity
	if len(identity) == 0 {
		identity = []oncelyfunc.Key{{Expr: "id"}}
	}
	once, err := oncelyfunc.WrapResult(exec, name, oncelyfunc.Options[Out]{
		Identity: identity, Validated: opts.Validated, Scope: client.ScopeGlobal,
		Retention: opts.Retention, Reconciler: opts.Reconciler,
		Summary: func(Out) string { return name + ": message handled" },
	}, func(ctx context.Context, in Input) (Out, error) { return handle(ctx, in.d) })
	if err != nil {
		return nil, err
	}
	return &Handler[Out]{once: once, ch: ch, queue: queue, opts: opts, log: cmp.Or(opts.Logger, slog.Default()),
		timeout: timeout, max: cmp.Or(opts.MaxAttempts, 5)}, nil
}

// Handle handles one delivery and acks, requeues, retries or
// dead-letters it; use it in the loop over Channel.Consume's deliveries.
// It is Process with a background context.
func (h *Handler[Out]) Handle(d amqp.Delivery) { _, _, _ = h.Process(context.Background(), d) }

// Attempt is the attempt number of a delivery: its x-oncely-attempt
// header, or one more than a quorum queue's x-delivery-count, or 1.
func Attempt(d amqp.Delivery) int {
	n := 1
	if v, ok := toInt(d.Headers[AttemptHeader]); ok && v > n {
		n = v
	}
	if v, ok := toInt(d.Headers["x-delivery-count"]); ok && v+1 > n {
		n = v + 1
	}
	return n
}

func toInt(v any) (int, bool) {
	switch x := v.(type) {
	case int:
		return x, true
	case int32:
		return int(x), true
	case int64:
		return int(x), true
	case int16:
		return int(x), true
	case int8:
		return int(x), true
	}
	return 0, false
}

// Process handles one delivery and settles it with the broker (see the
// package documentation), returning the handler's Out: the one it
// returned now, or the first run's on a repeat. Its error is the
// handling's (an acked message whose Out was not kept returns
// oncelyfunc.ErrResultNotKept), or the broker's.
func (h *Handler[Out]) Process(ctx context.Context, d amqp.Delivery) (Out, client.Result, error) {
	in := Input{ID: d.MessageId, Exchange: d.Exchange, RoutingKey: d.RoutingKey, Header: map[string]string{}, Body: string(d.Body), d: d}
	for k, v := range d.Headers {
		if s, ok := v.(string); ok {
			in.Header[k] = s
		}
	}
	hctx, cancel := context.WithTimeout(ctx, h.timeout)
	defer cancel()
	out, res, err := h.once(hctx, in)
	done := res.Outcome == client.AlreadyDone || (res.Outcome == client.Executed && (err == nil || errors.Is(err, oncelyfunc.ErrResultNotKept)))
	switch {
	case done:
		faultPoint("recorded")
		return out, res, errors.Join(err, d.Ack(false))
	case res.Outcome == client.InProgress:
		t := time.NewTimer(cmp.Or(h.opts.Delay, time.Second))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
		return out, res, errors.Join(err, d.Nack(false, true))
	}
	if err == nil {
		err = fmt.Errorf("oncelyamqp: %s", res.Outcome)
	}
	attempt := Attempt(d)
	final := res.Outcome == client.Conflict || res.Outcome == client.InvalidInput || (res.Outcome == client.Failed && !res.Retryable)
	last := final || attempt >= h.max
	if res.Outcome == client.Uncertain || last {
		h.log.LogAttrs(ctx, slog.LevelWarn, "oncelyamqp: message not done: "+advice(res, h.opts.Reconciler != nil, last),
			slog.String("queue", h.queue), slog.String("message_id", d.MessageId), slog.Int("attempt", attempt),
			slog.String("outcome", res.Outcome.String()), slog.String("key", res.Key), slog.Any("err", err))
	}
	if !last {
		// Published again with its attempt, then acked: a crash between
		// the two delivers it twice, which the ledger makes one action.
		p := amqp.Publishing{Headers: amqp.Table{}, ContentType: d.ContentType, ContentEncoding: d.ContentEncoding,
			DeliveryMode: d.DeliveryMode, Priority: d.Priority, CorrelationId: d.CorrelationId, ReplyTo: d.ReplyTo,
			Expiration: d.Expiration, MessageId: d.MessageId, Timestamp: d.Timestamp, Type: d.Type, UserId: d.UserId,
			AppId: d.AppId, Body: d.Body}
		for k, v := range d.Headers {
			p.Headers[k] = v
		}
		p.Headers[AttemptHeader] = int32(attempt + 1)
		if perr := h.ch.PublishWithContext(ctx, "", h.queue, false, false, p); perr != nil {
			return out, res, errors.Join(err, fmt.Errorf("oncelyamqp: publish the retry: %w", perr), d.Nack(false, true))
		}
		return out, res, errors.Join(err, d.Ack(false))
	}
	if h.opts.OnDeadLetter != nil {
		h.opts.OnDeadLetter(ctx, d, err)
	}
	return out, res, errors.Join(err, d.Reject(false))
}

// advice says what an operator must do about a message that was not done.
func advice(res client.Result, reconciler, last bool) string {
	const resolve = "check whether the effect exists and settle the record with `oncely ledger resolve KEY --done` (or `--failed --reason TEXT`)"
	switch {
	case res.Outcome == client.Uncertain && last:
		return "its outcome is unknown, the effect may exist, and it is dead-lettered: " + resolve + ", then republish it if it was not done."
	case res.Outcome == client.Uncertain && reconciler:
		return "its outcome is unknown and the effect may exist; its retry reconciles it."
	case res.Outcome == client.Uncertain:
		return "its outcome is unknown and the effect may exist; without a Reconciler every retry finds it so: " + resolve + "."
	case res.Outcome == client.InvalidInput:
		return "its identity is missing or unusable (no message-id?); it is dead-lettered."
	case res.Outcome == client.Conflict:
		return "its action was done with other validated values; it is dead-lettered, not handled."
	case res.Outcome == client.Failed && !res.Retryable:
		return "its handling failed permanently; it is dead-lettered."
	}
	return "its last attempt failed; it is dead-lettered."
}

// faultPoint marks the point between a message's record and its ack
// where the crash tests kill their process (a no-op otherwise).
var faultPoint = func(string) {}
