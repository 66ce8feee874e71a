package stripefake

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"
)

// Stripe error types.
const (
	typeInvalidRequest = "invalid_request_error"
	typeAPI            = "api_error"
	typeCard           = "card_error"
	typeIdempotency    = "idempotency_error"
)

// docURLBase is where Stripe documents its error codes.
const docURLBase = "https://stripe.com/docs/error-codes/"

// requestLogURLBase is where Stripe's dashboard shows a test-mode request.
const requestLogURLBase = "https://dashboard.stripe.com/test/logs/"

// apiError is a Stripe error object; status is the HTTP status it is sent
// with (400 when zero). errorResponse fills DocURL from Code; serve adds
// request_log_url.
type apiError struct {
	Type          string             `json:"type"`
	Code          string             `json:"code,omitempty"`
	DeclineCode   string             `json:"decline_code,omitempty"`
	DocURL        string             `json:"doc_url,omitempty"`
	Message       string             `json:"message"`
	Param         string             `json:"param,omitempty"`
	Charge        string             `json:"charge,omitempty"`
	PaymentIntent *paymentIntentJSON `json:"payment_intent,omitempty"`
	status        int
}

func (e *apiError) httpStatus() int {
	if e.status == 0 {
		return http.StatusBadRequest
	}
	return e.status
}

func notFound(object, id, param string) *apiError {
	return &apiError{Type: typeInvalidRequest, Code: "resource_missing", Message: "No such " + object + ": '" + id + "'", Param: param, status: http.StatusNotFound}
}

// record is what every stored object shares: its id, when it was created and
// its position in creation order (created is in whole seconds, so objects
// created in the same second are ordered by seq).
type record struct {
	id  string
	seq int64
	at  time.Time
}

func (r *record) recordOf() *record { return r }

type paymentIntent struct {
	record
	amount, amountReceived    int64
	amountCapturable          int64
	currency, status          string
	captureMethod             string
	description               string
	paymentMethod             string
	paymentMethodTypes        []string
	receiptEmail              string
	setupFutureUsage          string
	statementDescriptorSuffix string
	latestCharge              string
	clientSecret              string
	cancellationReason        string
	canceledAt                *int64
	apm                       *automaticPaymentMethods
	lastError                 *apiError
	metadata                  map[string]string
}

type automaticPaymentMethods struct {
	Enabled        bool   `json:"enabled"`
	AllowRedirects string `json:"allow_redirects,omitempty"`
}

type charge struct {
	record
	amount, amountRefunded int64
	amountCaptured         int64
	currency, status       string
	description            string
	paymentIntent          string
	paymentMethod          string
	failureCode            string
	failureMessage         string
	balanceTransaction     string
	metadata               map[string]string
}

type refund struct {
	record
	amount             int64
	currency           string
	charge             string
	paymentIntent      string
	reason             string
	balanceTransaction string
	metadata           map[string]string
}

type paymentIntentJSON struct {
	ID                        string                   `json:"id"`
	Object                    string                   `json:"object"`
	Amount                    int64                    `json:"amount"`
	AmountCapturable          int64                    `json:"amount_capturable"`
	AmountReceived            int64                    `json:"amount_received"`
	AutomaticPaymentMethods   *automaticPaymentMethods `json:"automatic_payment_methods"`
	CanceledAt                *int64                   `json:"canceled_at"`
	CancellationReason        *string                  `json:"cancellation_reason"`
	CaptureMethod             string                   `json:"capture_method"`
	ClientSecret              string                   `json:"client_secret"`
	ConfirmationMethod        string                   `json:"confirmation_method"`
	Created                   int64                    `json:"created"`
	Currency                  string                   `json:"currency"`
	Customer                  *string                  `json:"customer"`
	Description               *string                  `json:"description"`
	LastPaymentError          *apiError                `json:"last_payment_error"`
	LatestCharge              any                      `json:"latest_charge"`
	Livemode                  bool                     `json:"livemode"`
	Metadata                  map[string]string        `json:"metadata"`
	PaymentMethod             any                      `json:"payment_method"`
	PaymentMethodTypes        []string                 `json:"payment_method_types"`
	ReceiptEmail              *string                  `json:"receipt_email"`
	SetupFutureUsage          *string                  `json:"setup_future_usage"`
	StatementDescriptorSuffix *string                  `json:"statement_descriptor_suffix"`
	Status                    string                   `json:"status"`
}

type chargeJSON struct {
	ID                 string            `json:"id"`
	Object             string            `json:"object"`
	Amount             int64             `json:"amount"`
	AmountCaptured     int64             `json:"amount_captured"`
	AmountRefunded     int64             `json:"amount_refunded"`
	BalanceTransaction any               `json:"balance_transaction"`
	Captured           bool              `json:"captured"`
	Created            int64             `json:"created"`
	Currency           string            `json:"currency"`
	Customer           *string           `json:"customer"`
	Description        *string           `json:"description"`
	FailureCode        *string           `json:"failure_code"`
	FailureMessage     *string           `json:"failure_message"`
	Livemode           bool              `json:"livemode"`
	Metadata           map[string]string `json:"metadata"`
	Paid               bool              `json:"paid"`
	PaymentIntent      any               `json:"payment_intent"`
	PaymentMethod      *string           `json:"payment_method"`
	Refunded           bool              `json:"refunded"`
	Status             string            `json:"status"`
}

type refundJSON struct {
	ID                 string            `json:"id"`
	Object             string            `json:"object"`
	Amount             int64             `json:"amount"`
	BalanceTransaction any               `json:"balance_transaction"`
	Charge             any               `json:"charge"`
	Created            int64             `json:"created"`
	Currency           string            `json:"currency"`
	Metadata           map[string]string `json:"metadata"`
	PaymentIntent      any               `json:"payment_intent"`
	Reason             *string           `json:"reason"`
	Status             string            `json:"status"`
}

// balanceTransactionJSON is the ledger entry of a captured charge or a
// refund; the fake charges no fees.
type balanceTransactionJSON struct {
	ID       string `json:"id"`
	Object   string `json:"object"`
	Amount   int64  `json:"amount"`
	Created  int64  `json:"created"`
	Currency string `json:"currency"`
	Fee      int64  `json:"fee"`
	Net      int64  `json:"net"`
	Source   string `json:"source"`
	Status   string `json:"status"`
	Type     string `json:"type"`
}

// paymentMethodJSON is a test payment method; the fake knows only its id,
// so the card is always a Visa ending in 4242.
type paymentMethodJSON struct {
	ID       string            `json:"id"`
	Object   string            `json:"object"`
	Card     cardJSON          `json:"card"`
	Customer *string           `json:"customer"`
	Livemode bool              `json:"livemode"`
	Metadata map[string]string `json:"metadata"`
	Type     string            `json:"type"`
}

type cardJSON struct {
	Brand string `json:"brand"`
	Last4 string `json:"last4"`
}

// listJSON is a list or search_result page.
type listJSON struct {
	Object   string  `json:"object"`
	Data     []any   `json:"data"`
	HasMore  bool    `json:"has_more"`
	NextPage *string `json:"next_page,omitempty"`
	URL      string  `json:"url"`
}

// expandable lists, per object type, the fields expand[] may name and the
// type of object each expands to. A customer is never set in the fake, so
// it expands to null.
var expandable = map[string]map[string]string{
	"payment_intent":      {"customer": "customer", "latest_charge": "charge", "payment_method": "payment_method"},
	"charge":              {"balance_transaction": "balance_transaction", "customer": "customer", "payment_intent": "payment_intent"},
	"refund":              {"balance_transaction": "balance_transaction", "charge": "charge", "payment_intent": "payment_intent"},
	"payment_method":      {"customer": "customer"},
	"balance_transaction": {},
	"customer":            {},
}

// maxExpandDepth is how many levels one expand[] path may name, as in
// Stripe.
const maxExpandDepth = 4

// expansion is a tree of requested expansions: field → its own expansions.
type expansion map[string]expansion

// expansions validates expand[] for an object type and returns the tree;
// inList requires the "data." prefix of list and search endpoints.
func expansions(p params, objectType string, inList bool) (expansion, *apiError) {
	out := expansion{}
	for _, e := range p.lists["expand"] {
		path := e
		if inList {
			var ok bool
			if path, ok = strings.CutPrefix(e, "data."); !ok {
				return nil, cannotExpand(e)
			}
		}
		fields := strings.Split(path, ".")
		if len(fields) > maxExpandDepth {
			return nil, &apiError{Type: typeInvalidRequest, Message: fmt.Sprintf("You cannot expand more than %d levels of a property. Property: %s", maxExpandDepth, e), Param: "expand"}
		}
		typ, node := objectType, out
		for _, f := range fields {
			next, ok := expandable[typ][f]
			if !ok {
				return nil, cannotExpand(e)
			}
			if node[f] == nil {
				node[f] = expansion{}
			}
			typ, node = next, node[f]
		}
	}
	return out, nil
}

func cannotExpand(e string) *apiError {
	return &apiError{Type: typeInvalidRequest, Message: "This property cannot be expanded (" + e + ").", Param: "expand"}
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func cloneMeta(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return maps.Clone(m)
}

// The render functions run with the handler's lock held.

func (h *Handler) renderPaymentIntent(pi *paymentIntent, ex expansion) *paymentIntentJSON {
	out := &paymentIntentJSON{
		ID: pi.id, Object: "payment_intent", Amount: pi.amount, AmountCapturable: pi.amountCapturable, AmountReceived: pi.amountReceived,
		AutomaticPaymentMethods: pi.apm, CanceledAt: pi.canceledAt, CancellationReason: nullable(pi.cancellationReason),
		CaptureMethod: pi.captureMethod, ClientSecret: pi.clientSecret,
		ConfirmationMethod: "automatic", Created: pi.at.Unix(), Currency: pi.currency,
		Description: nullable(pi.description), LastPaymentError: pi.lastError, Metadata: cloneMeta(pi.metadata),
		PaymentMethodTypes: slices.Clone(pi.paymentMethodTypes), ReceiptEmail: nullable(pi.receiptEmail),
		SetupFutureUsage: nullable(pi.setupFutureUsage), StatementDescriptorSuffix: nullable(pi.statementDescriptorSuffix),
		Status: pi.status,
	}
	if pi.latestCharge != "" {
		out.LatestCharge = pi.latestCharge
		if sub, ok := ex["latest_charge"]; ok {
			out.LatestCharge = h.renderCharge(h.charges[pi.latestCharge], sub)
		}
	}
	if pi.paymentMethod != "" {
		out.PaymentMethod = pi.paymentMethod
		if _, ok := ex["payment_method"]; ok {
			out.PaymentMethod = &paymentMethodJSON{ID: pi.paymentMethod, Object: "payment_method", Card: cardJSON{Brand: "visa", Last4: "4242"}, Metadata: map[string]string{}, Type: "card"}
		}
	}
	return out
}

func (h *Handler) renderCharge(ch *charge, ex expansion) *chargeJSON {
	succeeded := ch.status == "succeeded"
	out := &chargeJSON{
		ID: ch.id, Object: "charge", Amount: ch.amount, AmountCaptured: ch.amountCaptured, AmountRefunded: ch.amountRefunded,
		Captured: succeeded && ch.amountCaptured > 0, Created: ch.at.Unix(), Currency: ch.currency, Description: nullable(ch.description),
		FailureCode: nullable(ch.failureCode), FailureMessage: nullable(ch.failureMessage), Metadata: cloneMeta(ch.metadata),
		Paid: succeeded, PaymentMethod: nullable(ch.paymentMethod), Refunded: succeeded && ch.amountRefunded == ch.amount,
		Status: ch.status,
	}
	if ch.balanceTransaction != "" {
		out.BalanceTransaction = ch.balanceTransaction
		if _, ok := ex["balance_transaction"]; ok {
			out.BalanceTransaction = balanceTransaction(ch.balanceTransaction, "charge", ch.id, ch.amountCaptured, ch.currency, ch.at)
		}
	}
	if ch.paymentIntent != "" {
		out.PaymentIntent = ch.paymentIntent
		if sub, ok := ex["payment_intent"]; ok {
			out.PaymentIntent = h.renderPaymentIntent(h.paymentIntents[ch.paymentIntent], sub)
		}
	}
	return out
}

func (h *Handler) renderRefund(re *refund, ex expansion) *refundJSON {
	out := &refundJSON{
		ID: re.id, Object: "refund", Amount: re.amount, BalanceTransaction: re.balanceTransaction, Charge: re.charge, Created: re.at.Unix(),
		Currency: re.currency, Metadata: cloneMeta(re.metadata), Reason: nullable(re.reason), Status: "succeeded",
	}
	if _, ok := ex["balance_transaction"]; ok {
		out.BalanceTransaction = balanceTransaction(re.balanceTransaction, "refund", re.id, -re.amount, re.currency, re.at)
	}
	if sub, ok := ex["charge"]; ok {
		out.Charge = h.renderCharge(h.charges[re.charge], sub)
	}
	if re.paymentIntent != "" {
		out.PaymentIntent = re.paymentIntent
		if sub, ok := ex["payment_intent"]; ok {
			out.PaymentIntent = h.renderPaymentIntent(h.paymentIntents[re.paymentIntent], sub)
		}
	}
	return out
}

// balanceTransactionID names the balance transaction of a charge or a
// refund after its source: it draws nothing from the seeded ids, so every
// object id a seed gives is independent of balance transactions.
func balanceTransactionID(sourceID string) string {
	_, rest, _ := strings.Cut(sourceID, "_")
	return "txn_" + rest
}

func balanceTransaction(id, typ, source string, amount int64, cur string, at time.Time) *balanceTransactionJSON {
	return &balanceTransactionJSON{ID: id, Object: "balance_transaction", Amount: amount, Created: at.Unix(), Currency: cur, Net: amount, Source: source, Status: "available", Type: typ}
}
