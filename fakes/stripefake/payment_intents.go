package stripefake

import (
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/oncely/oncely/fakes"
	"github.com/oncely/oncely/fakes/fault"
)

var (
	createPaymentIntentSpec = spec{
		"shipping": notModeled, "payment_method_data": notModeled, "payment_method_options": notModeled,
		"amount": scalar, "currency": scalar, "confirm": scalar, "payment_method": scalar,
		"payment_method_types": list, "automatic_payment_methods": object, "description": scalar,
		"receipt_email": scalar, "metadata": hash, "expand": list, "capture_method": scalar,
		"statement_descriptor_suffix": scalar, "setup_future_usage": scalar, "off_session": scalar,
		"return_url": scalar,
	}
	updatePaymentIntentSpec = spec{
		"shipping": notModeled, "payment_method_data": notModeled, "payment_method_options": notModeled,
		"amount": scalar, "currency": scalar, "payment_method": scalar, "payment_method_types": list,
		"description": scalar, "receipt_email": scalar, "metadata": hash, "expand": list,
		"capture_method": scalar, "statement_descriptor_suffix": scalar, "setup_future_usage": scalar,
	}
	confirmPaymentIntentSpec = spec{
		"shipping": notModeled, "payment_method_data": notModeled, "payment_method_options": notModeled,
		"payment_method": scalar, "return_url": scalar, "off_session": scalar, "setup_future_usage": scalar,
		"capture_method": scalar, "receipt_email": scalar, "payment_method_types": list, "expand": list,
	}
	cancelPaymentIntentSpec  = spec{"cancellation_reason": scalar, "expand": list}
	capturePaymentIntentSpec = spec{
		"amount_to_capture": scalar, "metadata": hash, "statement_descriptor_suffix": scalar, "expand": list,
	}
)

// Statuses a PaymentIntent may be canceled in, and the ones whose amount,
// currency and payment method may still change.
var (
	cancelable = []string{"requires_payment_method", "requires_capture", "requires_confirmation", "requires_action", "processing"}
	updatable  = []string{"requires_payment_method", "requires_confirmation", "requires_action"}
)

// returnURLRequired is Stripe's answer to a confirmation that may redirect
// but has nowhere to return to.
const returnURLRequired = "This PaymentIntent is configured to accept payment methods enabled in your Dashboard. " +
	"Because some of these payment methods might redirect your customer off of your page, you must provide a `return_url`. " +
	"If you don't want to accept redirect-based payment methods, set `automatic_payment_methods[enabled]` to `true` and " +
	"`automatic_payment_methods[allow_redirects]` to `never` when creating Setup Intents and Payment Intents."

// oneOf checks that an optional parameter is one of allowed.
func oneOf(p params, name string, allowed ...string) *apiError {
	if v, set := p.scalars[name]; set && !slices.Contains(allowed, v) {
		return &apiError{Type: typeInvalidRequest, Message: fmt.Sprintf("Invalid %s: must be one of %s", name, strings.Join(allowed, ", ")), Param: name}
	}
	return nil
}

// paymentIntentOptions validates the options that create, update and
// confirm share, when present.
func paymentIntentOptions(p params) *apiError {
	checks := []*apiError{
		oneOf(p, "capture_method", "automatic", "automatic_async", "manual"),
		oneOf(p, "setup_future_usage", "on_session", "off_session"),
		oneOf(p, "off_session", "true", "false", "one_off", "recurring"),
	}
	if s := p.str("statement_descriptor_suffix"); len(s) > 22 {
		checks = append(checks, &apiError{Type: typeInvalidRequest, Message: "The statement descriptor suffix must be at most 22 characters long.", Param: "statement_descriptor_suffix"})
	}
	if r := p.str("return_url"); r != "" {
		if u, err := url.Parse(r); err != nil || u.Scheme == "" {
			checks = append(checks, &apiError{Type: typeInvalidRequest, Message: "Not a valid URL", Param: "return_url"})
		}
	}
	if pm := p.str("payment_method"); pm != "" && !strings.HasPrefix(pm, "pm_") {
		checks = append(checks, notFound("PaymentMethod", pm, "payment_method"))
	}
	for _, e := range checks {
		if e != nil {
			return e
		}
	}
	return nil
}

// amountAndCurrency reads the required amount and currency of a payment
// intent or a charge, within Stripe's charge limits.
func amountAndCurrency(p params) (int64, string, *apiError) {
	amount, present, e := p.integer("amount", 1)
	if e == nil && !present {
		_, e = p.required("amount")
	}
	if e != nil {
		return 0, "", e
	}
	cur, e := p.required("currency")
	if e == nil {
		cur, e = currency(cur)
	}
	if e == nil {
		e = chargeable(amount, cur)
	}
	return amount, cur, e
}

// paymentMethods reads automatic_payment_methods and payment_method_types,
// of which Stripe takes one. With neither, automatic payment methods are
// on and may redirect, as in Stripe's API versions since 2023-08-16.
func paymentMethods(p params) (*automaticPaymentMethods, []string, *apiError) {
	fields, hasAPM := p.hashes["automatic_payment_methods"]
	types := slices.Clone(p.lists["payment_method_types"])
	switch {
	case hasAPM && len(types) > 0:
		return nil, nil, &apiError{Type: typeInvalidRequest, Message: "You may only specify one of these parameters: automatic_payment_methods, payment_method_types.", Param: "automatic_payment_methods"}
	case len(types) > 0:
		return nil, types, nil
	case !hasAPM:
		return &automaticPaymentMethods{Enabled: true, AllowRedirects: "always"}, []string{"card"}, nil
	}
	apm := &automaticPaymentMethods{AllowRedirects: fields["allow_redirects"]}
	if _, has := fields["enabled"]; !has {
		return nil, nil, &apiError{Type: typeInvalidRequest, Code: "parameter_missing", Message: "Missing required param: automatic_payment_methods[enabled].", Param: "automatic_payment_methods[enabled]"}
	}
	var e *apiError
	if apm.Enabled, e = parseBool("automatic_payment_methods[enabled]", fields["enabled"]); e != nil {
		return nil, nil, e
	}
	if r := apm.AllowRedirects; r != "" && r != "always" && r != "never" {
		return nil, nil, &apiError{Type: typeInvalidRequest, Message: "Invalid automatic_payment_methods[allow_redirects]: must be one of always, never", Param: "automatic_payment_methods[allow_redirects]"}
	}
	if apm.Enabled && apm.AllowRedirects == "" {
		apm.AllowRedirects = "always"
	}
	return apm, []string{"card"}, nil
}

func (h *Handler) createPaymentIntent(c *call) (fault.Response, bool) {
	p := c.p
	amount, cur, e := amountAndCurrency(p)
	if e == nil {
		e = paymentIntentOptions(p)
	}
	if e != nil {
		return invalid(e)
	}
	md, e := p.metadata()
	if e != nil {
		return invalid(e)
	}
	confirm, e := p.boolean("confirm")
	if e != nil {
		return invalid(e)
	}
	if p.has("off_session") && !confirm {
		return invalid(&apiError{Type: typeInvalidRequest, Message: "off_session can only be used when confirm is true.", Param: "off_session"})
	}
	ex, e := expansions(p, "payment_intent", false)
	if e != nil {
		return invalid(e)
	}
	apm, types, e := paymentMethods(p)
	if e != nil {
		return invalid(e)
	}
	pi := &paymentIntent{
		record: h.newRecord("pi_", c.now), amount: amount, currency: cur, description: p.str("description"),
		paymentMethod: p.str("payment_method"), paymentMethodTypes: types, receiptEmail: p.str("receipt_email"), apm: apm, metadata: md,
		captureMethod: p.str("capture_method"), setupFutureUsage: p.str("setup_future_usage"),
		statementDescriptorSuffix: p.str("statement_descriptor_suffix"), status: "requires_payment_method",
	}
	if pi.captureMethod == "" {
		pi.captureMethod = "automatic_async"
	}
	if confirm {
		if e := confirmable(pi, p.str("return_url")); e != nil {
			return invalid(e)
		}
	}
	pi.clientSecret = pi.id + "_secret_" + h.ids.New("", 25)
	if pi.paymentMethod != "" {
		pi.status = "requires_confirmation"
	}
	h.paymentIntents[pi.id] = pi
	h.piOrder = append(h.piOrder, pi)
	if confirm {
		if decline := h.chargeIntent(pi, c.now); decline != nil {
			return errorResponse(decline), true
		}
	}
	h.journal.Append(fakes.Effect{
		Kind: fakes.KindPaymentIntent, ID: pi.id, Key: c.key, At: c.now,
		Params: effectParams(md, "amount", strconv.FormatInt(amount, 10), "currency", cur, "status", pi.status),
	})
	return ok(h.renderPaymentIntent(pi, ex))
}

// confirmable checks that pi can be confirmed now: it has a payment method,
// and a return URL when its automatic payment methods may redirect.
func confirmable(pi *paymentIntent, returnURL string) *apiError {
	if pi.paymentMethod == "" {
		return &apiError{Type: typeInvalidRequest, Code: "payment_intent_unexpected_state", Message: "You cannot confirm this PaymentIntent because it's missing a payment method. Pass payment_method to confirm it."}
	}
	if pi.apm != nil && pi.apm.Enabled && pi.apm.AllowRedirects != "never" && returnURL == "" {
		return &apiError{Type: typeInvalidRequest, Message: returnURLRequired, Param: "return_url"}
	}
	return nil
}

// chargeIntent charges pi's payment method: the charge is captured at once
// unless pi's capture method is manual. A decline returns the 402 to
// answer and leaves pi waiting for another payment method.
func (h *Handler) chargeIntent(pi *paymentIntent, now time.Time) *apiError {
	ch := &charge{record: h.newRecord("ch_", now), amount: pi.amount, currency: pi.currency, paymentIntent: pi.id, paymentMethod: pi.paymentMethod, description: pi.description, metadata: maps.Clone(pi.metadata)}
	h.charges[ch.id] = ch
	h.chargeOrder = append(h.chargeOrder, ch)
	pi.latestCharge = ch.id
	if dec, declined := declineFor(pi.paymentMethod); declined {
		ch.status, ch.failureCode, ch.failureMessage = "failed", dec.code, dec.message
		pi.status, pi.paymentMethod = "requires_payment_method", ""
		pi.lastError = &apiError{Type: typeCard, Code: dec.code, DeclineCode: dec.declineCode, DocURL: docURLBase + strings.ReplaceAll(dec.code, "_", "-"), Message: dec.message, Charge: ch.id}
		e := *pi.lastError
		e.status = http.StatusPaymentRequired
		e.PaymentIntent = h.renderPaymentIntent(pi, nil)
		return &e
	}
	ch.status, pi.lastError = "succeeded", nil
	if pi.captureMethod == "manual" {
		pi.status, pi.amountCapturable = "requires_capture", pi.amount
		return nil
	}
	h.capture(pi, ch, pi.amount)
	return nil
}

// capture captures amount of pi's authorised charge; Stripe shows the
// released rest as refunded.
func (h *Handler) capture(pi *paymentIntent, ch *charge, amount int64) {
	ch.amountCaptured, ch.amountRefunded = amount, ch.amount-amount
	ch.balanceTransaction = balanceTransactionID(ch.id)
	pi.status, pi.amountReceived, pi.amountCapturable = "succeeded", amount, 0
}

// intent finds the PaymentIntent of the path.
func (h *Handler) intent(c *call) (*paymentIntent, *apiError) {
	id := c.r.PathValue("id")
	pi, found := h.paymentIntents[id]
	if !found {
		return nil, notFound("payment_intent", id, "intent")
	}
	return pi, nil
}

// unexpectedState is the answer to an operation pi's status does not allow.
func unexpectedState(pi *paymentIntent, action string, allowed []string) *apiError {
	return &apiError{Type: typeInvalidRequest, Code: "payment_intent_unexpected_state", Message: fmt.Sprintf(
		"You cannot %s this PaymentIntent because it has a status of %s. Only a PaymentIntent with one of the following statuses may be %s: %s.",
		action, pi.status, map[string]string{"cancel": "canceled", "capture": "captured", "confirm": "confirmed", "update": "updated"}[action], strings.Join(allowed, ", "))}
}

// journalIntent records a change of pi made through one of its routes.
func (h *Handler) journalIntent(c *call, kind string, pi *paymentIntent, kv ...string) {
	kv = append(kv, "payment_intent", pi.id, "status", pi.status)
	h.journal.Append(fakes.Effect{Kind: kind, ID: pi.id, Key: c.key, At: c.now, Params: effectParams(nil, kv...)})
}

func (h *Handler) updatePaymentIntent(c *call) (fault.Response, bool) {
	p := c.p
	pi, e := h.intent(c)
	if e == nil {
		e = paymentIntentOptions(p)
	}
	if e != nil {
		return invalid(e)
	}
	ex, e := expansions(p, "payment_intent", false)
	if e != nil {
		return invalid(e)
	}
	md, e := p.metadata()
	if e != nil {
		return invalid(e)
	}
	amount, cur := pi.amount, pi.currency
	if p.has("amount") {
		if amount, _, e = p.integer("amount", 1); e != nil {
			return invalid(e)
		}
	}
	if p.has("currency") {
		if cur, e = currency(p.str("currency")); e != nil {
			return invalid(e)
		}
	}
	if e := chargeable(amount, cur); e != nil && (p.has("amount") || p.has("currency")) {
		return invalid(e)
	}
	types := p.lists["payment_method_types"]
	for _, name := range []string{"amount", "currency", "payment_method", "payment_method_types", "capture_method"} {
		if (p.has(name) || len(p.lists[name]) > 0) && !slices.Contains(updatable, pi.status) {
			return errorResponse(unexpectedState(pi, "update", updatable)), true
		}
	}
	pi.amount, pi.currency = amount, cur
	for name, dst := range map[string]*string{
		"description": &pi.description, "receipt_email": &pi.receiptEmail, "payment_method": &pi.paymentMethod,
		"capture_method": &pi.captureMethod, "setup_future_usage": &pi.setupFutureUsage,
		"statement_descriptor_suffix": &pi.statementDescriptorSuffix,
	} {
		if p.has(name) {
			*dst = p.str(name)
		}
	}
	if len(types) > 0 {
		// Explicit types replace automatic payment methods.
		pi.paymentMethodTypes, pi.apm = slices.Clone(types), nil
	}
	mergeMetadata(&pi.metadata, p, md)
	if pi.status == "requires_payment_method" && pi.paymentMethod != "" {
		pi.status = "requires_confirmation"
	}
	h.journalIntent(c, fakes.KindPaymentIntentUpdate, pi, "amount", strconv.FormatInt(pi.amount, 10), "currency", pi.currency)
	return ok(h.renderPaymentIntent(pi, ex))
}

// mergeMetadata applies an update's metadata as Stripe does: keys are set,
// an empty value unsets its key, and metadata= (empty) unsets them all.
func mergeMetadata(dst *map[string]string, p params, md map[string]string) {
	sent, set := p.hashes["metadata"]
	if !set {
		return
	}
	if len(sent) == 0 {
		*dst = map[string]string{}
		return
	}
	if *dst == nil {
		*dst = map[string]string{}
	}
	for k, v := range sent {
		if v == "" {
			delete(*dst, k)
		}
	}
	maps.Copy(*dst, md)
}

func (h *Handler) confirmPaymentIntent(c *call) (fault.Response, bool) {
	p := c.p
	pi, e := h.intent(c)
	if e == nil {
		e = paymentIntentOptions(p)
	}
	if e != nil {
		return invalid(e)
	}
	ex, e := expansions(p, "payment_intent", false)
	if e != nil {
		return invalid(e)
	}
	if pi.status != "requires_payment_method" && pi.status != "requires_confirmation" {
		return errorResponse(unexpectedState(pi, "confirm", []string{"requires_payment_method", "requires_confirmation", "requires_action"})), true
	}
	next := *pi
	for name, dst := range map[string]*string{
		"payment_method": &next.paymentMethod, "capture_method": &next.captureMethod,
		"setup_future_usage": &next.setupFutureUsage, "receipt_email": &next.receiptEmail,
	} {
		if p.has(name) {
			*dst = p.str(name)
		}
	}
	if types := p.lists["payment_method_types"]; len(types) > 0 {
		next.paymentMethodTypes, next.apm = slices.Clone(types), nil
	}
	if e := confirmable(&next, p.str("return_url")); e != nil {
		return invalid(e)
	}
	*pi = next
	if decline := h.chargeIntent(pi, c.now); decline != nil {
		return errorResponse(decline), true
	}
	h.journalIntent(c, fakes.KindPaymentIntentConfirm, pi, "amount", strconv.FormatInt(pi.amount, 10), "currency", pi.currency)
	return ok(h.renderPaymentIntent(pi, ex))
}

func (h *Handler) cancelPaymentIntent(c *call) (fault.Response, bool) {
	p := c.p
	pi, e := h.intent(c)
	if e == nil {
		e = oneOf(p, "cancellation_reason", "abandoned", "duplicate", "fraudulent", "requested_by_customer")
	}
	if e != nil {
		return invalid(e)
	}
	ex, e := expansions(p, "payment_intent", false)
	if e != nil {
		return invalid(e)
	}
	if !slices.Contains(cancelable, pi.status) {
		return errorResponse(unexpectedState(pi, "cancel", cancelable)), true
	}
	if pi.status == "requires_capture" {
		// The authorisation is released: shown as refunded on the charge.
		ch := h.charges[pi.latestCharge]
		ch.amountRefunded = ch.amount
		pi.amountCapturable = 0
	}
	at := c.now.Unix()
	pi.status, pi.canceledAt, pi.cancellationReason = "canceled", &at, p.str("cancellation_reason")
	h.journalIntent(c, fakes.KindPaymentIntentCancel, pi, "cancellation_reason", pi.cancellationReason)
	return ok(h.renderPaymentIntent(pi, ex))
}

func (h *Handler) capturePaymentIntent(c *call) (fault.Response, bool) {
	p := c.p
	pi, e := h.intent(c)
	if e == nil {
		e = paymentIntentOptions(p)
	}
	if e != nil {
		return invalid(e)
	}
	amount, hasAmount, e := p.integer("amount_to_capture", 1)
	if e != nil {
		return invalid(e)
	}
	md, e := p.metadata()
	if e != nil {
		return invalid(e)
	}
	ex, e := expansions(p, "payment_intent", false)
	if e != nil {
		return invalid(e)
	}
	if pi.status != "requires_capture" {
		return errorResponse(unexpectedState(pi, "capture", []string{"requires_capture"})), true
	}
	if !hasAmount {
		amount = pi.amountCapturable
	}
	if amount > pi.amountCapturable {
		return errorResponse(&apiError{Type: typeInvalidRequest, Code: "amount_too_large", Message: "The amount to capture (" + money(amount, pi.currency) + ") is greater than the amount capturable (" + money(pi.amountCapturable, pi.currency) + ").", Param: "amount_to_capture"}), true
	}
	mergeMetadata(&pi.metadata, p, md)
	if p.has("statement_descriptor_suffix") {
		pi.statementDescriptorSuffix = p.str("statement_descriptor_suffix")
	}
	h.capture(pi, h.charges[pi.latestCharge], amount)
	h.journalIntent(c, fakes.KindPaymentIntentCapture, pi, "amount", strconv.FormatInt(amount, 10), "currency", pi.currency)
	return ok(h.renderPaymentIntent(pi, ex))
}
