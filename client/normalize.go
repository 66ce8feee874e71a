package client

import (
	"encoding/json"
	"errors"
	"math/big"
	"strings"
)

// A Normalizer maps the value of an identity or validated field to the
// value that is hashed, so that the model's type drift between calls
// (42 vs "42", 10 vs "10.00", "A@B.com " vs "a@b.com") is still the same
// action. The input is the decoded JSON value: nil, bool, string or
// json.Number (objects and arrays never reach it). It returns a JSON
// scalar, or an error saying why the value is unusable.
type Normalizer interface {
	Normalize(v any) (any, error)
}

// NormalizerFunc adapts a function to Normalizer.
type NormalizerFunc func(v any) (any, error)

// Normalize calls f.
func (f NormalizerFunc) Normalize(v any) (any, error) { return f(v) }

var errNotScalarText = errors.New("want a string or a number")

// String accepts a string, or a number or boolean written as its JSON
// text, and hashes the string: "42" and 42 are the same.
var String Normalizer = NormalizerFunc(func(v any) (any, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case json.Number:
		return x.String(), nil
	case bool:
		if x {
			return "true", nil
		}
		return "false", nil
	}
	return nil, errNotScalarText
})

// Trimmed is String with leading and trailing white space removed.
var Trimmed Normalizer = NormalizerFunc(func(v any) (any, error) {
	s, err := String.Normalize(v)
	if err != nil {
		return nil, err
	}
	return strings.TrimSpace(s.(string)), nil
})

// CaseFolded is Trimmed and lower-cased (Unicode simple folding), for
// handles and codes that are compared without case.
var CaseFolded Normalizer = NormalizerFunc(func(v any) (any, error) {
	s, err := Trimmed.Normalize(v)
	if err != nil {
		return nil, err
	}
	return strings.ToLower(s.(string)), nil
})

// Email is CaseFolded for an address that must contain one "@" with text
// on both sides.
var Email Normalizer = NormalizerFunc(func(v any) (any, error) {
	s, err := CaseFolded.Normalize(v)
	if err != nil {
		return nil, err
	}
	e := s.(string)
	at := strings.IndexByte(e, '@')
	if at <= 0 || at == len(e)-1 || strings.Count(e, "@") != 1 || strings.ContainsAny(e, " \t\r\n") {
		return nil, errors.New("want an email address")
	}
	return e, nil
})

// Integer accepts a JSON integer or a string holding one ("42", " 42",
// 42.0, "4.2e1"), of any size, and hashes its exact decimal text, so
// 9007199254740993 and 9007199254740992 stay different.
var Integer Normalizer = NormalizerFunc(func(v any) (any, error) {
	r, err := rational(v)
	if err != nil {
		return nil, err
	}
	if !r.IsInt() {
		return nil, errors.New("want an integer")
	}
	return r.Num().String(), nil
})

// Decimal accepts a JSON number or a string holding one ("10", 10.0,
// "10.00", "1e1") and hashes its exact value in shortest decimal form, so
// amounts the model writes differently are the same while 10.01 and 10.1
// differ. Values with no finite decimal form are rejected.
var Decimal Normalizer = NormalizerFunc(func(v any) (any, error) {
	r, err := rational(v)
	if err != nil {
		return nil, err
	}
	return decimalString(r), nil
})

// maxNumberText bounds the numbers Integer and Decimal parse, so that
// "1e1000000000" cannot make big.Rat allocate gigabytes.
const maxNumberText = 100

func rational(v any) (*big.Rat, error) {
	var s string
	switch x := v.(type) {
	case json.Number:
		s = x.String()
	case string:
		s = strings.TrimSpace(x)
	default:
		return nil, errors.New("want a number")
	}
	if len(s) > maxNumberText || strings.ContainsAny(s, "/_xXpP") || s == "" {
		return nil, errors.New("want a number")
	}
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		exp := strings.TrimLeft(s[i+1:], "+-0")
		if len(exp) > 3 { // |exponent| < 1000
			return nil, errors.New("number out of range")
		}
	}
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		return nil, errors.New("want a number")
	}
	return r, nil
}

// decimalString renders r exactly in shortest decimal form. A decimal
// literal's reduced denominator is 2^a * 5^b, which needs max(a, b)
// fractional digits.
func decimalString(r *big.Rat) string {
	if r.IsInt() {
		return r.Num().String()
	}
	d := new(big.Int).Set(r.Denom())
	var a, b int
	two, five, m := big.NewInt(2), big.NewInt(5), new(big.Int)
	for m.Mod(d, two).Sign() == 0 {
		d.Quo(d, two)
		a++
	}
	for m.Mod(d, five).Sign() == 0 {
		d.Quo(d, five)
		b++
	}
	if d.Cmp(big.NewInt(1)) != 0 { // not a decimal fraction; unreachable from a literal
		return r.String()
	}
	return r.FloatString(max(a, b))
}
