package providers_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oncely/oncely/clock"
	"github.com/oncely/oncely/fakes"
	"github.com/oncely/oncely/fakes/fault"
	"github.com/oncely/oncely/ledger/ledgermem"
	"github.com/oncely/oncely/oncelytest"
	"github.com/oncely/oncely/reconcile"
)

// notesFake is a fake of one's own for the Notes adapter: an http.Handler
// with a journal of what it committed (fakes.Journal), the fault layer
// (fakes/fault) around its commit, and a search that lags by lag on clk.
type notesFake struct {
	*httptest.Server
	faults  *fault.Injector
	journal fakes.Journal
	mu      sync.Mutex
	notes   []Note
	at      []time.Time
}

func newNotesFake(clk clock.Clock, lag time.Duration) *notesFake {
	if clk == nil {
		clk = clock.System{}
	}
	f := &notesFake{faults: fault.NewInjector(1)}
	errf := func(status int, msg string) fault.Response {
		b, _ := json.Marshal(map[string]string{"code": "fault", "message": msg})
		return fault.Response{Status: status, Header: http.Header{"Content-Type": {"application/json"}}, Body: b}
	}
	answer := func(status int, v any) fault.Response {
		b, _ := json.Marshal(v)
		return fault.Response{Status: status, Header: http.Header{"Content-Type": {"application/json"}}, Body: b}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /notes", func(w http.ResponseWriter, r *http.Request) {
		f.faults.Decide(r).Serve(w, r, errf, func() fault.Response {
			var n Note
			if err := json.NewDecoder(r.Body).Decode(&n); err != nil || n.Text == "" || len(n.Tags) != 1 {
				return errf(http.StatusBadRequest, "text and one tag are required")
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			n.ID = "n" + strconv.Itoa(len(f.notes)+1)
			f.notes, f.at = append(f.notes, n), append(f.at, clk.Now())
			f.journal.Append(fakes.Effect{Kind: "note", ID: n.ID, Key: n.Tags[0], At: clk.Now()})
			return answer(http.StatusCreated, n)
		})
	})
	mux.HandleFunc("GET /notes", func(w http.ResponseWriter, r *http.Request) {
		f.faults.Decide(r).Serve(w, r, errf, func() fault.Response {
			f.mu.Lock()
			defer f.mu.Unlock()
			out := []Note{}
			for i, n := range f.notes {
				if n.Tags[0] == r.URL.Query().Get("tag") && !clk.Now().Before(f.at[i].Add(lag)) {
					out = append(out, n)
				}
			}
			return answer(http.StatusOK, map[string]any{"notes": out})
		})
	})
	f.Server = httptest.NewServer(mux)
	return f
}

// The failure cases of oncelytest against the Notes adapter and its fake:
// a search lagging 2 s behind (the adapter declares 10 s), on the clock
// the cases move; the reconciler's waits advance it.
func TestNotesAdapterFailureCases(t *testing.T) {
	t.Parallel()
	oncelytest.FailureCases(t, func(t *testing.T, clk clock.Clock) oncelytest.Harness {
		fake := newNotesFake(clk, 2*time.Second)
		t.Cleanup(fake.Close)
		fc := clk.(*clock.Fake)
		rcfg := &reconcile.Config{Clock: fc, Sleep: func(ctx context.Context, d time.Duration) error {
			fc.Advance(d)
			return ctx.Err()
		}}
		return oncelytest.Harness{
			Store:   ledgermem.New(&ledgermem.Config{Clock: clk}),
			Tool:    notesTool(NewNotes(fake.URL, nil), rcfg),
			Input:   json.RawMessage(`{"ticket": 42, "text": "Refund issued."}`),
			Recall:  json.RawMessage(`{"ticket": "42", "text": "I have refunded the customer."}`),
			Effects: fake.journal.Len,
			TimeoutAfterSuccess: func() {
				fake.faults.Add(fault.Rule{Route: "POST /notes", Attempt: 1, Action: fault.CommitThenDrop})
			},
		}
	})
}

// docs/providers.md's "Writing an adapter" quotes the adapter and the
// test above whole and verbatim. (Every Go block of the docs is checked to
// come from tested code by TestDocsGoBlocksAreTested in the root package;
// this test checks the converse for the guide: that it shows all of the
// adapter, and that the adapter stays short.)
func TestProvidersGuideQuotesTheAdapter(t *testing.T) {
	t.Parallel()
	guide, err := os.ReadFile("../docs/providers.md")
	if err != nil {
		t.Fatal(err)
	}
	example, err := os.ReadFile("adapterguide_example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	test, err := os.ReadFile("adapterguide_test.go")
	if err != nil {
		t.Fatal(err)
	}
	_, adapter, _ := strings.Cut(string(example), "next marker.) ---\n\n")
	adapter, _, _ = strings.Cut(adapter, "// --- End of the adapter. ---")
	_, harness, _ := strings.Cut(string(test), "on the clock\n// the cases move; the reconciler's waits advance it.\n")
	harness, _, _ = strings.Cut(harness, "\n}\n")
	harness += "\n}"
	for name, code := range map[string]string{"the adapter": adapter, "the failure cases": harness} {
		if len(code) < 200 || !strings.Contains(string(guide), "```go\n"+strings.TrimSpace(code)+"\n```") {
			t.Errorf("docs/providers.md does not quote %s of the adapter guide whole, as it is (%d bytes)", name, len(code))
		}
	}
	if n := strings.Count(adapter, "\n"); n >= 100 {
		t.Errorf("the guide's adapter has %d lines, want fewer than 100", n)
	}
}
