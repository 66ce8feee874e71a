package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/config"

	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/fakes/fault"
	"github.com/oncely/oncely/ledger"
)

// A reason the model words its own way is refused before anything is
// sent (Stripe would answer 400 and the model would be told not to
// retry); a reason in Stripe's words, however spelled, is sent as
// Stripe's value.
func TestReasonIsValidated(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	r1 := invokeOne(t, f.h, time.Now().Add(10*time.Second), Event{RunID: "run-1",
		ToolCalls: []ToolUse{f.refundCall("toolu_01", 1000, "the customer changed their mind")}})
	if !r1.IsError.Value || !strings.Contains(text(r1), "must be one of duplicate, fraudulent, requested_by_customer") ||
		!strings.Contains(text(r1), "Nothing was done") {
		t.Errorf("reworded reason: %+v", r1)
	}
	if n := len(f.refunds()); n != 0 {
		t.Fatalf("%d refunds after a refused reason", n)
	}
	r2 := invokeOne(t, f.h, time.Now().Add(10*time.Second), Event{RunID: "run-1",
		ToolCalls: []ToolUse{f.refundCall("toolu_02", 1000, " Requested-by-Customer ")}})
	if r2.IsError.Value || len(f.refunds()) != 1 {
		t.Fatalf("reason in Stripe's words: %+v, %d refunds", r2, len(f.refunds()))
	}
	resp, err := http.Get(f.stripe.URL + "/v1/refunds/" + f.refunds()[0].ID + "?")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var re struct{ Reason string }
	if err := json.NewDecoder(resp.Body).Decode(&re); err != nil && resp.StatusCode == http.StatusOK {
		t.Fatal(err)
	}
	if resp.StatusCode == http.StatusOK && re.Reason != "requested_by_customer" {
		t.Errorf("Stripe got reason %q", re.Reason)
	}
	// Another reason for the same refund is a conflict, not a replay.
	r3 := invokeOne(t, f.h, time.Now().Add(10*time.Second), Event{RunID: "run-1",
		ToolCalls: []ToolUse{f.refundCall("toolu_03", 1000, "duplicate")}})
	if !r3.IsError.Value || !strings.Contains(text(r3), "with different reason") || len(f.refunds()) != 1 {
		t.Errorf("another reason: %+v, %d refunds", r3, len(f.refunds()))
	}
}

// The scheduled sweeper settles a refund an invocation left uncertain
// (Stripe committed it, then neither the answer, nor a resend, nor a
// lookup got through), without anyone calling again.
func TestSweeperSettlesUncertain(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.stripe.Faults.Add(fault.Rule{Route: "POST /v1/refunds", Attempt: 1, Action: fault.CommitThenDrop})
	f.stripe.Faults.Add(fault.Rule{Route: "POST /v1/refunds", Action: fault.FailBeforeCommit, Status: http.StatusInternalServerError})
	f.stripe.Faults.Add(fault.Rule{Route: "GET /v1/refunds", Action: fault.FailBeforeCommit, Status: http.StatusInternalServerError})
	ev := Event{RunID: "run-1", ToolCalls: []ToolUse{f.refundCall("toolu_01", 700, "")}}
	r1 := invokeOne(t, f.h, time.Now().Add(30*time.Second), ev)
	if !r1.IsError.Value || !strings.HasPrefix(text(r1), "Outcome unknown") {
		t.Fatalf("first invocation: %+v; want an unknown outcome", r1)
	}
	tool := RefundTool(f.st)
	key, err := tool.Key(ev.RunID, client.Call{Tool: tool.Name, Input: ev.ToolCalls[0].Input}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if rec, err := f.store.Get(context.Background(), key); err != nil || rec.State != ledger.StateUncertain {
		t.Fatalf("record %+v, %v; want uncertain", rec, err)
	}
	f.stripe.Faults.Clear() // Stripe answers again

	// The sweeper's own function: the same environment, ONCELY_MODE=sweeper.
	f.env["ONCELY_MODE"] = "sweeper"
	sw := f.newHandler(t)
	rep, err := sw.Sweep(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	rec, err := f.store.Get(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Done != 1 || len(f.refunds()) != 1 || rec.State != ledger.StateDone || rec.Ref != f.refunds()[0].ID {
		t.Errorf("sweep %+v, record %+v, %d refunds; want the one refund recorded done", rep, rec, len(f.refunds()))
	}
}

// The deployed function reads the Stripe key from SSM Parameter Store at
// cold start. SSM cannot run here: a stand-in answers GetParameter the
// way the SSM API does (JSON 1.1, X-Amz-Target), and checks that the key
// is asked for with decryption.
func TestStripeKeyFromParameter(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	asked := make(chan string, 1)
	ssmStandIn := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var in struct {
			Name           string
			WithDecryption bool
		}
		if r.Header.Get("X-Amz-Target") != "AmazonSSM.GetParameter" || json.Unmarshal(body, &in) != nil || !in.WithDecryption {
			http.Error(w, `{"__type":"ValidationException","message":"unexpected request"}`, http.StatusBadRequest)
			return
		}
		asked <- in.Name
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		json.NewEncoder(w).Encode(map[string]any{"Parameter": map[string]any{"Name": in.Name, "Type": "SecureString", "Value": apiKey}})
	}))
	defer ssmStandIn.Close()
	delete(f.env, "STRIPE_API_KEY")
	f.env["STRIPE_API_KEY_PARAMETER"] = "/oncely/stripe-api-key"
	env, err := EnvFrom(f.env.get)
	if err != nil {
		t.Fatal(err)
	}
	h, err := New(context.Background(), env, &Options{AWS: append(testAWS(), config.WithBaseEndpoint(ssmStandIn.URL))})
	if err != nil {
		t.Fatal(err)
	}
	if name := <-asked; name != "/oncely/stripe-api-key" {
		t.Errorf("asked SSM for %q", name)
	}
	r := invokeOne(t, h, time.Now().Add(10*time.Second), Event{RunID: "run-1", ToolCalls: []ToolUse{f.refundCall("toolu_01", 300, "")}})
	if r.IsError.Value || len(f.refunds()) != 1 {
		t.Errorf("refund with the key from SSM: %+v, %d refunds", r, len(f.refunds()))
	}
}
