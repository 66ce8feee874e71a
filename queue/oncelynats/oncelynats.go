// Package oncelynats makes a NATS JetStream consumer's side effects happen
// once per action, across redeliveries (an ack lost or late, a consumer
// that died before acking) and duplicate publishes.
//
// New wraps a message handler. Each message is one oncely action, keyed
// by its Nats-Msg-Id header, or by its stream and sequence where no id is
// set, or by identity fields of its body (Options.Identity, JMESPath over
// the Input document, such as json_parse(data).order_id). The handler
// runs once per action, with the action's downstream key
// (oncelyfunc.DownstreamKey) for the provider; a redelivery or a
// duplicate finds the action done, is acked, and gets the first run's
// result back.
//
// What happens to a message:
//   - its action is done (now, earlier, by a reconciler or an operator),
//     with or without a stored result: Ack;
//   - in flight in another consumer: NakWithDelay (Options.Delay), so that
//     it comes back after the holder settled it;
//   - failed (retryable) or uncertain: Nak, redelivered until its
//     delivery count reaches Options.MaxAttempts; an uncertain one is
//     logged with what an operator must do, never acked silently;
//   - failed permanently, conflicting with a done action, or without a
//     usable identity, or at its last attempt: dead-lettered: published to
//     Options.DeadLetterSubject (if set), Options.OnDeadLetter called once,
//     and terminated (Term), so that JetStream never redelivers it.
//
// A claim lives no longer than the handler's context, which ends after
// Options.Timeout; New refuses a Timeout that is not below the consumer's
// AckWait, since JetStream would redeliver a message whose claim is live.
package oncelynats

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/oncelyfunc"
)

// Options describe a consumer made exactly-once.
type Options struct {
	// Identity selects what makes two messages the same action, over the
	// JSON form of Input (default: "id": the Nats-Msg-Id, or the stream
	// sequence).
	Identity []oncelyfunc.Key
	// Validated, Retention and Reconciler are as in oncelyfunc.Options.
	Validated  []oncelyfunc.Key
	Retention  time.Duration
	Reconciler client.Reconciler
	// Timeout bounds one delivery's handling, and so its claim (default:
	// half the consumer's AckWait). It must be below AckWait.
	Timeout time.Duration
	// Delay is how long a message whose action is in flight elsewhere
	// waits before it is redelivered (default 1 second).
	Delay time.Duration
	// MaxAttempts is the delivery at which a failing message is
	// dead-lettered (default: the consumer's MaxDeliver; required when
	// that is unlimited). It may not exceed MaxDeliver.
	MaxAttempts int
	// DeadLetterSubject, if set, receives a copy of each dead-lettered
	// message (its headers, with Oncely-Error saying why).
	DeadLetterSubject string
	// OnDeadLetter is called once for each dead-lettered message. Optional.
	OnDeadLetter func(ctx context.Context, msg jetstream.Msg, err error)
	// Logger receives a warning, saying what an operator must do, for a
	// message whose action is uncertain or that is dead-lettered (default:
	// slog.Default()).
	Logger *slog.Logger
}

// Input is the JSON document the identity expressions select from.
type Input struct {
	// ID is the Nats-Msg-Id header, or "<stream>/<sequence>" without one.
	ID      string              `json:"id"`
	Subject string              `json:"subject"`
	Stream  string              `json:"stream"`
	Seq     uint64              `json:"seq"`
	Header  map[string][]string `json:"header"`
	Data    string              `json:"data"`

	msg jetstream.Msg
}

// Handler handles a consumer's messages once per action.
type Handler[Out any] struct {
	once    func(context.Context, Input) (Out, client.Result, error)
	js      jetstream.JetStream
	opts    Options
	log     *slog.Logger
	timeout time.Duration
	max     int
}

// New registers a tool named name with exec and returns a Handler that
// runs handle once per action for the messages of cons. js publishes
// dead-lettered messages (it may be nil without a DeadLetterSubject).
//
// handle's errors are classified as in oncelyfunc.Wrap: an unmarked error
// leaves the action uncertain (redelivered and reconciled),
// client.Definite marks one that did nothing (redelivered and run again),
// client.Permanent one that never will succeed (dead-lettered at once).
func New[Out any](exec *client.Executor, cons jetstream.Consumer, js jetstream.JetStream, name string, opts Options,
	handle func(context.Context, jetstream.Msg) (Out, error)) (*Handler[Out], error) {
	if handle == nil {
		return nil, fmt.Errorf("oncelynats: %s: nil handler", name)
	}
	if opts.DeadLetterSubject != "" && js == nil {
		return nil, fmt.Errorf("oncelynats: %s: a DeadLetterSubject needs a JetStream to publish with", name)
	}
	info := cons.CachedInfo()
	timeout, max, err := check(info.Config.AckWait, info.Config.MaxDeliver, opts.Timeout, opts.MaxAttempts)
	if err != nil {
		return nil, fmt.Errorf("oncelynats: %s: consumer %s: %w", name, info.Name, err)
	}
	identity := opts.Identity
	if len(identity) == 0 {
		identity = []oncelyfunc.Key{{Expr: "id"}}
	}
	once, err := oncelyfunc.WrapResult(exec, name, oncelyfunc.Options[Out]{
		Identity: identity, Validated: opts.Validated, Scope: client.ScopeGlobal,
		Retention: opts.Retention, Reconciler: opts.Reconciler,
		Summary: func(Out) string { return name + ": message handled" },
	}, func(ctx context.Context, in Input) (Out, error) { return handle(ctx, in.msg) })
	if err != nil {
		return nil, err
	}
	return &Handler[Out]{once: once, js: js, opts: opts, log: cmp.Or(opts.Logger, slog.Default()), timeout: timeout, max: max}, nil
}

// check refuses a claim that could outlive the redelivery window.
func check(ackWait time.Duration, maxDeliver int, timeout time.Duration, maxAttempts int) (time.Duration, int, error) {
	if ackWait <= 0 {
		ackWait = 30 * time.Second // JetStream's default
	}
	if timeout == 0 {
		timeout = ackWait / 2
	}
	if timeout < 0 || timeout >= ackWait {
		return 0, 0, fmt.Errorf("Timeout (%v) is not below the consumer's AckWait (%v): JetStream would redeliver a message while its claim is live; lower Timeout or raise AckWait", timeout, ackWait)
	}
	if maxAttempts == 0 {
		maxAttempts = maxDeliver
	}
	if maxAttempts <= 0 {
		return 0, 0, errors.New("MaxAttempts is needed when the consumer's MaxDeliver is unlimited")
	}
	if maxDeliver > 0 && maxAttempts > maxDeliver {
		return 0, 0, fmt.Errorf("MaxAttempts (%d) exceeds the consumer's MaxDeliver (%d): JetStream stops delivering first, and the dead-letter hook would never fire", maxAttempts, maxDeliver)
	}
	return timeout, maxAttempts, nil
}

// Handle handles one message and acks, naks or terminates it; use it
// with Consumer.Consume. It is Process with a background context.
func (h *Handler[Out]) Handle(msg jetstream.Msg) { _, _, _ = h.Process(context.Background(), msg) }

// Process handles one message and acks, naks or terminates it (see the
// package documentation), returning the handler's Out: the one it
// returned now, or the first run's on a repeat. Its error is the
// handling's (an acked message whose Out was not kept returns
// oncelyfunc.ErrResultNotKept), or the broker's when the message could
// not be acked, naked or terminated.
func (h *Handler[Out]) Process(ctx context.Context, msg jetstream.Msg) (Out, client.Result, error) {
	in, err := input(msg)
	if err != nil {
		var zero Out
		return zero, client.Result{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, h.timeout)
	defer cancel()
	out, res, err := h.once(ctx, in)
	attempt := 1
	if md, mdErr := msg.Metadata(); mdErr == nil {
		attempt = int(md.NumDelivered)
	}
	done := res.Outcome == client.AlreadyDone || (res.Outcome == client.Executed && (err == nil || errors.Is(err, oncelyfunc.ErrResultNotKept)))
	switch {
	case done:
		faultPoint("recorded")
		return out, res, errors.Join(err, msg.Ack())
	case res.Outcome == client.InProgress:
		return out, res, errors.Join(err, msg.NakWithDelay(cmp.Or(h.opts.Delay, time.Second)))
	}
	if err == nil {
		err = fmt.Errorf("oncelynats: %s", res.Outcome)
	}
	final := res.Outcome == client.Conflict || res.Outcome == client.InvalidInput || (res.Outcome == client.Failed && !res.Retryable)
	last := final || attempt >= h.max
	if res.Outcome == client.Uncertain || last {
		h.log.LogAttrs(ctx, slog.LevelWarn, "oncelynats: message not done: "+advice(res, h.opts.Reconciler != nil, last),
			slog.String("subject", in.Subject), slog.String("id", in.ID), slog.Int("delivery", attempt),
			slog.String("outcome", res.Outcome.String()), slog.String("key", res.Key), slog.Any("err", err))
	}
	if !last {
		return out, res, errors.Join(err, msg.Nak())
	}
	if h.opts.DeadLetterSubject != "" {
		dl := &nats.Msg{Subject: h.opts.DeadLetterSubject, Data: msg.Data(), Header: nats.Header{}}
		for k, v := range msg.Headers() {
			dl.Header[k] = v
		}
		dl.Header.Set("Oncely-Error", err.Error())
		dl.Header.Set("Oncely-Source", in.Stream+"/"+strconv.FormatUint(in.Seq, 10))
		if _, perr := h.js.PublishMsg(ctx, dl); perr != nil {
			// Not terminated: redelivered while JetStream still delivers it.
			return out, res, errors.Join(err, fmt.Errorf("oncelynats: publish to %s: %w", h.opts.DeadLetterSubject, perr), msg.Nak())
		}
	}
	if h.opts.OnDeadLetter != nil {
		h.opts.OnDeadLetter(ctx, msg, err)
	}
	return out, res, errors.Join(err, msg.Term())
}

func input(msg jetstream.Msg) (Input, error) {
	md, err := msg.Metadata()
	if err != nil {
		return Input{}, fmt.Errorf("oncelynats: not a JetStream message: %w", err)
	}
	in := Input{Subject: msg.Subject(), Stream: md.Stream, Seq: md.Sequence.Stream, Header: msg.Headers(), Data: string(msg.Data()), msg: msg}
	in.ID = msg.Headers().Get(nats.MsgIdHdr)
	if in.ID == "" {
		in.ID = md.Stream + "/" + strconv.FormatUint(md.Sequence.Stream, 10)
	}
	return in, nil
}

// advice says what an operator must do about a message that was not done.
func advice(res client.Result, reconciler, last bool) string {
	const resolve = "check whether the effect exists and settle the record with `oncely ledger resolve KEY --done` (or `--failed --reason TEXT`)"
	switch {
	case res.Outcome == client.Uncertain && last:
		return "its outcome is unknown, the effect may exist, and it is dead-lettered: " + resolve + ", then republish it if it was not done."
	case res.Outcome == client.Uncertain && reconciler:
		return "its outcome is unknown and the effect may exist; the redelivery reconciles it."
	case res.Outcome == client.Uncertain:
		return "its outcome is unknown and the effect may exist; without a Reconciler every redelivery finds it so: " + resolve + "."
	case res.Outcome == client.InvalidInput:
		return "its identity is missing or unusable; it is dead-lettered."
	case res.Outcome == client.Conflict:
		return "its action was done with other validated values; it is dead-lettered, not handled."
	case res.Outcome == client.Failed && !res.Retryable:
		return "its handling failed permanently; it is dead-lettered."
	}
	return "its last delivery failed; it is dead-lettered."
}

// faultPoint marks the point between a message's record and its ack
// where the crash tests kill their process (a no-op otherwise).
var faultPoint = func(string) {}
