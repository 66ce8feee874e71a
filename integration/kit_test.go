package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/clock"
	"github.com/oncely/oncely/fakes"
	"github.com/oncely/oncely/fakes/crmfake"
	"github.com/oncely/oncely/fakes/fault"
	"github.com/oncely/oncely/fakes/keyheaderfake"
	"github.com/oncely/oncely/fakes/mailfake"
	"github.com/oncely/oncely/fakes/stripefake"
	"github.com/oncely/oncely/providers"
	"github.com/oncely/oncely/providers/crm"
	"github.com/oncely/oncely/providers/keyheader"
	"github.com/oncely/oncely/providers/mail"
	"github.com/oncely/oncely/providers/stripe"
	"github.com/oncely/oncely/reconcile"
)

// Timing. The fakes, the adapters' lookups, the reconcile policies, the
// ledgers and the executors all read one fake clock per kit (a
// *clock.Fake), which only the tests move: a policy's waits advance
// it. Real time bounds nothing but hangs.
const (
	// hangGuard bounds one provider request in real time. No fault
	// depends on it: a fake that holds a request (a Delay fault) is given
	// up on by a signal (see holdTransport), so only a hang meets it,
	// never a slow machine.
	hangGuard = 2 * time.Minute
	// indexLag is the fakes' search lag, in fake time; the adapters are
	// told a bound above it.
	indexLag, indexLagBound = 2 * time.Second, 5 * time.Second
	// lease is the executors' lease, on their fake clock.
	lease = time.Minute
)

// setupPrefix marks the keys of objects a test creates to prepare an
// action (the PaymentIntent a refund refunds); the checkers ignore their
// effects.
const setupPrefix = "setup-"

// urls locates the fake providers.
type urls struct {
	Stripe, Mail, CRM, KeyHeader string
	// Extra locates the fakes of extraProviders, by name.
	Extra map[string]string `json:",omitempty"`
}

// extraProvider is a provider whose fake and adapter are set up in a file
// of its own (provider_<name>_test.go), registered in extraProviders
// from an init function.
type extraProvider struct {
	// start makes the fake on opt's clock and seed.
	start func(opt kitOptions) (http.Handler, server)
	// build makes the adapter for the fake at url, and stores it in
	// k.extra.
	build func(k *kit, opt kitOptions, url string, http providers.Config)
}

// extraProviders are the providers set up outside this file, by name.
var extraProviders = map[string]extraProvider{}

// kit is the fake providers and the tools that act on them, as one
// process sees them. A kit made by newKit owns the servers; one made by
// kitAt (in a child process) only talks to them.
type kit struct {
	urls      urls
	servers   map[string]server // by provider name
	stripe    *stripe.Client
	mail      *mail.Client
	crm       *crm.Client
	keyheader *keyheader.Client
	extra     map[string]any         // the adapters of extraProviders, by name
	tools     map[string]client.Tool // by scenario name
}

// server is what the tests use of a fake: its faults, its journal, and
// which requests it has finished handling.
type server struct {
	faults  *fault.Injector
	journal func() []fakes.Effect
	served  *served
}

// kitOptions tune a kit.
type kitOptions struct {
	seed int64
	// clock is the kit's fake time: the fakes' clock, and the reconcile
	// policies', whose waits advance it. Nil: the wall clock, for a kit
	// whose tools never reconcile (a child process's).
	clock *clock.Fake
	// blind replaces every reconciler by one that always answers "not
	// found": blind retry, the behaviour oncely exists to prevent.
	blind bool
}

// newKit starts the fakes of the given providers (every provider when
// none is named) on opt.clock and builds the tools on them. The servers
// close when t ends.
func newKit(t testing.TB, opt kitOptions, names ...string) *kit {
	t.Helper()
	if len(names) == 0 {
		names = providerNames
	}
	if opt.clock == nil {
		t.Fatal("integration: newKit needs a clock")
	}
	now := opt.clock
	k := &kit{servers: map[string]server{}}
	for _, name := range names {
		var h http.Handler
		var srv server
		switch name {
		case "stripe":
			f := stripefake.NewHandler(&stripefake.Config{Seed: opt.seed, Clock: now, SearchLag: indexLag})
			h, srv = f, server{faults: f.Faults, journal: f.Journal}
		case "mail":
			f := mailfake.NewHandler(&mailfake.Config{Seed: opt.seed, Clock: now, IndexLag: indexLag})
			h, srv = f, server{faults: f.Faults, journal: f.Journal}
		case "crm":
			f := crmfake.NewHandler(&crmfake.Config{Seed: opt.seed, Clock: now})
			h, srv = f, server{faults: f.Faults, journal: f.Journal}
		case "keyheader":
			f := keyheaderfake.NewHandler(&keyheaderfake.Config{Seed: opt.seed, Clock: now})
			h, srv = f, server{faults: f.Faults, journal: f.Journal}
		default:
			p, ok := extraProviders[name]
			if !ok {
				t.Fatalf("unknown provider %q", name)
			}
			h, srv = p.start(opt)
		}
		srv.served = newServed()
		hs := httptest.NewServer(srv.served.wrap(h))
		t.Cleanup(hs.Close)
		k.servers[name] = srv
		switch name {
		case "stripe":
			k.urls.Stripe = hs.URL
		case "mail":
			k.urls.Mail = hs.URL
		case "crm":
			k.urls.CRM = hs.URL
		case "keyheader":
			k.urls.KeyHeader = hs.URL
		default:
			if k.urls.Extra == nil {
				k.urls.Extra = map[string]string{}
			}
			k.urls.Extra[name] = hs.URL
		}
	}
	k.build(opt)
	return k
}

var providerNames = []string{"stripe", "mail", "crm", "keyheader"}

// kitAt builds the tools on fakes that run elsewhere.
func kitAt(u urls, opt kitOptions) *kit {
	k := &kit{urls: u}
	k.build(opt)
	return k
}

func (k *kit) build(opt kitOptions) {
	httpCfg := func(provider string) providers.Config {
		cfg := providers.Config{
			Timeout: hangGuard, MaxRetries: 2,
			RetryWaitMin: 5 * time.Millisecond, RetryWaitMax: 20 * time.Millisecond, MaxRetryAfter: 50 * time.Millisecond,
		}
		if srv, ok := k.servers[provider]; ok {
			cfg.HTTPClient = &http.Client{Transport: &holdTransport{base: http.DefaultTransport.(*http.Transport).Clone(), srv: srv}}
		}
		return cfg
	}
	k.stripe = stripe.New(k.urls.Stripe, &stripe.Config{APIKey: "sk_test_integration", HTTP: httpCfg("stripe"), SearchLag: indexLagBound})
	k.mail = mail.New(k.urls.Mail, &mail.Config{HTTP: httpCfg("mail"), IndexLag: indexLagBound})
	k.crm = crm.New(k.urls.CRM, &crm.Config{HTTP: httpCfg("crm")})
	k.keyheader = keyheader.New(k.urls.KeyHeader, &keyheader.Config{HTTP: httpCfg("keyheader")})
	k.extra = map[string]any{}
	for name, p := range extraProviders {
		url := k.urls.Extra[name]
		if url == "" {
			// A kit without this fake still builds its tools; they must
			// never reach the real provider.
			url = "http://" + name + ".invalid"
		}
		p.build(k, opt, url, httpCfg(name))
	}
	policy := func(a providers.Adapter) client.Reconciler {
		if opt.blind {
			return client.ReconcilerFunc(func(context.Context, client.Invocation) (client.Reconciliation, error) {
				return client.Reconciliation{Verdict: client.VerdictResendSafe}, nil
			})
		}
		if opt.clock == nil {
			return nil
		}
		// The defaults of InFlight and MaxWait (docs/concepts.md's bound rests
		// on them), on the kit's fake clock: a wait advances it. Longer
		// intervals than the defaults only make fewer lookups per pass.
		return reconcile.New(a, &reconcile.Config{Clock: opt.clock, Sleep: sleeper(opt.clock),
			InitialInterval: time.Second, MaxInterval: 5 * time.Second})
	}
	k.tools = map[string]client.Tool{}
	for _, s := range scenarios {
		k.tools[s.name] = s.tool(k, policy)
	}
}

// sleeper returns a reconcile Sleep that advances clock instead of
// waiting.
func sleeper(clock *clock.Fake) func(ctx context.Context, d time.Duration) error {
	return func(ctx context.Context, d time.Duration) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		clock.Advance(d)
		return nil
	}
}

func (k *kit) server(provider string) server {
	s, ok := k.servers[provider]
	if !ok {
		panic("integration: no server for " + provider)
	}
	return s
}

// scenario is one side-effecting adapter under test: a tool, the inputs
// of its actions, and where its effects show.
type scenario struct {
	name     string // stripe_refund
	provider string // the fake it acts on
	kind     string // the journal's effect kind
	route    string // the create route, for fault rules
	tool     func(k *kit, policy func(providers.Adapter) client.Reconciler) client.Tool
	// input is the call input of the action numbered n: free text
	// variant text, and the setup object ref (for refunds).
	input func(n int, ref, text string) json.RawMessage
	// setup, when set, prepares the action numbered n and returns the ref
	// input needs. It must be idempotent by key.
	setup func(ctx context.Context, k *kit, key string, n int) (string, error)
}

// scenarioByName returns the scenario named name.
func scenarioByName(name string) *scenario {
	for i := range scenarios {
		if scenarios[i].name == name {
			return &scenarios[i]
		}
	}
	return nil
}

var scenarios = []scenario{
	{
		name: "stripe_payment_intent", provider: "stripe", kind: fakes.KindPaymentIntent, route: "POST /v1/payment_intents",
		tool: func(k *kit, policy func(providers.Adapter) client.Reconciler) client.Tool {
			return client.Tool{
				Name:      "charge_order",
				Identity:  []client.Field{{Path: "orderId", Norm: client.Integer}},
				Validated: []client.Field{{Path: "amountCents", Norm: client.Integer}, {Path: "currency", Norm: client.String}},
				Run: func(ctx context.Context, inv client.Invocation) (client.Effect, error) {
					var in struct {
						OrderID     int64  `json:"orderId"`
						AmountCents int64  `json:"amountCents"`
						Currency    string `json:"currency"`
					}
					if err := decode(inv, &in); err != nil {
						return client.Effect{}, err
					}
					// The model's note is not sent: Stripe rejects a repeat of
					// a key with other parameters.
					pi, err := k.stripe.PaymentIntents.Create(ctx, inv.DownstreamKey, stripe.PaymentIntentParams{
						Amount: in.AmountCents, Currency: in.Currency, PaymentMethod: "pm_card_visa", Confirm: true,
						Metadata: map[string]string{"order": fmt.Sprint(in.OrderID)},
					})
					if err != nil {
						return client.Effect{}, err
					}
					return client.Effect{Summary: pi.Summary(), Ref: pi.ID}, nil
				},
				Reconciler: policy(k.stripe.PaymentIntents),
			}
		},
		input: func(n int, _, text string) json.RawMessage {
			return jsonf(`{"orderId": %d, "amountCents": %d, "currency": "eur", "note": %q}`, n, 1000+n%1000, text)
		},
	},
	{
		name: "stripe_refund", provider: "stripe", kind: fakes.KindRefund, route: "POST /v1/refunds",
		tool: func(k *kit, policy func(providers.Adapter) client.Reconciler) client.Tool {
			return client.Tool{
				Name:     "refund_payment",
				Identity: []client.Field{{Path: "paymentIntent", Norm: client.String}, {Path: "amountCents", Norm: client.Integer}},
				Run: func(ctx context.Context, inv client.Invocation) (client.Effect, error) {
					var in struct {
						PaymentIntent string `json:"paymentIntent"`
						AmountCents   int64  `json:"amountCents"`
					}
					if err := decode(inv, &in); err != nil {
						return client.Effect{}, err
					}
					re, err := k.stripe.Refunds.Create(ctx, inv.DownstreamKey, stripe.RefundParams{
						PaymentIntent: in.PaymentIntent, Amount: in.AmountCents, Reason: "requested_by_customer",
					})
					if err != nil {
						return client.Effect{}, err
					}
					return client.Effect{Summary: re.Summary(), Ref: re.ID}, nil
				},
				Reconciler: policy(k.stripe.Refunds),
			}
		},
		input: func(n int, pi, text string) json.RawMessage {
			return jsonf(`{"paymentIntent": %q, "amountCents": %d, "note": %q}`, pi, 100+n%1000, text)
		},
		setup: func(ctx context.Context, k *kit, key string, n int) (string, error) {
			pi, err := k.stripe.PaymentIntents.Create(ctx, key, stripe.PaymentIntentParams{
				Amount: 100_000, Currency: "eur", PaymentMethod: "pm_card_visa", Confirm: true,
			})
			if err != nil {
				return "", err
			}
			return pi.ID, nil
		},
	},
	{
		name: "mail_send", provider: "mail", kind: fakes.KindMessage, route: "POST /v1/messages",
		tool: func(k *kit, policy func(providers.Adapter) client.Reconciler) client.Tool {
			return client.Tool{
				Name:     "send_reply",
				Identity: []client.Field{{Path: "ticketId", Norm: client.String}, {Path: "to", Norm: client.Email}},
				Run: func(ctx context.Context, inv client.Invocation) (client.Effect, error) {
					var in struct {
						TicketID int64  `json:"ticketId"`
						To       string `json:"to"`
						Text     string `json:"text"`
					}
					if err := decode(inv, &in); err != nil {
						return client.Effect{}, err
					}
					// The model's text is sent: mail has no idempotency to
					// compare it, and the message is sent only once.
					m, err := k.mail.Send(ctx, inv.DownstreamKey, mail.Message{
						From: "support@example.com", To: in.To, Subject: fmt.Sprintf("Ticket %d", in.TicketID), Text: in.Text,
					})
					if err != nil {
						return client.Effect{}, err
					}
					return client.Effect{Summary: m.Summary(), Ref: m.ID}, nil
				},
				Reconciler: policy(k.mail),
			}
		},
		input: func(n int, _, text string) json.RawMessage {
			return jsonf(`{"ticketId": %d, "to": "customer%d@example.com", "text": %q}`, n, n, text)
		},
	},
	{
		name: "crm_upsert", provider: "crm", kind: fakes.KindContactUpsert, route: "PUT /v1/contacts/by-external-id/{id}",
		tool: func(k *kit, policy func(providers.Adapter) client.Reconciler) client.Tool {
			return client.Tool{
				Name:      "upsert_contact",
				Identity:  []client.Field{{Path: "email", Norm: client.Email}},
				Validated: []client.Field{{Path: "name", Norm: client.String}},
				Run: func(ctx context.Context, inv client.Invocation) (client.Effect, error) {
					var in struct {
						Email string `json:"email"`
						Name  string `json:"name"`
					}
					if err := decode(inv, &in); err != nil {
						return client.Effect{}, err
					}
					// The model's note is not written: a repeat of the upsert
					// must converge on the same contact.
					ct, err := k.crm.Upsert(ctx, inv.DownstreamKey, crm.ContactInput{
						Email: strings.ToLower(in.Email), Name: in.Name, Fields: map[string]string{"source": "agent"},
					})
					if err != nil {
						return client.Effect{}, err
					}
					return client.Effect{Summary: ct.Summary(), Ref: ct.ID}, nil
				},
				Reconciler: policy(k.crm),
			}
		},
		input: func(n int, _, text string) json.RawMessage {
			return jsonf(`{"email": "Lead%d@Example.com", "name": "Lead %d", "note": %q}`, n, n, text)
		},
	},
	{
		name: "keyheader_order", provider: "keyheader", kind: fakes.KindOrder, route: "POST /v1/orders",
		tool: func(k *kit, policy func(providers.Adapter) client.Reconciler) client.Tool {
			return client.Tool{
				Name:      "place_order",
				Identity:  []client.Field{{Path: "orderRef", Norm: client.String}},
				Validated: []client.Field{{Path: "sku", Norm: client.String}, {Path: "quantity", Norm: client.Integer}},
				Run: func(ctx context.Context, inv client.Invocation) (client.Effect, error) {
					var in struct {
						OrderRef string `json:"orderRef"`
						SKU      string `json:"sku"`
						Quantity int64  `json:"quantity"`
					}
					if err := decode(inv, &in); err != nil {
						return client.Effect{}, err
					}
					var order keyheaderfake.Order
					if _, err := k.keyheader.Post(ctx, inv.DownstreamKey, "/v1/orders",
						map[string]any{"sku": in.SKU, "quantity": in.Quantity, "customer": in.OrderRef}, &order); err != nil {
						return client.Effect{}, err
					}
					return client.Effect{Summary: fmt.Sprintf("order %s: %d x %s", order.ID, order.Quantity, order.SKU), Ref: order.ID}, nil
				},
				Reconciler: policy(k.keyheader),
			}
		},
		input: func(n int, _, text string) json.RawMessage {
			return jsonf(`{"orderRef": "ref-%d", "sku": "sku-%d", "quantity": %d, "note": %q}`, n, n%7, 1+n%3, text)
		},
	},
}

// decode reads a tool's input; a malformed one is a permanent failure.
func decode(inv client.Invocation, v any) error {
	if err := json.Unmarshal(inv.Input, v); err != nil {
		return client.Permanent(fmt.Errorf("input: %w", err))
	}
	return nil
}

func jsonf(format string, args ...any) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(format, args...))
}

// effectsOf returns the effects of kind whose key belongs to the action
// key (its first attempt's key, or a later attempt's key-N).
func effectsOf(journal []fakes.Effect, kind, key string) []fakes.Effect {
	var out []fakes.Effect
	for _, e := range journal {
		if e.Kind == kind && (e.Key == key || strings.HasPrefix(e.Key, key+"-")) {
			out = append(out, e)
		}
	}
	return out
}

// prepare runs an action's setup, retrying through injected faults (the
// setup create is keyed, so retries cannot duplicate it).
func prepare(ctx context.Context, k *kit, s *scenario, key string, n int) (string, error) {
	if s.setup == nil {
		return "", nil
	}
	var err error
	for i := range 20 {
		// A new key per try: a fault may have saved an error under the last.
		var ref string
		if ref, err = s.setup(ctx, k, fmt.Sprintf("%s%s-%d", setupPrefix, key, i), n); err == nil {
			return ref, nil
		}
	}
	return "", fmt.Errorf("setup %s: %w", key, err)
}
