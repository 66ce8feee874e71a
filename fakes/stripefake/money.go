package stripefake

import (
	"fmt"
	"strings"
)

// currencies are the currencies the fake accepts: the presentment
// currencies of stripe-go v82 (Stripe's own list) and the three-decimal
// ones Stripe documents.
var currencies = setOf(strings.Fields(`
	aed afn all amd ang aoa ars aud awg azn bam bbd bdt bgn bhd bif bmd bnd bob brl bsd bwp bzd
	cad cdf chf clp cny cop crc cve czk djf dkk dop dzd eek egp etb eur fjd fkp gbp gel gip gmd
	gnf gtq gyd hkd hnl hrk htg huf idr ils inr isk jmd jod jpy kes kgs khr kmf krw kwd kyd kzt
	lak lbp lkr lrd lsl ltl lvl mad mdl mga mkd mnt mop mro mur mvr mwk mxn myr mzn nad ngn nio
	nok npr nzd omr pab pen pgk php pkr pln pyg qar ron rsd rub rwf sar sbd scr sek sgd shp sll
	sos srd std svc szl thb tjs tnd top try ttd twd tzs uah ugx usd uyu uzs vef vnd vuv wst xaf
	xcd xof xpf yer zar zmw`)...)

// zeroDecimal are the currencies whose amounts have no minor unit: 100
// means ¥100, not ¥1.00.
var zeroDecimal = setOf("bif", "clp", "djf", "gnf", "jpy", "kmf", "krw", "mga", "pyg", "rwf", "ugx", "vnd", "vuv", "xaf", "xof", "xpf")

// minimumCharge is the smallest amount Stripe charges, in the currency's
// smallest unit, for the settlement currencies it documents. Other
// currencies have a minimum worth about 0.50 USD at the day's rate, which
// the fake does not model: it asks them for 1.
var minimumCharge = map[string]int64{
	"usd": 50, "aed": 200, "aud": 50, "bgn": 100, "brl": 50, "cad": 50, "chf": 50, "czk": 1500,
	"dkk": 250, "eur": 50, "gbp": 30, "hkd": 400, "huf": 17500, "inr": 50, "jpy": 50, "mxn": 1000,
	"myr": 200, "nok": 300, "nzd": 50, "pln": 200, "ron": 200, "sek": 300, "sgd": 50, "thb": 1000,
}

// maximumCharge is the largest amount Stripe accepts: eight digits in the
// currency's smallest unit (999,999.99 USD, ¥99,999,999).
const maximumCharge = 99_999_999

func setOf(items ...string) map[string]bool {
	out := make(map[string]bool, len(items))
	for _, it := range items {
		out[it] = true
	}
	return out
}

// currency validates a currency code against the supported currencies and
// lowercases it.
func currency(v string) (string, *apiError) {
	c := strings.ToLower(v)
	if !currencies[c] {
		return "", &apiError{Type: typeInvalidRequest, Message: "Invalid currency: " + v + ". Stripe currently supports these currencies: usd, eur, gbp, jpy and the others listed at https://stripe.com/docs/currencies.", Param: "currency"}
	}
	return c, nil
}

// chargeable checks that amount, in cur's smallest unit, is within
// Stripe's minimum and maximum charge.
func chargeable(amount int64, cur string) *apiError {
	minimum := max(minimumCharge[cur], 1)
	switch {
	case amount < minimum:
		return &apiError{Type: typeInvalidRequest, Code: "amount_too_small", Message: "Amount must be at least " + money(minimum, cur), Param: "amount"}
	case amount > maximumCharge:
		return &apiError{Type: typeInvalidRequest, Code: "amount_too_large", Message: "Amount must be no more than " + money(maximumCharge, cur), Param: "amount"}
	}
	return nil
}

// money formats an amount in the currency's smallest unit: "USD 10.00",
// "JPY 500".
func money(amount int64, cur string) string {
	if zeroDecimal[cur] {
		return fmt.Sprintf("%s %d", strings.ToUpper(cur), amount)
	}
	return fmt.Sprintf("%s %d.%02d", strings.ToUpper(cur), amount/100, amount%100)
}
