package ledgerdynamo_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oncely/oncely/clock"
	"github.com/oncely/oncely/ledger"
	"github.com/oncely/oncely/ledger/ledgerdynamo"
)

// answer is one response of the stand-in server.
type answer struct {
	status int
	body   any
}

var ok = answer{http.StatusOK, map[string]any{}}

// dropConnection as an answer's status closes the connection unanswered.
const dropConnection = -1

// apiError is a DynamoDB JSON error answer; item, when set, is returned
// with it (ConditionalCheckFailedException with ALL_OLD).
func apiError(status int, code string, item map[string]any) answer {
	body := map[string]any{"__type": "com.amazonaws.dynamodb.v20120810#" + code, "message": code}
	if item != nil {
		body["Item"] = item
	}
	return answer{status, body}
}

func conditionFailed(item map[string]any) answer {
	return apiError(http.StatusBadRequest, "ConditionalCheckFailedException", item)
}

// standIn is a DynamoDB stand-in on 127.0.0.1 that speaks the JSON protocol
// for UpdateItem and GetItem: it answers UpdateItem requests from a script
// in order, and GetItem with getItem (absent when nil).
type standIn struct {
	mu       sync.Mutex
	updates  []answer
	getItem  map[string]any
	requests []map[string]any // bodies, in order
}

func (s *standIn) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body map[string]any
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.requests = append(s.requests, body)
	var a answer
	switch target := r.Header.Get("X-Amz-Target"); {
	case strings.HasSuffix(target, ".UpdateItem") && len(s.updates) > 0:
		a = s.updates[0]
		if len(s.updates) > 1 {
			s.updates = s.updates[1:]
		}
	case strings.HasSuffix(target, ".GetItem"):
		a = answer{http.StatusOK, map[string]any{}}
		if s.getItem != nil {
			a.body = map[string]any{"Item": s.getItem}
		}
	default:
		a = apiError(http.StatusBadRequest, "UnknownOperationException", nil)
	}
	s.mu.Unlock()
	if a.status == dropConnection {
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.Close()
		}
		return
	}
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	w.WriteHeader(a.status)
	json.NewEncoder(w).Encode(a.body)
}

func (s *standIn) bodies() []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests
}

// newStandIn starts a stand-in whose UpdateItem answers are updates (the
// last one repeats) and returns a Store on it with a counting client.
func newStandIn(t *testing.T, getItem map[string]any, updates ...answer) (*ledgerdynamo.Store, *counter, *standIn) {
	t.Helper()
	return newStandInWith(t, nil, getItem, updates...)
}

// newStandInWith is newStandIn whose Store's configuration tune changes
// (nil: none).
func newStandInWith(t *testing.T, tune func(*ledgerdynamo.Config), getItem map[string]any, updates ...answer) (*ledgerdynamo.Store, *counter, *standIn) {
	t.Helper()
	si := &standIn{updates: updates, getItem: getItem}
	srv := httptest.NewServer(si)
	t.Cleanup(srv.Close)
	c := newCounter(nil)
	cfg := &ledgerdynamo.Config{
		Clock:          clock.NewFake(t0),
		MaxAttempts:    3,
		InitialBackoff: time.Millisecond,
		MaxBackoff:     2 * time.Millisecond,
		// The claim's write path alone; tests of the read first set it.
		ReadFirst: ledgerdynamo.ReadFirstNever,
	}
	if tune != nil {
		tune(cfg)
	}
	store := ledgerdynamo.New(newClient(srv.URL, c), "ledger", cfg)
	return store, c, si
}

var t0 = time.Date(2025, 3, 14, 15, 9, 26, 0, time.UTC)

// wireItem is r as a DynamoDB JSON item.
func wireItem(r ledger.Record) map[string]any {
	str := func(v string) map[string]any { return map[string]any{"S": v} }
	num := func(v int64) map[string]any { return map[string]any{"N": strconv.FormatInt(v, 10)} }
	it := map[string]any{
		"pk": str(r.Key), "state": str(string(r.State)), "owner": str(r.Owner),
		"lease_until": num(r.LeaseUntil.UnixMilli()), "expires_at": num(r.ExpiresAt.Unix()),
		"fingerprint": str(r.Fingerprint), "attempts": num(int64(r.Attempt)),
		"attempt_at": num(r.AttemptAt.UnixMilli()), "run_id": str(r.RunID), "tool": str(r.Tool),
		"updated_at": num(r.UpdatedAt.UnixMilli()),
	}
	if r.Summary != "" {
		it["summary"] = str(r.Summary)
	}
	if r.Ref != "" {
		it["ref"] = str(r.Ref)
	}
	return it
}

func params(key, owner string) ledger.ClaimParams {
	return ledger.ClaimParams{Key: key, Tool: "send_reply", RunID: "run-1", Owner: owner,
		LeaseUntil: t0.Add(30 * time.Second), Fingerprint: "fp-1", ExpiresAt: t0.Add(24 * time.Hour)}
}

// record is the record a claim with p stores, in state.
func record(p ledger.ClaimParams, state ledger.State) ledger.Record {
	return ledger.Record{Key: p.Key, Tool: p.Tool, RunID: p.RunID, State: state, Owner: p.Owner,
		LeaseUntil: p.LeaseUntil, ExpiresAt: p.ExpiresAt, Fingerprint: p.Fingerprint,
		Attempt: 1, AttemptAt: t0.Add(-time.Minute), UpdatedAt: t0.Add(-time.Second)}
}

// A server that returns the blocking item with the failed condition
// answers a repeat in one request: no GetItem.
func TestClaimBlockedByReturnedItem(t *testing.T) {
	t.Parallel()
	done := record(params("k", "owner-a"), ledger.StateDone)
	done.Summary, done.Ref = "sent reply 7", "msg_7"
	store, c, si := newStandIn(t, nil, conditionFailed(wireItem(done)))

	res, err := store.Claim(context.Background(), params("k", "owner-b"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Claimed || res.Previous == nil || res.Previous.State != ledger.StateDone ||
		res.Previous.Summary != done.Summary || res.Previous.Ref != done.Ref || !res.Previous.UpdatedAt.Equal(done.UpdatedAt) {
		t.Fatalf("Claim = %+v (previous %+v), want blocked by the done record", res, res.Previous)
	}
	if got := c.take(); total(got) != 1 || got["UpdateItem"] != 1 {
		t.Errorf("requests = %v, want one UpdateItem", got)
	}
	body := si.bodies()[0]
	if body["ReturnValuesOnConditionCheckFailure"] != "ALL_OLD" || body["ReturnValues"] != "ALL_OLD" {
		t.Errorf("claim request asks ReturnValues %v, ReturnValuesOnConditionCheckFailure %v; want ALL_OLD for both",
			body["ReturnValues"], body["ReturnValuesOnConditionCheckFailure"])
	}
}

func TestRetries(t *testing.T) {
	t.Parallel()
	blocking := record(params("k", "owner-a"), ledger.StatePending)
	for _, tc := range []struct {
		name     string
		updates  []answer
		requests int
		claimed  bool
		err      error // nil: the claim answers
	}{
		{"throttled then ok", []answer{apiError(400, "ThrottlingException", nil), ok}, 2, true, nil},
		{"provisioned throughput then ok", []answer{apiError(400, "ProvisionedThroughputExceededException", nil), ok}, 2, true, nil},
		{"request limit then ok", []answer{apiError(400, "RequestLimitExceeded", nil), ok}, 2, true, nil},
		{"500 then ok", []answer{apiError(500, "InternalServerError", nil), ok}, 2, true, nil},
		{"connection dropped then ok", []answer{{status: dropConnection}, ok}, 2, true, nil},
		{"503 twice then ok", []answer{{503, "busy"}, {503, "busy"}, ok}, 3, true, nil},
		{"always 500", []answer{apiError(500, "InternalServerError", nil)}, 3, false, ledger.ErrUnavailable},
		{"always throttled", []answer{apiError(400, "ThrottlingException", nil)}, 3, false, ledger.ErrUnavailable},
		{"condition failed is not retried", []answer{conditionFailed(wireItem(blocking)), ok}, 1, false, nil},
		{"validation error is not retried", []answer{apiError(400, "ValidationException", nil), ok}, 1, false, ledger.ErrUnavailable},
		{"missing table is not retried", []answer{apiError(400, "ResourceNotFoundException", nil), ok}, 1, false, ledger.ErrUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			store, c, _ := newStandIn(t, nil, tc.updates...)
			res, err := store.Claim(context.Background(), params("k", "owner-b"))
			switch {
			case tc.err != nil && !errors.Is(err, tc.err):
				t.Errorf("Claim error = %v, want %v", err, tc.err)
			case tc.err == nil && err != nil:
				t.Errorf("Claim error = %v", err)
			case err == nil && res.Claimed != tc.claimed:
				t.Errorf("Claim = %+v, want claimed %v", res, tc.claimed)
			}
			if got := c.take(); total(got) != tc.requests || got["UpdateItem"] != tc.requests {
				t.Errorf("requests = %v, want %d UpdateItem", got, tc.requests)
			}
		})
	}
}

// When an attempt's answer is lost (5xx) and its retry fails the condition
// because the lost attempt was applied, the Store recognises its own write.
func TestLostAnswer(t *testing.T) {
	t.Parallel()
	mine := params("k", "owner-a")
	lost := apiError(500, "InternalServerError", nil)
	pendingMine := record(mine, ledger.StatePending)
	doneMine := record(mine, ledger.StateDone)
	failedMine := record(mine, ledger.StateFailed)
	doneOther := record(params("k", "owner-b"), ledger.StateDone)
	ctx := context.Background()

	t.Run("claim applied", func(t *testing.T) {
		t.Parallel()
		store, c, _ := newStandIn(t, nil, lost, conditionFailed(wireItem(pendingMine)))
		res, err := store.Claim(ctx, mine)
		if err != nil || !res.Claimed || res.Attempt != 1 || !res.MustReconcile() {
			t.Errorf("Claim = %+v, %v; want claimed, attempt 1, and a reconcile (what it took over is unknown)", res, err)
		}
		if got := c.take(); total(got) != 2 {
			t.Errorf("requests = %v, want 2 UpdateItem", got)
		}
	})
	t.Run("claim applied, item read back", func(t *testing.T) {
		t.Parallel()
		store, c, si := newStandIn(t, wireItem(pendingMine), lost, conditionFailed(nil))
		res, err := store.Claim(ctx, mine)
		if err != nil || !res.Claimed || !res.MustReconcile() {
			t.Errorf("Claim = %+v, %v; want claimed with a reconcile", res, err)
		}
		if got := c.take(); got["UpdateItem"] != 2 || got["GetItem"] != 1 || total(got) != 3 {
			t.Errorf("requests = %v, want 2 UpdateItem and 1 GetItem", got)
		}
		if get := si.bodies()[2]; get["ConsistentRead"] != true {
			t.Errorf("GetItem request %v is not a consistent read", get)
		}
	})
	t.Run("same owner after an answer lost outside the store", func(t *testing.T) {
		// The caller repeats a claim whose answer it lost: the key is its
		// own, and what it took over is unknown.
		t.Parallel()
		store, _, _ := newStandIn(t, nil, conditionFailed(wireItem(pendingMine)))
		if res, err := store.Claim(ctx, mine); err != nil || !res.Claimed || !res.MustReconcile() {
			t.Errorf("Claim = %+v, %v; want claimed with a reconcile", res, err)
		}
	})
	t.Run("complete applied", func(t *testing.T) {
		t.Parallel()
		store, c, _ := newStandIn(t, nil, lost, conditionFailed(wireItem(doneMine)))
		if err := store.Complete(ctx, mine.Key, mine.Owner, ledger.Completion{Summary: "ok"}); err != nil {
			t.Errorf("Complete = %v, want success", err)
		}
		if got := c.take(); total(got) != 2 {
			t.Errorf("requests = %v, want 2 UpdateItem", got)
		}
	})
	t.Run("complete twice is not owner", func(t *testing.T) {
		t.Parallel()
		store, c, _ := newStandIn(t, nil, conditionFailed(wireItem(doneMine)))
		if err := store.Complete(ctx, mine.Key, mine.Owner, ledger.Completion{Summary: "ok"}); !errors.Is(err, ledger.ErrNotOwner) {
			t.Errorf("Complete = %v, want ErrNotOwner", err)
		}
		if got := c.take(); total(got) != 1 {
			t.Errorf("requests = %v, want 1 UpdateItem", got)
		}
	})
	t.Run("complete lost to another owner", func(t *testing.T) {
		t.Parallel()
		store, _, _ := newStandIn(t, nil, lost, conditionFailed(wireItem(doneOther)))
		if err := store.Complete(ctx, mine.Key, mine.Owner, ledger.Completion{Summary: "ok"}); !errors.Is(err, ledger.ErrNotOwner) {
			t.Errorf("Complete = %v, want ErrNotOwner", err)
		}
	})
	t.Run("definite failure applied", func(t *testing.T) {
		t.Parallel()
		store, _, _ := newStandIn(t, nil, lost, conditionFailed(wireItem(failedMine)))
		if err := store.Fail(ctx, mine.Key, mine.Owner, ledger.Failure{Definite: true}); err != nil {
			t.Errorf("Fail = %v, want success", err)
		}
	})
	t.Run("ambiguous failure does not match a failed record", func(t *testing.T) {
		t.Parallel()
		store, _, _ := newStandIn(t, nil, lost, conditionFailed(wireItem(failedMine)))
		if err := store.Fail(ctx, mine.Key, mine.Owner, ledger.Failure{}); !errors.Is(err, ledger.ErrNotOwner) {
			t.Errorf("Fail = %v, want ErrNotOwner", err)
		}
	})
}
