package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	gh "github.com/google/go-github/v93/github"
	"github.com/hashicorp/go-retryablehttp"

	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/clock"
	"github.com/oncely/oncely/fakes"
	"github.com/oncely/oncely/fakes/githubfake"
	"github.com/oncely/oncely/internal/clip"
	"github.com/oncely/oncely/providers"
	"github.com/oncely/oncely/providers/crm"
	"github.com/oncely/oncely/providers/github"
	"github.com/oncely/oncely/providers/keyheader"
	"github.com/oncely/oncely/providers/mail"
	"github.com/oncely/oncely/providers/resend"
	"github.com/oncely/oncely/providers/stripe"
)

// args reads a tool's input leniently: the model may send 42 or "42".
type args map[string]any

func parseArgs(input json.RawMessage) (args, error) {
	m, err := client.ParseInput(input, 0)
	if err != nil {
		return nil, client.Permanent(err)
	}
	return args(m), nil
}

func (a args) str(name string) string {
	switch v := a[name].(type) {
	case string:
		return strings.TrimSpace(v)
	case json.Number:
		return v.String()
	}
	return ""
}

func (a args) int(name string) int64 {
	n, err := strconv.ParseFloat(a.str(name), 64)
	if err != nil {
		return 0
	}
	return int64(n)
}

// scenario is one kind of action the demo's agent performs: a tool
// through oncely, the same request from a plain retrying client, and
// where its effects show in the fakes' journals.
type scenario struct {
	label    string // in the table
	fake     string // the fake it acts on
	kinds    []string
	route    string // the create route
	tool     string
	identity []client.Field
	validate []client.Field
	// input is the model's input for action n: drift sends the identity
	// values with other JSON types; text is free text the model rephrases.
	input func(n int, pi string, text string, drift bool) json.RawMessage
	// act performs the action through an adapter with the downstream key.
	act func(ctx context.Context, k *kit, a args, key string) (client.Effect, error)
	// naive performs it as a plain HTTP request tagged with the action id.
	naive func(ctx context.Context, n *naiveClient, a args, action string) error
	// adapter is what reconciles the tool.
	adapter func(k *kit) providers.Adapter
}

// metaAction tags a naive request's effect with its action, in the
// provider's metadata; the journal shows it as metadata.action.
const metaAction = "action"

var scenarios = []*scenario{
	{
		label: "stripe payments", fake: "stripe", kinds: []string{fakes.KindPaymentIntent}, route: "POST /v1/payment_intents",
		tool:     "charge_order",
		identity: []client.Field{{Path: "orderId", Norm: client.Integer}},
		validate: []client.Field{{Path: "amountCents", Norm: client.Integer}, {Path: "currency", Norm: client.CaseFolded}},
		input: func(n int, _ string, text string, drift bool) json.RawMessage {
			if drift {
				return jsonf(`{"orderId": "%d", "amountCents": "%d", "currency": "EUR", "note": %q}`, n, 1000+n%1000, text)
			}
			return jsonf(`{"orderId": %d, "amountCents": %d, "currency": "eur", "note": %q}`, n, 1000+n%1000, text)
		},
		act: func(ctx context.Context, k *kit, a args, key string) (client.Effect, error) {
			pi, err := k.stripe.PaymentIntents.Create(ctx, key, stripe.PaymentIntentParams{
				Amount: a.int("amountCents"), Currency: strings.ToLower(a.str("currency")), PaymentMethod: "pm_card_visa", Confirm: true,
				Metadata: map[string]string{"order": a.str("orderId")},
			})
			if err != nil {
				return client.Effect{}, err
			}
			return client.Effect{Summary: pi.Summary(), Ref: pi.ID}, nil
		},
		naive: func(ctx context.Context, n *naiveClient, a args, action string) error {
			// What Stripe requires of a confirmed PaymentIntent, as the
			// adapter sends it: no redirect-based payment methods.
			return n.form(ctx, "/v1/payment_intents", url.Values{
				"amount": {a.str("amountCents")}, "currency": {strings.ToLower(a.str("currency"))}, "payment_method": {"pm_card_visa"},
				"confirm": {"true"}, "automatic_payment_methods[enabled]": {"true"}, "automatic_payment_methods[allow_redirects]": {"never"},
				"metadata[order]": {a.str("orderId")}, "metadata[" + metaAction + "]": {action},
			})
		},
		adapter: func(k *kit) providers.Adapter { return k.stripe.PaymentIntents },
	},
	{
		label: "stripe refunds", fake: "stripe", kinds: []string{fakes.KindRefund}, route: "POST /v1/refunds",
		tool:     "refund_payment",
		identity: []client.Field{{Path: "paymentIntent", Norm: client.String}, {Path: "amountCents", Norm: client.Integer}},
		input: func(n int, pi string, text string, drift bool) json.RawMessage {
			if drift {
				return jsonf(`{"paymentIntent": %q, "amountCents": "%d", "note": %q}`, pi, 100+n%1000, text)
			}
			return jsonf(`{"paymentIntent": %q, "amountCents": %d, "note": %q}`, pi, 100+n%1000, text)
		},
		act: func(ctx context.Context, k *kit, a args, key string) (client.Effect, error) {
			re, err := k.stripe.Refunds.Create(ctx, key, stripe.RefundParams{
				PaymentIntent: a.str("paymentIntent"), Amount: a.int("amountCents"), Reason: "requested_by_customer",
			})
			if err != nil {
				return client.Effect{}, err
			}
			return client.Effect{Summary: re.Summary(), Ref: re.ID}, nil
		},
		naive: func(ctx context.Context, n *naiveClient, a args, action string) error {
			return n.form(ctx, "/v1/refunds", url.Values{
				"payment_intent": {a.str("paymentIntent")}, "amount": {a.str("amountCents")},
				"reason": {"requested_by_customer"}, "metadata[" + metaAction + "]": {action},
			})
		},
		adapter: func(k *kit) providers.Adapter { return k.stripe.Refunds },
	},
	{
		label: "mail replies", fake: "mail", kinds: []string{fakes.KindMessage}, route: "POST /v1/messages",
		tool:     "send_reply",
		identity: []client.Field{{Path: "ticketId", Norm: client.String}, {Path: "to", Norm: client.Email}},
		input: func(n int, _ string, text string, drift bool) json.RawMessage {
			if drift {
				return jsonf(`{"ticketId": "%d", "to": " Customer%d@Example.com", "text": %q}`, n, n, text)
			}
			return jsonf(`{"ticketId": %d, "to": "customer%d@example.com", "text": %q}`, n, n, text)
		},
		act: func(ctx context.Context, k *kit, a args, key string) (client.Effect, error) {
			m, err := k.mail.Send(ctx, key, mail.Message{
				From: "support@example.com", To: strings.ToLower(a.str("to")), Subject: "Ticket " + a.str("ticketId"), Text: a.str("text"),
			})
			if err != nil {
				return client.Effect{}, err
			}
			return client.Effect{Summary: m.Summary(), Ref: m.ID}, nil
		},
		naive: func(ctx context.Context, n *naiveClient, a args, action string) error {
			return n.json(ctx, "/v1/messages", "", map[string]any{
				"from": "support@example.com", "to": strings.ToLower(a.str("to")), "subject": "Ticket " + a.str("ticketId"),
				"text": a.str("text"), "metadata": map[string]string{metaAction: action},
			})
		},
		adapter: func(k *kit) providers.Adapter { return k.mail },
	},
	{
		label: "crm contacts", fake: "crm", kinds: []string{fakes.KindContactUpsert, fakes.KindContactCreate}, route: "PUT /v1/contacts/by-external-id/{id}",
		tool:     "upsert_contact",
		identity: []client.Field{{Path: "email", Norm: client.Email}},
		validate: []client.Field{{Path: "name", Norm: client.Trimmed}},
		input: func(n int, _ string, text string, drift bool) json.RawMessage {
			if drift {
				return jsonf(`{"email": "LEAD%d@example.com ", "name": "Lead %d", "note": %q}`, n, n, text)
			}
			return jsonf(`{"email": "lead%d@example.com", "name": "Lead %d", "note": %q}`, n, n, text)
		},
		act: func(ctx context.Context, k *kit, a args, key string) (client.Effect, error) {
			ct, err := k.crm.Upsert(ctx, key, crm.ContactInput{
				Email: strings.ToLower(a.str("email")), Name: a.str("name"), Fields: map[string]string{"source": "agent"},
			})
			if err != nil {
				return client.Effect{}, err
			}
			return client.Effect{Summary: ct.Summary(), Ref: ct.ID}, nil
		},
		// A plain agent tool creates the contact.
		naive: func(ctx context.Context, n *naiveClient, a args, action string) error {
			return n.json(ctx, "/v1/contacts", "", map[string]any{
				"email": strings.ToLower(a.str("email")), "name": a.str("name"), "fields": map[string]string{"source": "agent", metaAction: action},
			})
		},
		adapter: func(k *kit) providers.Adapter { return k.crm },
	},
	{
		label: "orders (IETF key)", fake: "keyheader", kinds: []string{fakes.KindOrder}, route: "POST /v1/orders",
		tool:     "place_order",
		identity: []client.Field{{Path: "orderRef", Norm: client.Trimmed}},
		validate: []client.Field{{Path: "sku", Norm: client.String}, {Path: "quantity", Norm: client.Integer}},
		input: func(n int, _ string, text string, drift bool) json.RawMessage {
			if drift {
				return jsonf(`{"orderRef": " ref-%d", "sku": "sku-%d", "quantity": "%d", "note": %q}`, n, n%7, 1+n%3, text)
			}
			return jsonf(`{"orderRef": "ref-%d", "sku": "sku-%d", "quantity": %d, "note": %q}`, n, n%7, 1+n%3, text)
		},
		act: func(ctx context.Context, k *kit, a args, key string) (client.Effect, error) {
			var o struct {
				ID       string `json:"id"`
				SKU      string `json:"sku"`
				Quantity int64  `json:"quantity"`
			}
			body := map[string]any{"sku": a.str("sku"), "quantity": a.int("quantity"), "customer": a.str("orderRef")}
			if _, err := k.keyheader.Post(ctx, key, "/v1/orders", body, &o); err != nil {
				return client.Effect{}, err
			}
			return client.Effect{Summary: fmt.Sprintf("order %s: %d x %s", o.ID, o.Quantity, o.SKU), Ref: o.ID}, nil
		},
		// The API requires an Idempotency-Key; a plain client makes a new
		// one for every call of the tool.
		naive: func(ctx context.Context, n *naiveClient, a args, action string) error {
			return n.json(ctx, "/v1/orders", `"`+randomHex(16)+`"`, map[string]any{
				"sku": a.str("sku"), "quantity": a.int("quantity"), "customer": a.str("orderRef"),
				"metadata": map[string]string{metaAction: action},
			})
		},
		adapter: func(k *kit) providers.Adapter { return k.keyheader },
	},
	{
		label: "github issues", fake: "github", kinds: []string{githubfake.KindIssue}, route: "POST /repos/{owner}/{repo}/issues",
		tool:     "report_bug",
		identity: []client.Field{{Path: "ticketId", Norm: client.String}},
		input: func(n int, _ string, text string, drift bool) json.RawMessage {
			if drift {
				return jsonf(`{"ticketId": "%d", "text": %q}`, n, text)
			}
			return jsonf(`{"ticketId": %d, "text": %q}`, n, text)
		},
		act: func(ctx context.Context, k *kit, a args, key string) (client.Effect, error) {
			text := a.str("text")
			is, err := k.github.Issues.Create(ctx, key, gh.CreateIssueRequest{Title: "Bug from ticket " + a.str("ticketId"), Body: &text})
			if err != nil {
				return client.Effect{}, err
			}
			return client.Effect{Summary: is.Summary(), Ref: is.Ref()}, nil
		},
		// The naive issue carries its action as a label.
		naive: func(ctx context.Context, n *naiveClient, a args, action string) error {
			return n.json(ctx, "/repos/"+demoRepo+"/issues", "", map[string]any{
				"title": "Bug from ticket " + a.str("ticketId"), "body": a.str("text"), "labels": []string{metaAction + "=" + action},
			})
		},
		adapter: func(k *kit) providers.Adapter { return k.github.Issues },
	},
}

func jsonf(format string, a ...any) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(format, a...))
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// kit is the adapters on one set of fakes.
type kit struct {
	stripe    *stripe.Client
	mail      *mail.Client
	crm       *crm.Client
	keyheader *keyheader.Client
	resend    *resend.Client
	github    *github.Client
}

// newKit builds the adapters on the fakes; timeout bounds one request.
func newKit(set *fakeSet, conns *connTracker, clk clock.Clock, timeout time.Duration) *kit {
	hc := providers.Config{
		HTTPClient: conns.client(), Timeout: timeout, MaxRetries: 2,
		RetryWaitMin: 5 * time.Millisecond, RetryWaitMax: 20 * time.Millisecond, MaxRetryAfter: 50 * time.Millisecond,
	}
	// Stripe's lookups reckon the search lag from the workers' clock.
	stripeHTTP := hc
	stripeHTTP.Clock = clk
	api := set.servers["github"].url + "/"
	ghc, err := gh.NewClient(gh.WithURLs(&api, &api), gh.WithHTTPClient(conns.client()), gh.WithDisableRateLimitCheck())
	if err != nil {
		panic(err) // the URL is the fake's own
	}
	return &kit{
		github: github.New(ghc, "acme", "support", &github.Config{
			Clock: clk, Timeout: timeout, MaxRetries: 2, RetryWaitMin: hc.RetryWaitMin, RetryWaitMax: hc.RetryWaitMax,
			MaxRetryAfter: hc.MaxRetryAfter, SearchLag: indexLagBound,
		}),
		stripe:    stripe.New(set.servers["stripe"].url, &stripe.Config{APIKey: demoStripeKey, HTTP: stripeHTTP, SearchLag: indexLagBound}),
		mail:      mail.New(set.servers["mail"].url, &mail.Config{HTTP: hc, IndexLag: indexLagBound}),
		crm:       crm.New(set.servers["crm"].url, &crm.Config{HTTP: hc}),
		keyheader: keyheader.New(set.servers["keyheader"].url, &keyheader.Config{HTTP: hc}),
		resend:    resend.New(set.servers["resend"].url, &resend.Config{APIKey: demoResendKey, HTTP: hc}),
	}
}

const demoStripeKey = "sk_test_oncely_demo"

// demoRepo is the repository of the fake GitHub the demo opens issues in.
const demoRepo = "acme/support"

// naiveClient is what most agents use today: a retrying HTTP client
// (go-retryablehttp's defaults: connection errors, 5xx and 429 are
// retried), no idempotency key of its own, no ledger.
type naiveClient struct {
	rc   *retryablehttp.Client
	base map[string]string // by fake name
	fake string
}

func newNaiveClient(set *fakeSet, conns *connTracker, timeout time.Duration) *naiveClient {
	rc := retryablehttp.NewClient()
	rc.HTTPClient = conns.client()
	rc.HTTPClient.Timeout = timeout
	rc.RetryMax = 2
	rc.RetryWaitMin, rc.RetryWaitMax = 5*time.Millisecond, 20*time.Millisecond
	// Retry-After is honoured up to RetryWaitMax, to keep the demo short.
	rc.Backoff = func(lo, hi time.Duration, attempt int, resp *http.Response) time.Duration {
		return min(retryablehttp.DefaultBackoff(lo, hi, attempt, resp), hi)
	}
	rc.Logger = nil
	base := map[string]string{}
	for name, fs := range set.servers {
		base[name] = fs.url
	}
	return &naiveClient{rc: rc, base: base}
}

// on returns the client for one fake.
func (n *naiveClient) on(fake string) *naiveClient {
	c := *n
	c.fake = fake
	return &c
}

func (n *naiveClient) form(ctx context.Context, path string, v url.Values) error {
	return n.do(ctx, path, "", "application/x-www-form-urlencoded", []byte(v.Encode()))
}

func (n *naiveClient) json(ctx context.Context, path, key string, body any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	return n.do(ctx, path, key, "application/json", b)
}

func (n *naiveClient) do(ctx context.Context, path, key, contentType string, body []byte) error {
	req, err := retryablehttp.NewRequestWithContext(ctx, http.MethodPost, n.base[n.fake]+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", contentType)
	if n.fake == "resend" {
		req.Header.Set("Authorization", "Bearer "+demoResendKey)
	} else {
		req.Header.Set("Authorization", "Bearer "+demoStripeKey)
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := n.rc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
	_, _ = io.Copy(io.Discard, resp.Body) // the connection is reused
	switch {
	case resp.StatusCode >= 400 && resp.StatusCode < 500 && resp.StatusCode != http.StatusTooManyRequests:
		// The faults answer 429 and 5xx only: the request itself is wrong.
		return &refusal{fake: n.fake, path: path, status: resp.Status, message: errorMessage(b)}
	case resp.StatusCode >= 300:
		return fmt.Errorf("%s %s: %s", n.fake, path, resp.Status)
	}
	return nil
}

// refusal is a naive request a fake refused as invalid: a defect of the
// demo's workload, not an effect of the faults.
type refusal struct {
	fake, path, status, message string
}

func (r *refusal) Error() string {
	return fmt.Sprintf("fake %s refused POST %s: %s: %s", r.fake, r.path, r.status, r.message)
}

// errorMessage reads the message of a fake's error body
// ({"error": {"message": ..., "param": ...}}), or returns the body.
func errorMessage(body []byte) string {
	var e struct {
		Error struct{ Message, Param string }
	}
	if json.Unmarshal(body, &e) != nil || e.Error.Message == "" {
		return clip.String(oneLine(string(body)), 300)
	}
	if e.Error.Param != "" {
		return fmt.Sprintf("%s (param %s)", e.Error.Message, e.Error.Param)
	}
	return e.Error.Message
}
