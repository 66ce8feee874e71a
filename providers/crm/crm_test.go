package crm_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/errclass"
	"github.com/oncely/oncely/fakes"
	"github.com/oncely/oncely/fakes/crmfake"
	"github.com/oncely/oncely/fakes/fault"
	"github.com/oncely/oncely/providers"
	"github.com/oncely/oncely/providers/crm"
	"github.com/oncely/oncely/providers/internal/adaptertest"
)

const route = "PUT /v1/contacts/by-external-id/{id}"

var ada = crm.ContactInput{Email: "ada@example.com", Name: "Ada", Fields: map[string]string{"plan": "pro"}}

func newFake(t *testing.T) *crmfake.Server {
	t.Helper()
	s := crmfake.NewServer(&crmfake.Config{Seed: 1})
	t.Cleanup(s.Close)
	return s
}

func newClient(url string) *crm.Client {
	return crm.New(url, &crm.Config{APIKey: "key", HTTP: adaptertest.HTTPConfig()})
}

func TestUpsertUnderFaults(t *testing.T) {
	t.Parallel()
	for _, c := range adaptertest.Faults(route, true) {
		t.Run(c.Name, func(t *testing.T) {
			t.Parallel()
			s := newFake(t)
			for _, r := range c.Rules {
				s.Faults.Add(r)
			}
			key := client.DownstreamKey("c0ffee", 1)
			ct, err := newClient(s.URL).Upsert(context.Background(), key, ada)
			adaptertest.Check(t, c, err, func() []fakes.Effect { return fakes.Filter(s.Journal(), fakes.KindContactUpsert, key) })
			if err == nil && (ct.ExternalID != key || ct.Email != ada.Email || ct.Fields["plan"] != "pro") {
				t.Fatalf("contact %+v", ct)
			}
			if n := len(fakes.Filter(s.Journal(), fakes.KindContactCreate, "")); n != 0 {
				t.Fatalf("%d plain creates", n)
			}
		})
	}
}

func TestUpsertRepeatsConverge(t *testing.T) {
	t.Parallel()
	s := newFake(t)
	c := newClient(s.URL)
	ctx := context.Background()
	first, err := c.Upsert(ctx, "k", ada)
	if err != nil || !first.Created {
		t.Fatalf("%+v, %v", first, err)
	}
	again, err := c.Upsert(ctx, "k", ada)
	if err != nil || again.Created || again.ID != first.ID || again.Version != 1 {
		t.Fatalf("repeat: %+v, %v", again, err)
	}
	if n := len(s.Journal()); n != 1 {
		t.Fatalf("%d effects", n)
	}
}

func TestLookup(t *testing.T) {
	t.Parallel()
	s := newFake(t)
	c := newClient(s.URL)
	ctx := context.Background()
	ct, err := c.Upsert(ctx, "k/with slash", ada)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		key  string
		want providers.LookupStatus
		ref  string
	}{{"k/with slash", providers.Found, ct.ID}, {"absent", providers.NotFound, ""}} {
		res, err := c.Lookup(ctx, tc.key)
		if err != nil || res.Status != tc.want || res.Ref != tc.ref {
			t.Fatalf("%s: %+v, %v", tc.key, res, err)
		}
	}
	if caps := c.Capabilities(); !caps.Upsert || caps.Lookup != providers.Consistent {
		t.Fatalf("capabilities %+v", caps)
	}
	// A lookup that cannot reach an answer is an error, not NotFound.
	s.Faults.Add(fault.Rule{Route: "GET /v1/contacts/by-external-id/{id}", Action: fault.FailBeforeCommit, Status: 503})
	if res, err := c.Lookup(ctx, "k/with slash"); err == nil || res.Status != providers.Inconclusive {
		t.Fatalf("failing lookup: %+v, %v", res, err)
	}
	// A 404 after failed attempts is still an answer.
	s.Faults.Clear()
	s.Faults.Add(fault.Rule{Route: "GET /v1/contacts/by-external-id/{id}", Attempt: 1, Action: fault.FailBeforeCommit})
	if res, err := c.Lookup(ctx, "absent"); err != nil || res.Status != providers.NotFound {
		t.Fatalf("404 after a 500: %+v, %v", res, err)
	}
}

func TestInvalidUpserts(t *testing.T) {
	t.Parallel()
	s := newFake(t)
	c := newClient(s.URL)
	if _, err := c.Upsert(context.Background(), "", ada); !errors.Is(err, providers.ErrInvalidRequest) {
		t.Fatalf("empty key: %v", err)
	}
	_, err := c.Upsert(context.Background(), "k", crm.ContactInput{Email: "nope"})
	if errclass.Of(err) != errclass.Permanent {
		t.Fatalf("bad email: %v", err)
	}
	if n := len(s.Journal()); n != 0 {
		t.Fatalf("%d effects", n)
	}
}

// An answer about another contact is not a success.
func TestAnswerForAnotherContact(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPut || r.URL.Path != "/v1/contacts/by-external-id/k" || r.Header.Get("Authorization") != "Bearer key" {
			t.Errorf("request %s %s %v", r.Method, r.URL.Path, r.Header)
		}
		io.WriteString(w, `{"id":"ct_9","external_id":"other","email":"x@example.com"}`)
	}))
	t.Cleanup(srv.Close)
	_, err := newClient(srv.URL).Upsert(context.Background(), "k", ada)
	if errclass.Of(err) != errclass.Ambiguous || !errors.Is(err, providers.ErrBadResponse) {
		t.Fatalf("%v", err)
	}
}
