package hubspot_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/clock"
	"github.com/oncely/oncely/errclass"
	"github.com/oncely/oncely/fakes"
	"github.com/oncely/oncely/fakes/fault"
	"github.com/oncely/oncely/fakes/hubspotfake"
	"github.com/oncely/oncely/providers"
	"github.com/oncely/oncely/providers/hubspot"
	"github.com/oncely/oncely/providers/internal/adaptertest"
)

const route = "POST /crm/v3/objects/{type}/batch/upsert"

var ada = map[string]string{"email": "ada@example.com", "firstname": "Ada"}

func newFake(t *testing.T, cfg *hubspotfake.Config) *hubspotfake.Server {
	t.Helper()
	if cfg == nil {
		cfg = &hubspotfake.Config{}
	}
	cfg.Token = "pat-test"
	s := hubspotfake.NewServer(cfg)
	t.Cleanup(s.Close)
	return s
}

func newClient(url, objectType string) *hubspot.Client {
	return hubspot.New(&hubspot.Config{BaseURL: url, AccessToken: "pat-test", ObjectType: objectType, HTTP: adaptertest.HTTPConfig()})
}

func TestUpsertUnderFaults(t *testing.T) {
	t.Parallel()
	for _, c := range adaptertest.Faults(route, true) {
		t.Run(c.Name, func(t *testing.T) {
			t.Parallel()
			s := newFake(t, nil)
			for _, r := range c.Rules {
				s.Faults.Add(r)
			}
			key := client.DownstreamKey("c0ffee", 1)
			rec, err := newClient(s.URL, hubspot.Contacts).Upsert(context.Background(), key, ada)
			adaptertest.Check(t, c, err, func() []fakes.Effect { return fakes.Filter(s.Journal(), hubspotfake.KindUpsert, key) })
			if err == nil && (rec.Properties["oncely_key"] != key || rec.Properties["email"] != ada["email"]) {
				t.Fatalf("record %+v", rec)
			}
			if n := len(fakes.Filter(s.Journal(), hubspotfake.KindCreate, "")); n != 0 {
				t.Fatalf("%d plain creates", n)
			}
		})
	}
}

func TestUpsertRepeatsConverge(t *testing.T) {
	t.Parallel()
	s := newFake(t, nil)
	for _, typ := range []string{hubspot.Contacts, hubspot.Deals} {
		c := newClient(s.URL, typ)
		props := ada
		if typ == hubspot.Deals {
			props = map[string]string{"dealname": "Renewal", "amount": "1200.50"}
		}
		ctx := context.Background()
		first, err := c.Upsert(ctx, "k-"+typ, props)
		if err != nil || !first.New {
			t.Fatalf("%s: %+v, %v", typ, first, err)
		}
		again, err := c.Upsert(ctx, "k-"+typ, props)
		if err != nil || again.New || again.ID != first.ID {
			t.Fatalf("%s repeat: %+v, %v", typ, again, err)
		}
	}
	if n := len(s.Journal()); n != 2 {
		t.Fatalf("%d effects, want one per type: %+v", n, s.Journal())
	}
}

func TestLookup(t *testing.T) {
	t.Parallel()
	s := newFake(t, nil)
	c := newClient(s.URL, hubspot.Contacts)
	ctx := context.Background()
	rec, err := c.Upsert(ctx, "k/with slash", ada)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		key  string
		want providers.LookupStatus
		ref  string
	}{{"k/with slash", providers.Found, rec.ID}, {"absent", providers.NotFound, ""}} {
		res, err := c.Lookup(ctx, tc.key)
		if err != nil || res.Status != tc.want || res.Ref != tc.ref {
			t.Fatalf("%s: %+v, %v", tc.key, res, err)
		}
	}
	if caps := c.Capabilities(); !caps.Upsert || caps.Lookup != providers.Consistent {
		t.Fatalf("capabilities %+v", caps)
	}
	got, err := c.Get(ctx, "k/with slash", "email", "firstname")
	if err != nil || got.Properties["email"] != ada["email"] || got.Properties["firstname"] != "Ada" {
		t.Fatalf("get: %+v, %v", got, err)
	}
	s.Faults.Add(fault.Rule{Route: "GET /crm/v3/objects/{type}/{id}", Action: fault.FailBeforeCommit, Status: 503})
	if res, err := c.Lookup(ctx, "k/with slash"); err == nil || res.Status != providers.Inconclusive {
		t.Fatalf("failing lookup: %+v, %v", res, err)
	}
}

// HubSpot's refusals are read from its status and error body.
func TestClassification(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newFake(t, nil)
	c := newClient(s.URL, hubspot.Contacts)
	var pe *providers.ProviderError

	_, err := c.Upsert(ctx, "k1", map[string]string{"email": "not an address"})
	if errclass.Of(err) != errclass.Permanent || !errors.As(err, &pe) || pe.Status != 400 || pe.Type != "VALIDATION_ERROR" || pe.Code != "INVALID_EMAIL" {
		t.Fatalf("invalid email: %v (%+v)", err, pe)
	}
	_, err = c.Upsert(ctx, "k1", map[string]string{"favourite_colour": "blue"})
	if errclass.Of(err) != errclass.Permanent || !errors.As(err, &pe) || pe.Code != "PROPERTY_DOESNT_EXIST" {
		t.Fatalf("unknown property: %v", err)
	}
	// Two records cannot share a unique email: 409 is permanent here.
	if _, err := c.Upsert(ctx, "k1", ada); err != nil {
		t.Fatal(err)
	}
	_, err = c.Upsert(ctx, "k2", ada)
	if errclass.Of(err) != errclass.Permanent || !errors.As(err, &pe) || pe.Status != 409 || pe.Type != "CONFLICT" {
		t.Fatalf("conflict: %v", err)
	}
	// An idProperty that is not unique in the portal.
	_, err = hubspot.New(&hubspot.Config{BaseURL: s.URL, AccessToken: "pat-test", IDProperty: "firstname", HTTP: adaptertest.HTTPConfig()}).Upsert(ctx, "k3", nil)
	if errclass.Of(err) != errclass.Permanent {
		t.Fatalf("non-unique idProperty: %v", err)
	}
	_, err = hubspot.New(&hubspot.Config{BaseURL: s.URL, AccessToken: "other", HTTP: adaptertest.HTTPConfig()}).Upsert(ctx, "k3", ada)
	if errclass.Of(err) != errclass.Permanent || !errors.As(err, &pe) || pe.Status != 401 {
		t.Fatalf("bad token: %v", err)
	}
	if _, err := c.Upsert(ctx, "", ada); !errors.Is(err, providers.ErrInvalidRequest) {
		t.Fatalf("empty key: %v", err)
	}
	if _, err := c.Upsert(ctx, "k4", map[string]string{"oncely_key": "other"}); !errors.Is(err, providers.ErrInvalidRequest) {
		t.Fatalf("reserved property: %v", err)
	}
	if n := len(s.Journal()); n != 1 {
		t.Fatalf("%d effects, want the one good upsert", n)
	}
}

// The fake's own rate limit (TEN_SECONDLY_ROLLING) answers 429 with
// Retry-After: definite, retryable, and the wait is reported.
func TestRateLimit(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	s := newFake(t, &hubspotfake.Config{Clock: clk, RateLimit: 2})
	c := newClient(s.URL, hubspot.Contacts)
	ctx := context.Background()
	for i := range 2 {
		if _, err := c.Lookup(ctx, "k"); err != nil {
			t.Fatalf("lookup %d: %v", i, err)
		}
	}
	_, err := c.Upsert(ctx, "k", ada)
	var pe *providers.ProviderError
	if errclass.Of(err) != errclass.Definite || !errors.As(err, &pe) || pe.Status != 429 || pe.RetryAfter != 10*time.Second || pe.Type != "RATE_LIMIT" {
		t.Fatalf("rate limited: %v (%+v)", err, pe)
	}
	clk.Advance(10 * time.Second)
	if _, err := c.Upsert(ctx, "k", ada); err != nil {
		t.Fatalf("after the window: %v", err)
	}
	if n := len(s.Journal()); n != 1 {
		t.Fatalf("%d effects", n)
	}
}

// A 207 that carries the input's error is a permanent failure; an answer
// about another record is not a success.
func TestOddAnswers(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, body string
		status     int
		class      errclass.Class
	}{
		{"multi-status error", `{"status":"COMPLETE","results":[],"numErrors":1,"errors":[{"status":"error","category":"VALIDATION_ERROR","message":"bad"}]}`, 207, errclass.Permanent},
		{"another record", `{"status":"COMPLETE","results":[{"id":"9","properties":{"oncely_key":"other"}}]}`, 200, errclass.Ambiguous},
		{"no results", `{"status":"COMPLETE","results":[]}`, 200, errclass.Ambiguous},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(tc.status)
				io.WriteString(w, tc.body)
			}))
			t.Cleanup(srv.Close)
			_, err := newClient(srv.URL, hubspot.Contacts).Upsert(context.Background(), "k", ada)
			if errclass.Of(err) != tc.class {
				t.Fatalf("%v: class %v, want %v", err, errclass.Of(err), tc.class)
			}
		})
	}
}
