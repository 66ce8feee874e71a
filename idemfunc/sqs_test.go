package idemfunc_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/client"
	"github.com/idemkit/idemkit/idemfunc"
	"github.com/idemkit/idemkit/ledger/ledgermem"
)

func msg(id, body, group string, fifo bool) events.SQSMessage {
	arn := "arn:aws:sqs:us-east-1:123456789012:orders"
	if fifo {
		arn += ".fifo"
	}
	return events.SQSMessage{MessageId: id, Body: body, EventSourceARN: arn, Attributes: map[string]string{"MessageGroupId": group}}
}

func failures(r events.SQSEventResponse) []string {
	var ids []string
	for _, f := range r.BatchItemFailures {
		ids = append(ids, f.ItemIdentifier)
	}
	return ids
}

// Redelivered messages are handled once; a definite failure is reported
// for redelivery and handled on the next delivery.
func TestSQSRedelivery(t *testing.T) {
	t.Parallel()
	exec := client.New(ledgermem.New(nil), nil)
	var handled []string
	failOnce := map[string]bool{"m2": true}
	h, err := idemfunc.SQS(exec, "orders", idemfunc.SQSOptions{}, func(_ context.Context, m events.SQSMessage) error {
		if failOnce[m.MessageId] {
			failOnce[m.MessageId] = false
			return client.Definite(errors.New("downstream refused"))
		}
		handled = append(handled, m.MessageId)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	batch := events.SQSEvent{Records: []events.SQSMessage{msg("m1", "{}", "", false), msg("m2", "{}", "", false), msg("m3", "{}", "", false)}}
	resp, err := h(ctx, batch)
	if err != nil || !slices.Equal(failures(resp), []string{"m2"}) {
		t.Fatalf("first delivery: failures %v, %v; want [m2]", failures(resp), err)
	}
	// Lambda delivers the whole batch again (a timeout), and m2 again.
	resp, err = h(ctx, batch)
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("redelivery: failures %v, %v", failures(resp), err)
	}
	if !slices.Equal(handled, []string{"m1", "m3", "m2"}) {
		t.Errorf("handled %v, want each message once: [m1 m3 m2]", handled)
	}
}

// With identity fields from the body, two messages carrying one order are
// one action.
func TestSQSBodyIdentity(t *testing.T) {
	t.Parallel()
	exec := client.New(ledgermem.New(nil), nil)
	n := 0
	h, err := idemfunc.SQS(exec, "orders", idemfunc.SQSOptions{
		Identity: []idemfunc.Key{{Expr: "json_parse(body).orderId", Norm: client.Integer}},
	}, func(context.Context, events.SQSMessage) error { n++; return nil })
	if err != nil {
		t.Fatal(err)
	}
	resp, err := h(context.Background(), events.SQSEvent{Records: []events.SQSMessage{
		msg("a", `{"orderId": 12, "from": "checkout"}`, "", false),
		msg("b", `{"orderId": "12", "from": "retry job"}`, "", false),
		msg("c", `{"from": "no order"}`, "", false),
	}})
	if err != nil {
		t.Fatal(err)
	}
	if n != 1 || !slices.Equal(failures(resp), []string{"c"}) {
		t.Errorf("handled %d times, failures %v; want 1 and [c] (no identity)", n, failures(resp))
	}
}

// On a FIFO queue a failure holds back the rest of its message group, not
// the other groups.
func TestSQSFIFOGroups(t *testing.T) {
	t.Parallel()
	exec := client.New(ledgermem.New(nil), nil)
	var handled []string
	h, err := idemfunc.SQS(exec, "orders", idemfunc.SQSOptions{}, func(_ context.Context, m events.SQSMessage) error {
		if m.MessageId == "a1" {
			return client.Definite(errors.New("refused"))
		}
		handled = append(handled, m.MessageId)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := h(context.Background(), events.SQSEvent{Records: []events.SQSMessage{
		msg("a1", "{}", "A", true), msg("b1", "{}", "B", true), msg("a2", "{}", "A", true), msg("b2", "{}", "B", true),
	}})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(failures(resp), []string{"a1", "a2"}) || !slices.Equal(handled, []string{"b1", "b2"}) {
		t.Errorf("failures %v, handled %v; want [a1 a2] and [b1 b2]", failures(resp), handled)
	}
}
