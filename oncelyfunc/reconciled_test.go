package oncelyfunc_test

import (
	"context"
	"errors"
	"testing"

	gh "github.com/google/go-github/v93/github"

	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/fakes"
	"github.com/oncely/oncely/fakes/githubfake"
	"github.com/oncely/oncely/fakes/hubspotfake"
	"github.com/oncely/oncely/fakes/resendfake"
	"github.com/oncely/oncely/fakes/slackfake"
	"github.com/oncely/oncely/fakes/stripefake"
	"github.com/oncely/oncely/ledger/ledgermem"
	"github.com/oncely/oncely/oncelyfunc"
	"github.com/oncely/oncely/providers/github"
	"github.com/oncely/oncely/providers/hubspot"
	"github.com/oncely/oncely/providers/resend"
	"github.com/oncely/oncely/providers/slack"
	"github.com/oncely/oncely/providers/stripe"
	"github.com/oncely/oncely/reconcile"
)

// created is a function's output: the provider's object id.
type created struct {
	ID string `json:"id"`
}

// adapterCase creates one object at a provider's fake with a downstream
// key; reconciler asks the provider whether it exists.
type adapterCase struct {
	name       string
	reconciler client.Reconciler
	create     func(ctx context.Context, key string) (string, error)
	journal    func() []fakes.Effect
	close      func()
}

func adapterCases(t *testing.T) []adapterCase {
	t.Helper()
	st := stripefake.NewServer(&stripefake.Config{Seed: 1})
	stc := stripe.New(st.URL, &stripe.Config{APIKey: "sk_test_example"})
	rs := resendfake.NewServer(&resendfake.Config{Seed: 1})
	rsc := resend.New(rs.URL, &resend.Config{APIKey: "re_123"})
	gs := githubfake.NewServer(nil)
	api := gs.URL + "/"
	ghc, err := gh.NewClient(gh.WithURLs(&api, &api), gh.WithAuthToken("ghp_example"))
	if err != nil {
		t.Fatal(err)
	}
	issues := github.New(ghc, "acme", "widgets", nil).Issues
	hs := hubspotfake.NewServer(nil)
	contacts := hubspot.New(&hubspot.Config{BaseURL: hs.URL, AccessToken: "pat-...", ObjectType: hubspot.Contacts})
	ss := slackfake.NewServer(nil)
	channel, err := slack.New(&slack.Config{APIURL: ss.URL + "/api/", Token: "xoxb-...", Channel: "C0000000001"})
	if err != nil {
		t.Fatal(err)
	}
	return []adapterCase{
		{"stripe", reconcile.New(stc.PaymentIntents, nil), func(ctx context.Context, key string) (string, error) {
			pi, err := stc.PaymentIntents.Create(ctx, key, stripe.PaymentIntentParams{Amount: 990, Currency: "usd"})
			if err != nil {
				return "", err
			}
			return pi.ID, nil
		}, st.Journal, st.Close},
		{"resend", reconcile.New(rsc, nil), func(ctx context.Context, key string) (string, error) {
			s, err := rsc.Send(ctx, key, resend.Email{From: "Acme <orders@acme.test>", To: []string{"ada@example.com"}, Subject: "Order 7", Text: "Thanks."})
			if err != nil {
				return "", err
			}
			return s.ID, nil
		}, rs.Journal, rs.Close},
		{"github", reconcile.New(issues, nil), func(ctx context.Context, key string) (string, error) {
			is, err := issues.Create(ctx, key, gh.CreateIssueRequest{Title: "Bug from ticket 7"})
			if err != nil {
				return "", err
			}
			return is.Ref(), nil
		}, gs.Journal, gs.Close},
		{"hubspot", reconcile.New(contacts, nil), func(ctx context.Context, key string) (string, error) {
			rec, err := contacts.Upsert(ctx, key, map[string]string{"email": "ada@example.com"})
			if err != nil {
				return "", err
			}
			return rec.ID, nil
		}, hs.Journal, hs.Close},
		{"slack", reconcile.New(channel, nil), func(ctx context.Context, key string) (string, error) {
			msg, err := channel.Post(ctx, key, "billing v42 is live")
			if err != nil {
				return "", err
			}
			return msg.Ref(), nil
		}, ss.Journal, ss.Close},
	}
}

// The function creates the object and its answer is lost (an ambiguous
// error after the create): the executor reconciles with the provider,
// whose lookup finds the object. The caller gets a Done that says the
// output is unknown (Known false, the zero value) and carries the
// provider's object id and the lookup's summary; one object exists.
func TestReconciledReferenceReachesCaller(t *testing.T) {
	t.Parallel()
	for _, tc := range adapterCases(t) {
		t.Run(tc.name, func(t *testing.T) {
			defer tc.close()
			exec := client.New(ledgermem.New(nil), nil)
			var made []string
			do, err := oncelyfunc.WrapDone(exec, "create_"+tc.name, oncelyfunc.Options[created]{
				Identity:   []oncelyfunc.Key{{Expr: "orderId"}},
				Reconciler: tc.reconciler,
				Ref:        func(c created) string { return c.ID },
			}, func(ctx context.Context, in order) (created, error) {
				id, err := tc.create(ctx, oncelyfunc.DownstreamKey(ctx))
				if err != nil {
					return created{}, err
				}
				made = append(made, id)
				if len(made) == 1 {
					return created{}, client.Ambiguous(errors.New("connection dropped after the create"))
				}
				return created{ID: id}, nil
			})
			if err != nil {
				t.Fatal(err)
			}
			d, res, err := do(context.Background(), order{OrderID: "7"})
			if err != nil {
				t.Fatalf("%v (%v)", err, res.Outcome)
			}
			if n := len(tc.journal()); n != 1 {
				t.Fatalf("objects created = %d, want 1", n)
			}
			if d.Ref == "" || d.Ref != made[0] {
				t.Fatalf("Done %+v, want the reference %s", d, made[0])
			}
			if d.Known || d.Value != (created{}) || !d.Replayed || d.Summary == "" || len(made) != 1 {
				t.Fatalf("Done %+v after %d runs: want one run, and unknown, replayed, the zero value, a summary", d, len(made))
			}
			t.Logf("%s: known %v, ref %s, summary %q", tc.name, d.Known, d.Ref, d.Summary)
		})
	}
}
