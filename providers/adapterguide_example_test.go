package providers_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/ledger/ledgermem"
	"github.com/oncely/oncely/providers"
	"github.com/oncely/oncely/reconcile"
)

// --- The adapter (docs/providers.md's "Writing an adapter" quotes from here to
// the next marker.) ---

// Notes is an adapter for a notes API that has no idempotency: the
// downstream key rides on the note as a tag, and a search by tag finds the
// note again. The search index lags behind by up to notesIndexLag, so an
// empty search is Inconclusive, never NotFound.
type Notes struct{ hc *providers.Client }

const notesIndexLag = 10 * time.Second // the provider's documented bound

// NewNotes returns the adapter. cfg tunes the HTTP layer (nil: defaults).
func NewNotes(baseURL string, cfg *providers.Config) *Notes {
	var c providers.Config
	if cfg != nil {
		c = *cfg
	}
	// Classification: the layer already reads 408/425/429/503+Retry-After
	// as "not done, retry later", 5xx and timeouts after the request left
	// as ambiguous, other 4xx as permanent. Correct what this API means
	// otherwise: its 429 "daily_quota" will not pass before tomorrow.
	c.Classify = func(e *providers.ProviderError) {
		if e.Status == http.StatusTooManyRequests && e.Code == "daily_quota" {
			e.Retryable = false
		}
	}
	return &Notes{hc: providers.NewClient(baseURL, &c)}
}

// Note is a note as the API returns it.
type Note struct {
	ID   string   `json:"id"`
	Text string   `json:"text"`
	Tags []string `json:"tags"`
}

// Validate makes an answer without an id an ambiguous error, not a success.
func (n *Note) Validate() error {
	if n.ID == "" {
		return errors.New("a note without an id")
	}
	return nil
}

// Create posts a note carrying key. The API does not deduplicate, so the
// layer never resends it once it may have left (ReplayUnsafe): a timeout
// is ambiguous, and reconciliation looks the note up instead.
func (a *Notes) Create(ctx context.Context, key, text string) (*Note, error) {
	body, err := json.Marshal(map[string]any{"text": text, "tags": []string{key}})
	if err != nil {
		return nil, err
	}
	var n Note
	if _, err := a.hc.Do(ctx, &providers.Request{
		Method: http.MethodPost, Path: "/notes", Body: body, ContentType: "application/json",
		Replay: providers.ReplayUnsafe,
	}, &n); err != nil {
		return nil, err
	}
	return &n, nil
}

// Capabilities: no deduplication, a lookup that lags by notesIndexLag.
func (a *Notes) Capabilities() providers.Capabilities {
	return providers.Capabilities{Lookup: providers.Eventual, IndexLag: notesIndexLag}
}

// Lookup searches by tag: Found, or Inconclusive (the index may lag).
// Package reconcile turns Inconclusive into "absent" only once the lag
// has passed since the last request could have committed.
func (a *Notes) Lookup(ctx context.Context, key string) (providers.LookupResult, error) {
	var res struct {
		Notes []Note `json:"notes"`
	}
	if _, err := a.hc.Do(ctx, &providers.Request{
		Method: http.MethodGet, Path: "/notes", Query: url.Values{"tag": {key}},
	}, &res); err != nil {
		return providers.LookupResult{}, err // the provider could not be asked
	}
	for _, n := range res.Notes {
		if slices.Contains(n.Tags, key) {
			return providers.LookupResult{Status: providers.Found, Ref: n.ID, Summary: "note " + n.ID}, nil
		}
	}
	return providers.LookupResult{Status: providers.Inconclusive}, nil
}

// --- End of the adapter. ---

// notesTool is a tool on the adapter; rcfg tunes its reconciler.
func notesTool(notes *Notes, rcfg *reconcile.Config) client.Tool {
	return client.Tool{
		Name:     "add_note",
		Identity: []client.Field{{Path: "ticket", Norm: client.Integer}},
		Run: func(ctx context.Context, inv client.Invocation) (client.Effect, error) {
			var in struct {
				Ticket int64  `json:"ticket"`
				Text   string `json:"text"`
			}
			if err := inv.Bind(&in); err != nil {
				return client.Effect{}, err
			}
			n, err := notes.Create(ctx, inv.DownstreamKey, fmt.Sprintf("#%d: %s", in.Ticket, in.Text))
			if err != nil {
				return client.Effect{}, err
			}
			return client.Effect{Summary: "note " + n.ID + " added", Ref: n.ID}, nil
		},
		Reconciler: reconcile.New(notes, rcfg),
	}
}

// Writing an adapter: a notes API without idempotency, its key as a tag,
// a lag-aware lookup. The fake it runs against is in
// adapterguide_test.go, with the failure cases of oncelytest.
func Example_writingAnAdapter() {
	fake := newNotesFake(nil, 0)
	defer fake.Close()
	exec := client.New(ledgermem.New(nil), nil)
	if err := exec.Register(notesTool(NewNotes(fake.URL, nil), nil)); err != nil {
		panic(err)
	}
	for _, text := range []string{"Refund issued.", "I have refunded the customer."} { // the model re-calls
		res, err := exec.Execute(context.Background(), "run-1", client.Call{
			Tool: "add_note", Input: json.RawMessage(fmt.Sprintf(`{"ticket": 42, "text": %q}`, text)),
		})
		if err != nil {
			panic(err)
		}
		fmt.Println(res.Text)
	}
	fmt.Println("notes:", fake.journal.Len())
	// Output:
	// Done: note n1 added
	// Already done earlier in this run: note n1 added. Do not repeat it.
	// notes: 1
}
