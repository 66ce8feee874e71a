package stripefake

import (
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

// apiError is a Stripe error object; status is the HTTP status it is sent
// with (400 when zero).
type apiError struct {
	Type          string             `json:"type"`
	Code          string             `json:"code,omitempty"`
	DeclineCode   string             `json:"decline_code,omitempty"`
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
	amount, amountReceived int64
	currency, status       string
	description            string
	paymentMethod          string
	paymentMethodTypes     []string
	receiptEmail           string
	latestCharge           string
	clientSecret           string
	apm                    *automaticPaymentMethods
	lastError              *apiError
	metadata               map[string]string
}

type automaticPaymentMethods struct {
	Enabled        bool   `json:"enabled"`
	AllowRedirects string `json:"allow_redirects,omitempty"`
}

type charge struct {
	record
	amount, amountRefunded int64
	currency, status       string
	description            string
	paymentIntent          string
	paymentMethod          string
	failureCode            string
	failureMessage         string
	metadata               map[string]string
}

type refund struct {
	record
	amount        int64
	currency      string
	charge        string
	paymentIntent string
	reason        string
	metadata      map[string]string
}

type paymentIntentJSON struct {
	ID                      string                   `json:"id"`
	Object                  string                   `json:"object"`
	Amount                  int64                    `json:"amount"`
	AmountCapturable        int64                    `json:"amount_capturable"`
	AmountReceived          int64                    `json:"amount_received"`
	AutomaticPaymentMethods *automaticPaymentMethods `json:"automatic_payment_methods"`
	CanceledAt              *int64                   `json:"canceled_at"`
	CaptureMethod           string                   `json:"capture_method"`
	ClientSecret            string                   `json:"client_secret"`
	ConfirmationMethod      string                   `json:"confirmation_method"`
	Created                 int64                    `json:"created"`
	Currency                string                   `json:"currency"`
	Customer                *string                  `json:"customer"`
	Description             *string                  `json:"description"`
	LastPaymentError        *apiError                `json:"last_payment_error"`
	LatestCharge            any                      `json:"latest_charge"`
	Livemode                bool                     `json:"livemode"`
	Metadata                map[string]string        `json:"metadata"`
	PaymentMethod           *string                  `json:"payment_method"`
	PaymentMethodTypes      []string                 `json:"payment_method_types"`
	ReceiptEmail            *string                  `json:"receipt_email"`
	Status                  string                   `json:"status"`
}

type chargeJSON struct {
	ID                 string            `json:"id"`
	Object             string            `json:"object"`
	Amount             int64             `json:"amount"`
	AmountCaptured     int64             `json:"amount_captured"`
	AmountRefunded     int64             `json:"amount_refunded"`
	BalanceTransaction *string           `json:"balance_transaction"`
	Captured           bool              `json:"captured"`
	Created            int64             `json:"created"`
	Currency           string            `json:"currency"`
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
	ID            string            `json:"id"`
	Object        string            `json:"object"`
	Amount        int64             `json:"amount"`
	Charge        any               `json:"charge"`
	Created       int64             `json:"created"`
	Currency      string            `json:"currency"`
	Metadata      map[string]string `json:"metadata"`
	PaymentIntent any               `json:"payment_intent"`
	Reason        *string           `json:"reason"`
	Status        string            `json:"status"`
}

// listJSON is a list or search_result page.
type listJSON struct {
	Object   string  `json:"object"`
	Data     []any   `json:"data"`
	HasMore  bool    `json:"has_more"`
	NextPage *string `json:"next_page,omitempty"`
	URL      string  `json:"url"`
}

// expandable lists, per object type, the fields expand[] may name.
var expandable = map[string][]string{
	"payment_intent": {"latest_charge"},
	"charge":         {"payment_intent"},
	"refund":         {"charge", "payment_intent"},
}

// expansions validates expand[] for an object type; inList accepts the
// "data." prefix of list and search endpoints.
func expansions(p params, objectType string, inList bool) (map[string]bool, *apiError) {
	out := map[string]bool{}
	for _, e := range p.lists["expand"] {
		field := e
		if inList {
			var ok bool
			if field, ok = strings.CutPrefix(e, "data."); !ok {
				return nil, &apiError{Type: typeInvalidRequest, Message: "This property cannot be expanded (" + e + ").", Param: "expand"}
			}
		}
		if !slices.Contains(expandable[objectType], field) {
			return nil, &apiError{Type: typeInvalidRequest, Message: "This property cannot be expanded (" + e + ").", Param: "expand"}
		}
		out[field] = true
	}
	return out, nil
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

func (h *Handler) renderPaymentIntent(pi *paymentIntent, expand map[string]bool) *paymentIntentJSON {
	out := &paymentIntentJSON{
		ID: pi.id, Object: "payment_intent", Amount: pi.amount, AmountReceived: pi.amountReceived,
		AutomaticPaymentMethods: pi.apm, CaptureMethod: "automatic_async", ClientSecret: pi.clientSecret,
		ConfirmationMethod: "automatic", Created: pi.at.Unix(), Currency: pi.currency,
		Description: nullable(pi.description), LastPaymentError: pi.lastError, Metadata: cloneMeta(pi.metadata),
		PaymentMethod: nullable(pi.paymentMethod), PaymentMethodTypes: slices.Clone(pi.paymentMethodTypes),
		ReceiptEmail: nullable(pi.receiptEmail), Status: pi.status,
	}
	if pi.latestCharge != "" {
		out.LatestCharge = pi.latestCharge
		if expand["latest_charge"] {
			out.LatestCharge = h.renderCharge(h.charges[pi.latestCharge], nil)
		}
	}
	return out
}

func (h *Handler) renderCharge(ch *charge, expand map[string]bool) *chargeJSON {
	succeeded := ch.status == "succeeded"
	out := &chargeJSON{
		ID: ch.id, Object: "charge", Amount: ch.amount, AmountRefunded: ch.amountRefunded,
		Captured: succeeded, Created: ch.at.Unix(), Currency: ch.currency, Description: nullable(ch.description),
		FailureCode: nullable(ch.failureCode), FailureMessage: nullable(ch.failureMessage), Metadata: cloneMeta(ch.metadata),
		Paid: succeeded, PaymentMethod: nullable(ch.paymentMethod), Refunded: succeeded && ch.amountRefunded == ch.amount,
		Status: ch.status,
	}
	if succeeded {
		out.AmountCaptured = ch.amount
	}
	if ch.paymentIntent != "" {
		out.PaymentIntent = ch.paymentIntent
		if expand["payment_intent"] {
			out.PaymentIntent = h.renderPaymentIntent(h.paymentIntents[ch.paymentIntent], nil)
		}
	}
	return out
}

func (h *Handler) renderRefund(re *refund, expand map[string]bool) *refundJSON {
	out := &refundJSON{
		ID: re.id, Object: "refund", Amount: re.amount, Charge: re.charge, Created: re.at.Unix(),
		Currency: re.currency, Metadata: cloneMeta(re.metadata), Reason: nullable(re.reason), Status: "succeeded",
	}
	if expand["charge"] {
		out.Charge = h.renderCharge(h.charges[re.charge], nil)
	}
	if re.paymentIntent != "" {
		out.PaymentIntent = re.paymentIntent
		if expand["payment_intent"] {
			out.PaymentIntent = h.renderPaymentIntent(h.paymentIntents[re.paymentIntent], nil)
		}
	}
	return out
}
