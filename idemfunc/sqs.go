package idemfunc

import (
	"context"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/client"
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
}

// SQS registers a tool named name with exec and returns a Lambda handler
// for SQS events that runs handle at most once per message identity
// (ScopeGlobal: redeliveries and duplicates across invocations are the
// same action).
//
// The response lists in BatchItemFailures the messages Lambda must
// deliver again: those whose handling failed, is in progress elsewhere,
// ended uncertain (a redelivery finds it reconciled or still uncertain),
// or could not be identified (they reach the dead-letter queue after the
// queue's maxReceiveCount). Report it with the function's
// ReportBatchItemFailures setting. Messages are handled in order; on a
// FIFO queue (an event source ARN ending in ".fifo"), after a message of
// a group fails, the group's later messages are reported failed without
// being handled, so that the group keeps its order.
func SQS(exec *client.Executor, name string, opts SQSOptions, handle func(context.Context, events.SQSMessage) error) (func(context.Context, events.SQSEvent) (events.SQSEventResponse, error), error) {
	identity := opts.Identity
	if len(identity) == 0 {
		identity = []Key{{Expr: "messageId"}}
	}
	once, err := Wrap(exec, name, Options[struct{}]{
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
			if _, err := once(ctx, m); err != nil {
				resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: m.MessageId})
				failedGroups[group] = true
			}
		}
		return resp, nil
	}, nil
}
