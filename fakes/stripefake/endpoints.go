package stripefake

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/oncely/oncely/fakes"
	"github.com/oncely/oncely/fakes/fault"
	"github.com/oncely/oncely/fakes/internal/fakehttp"
)

var (
	createRefundSpec = spec{
		"payment_intent": scalar, "charge": scalar, "amount": scalar, "reason": scalar,
		"metadata": hash, "expand": list, "instructions_email": scalar,
	}
	createChargeSpec = spec{
		"shipping": notModeled,
		"amount":   scalar, "currency": scalar, "source": scalar, "description": scalar,
		"receipt_email": scalar, "metadata": hash, "expand": list,
	}
	listPaymentIntentsSpec = spec{
		"limit": scalar, "starting_after": scalar, "ending_before": scalar, "created": rangeKind, "expand": list,
		"customer": scalar,
	}
	listChargesSpec = spec{
		"limit": scalar, "starting_after": scalar, "ending_before": scalar, "created": rangeKind, "expand": list,
		"customer": scalar, "payment_intent": scalar, "transfer_group": scalar,
	}
	listRefundsSpec = spec{
		"limit": scalar, "starting_after": scalar, "ending_before": scalar, "created": rangeKind, "expand": list,
		"payment_intent": scalar, "charge": scalar,
	}
	searchSpec = spec{"query": scalar, "limit": scalar, "page": scalar, "expand": list}
)

// decline is how a test card or token fails.
type decline struct{ code, declineCode, message string }

var declines = map[string]decline{
	"chargeDeclined":                  {"card_declined", "generic_decline", "Your card was declined."},
	"chargeDeclinedInsufficientFunds": {"card_declined", "insufficient_funds", "Your card has insufficient funds."},
	"chargeDeclinedExpiredCard":       {"expired_card", "expired_card", "Your card has expired."},
}

// declineFor reports whether a test payment method (pm_card_X) or token
// (tok_X) is one that declines.
func declineFor(method string) (decline, bool) {
	name, ok := strings.CutPrefix(method, "pm_card_")
	if !ok {
		name, _ = strings.CutPrefix(method, "tok_")
	}
	d, ok := declines[name]
	return d, ok
}

func invalid(e *apiError) (fault.Response, bool) { return errorResponse(e), false }

func ok(v any) (fault.Response, bool) { return fakehttp.JSON(http.StatusOK, "", v), true }

func (h *Handler) newRecord(prefix string, now time.Time) record {
	h.seq++
	return record{id: h.ids.New(prefix, 24), seq: h.seq, at: now}
}

func effectParams(md map[string]string, kv ...string) map[string]string {
	out := make(map[string]string, len(md)+len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] != "" {
			out[kv[i]] = kv[i+1]
		}
	}
	for k, v := range md {
		out["metadata."+k] = v
	}
	return out
}

func (h *Handler) createRefund(c *call) (fault.Response, bool) {
	p := c.p
	piID, chID := p.str("payment_intent"), p.str("charge")
	if piID == "" && chID == "" {
		return invalid(&apiError{Type: typeInvalidRequest, Code: "parameter_missing", Message: "One of the following params should be provided: charge, payment_intent."})
	}
	if piID != "" && chID != "" {
		return invalid(&apiError{Type: typeInvalidRequest, Message: "You can only specify one of these parameters: charge, payment_intent.", Param: "payment_intent"})
	}
	amount, hasAmount, e := p.integer("amount", 1)
	if e != nil {
		return invalid(e)
	}
	if r := p.str("reason"); r != "" && r != "duplicate" && r != "fraudulent" && r != "requested_by_customer" {
		return invalid(&apiError{Type: typeInvalidRequest, Message: "Invalid reason: must be one of duplicate, fraudulent, or requested_by_customer", Param: "reason"})
	}
	md, e := p.metadata()
	if e != nil {
		return invalid(e)
	}
	expand, e := expansions(p, "refund", false)
	if e != nil {
		return invalid(e)
	}
	var ch *charge
	if piID != "" {
		pi, found := h.paymentIntents[piID]
		if !found {
			return invalid(notFound("payment_intent", piID, "payment_intent"))
		}
		if pi.status != "succeeded" {
			return errorResponse(&apiError{Type: typeInvalidRequest, Code: "payment_intent_unexpected_state", Message: "This PaymentIntent (" + piID + ") does not have a successful charge to refund.", Param: "payment_intent"}), true
		}
		ch = h.charges[pi.latestCharge]
	} else {
		found := false
		if ch, found = h.charges[chID]; !found {
			return invalid(notFound("charge", chID, "charge"))
		}
		if ch.status != "succeeded" {
			return errorResponse(&apiError{Type: typeInvalidRequest, Code: "charge_not_refundable", Message: "Charge " + chID + " has no successful payment to refund.", Param: "charge"}), true
		}
	}
	remaining := ch.amount - ch.amountRefunded
	if remaining == 0 {
		return errorResponse(&apiError{Type: typeInvalidRequest, Code: "charge_already_refunded", Message: "Charge " + ch.id + " has already been refunded."}), true
	}
	if !hasAmount {
		amount = remaining
	}
	if amount > remaining {
		return errorResponse(&apiError{Type: typeInvalidRequest, Code: "amount_too_large", Message: "Refund amount (" + money(amount, ch.currency) + ") is greater than unrefunded amount on charge (" + money(remaining, ch.currency) + ")", Param: "amount"}), true
	}
	re := &refund{record: h.newRecord("re_", c.now), amount: amount, currency: ch.currency, charge: ch.id, paymentIntent: ch.paymentIntent, reason: p.str("reason"), metadata: md}
	re.balanceTransaction = balanceTransactionID(re.id)
	ch.amountRefunded += amount
	h.refunds[re.id] = re
	h.refundOrder = append(h.refundOrder, re)
	h.journal.Append(fakes.Effect{
		Kind: fakes.KindRefund, ID: re.id, Key: c.key, At: c.now,
		Params: effectParams(md, "amount", strconv.FormatInt(amount, 10), "currency", ch.currency, "charge", ch.id, "payment_intent", ch.paymentIntent, "reason", re.reason),
	})
	return ok(h.renderRefund(re, expand))
}

func (h *Handler) createCharge(c *call) (fault.Response, bool) {
	p := c.p
	amount, cur, e := amountAndCurrency(p)
	if e != nil {
		return invalid(e)
	}
	source := p.str("source")
	if source == "" {
		return invalid(&apiError{Type: typeInvalidRequest, Code: "parameter_missing", Message: "Must provide source or customer.", Param: "source"})
	}
	if !strings.HasPrefix(source, "tok_") {
		return invalid(notFound("token", source, "source"))
	}
	md, e := p.metadata()
	if e != nil {
		return invalid(e)
	}
	expand, e := expansions(p, "charge", false)
	if e != nil {
		return invalid(e)
	}
	ch := &charge{record: h.newRecord("ch_", c.now), amount: amount, currency: cur, description: p.str("description"), metadata: md}
	ch.paymentMethod = "card_" + h.ids.New("", 24)
	h.charges[ch.id] = ch
	h.chargeOrder = append(h.chargeOrder, ch)
	if dec, declined := declineFor(source); declined {
		ch.status, ch.failureCode, ch.failureMessage = "failed", dec.code, dec.message
		return errorResponse(&apiError{Type: typeCard, Code: dec.code, DeclineCode: dec.declineCode, Message: dec.message, Charge: ch.id, status: http.StatusPaymentRequired}), true
	}
	ch.status, ch.amountCaptured, ch.balanceTransaction = "succeeded", amount, balanceTransactionID(ch.id)
	h.journal.Append(fakes.Effect{
		Kind: fakes.KindCharge, ID: ch.id, Key: c.key, At: c.now,
		Params: effectParams(md, "amount", strconv.FormatInt(amount, 10), "currency", cur, "source", source),
	})
	return ok(h.renderCharge(ch, expand))
}

func (h *Handler) retrievePaymentIntent(c *call) fault.Response {
	return retrieve(c, "payment_intent", h.paymentIntents, h.renderPaymentIntent)
}

func (h *Handler) retrieveRefund(c *call) fault.Response {
	return retrieve(c, "refund", h.refunds, h.renderRefund)
}

func (h *Handler) retrieveCharge(c *call) fault.Response {
	return retrieve(c, "charge", h.charges, h.renderCharge)
}

// retrieve answers GET /v1/<object>s/{id}: the object of that id in objects,
// rendered with the requested expansions, or a 404.
func retrieve[T, J any](c *call, object string, objects map[string]*T, render func(*T, expansion) J) fault.Response {
	expand, e := expansions(c.p, object, false)
	if e != nil {
		return errorResponse(e)
	}
	id := c.r.PathValue("id")
	obj, found := objects[id]
	if !found {
		return errorResponse(notFound(object, id, "id"))
	}
	return fakehttp.JSON(http.StatusOK, "", render(obj, expand))
}

// listParams are the pagination parameters shared by list endpoints.
type listParams struct {
	limit                       int
	startingAfter, endingBefore *record
	created                     func(int64) bool
}

func parseLimit(p params) (int, *apiError) {
	limit, present, e := p.integer("limit", 1)
	if e != nil || !present {
		return 10, e
	}
	if limit > 100 {
		return 0, &apiError{Type: typeInvalidRequest, Message: "This value must be less than or equal to 100.", Param: "limit"}
	}
	return int(limit), nil
}

func parseListParams(p params, lookup func(id string) (*record, bool), object string) (listParams, *apiError) {
	lp := listParams{created: func(int64) bool { return true }}
	var e *apiError
	if lp.limit, e = parseLimit(p); e != nil {
		return lp, e
	}
	after, before := p.str("starting_after"), p.str("ending_before")
	if after != "" && before != "" {
		return lp, &apiError{Type: typeInvalidRequest, Message: "You may only specify one of these parameters: ending_before, starting_after.", Param: "ending_before"}
	}
	for _, cur := range []struct {
		param, id string
		dst       **record
	}{{"starting_after", after, &lp.startingAfter}, {"ending_before", before, &lp.endingBefore}} {
		if cur.id == "" {
			continue
		}
		rec, found := lookup(cur.id)
		if !found {
			return lp, notFound(object, cur.id, cur.param)
		}
		*cur.dst = rec
	}
	if p.has("created") {
		n, _, e := parseInteger("created", p.str("created"), 0)
		if e != nil {
			return lp, e
		}
		lp.created = func(t int64) bool { return t == n }
	} else if bounds := p.hashes["created"]; len(bounds) > 0 {
		limits := map[string]int64{}
		for op, v := range bounds {
			n, _, e := parseInteger("created["+op+"]", v, 0)
			if e != nil {
				return lp, e
			}
			limits[op] = n
		}
		lp.created = func(t int64) bool {
			for op, n := range limits {
				if (op == "gt" && t <= n) || (op == "gte" && t < n) || (op == "lt" && t >= n) || (op == "lte" && t > n) {
					return false
				}
			}
			return true
		}
	}
	return lp, nil
}

// paginate returns one page of items (held in creation order), newest
// first, filtered by match and lp.
func paginate[T interface{ recordOf() *record }](items []T, match func(T) bool, lp listParams) (page []T, hasMore bool) {
	var desc []T
	for i := len(items) - 1; i >= 0; i-- {
		if rec := items[i].recordOf(); lp.created(rec.at.Unix()) && match(items[i]) {
			desc = append(desc, items[i])
		}
	}
	switch {
	case lp.startingAfter != nil:
		i := 0
		for i < len(desc) && desc[i].recordOf().seq >= lp.startingAfter.seq {
			i++
		}
		desc = desc[i:]
	case lp.endingBefore != nil:
		i := 0
		for i < len(desc) && desc[i].recordOf().seq > lp.endingBefore.seq {
			i++
		}
		start := max(0, i-lp.limit)
		return desc[start:i], start > 0
	}
	if len(desc) > lp.limit {
		return desc[:lp.limit], true
	}
	return desc, false
}

func (h *Handler) listPaymentIntents(c *call) fault.Response {
	lp, e := parseListParams(c.p, func(id string) (*record, bool) {
		pi, found := h.paymentIntents[id]
		if !found {
			return nil, false
		}
		return &pi.record, true
	}, "payment_intent")
	if e != nil {
		return errorResponse(e)
	}
	expand, e := expansions(c.p, "payment_intent", true)
	if e != nil {
		return errorResponse(e)
	}
	customer := c.p.str("customer") // no PaymentIntent of the fake has one
	page, more := paginate(h.piOrder, func(*paymentIntent) bool { return customer == "" }, lp)
	out := listJSON{Object: "list", Data: []any{}, HasMore: more, URL: "/v1/payment_intents"}
	for _, pi := range page {
		out.Data = append(out.Data, h.renderPaymentIntent(pi, expand))
	}
	return fakehttp.JSON(http.StatusOK, "", out)
}

func (h *Handler) listRefunds(c *call) fault.Response {
	lp, e := parseListParams(c.p, func(id string) (*record, bool) {
		re, found := h.refunds[id]
		if !found {
			return nil, false
		}
		return &re.record, true
	}, "refund")
	if e != nil {
		return errorResponse(e)
	}
	expand, e := expansions(c.p, "refund", true)
	if e != nil {
		return errorResponse(e)
	}
	piID, chID := c.p.str("payment_intent"), c.p.str("charge")
	page, more := paginate(h.refundOrder, func(re *refund) bool {
		return (piID == "" || re.paymentIntent == piID) && (chID == "" || re.charge == chID)
	}, lp)
	out := listJSON{Object: "list", Data: []any{}, HasMore: more, URL: "/v1/refunds"}
	for _, re := range page {
		out.Data = append(out.Data, h.renderRefund(re, expand))
	}
	return fakehttp.JSON(http.StatusOK, "", out)
}

func (h *Handler) listCharges(c *call) fault.Response {
	lp, e := parseListParams(c.p, func(id string) (*record, bool) {
		ch, found := h.charges[id]
		if !found {
			return nil, false
		}
		return &ch.record, true
	}, "charge")
	if e != nil {
		return errorResponse(e)
	}
	expand, e := expansions(c.p, "charge", true)
	if e != nil {
		return errorResponse(e)
	}
	piID, customer := c.p.str("payment_intent"), c.p.str("customer")
	page, more := paginate(h.chargeOrder, func(ch *charge) bool {
		// No charge of the fake has a customer or a transfer group.
		return (piID == "" || ch.paymentIntent == piID) && customer == "" && c.p.str("transfer_group") == ""
	}, lp)
	out := listJSON{Object: "list", Data: []any{}, HasMore: more, URL: "/v1/charges"}
	for _, ch := range page {
		out.Data = append(out.Data, h.renderCharge(ch, expand))
	}
	return fakehttp.JSON(http.StatusOK, "", out)
}

func (h *Handler) searchPaymentIntents(c *call) fault.Response {
	q, e := c.p.required("query")
	if e != nil {
		return errorResponse(e)
	}
	match, e := parseQuery(q)
	if e != nil {
		return errorResponse(e)
	}
	limit, e := parseLimit(c.p)
	if e != nil {
		return errorResponse(e)
	}
	expand, e := expansions(c.p, "payment_intent", true)
	if e != nil {
		return errorResponse(e)
	}
	before := int64(-1) // page: results older than this seq
	if page := c.p.str("page"); page != "" {
		n, err := strconv.ParseInt(strings.TrimPrefix(page, "page_"), 36, 64)
		if err != nil || !strings.HasPrefix(page, "page_") || n < 0 {
			return errorResponse(&apiError{Type: typeInvalidRequest, Message: "Invalid page: " + page, Param: "page"})
		}
		before = n
	}
	visibleUntil := c.now.Add(-h.cfg.SearchLag)
	out := listJSON{Object: "search_result", Data: []any{}, URL: "/v1/payment_intents/search"}
	var lastSeq int64
	for i := len(h.piOrder) - 1; i >= 0; i-- {
		pi := h.piOrder[i]
		if pi.at.After(visibleUntil) || (before >= 0 && pi.seq >= before) || !match(pi) {
			continue
		}
		if len(out.Data) == limit {
			out.HasMore = true
			next := "page_" + strconv.FormatInt(lastSeq, 36)
			out.NextPage = &next
			break
		}
		out.Data = append(out.Data, h.renderPaymentIntent(pi, expand))
		lastSeq = pi.seq
	}
	return fakehttp.JSON(http.StatusOK, "", out)
}
