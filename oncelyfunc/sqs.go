package oncelyfunc

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/oncely/oncely/client"
)

// SQSOptions describe a message handler made exactly-once by SQS.
type SQSOptions struct {
	// Identity selects what makes two messages the same action, over the
	// JSON form of events.SQSMessage (default: "messageId", one action per
	// message). Use json_parse(body).orderId for a field of a JSON body,
	// so that two messages carrying the same order are one action.
	Identity []Key
	// Validated, Retention and Reconciler are as in Options.
	Validated  []Key
	Retention  time.Duration
	Reconciler client.Reconciler
	// FunctionTimeout and VisibilityTimeout, when both are set, are the
	// function's timeout and the queue's visibility timeout: a claim lives
	// as long as the invocation, so SQS refuses a FunctionTimeout that is
	// not below VisibilityTimeout (SQS would deliver a message again while
	// its claim is live).
	FunctionTimeout   time.Duration
	VisibilityTimeout time.Duration
	// MaxReceiveCount is the queue's redrive policy's maxReceiveCount (0:
	// none). A message reported for redelivery on its last receive (its
	// ApproximateReceiveCount reached it) is passed to OnDeadLetter, once,
	// as SQS moves it to the dead-letter queue.
	MaxReceiveCount int
	// OnDeadLetter is called for such a message, with why it failed.
	// Optional.
	OnDeadLetter func(ctx context.Context, m events.SQSMessage, err error)
	// Logger receives a warning, saying what an operator must do, for each
	// message reported for redelivery that a redelivery may not handle:
	// its outcome is uncertain, its identity is missing or unusable, it
	// conflicts with a done action, or its handling failed permanently
	// (default: slog.Default()).
	Logger *slog.Logger
}

// SQS registers a tool named name with exec and returns a Lambda handler
// for SQS events that runs handle at most once per message identity
// (ScopeGlobal: redeliveries and duplicates across invocations are the
// same action).
//
// A message whose action is done is processed: handled now or by an
// earlier delivery, found done by the Reconciler, or resolved done by an
// operator (ledger.Resolve), with or without a stored result. The
// response lists in BatchItemFailures the messages Lambda must deliver
// again: those whose handling failed, is in progress elsewhere, ended
// uncertain (a redelivery finds it reconciled or still uncertain), or
// could not be identified (they reach the dead-letter queue after the
// queue's maxReceiveCount). Those a redelivery may not handle are logged
// (see SQSOptions.Logger). Report it with the function's
// ReportBatchItemFailures setting. Messages are handled in order; on a
// FIFO queue (an event source ARN ending in ".fifo"), after a message of
// a group fails, the group's later messages are reported failed without
// being handled, so that the group keeps its order.
func SQS(exec *client.Executor, name string, opts SQSOptions, handle func(context.Context, events.SQSMessage) error) (func(context.Context, events.SQSEvent) (events.SQSEventResponse, error), error) {
	if opts.FunctionTimeout > 0 && opts.VisibilityTimeout > 0 && opts.FunctionTimeout >= opts.VisibilityTimeout {
		return nil, fmt.Errorf("oncelyfunc: %s: FunctionTimeout (%v) is not below the queue's VisibilityTimeout (%v): SQS would deliver a message again while its claim is live; raise the visibility timeout (AWS advises 6 times the function's timeout)", name, opts.FunctionTimeout, opts.VisibilityTimeout)
	}
	identity := opts.Identity
	if len(identity) == 0 {
		identity = []Key{{Expr: "messageId"}}
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	once, err := wrap(exec, name, Options[struct{}]{
		Identity: identity, Validated: opts.Validated, Scope: client.ScopeGlobal,
		Retention: opts.Retention, Reconciler: opts.Reconciler,
		Summary: func(struct{}) string { return name + ": message handled" },
	}, func(ctx context.Context, m events.SQSMessage) (struct{}, error) {
		return struct{}{}, handle(ctx, m)
	})
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		var resp events.SQSEventResponse
		failedGroups := map[string]bool{}
		for _, m := range ev.Records {
			group := m.Attributes["MessageGroupId"]
			fifo := strings.HasSuffix(m.EventSourceARN, ".fifo")
			if fifo && failedGroups[group] {
				resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: m.MessageId})
				continue
			}
			_, res, err := once(ctx, m)
			if res.Outcome == client.Executed || res.Outcome == client.AlreadyDone {
				continue // done, with or without a stored result: a message has no result to return
			}
			if advice := stuck(res, opts.Reconciler != nil); advice != "" {
				log.LogAttrs(ctx, slog.LevelWarn, "oncelyfunc: SQS message reported for redelivery: "+advice,
					slog.String("function", name), slog.String("message_id", m.MessageId), slog.String("outcome", res.Outcome.String()),
					slog.String("key", res.Key), slog.Any("err", err))
			}
			if opts.OnDeadLetter != nil && lastReceive(m, opts.MaxReceiveCount) {
				if err == nil {
					err = fmt.Errorf("oncelyfunc: %s: %s", name, res.Outcome)
				}
				opts.OnDeadLetter(ctx, m, err)
			}
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: m.MessageId})
			failedGroups[group] = true
		}
		return resp, nil
	}, nil
}

// lastReceive reports whether a message reported for redelivery will not
// be delivered again: this was its last receive under the redrive policy
// (its ApproximateReceiveCount reached maxReceive), so SQS moves it to the
// dead-letter queue. A message no receive can handle fires it on that
// receive too, and on no earlier one, so that the hook fires once.
func lastReceive(m events.SQSMessage, maxReceive int) bool {
	n, err := strconv.Atoi(m.Attributes["ApproximateReceiveCount"])
	return maxReceive > 0 && err == nil && n >= maxReceive
}

// stuck says what an operator must do about a message that redeliveries
// may not handle, which so reaches the dead-letter queue after the queue's
// maxReceiveCount; "" for one that a redelivery may handle.
func stuck(res client.Result, reconciler bool) string {
	const resolve = "check whether the effect exists, settle the record with `oncely ledger resolve KEY --done` (or `--failed --reason TEXT`), then redrive the message"
	switch {
	case res.Outcome == client.Uncertain && reconciler:
		return "its outcome is unknown and the effect may exist; a redelivery reconciles it. If it reaches the dead-letter queue, " + resolve + "."
	case res.Outcome == client.Uncertain:
		return "its outcome is unknown and the effect may exist; without a Reconciler every redelivery finds it so, and it will reach the dead-letter queue. To settle it, " + resolve + "."
	case res.Outcome == client.InvalidInput:
		return "its identity is missing or unusable, and it will reach the dead-letter queue; fix the message or the Identity expressions, then redrive it."
	case res.Outcome == client.Conflict:
		return "its action was done with other validated values, and it will reach the dead-letter queue; it was not handled."
	case res.Outcome == client.Failed && !res.Retryable:
		return "its handling failed permanently and will fail again; it will reach the dead-letter queue."
	}
	return ""
}
