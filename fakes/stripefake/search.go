package stripefake

import (
	"fmt"
	"strconv"
	"strings"
)

// The subset of Stripe's search query language the fake understands:
//
//	query   = clause *( sep clause )
//	sep     = " " | " AND " | " OR "      (keywords in any case)
//	clause  = [ "-" ] field op value
//	field   = "amount" | "created" | "currency" | "status" | "customer"
//	        | "metadata[" quoted "]"
//	op      = ":" | ">" | "<" | ">=" | "<="
//	value   = quoted | integer | "null"
//
// Clauses separated by spaces alone are joined by AND. Strings are quoted
// with ' or " (a backslash escapes the quote); ':' is an exact match that
// ignores case, and the comparisons apply to the numeric fields. Every
// string field of a PaymentIntent is a token field in Stripe, so the
// substring operator '~' is refused. metadata['k']:null matches objects
// without the key. AND and OR cannot be mixed, as in Stripe.

// predicate decides whether a PaymentIntent matches (part of) a query.
type predicate func(*paymentIntent) bool

var numericFields = map[string]func(*paymentIntent) int64{
	"amount":  func(pi *paymentIntent) int64 { return pi.amount },
	"created": func(pi *paymentIntent) int64 { return pi.at.Unix() },
}

var stringFields = map[string]func(*paymentIntent) string{
	"currency": func(pi *paymentIntent) string { return pi.currency },
	"status":   func(pi *paymentIntent) string { return pi.status },
	"customer": func(*paymentIntent) string { return "" },
}

type queryParser struct {
	s   string
	pos int
}

func parseQuery(q string) (predicate, *apiError) {
	qp := &queryParser{s: q}
	var clauses []predicate
	joiner := ""
	for {
		qp.skipSpace()
		c, err := qp.clause()
		if err != nil {
			return nil, &apiError{Type: typeInvalidRequest, Message: fmt.Sprintf("Invalid search query (at position %d): %s", qp.pos, err), Param: "query"}
		}
		clauses = append(clauses, c)
		end := qp.pos
		qp.skipSpace()
		if qp.pos == len(qp.s) {
			break
		}
		if qp.pos == end {
			return nil, &apiError{Type: typeInvalidRequest, Message: fmt.Sprintf("Invalid search query (at position %d): expected a space, AND or OR between clauses", qp.pos), Param: "query"}
		}
		word := "AND" // implicit, between clauses separated by spaces
		if w := qp.keyword(); w != "" {
			word = w
		}
		if joiner != "" && word != joiner {
			return nil, &apiError{Type: typeInvalidRequest, Message: "Invalid search query: AND and OR cannot be combined in one query.", Param: "query"}
		}
		joiner = word
	}
	if len(clauses) > 10 {
		return nil, &apiError{Type: typeInvalidRequest, Message: "Invalid search query: at most 10 clauses are allowed.", Param: "query"}
	}
	anyOf := joiner == "OR"
	return func(pi *paymentIntent) bool {
		for _, c := range clauses {
			if c(pi) == anyOf {
				return anyOf
			}
		}
		return !anyOf
	}, nil
}

func (qp *queryParser) skipSpace() {
	for qp.pos < len(qp.s) && qp.s[qp.pos] == ' ' {
		qp.pos++
	}
}

// keyword consumes AND or OR, in any case, followed by a space, and
// returns it in upper case; "" when the next word is not one.
func (qp *queryParser) keyword() string {
	for _, kw := range []string{"AND", "OR"} {
		end := qp.pos + len(kw)
		if end < len(qp.s) && strings.EqualFold(qp.s[qp.pos:end], kw) && qp.s[end] == ' ' {
			qp.pos = end
			return kw
		}
	}
	return ""
}

func (qp *queryParser) clause() (predicate, error) {
	negate := false
	if qp.pos < len(qp.s) && qp.s[qp.pos] == '-' {
		negate = true
		qp.pos++
	}
	start := qp.pos
	for qp.pos < len(qp.s) && (qp.s[qp.pos] == '_' || (qp.s[qp.pos] >= 'a' && qp.s[qp.pos] <= 'z')) {
		qp.pos++
	}
	field := qp.s[start:qp.pos]
	var metaKey string
	if field == "metadata" {
		if !qp.consume("[") {
			return nil, fmt.Errorf("expected [ after metadata")
		}
		k, err := qp.quoted()
		if err != nil {
			return nil, err
		}
		if !qp.consume("]") {
			return nil, fmt.Errorf("expected ] after the metadata key")
		}
		metaKey = k
	} else if numericFields[field] == nil && stringFields[field] == nil {
		return nil, fmt.Errorf("field %q is an unsupported search field for query", field)
	}
	op := ""
	if strings.HasPrefix(qp.s[qp.pos:], "~") {
		return nil, fmt.Errorf("%s is a token field: it supports exact match (:) only, not substring match (~)", field)
	}
	for _, o := range []string{">=", "<=", ":", ">", "<"} {
		if qp.consume(o) {
			op = o
			break
		}
	}
	if op == "" {
		return nil, fmt.Errorf("expected an operator after %s", field)
	}
	p, err := qp.value(field, metaKey, op)
	if err != nil {
		return nil, err
	}
	if negate {
		return func(pi *paymentIntent) bool { return !p(pi) }, nil
	}
	return p, nil
}

func (qp *queryParser) consume(tok string) bool {
	if strings.HasPrefix(qp.s[qp.pos:], tok) {
		qp.pos += len(tok)
		return true
	}
	return false
}

func (qp *queryParser) quoted() (string, error) {
	if qp.pos >= len(qp.s) || (qp.s[qp.pos] != '\'' && qp.s[qp.pos] != '"') {
		return "", fmt.Errorf("expected a quoted string")
	}
	quote := qp.s[qp.pos]
	qp.pos++
	var b strings.Builder
	for qp.pos < len(qp.s) {
		ch := qp.s[qp.pos]
		qp.pos++
		switch {
		case ch == '\\' && qp.pos < len(qp.s):
			b.WriteByte(qp.s[qp.pos])
			qp.pos++
		case ch == quote:
			return b.String(), nil
		default:
			b.WriteByte(ch)
		}
	}
	return "", fmt.Errorf("unterminated string")
}

func (qp *queryParser) value(field, metaKey, op string) (predicate, error) {
	if num := numericFields[field]; num != nil {
		start := qp.pos
		for qp.pos < len(qp.s) && (qp.s[qp.pos] == '-' || (qp.s[qp.pos] >= '0' && qp.s[qp.pos] <= '9')) {
			qp.pos++
		}
		n, err := strconv.ParseInt(qp.s[start:qp.pos], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%s needs an integer value", field)
		}
		return func(pi *paymentIntent) bool {
			v := num(pi)
			switch op {
			case ">":
				return v > n
			case "<":
				return v < n
			case ">=":
				return v >= n
			case "<=":
				return v <= n
			}
			return v == n
		}, nil
	}
	if op != ":" {
		return nil, fmt.Errorf("%s applies to numeric fields only", op)
	}
	get := stringFields[field]
	if field == "metadata" {
		if qp.consume("null") {
			return func(pi *paymentIntent) bool { _, has := pi.metadata[metaKey]; return !has }, nil
		}
		get = func(pi *paymentIntent) string { return pi.metadata[metaKey] }
	}
	want, err := qp.quoted()
	if err != nil {
		return nil, err
	}
	if field == "metadata" {
		return func(pi *paymentIntent) bool { v, has := pi.metadata[metaKey]; return has && strings.EqualFold(v, want) }, nil
	}
	return func(pi *paymentIntent) bool { return strings.EqualFold(get(pi), want) }, nil
}
