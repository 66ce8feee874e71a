package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// A Normalizer maps the value of an identity or validated field to the
// value that is hashed, so that the model's type drift between calls
// (42 vs "42", 10 vs "10.00", "A@B.com " vs "a@b.com") is still the same
// action. The input is the decoded JSON value: bool, string or
// json.Number (null, objects and arrays never reach it). It returns a
// JSON scalar, or an error saying why the value is unusable. The tool sees
// the returned value, not the model's, through Invocation.Bind.
//
// A returned scalar is nil, a bool, a string of valid UTF-8, or a number
// of any Go integer or float type, json.Number, *big.Int, *big.Rat or
// *big.Float (a type with a MarshalJSON or MarshalText method counts as
// its JSON form). Numbers are hashed exactly, never rounded: one that an
// IEEE double does not hold exactly (an integer beyond 2^53, more than 17
// significant digits, 1/3) is refused with ErrUnsafeNumber, so return such
// a value as a string of its exact digits, as Integer and Decimal do. A
// float is the number of its shortest decimal form (0.1 is 0.1), and an
// integral float is refused from 2^53 up (2^24 for a float32): it may be
// the rounding of another integer. For an identity field, nil or "" is a
// missing value (ErrMissingField).
type Normalizer interface {
	Normalize(v any) (any, error)
}

// NormalizerFunc adapts a function to Normalizer.
type NormalizerFunc func(v any) (any, error)

// Normalize calls f.
func (f NormalizerFunc) Normalize(v any) (any, error) { return f(v) }

var errNotScalarText = errors.New("want a string or a number")

// BuiltinNormalizer is a normalizer oncely defines: String, Trimmed,
// CaseFolded, Email, Integer and Decimal. They are constants, so that no
// importer can replace one for the whole process.
type BuiltinNormalizer int

// The built-in normalizers; each constant's documentation says what it
// accepts and hashes.
const (
	// String accepts a string, or a number or boolean written as its JSON
	// text, and hashes the string: "42" and 42 are the same. The string is
	// compared code point by code point, as an opaque id: a precomposed
	// "é" (NFC, U+00E9) and "e" followed by a combining accent (NFD,
	// U+0065 U+0301) are different values. CaseFolded and Email treat them
	// alike.
	String BuiltinNormalizer = iota + 1
	// Trimmed is String with leading and trailing white space removed.
	// Like String, it keeps the code points as they are (no Unicode
	// normalization).
	Trimmed
	// CaseFolded is Trimmed, in Unicode normalization form C, and
	// case-folded with Unicode simple case folding as strings.EqualFold
	// applies it, for handles and codes that are compared without case.
	// Values whose NFC forms strings.EqualFold reports equal are the same:
	// "Straße" and "STRAẞE", "ΣΊΣΥΦΟΣ" and "σίσυφος" (final sigma
	// included), "ſ" and "s", the micro sign and "μ", the Kelvin sign and
	// "k", and "é" composed (NFC) or decomposed (NFD). Full folding is not
	// applied ("ß" and "ss" differ), nor Turkic folding ("ı" and "i"
	// differ). The hashed and bound value is the folded text in NFC, lower
	// case for every script but Cherokee.
	CaseFolded
	// Email is CaseFolded for an address that must contain one "@" with
	// text on both sides.
	Email
	// Integer accepts a JSON integer or a string holding one in plain
	// decimal ("42", " 42", "+42", "042", 42.0, "4.2e1"), and hashes its
	// exact decimal text, so 9007199254740993 and 9007199254740992 stay
	// different. Up to MaxNumberDigits digits it is exact; larger integers
	// are refused. Other notations ("0x2a", "0b101010", "0o52", "4_2", "½")
	// are refused: no model means them. The tool binds the value as a JSON
	// number (1000, whether the model sent 1000, "1000" or 1e3) into any
	// integer type or big.Int.
	Integer
	// Decimal accepts a JSON number or a string holding one in plain
	// decimal ("10", 10.0, "10.00", "1e1", "-0.5"), and hashes its exact
	// value in shortest decimal form, so amounts the model writes
	// differently are the same while 10.01 and 10.1 differ. Its limits and
	// refused notations are Integer's. The tool binds the value as a JSON
	// number in shortest form ("10.00" arrives as 10, "1e-1" as 0.1).
	Decimal
)

var builtinNames = [...]string{"", "String", "Trimmed", "CaseFolded", "Email", "Integer", "Decimal"}

// String returns the normalizer's name ("Integer").
func (n BuiltinNormalizer) String() string {
	if n > 0 && int(n) < len(builtinNames) {
		return builtinNames[n]
	}
	return fmt.Sprintf("BuiltinNormalizer(%d)", int(n))
}

// Normalize implements Normalizer.
func (n BuiltinNormalizer) Normalize(v any) (any, error) {
	switch n {
	case String:
		return normalizeString(v)
	case Trimmed:
		return normalizeTrimmed(v)
	case CaseFolded:
		return normalizeCaseFolded(v)
	case Email:
		return normalizeEmail(v)
	case Integer:
		return normalizeNumber(v, true)
	case Decimal:
		return normalizeNumber(v, false)
	}
	return nil, fmt.Errorf("client: unknown normalizer %d", int(n))
}

// isNumber reports whether n binds its value as a JSON number (Integer,
// Decimal).
func (n BuiltinNormalizer) isNumber() bool { return n == Integer || n == Decimal }

// normalizeString is String.
func normalizeString(v any) (any, error) {
	switch x := v.(type) {
	case string:
		return v, nil // v holds the string already: no new interface value to allocate
	case json.Number:
		return x.String(), nil
	case bool:
		if x {
			return "true", nil
		}
		return "false", nil
	}
	return nil, errNotScalarText
}

// normalizeTrimmed is Trimmed.
func normalizeTrimmed(v any) (any, error) {
	s, err := normalizeString(v)
	if err != nil {
		return nil, err
	}
	return strings.TrimSpace(s.(string)), nil
}

// normalizeCaseFolded is CaseFolded.
func normalizeCaseFolded(v any) (any, error) {
	s, err := normalizeTrimmed(v)
	if err != nil {
		return nil, err
	}
	return foldNFC(s.(string)), nil
}

// normalizeEmail is Email.
func normalizeEmail(v any) (any, error) {
	s, err := normalizeCaseFolded(v)
	if err != nil {
		return nil, err
	}
	e := s.(string)
	at := strings.IndexByte(e, '@')
	if at <= 0 || at == len(e)-1 || strings.Count(e, "@") != 1 || strings.ContainsAny(e, " \t\r\n") {
		return nil, errors.New("want an email address")
	}
	return e, nil
}

// foldNFC returns s in NFC with every code point replaced by its simple
// case folding, again in NFC (a folded string may not be in NFC):
// foldNFC(a) == foldNFC(b) when strings.EqualFold(NFC(a), NFC(b)).
func foldNFC(s string) string {
	if ascii, upper := asciiCase(s); ascii {
		if !upper {
			return s
		}
		return strings.ToLower(s)
	}
	return norm.NFC.String(strings.Map(simpleFold, norm.NFC.String(s)))
}

// asciiCase reports whether s is ASCII and whether it has an upper-case
// letter. ASCII text is its own NFC form and folds to lower case.
func asciiCase(s string) (ascii, upper bool) {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= utf8.RuneSelf:
			return false, false
		case 'A' <= c && c <= 'Z':
			upper = true
		}
	}
	return true, upper
}

// simpleFold maps r to one member of its unicode.SimpleFold orbit (the set
// of runes strings.EqualFold treats as equal to it), the same member for
// the whole orbit; TestSimpleFoldIsEqualFold checks every rune. The member
// is ToLower(ToUpper(r)), which for runes with case variants is also the
// simple folding of Unicode's CaseFolding.txt, except for Cherokee letters
// (folded to lower case here, to upper case there). A rune without case
// variants is its own folding.
func simpleFold(r rune) rune {
	if unicode.SimpleFold(r) == r {
		return r
	}
	return unicode.ToLower(unicode.ToUpper(r))
}

// MaxNumberDigits bounds every number an identity or validated field may
// hold, whatever its form and normalizer: written out in plain decimal
// (no exponent, no leading zeros before the point or trailing zeros after
// it), it has at most this many digits. 1e99 and 99 nines pass; 1e100 (a
// 1 followed by 100 zeros) and 1e-101 do not, written in any form. The
// bound keeps hashing cheap: "1e1000000000" is refused before any
// arithmetic, not expanded.
const MaxNumberDigits = 100

// normalizeNumber is Integer (integer) or Decimal. It hashes the number's
// exact decimal text as a JSON string (canonical JSON would round a number
// to a double), and Invocation.Bind hands the tool that text as a JSON
// number.
func normalizeNumber(v any, integer bool) (any, error) {
	var s string
	switch x := v.(type) {
	case json.Number:
		s = x.String()
	case string:
		s = strings.TrimSpace(x)
	default:
		return nil, errors.New("want a number")
	}
	d, err := parseDecimal(s)
	if err != nil {
		return nil, err
	}
	if integer && d.exp < 0 {
		return nil, errors.New("want an integer")
	}
	return d.String(), nil
}

// decimal is ±digits × 10^exp, with digits free of leading and trailing
// zeros ("" for zero, whose exp and neg are then 0 and false).
type decimal struct {
	neg    bool
	digits string
	exp    int
}

// maxExponent saturates exponents while parsing: anything beyond it is out
// of range whatever the digits (a number has at most MaxInputBytes of
// them).
const maxExponent = 1 << 30

// parseDecimal parses the plain decimal form of a number: an optional sign,
// one or more digits, an optional fraction of one or more digits, an
// optional exponent (e or E, an optional sign, one or more digits). It
// refuses every other form and values beyond MaxNumberDigits.
func parseDecimal(s string) (decimal, error) {
	var d decimal
	i := 0
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		d.neg = s[i] == '-'
		i++
	}
	intStart := i
	for i < len(s) && isDigit(s[i]) {
		i++
	}
	intPart := s[intStart:i]
	var frac string
	if i < len(s) && s[i] == '.' {
		i++
		start := i
		for i < len(s) && isDigit(s[i]) {
			i++
		}
		if frac = s[start:i]; frac == "" {
			return decimal{}, errNotDecimal
		}
	}
	if intPart == "" {
		return decimal{}, errNotDecimal
	}
	exp := 0
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		negExp := false
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			negExp = s[i] == '-'
			i++
		}
		start := i
		for ; i < len(s) && isDigit(s[i]); i++ {
			exp = min(exp*10+int(s[i]-'0'), maxExponent)
		}
		if i == start {
			return decimal{}, errNotDecimal
		}
		if negExp {
			exp = -exp
		}
	}
	if i != len(s) {
		return decimal{}, errNotDecimal
	}
	// digits × 10^exp, with the fraction's digits moved into the mantissa.
	mant := strings.TrimLeft(intPart+frac, "0")
	if mant == "" {
		return decimal{}, nil // zero, with any sign and exponent
	}
	exp -= len(frac)
	trimmed := strings.TrimRight(mant, "0")
	exp += len(mant) - len(trimmed)
	d.digits, d.exp = trimmed, exp
	if d.plainDigits() > MaxNumberDigits {
		return decimal{}, errNumberRange
	}
	return d, nil
}

var (
	errNotDecimal  = errors.New("want a number in plain decimal notation")
	errNumberRange = fmt.Errorf("number out of range: more than %d digits written out", MaxNumberDigits)
)

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// plainDigits counts the digits of d written out without an exponent,
// leading zeros before the point or trailing zeros after it: 1500 has 4,
// 0.015 has 3, 12.5 has 3. It cannot overflow: len(digits) is bounded by
// the input size and |exp| by maxExponent plus that size.
func (d decimal) plainDigits() int {
	switch n := len(d.digits); {
	case d.exp >= 0:
		return n + d.exp
	case n+d.exp > 0: // a point inside the digits
		return n
	default: // 0.000ddd
		return -d.exp
	}
}

// String writes d out in plain decimal: "-1500", "0.015", "12.5", "0".
func (d decimal) String() string {
	if d.digits == "" {
		return "0"
	}
	var b strings.Builder
	if d.neg {
		b.WriteByte('-')
	}
	switch n := len(d.digits); {
	case d.exp >= 0:
		b.WriteString(d.digits)
		b.WriteString(strings.Repeat("0", d.exp))
	case n+d.exp > 0:
		b.WriteString(d.digits[:n+d.exp])
		b.WriteByte('.')
		b.WriteString(d.digits[n+d.exp:])
	default:
		b.WriteString("0.")
		b.WriteString(strings.Repeat("0", -d.exp-n))
		b.WriteString(d.digits)
	}
	return b.String()
}
