package client

import (
	"encoding/json"
	"strconv"
	"unicode/utf8"

	"github.com/gowebpki/jcs"
)

// appendIdentity appends the RFC 8785 canonical JSON of
// [prefix..., [[path, value], ...]] to b without building and re-parsing
// an intermediate document. It handles the values key derivation
// produces (strings that are valid UTF-8, JSON numbers, booleans and null)
// and reports false for any other value, for which the caller falls back
// to encoding/json and jcs.Transform. Its output is byte for byte that of
// jcs.Transform (see FuzzAppendIdentity): the document has no objects, so
// canonical form is only a matter of string escapes and number formatting.
func appendIdentity(b []byte, prefix []string, paths []string, values []any) ([]byte, bool) {
	b = append(b, '[')
	for _, s := range prefix {
		var ok bool
		if b, ok = appendCanonicalString(b, s); !ok {
			return b, false
		}
		b = append(b, ',')
	}
	b = append(b, '[')
	for i, p := range paths {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '[')
		var ok bool
		if b, ok = appendCanonicalString(b, p); !ok {
			return b, false
		}
		b = append(b, ',')
		if b, ok = appendCanonicalScalar(b, values[i]); !ok {
			return b, false
		}
		b = append(b, ']')
	}
	return append(b, ']', ']'), true
}

// appendCanonicalScalar appends the canonical form of a string, number,
// boolean or null; false for anything else or a value jcs would refuse.
func appendCanonicalScalar(b []byte, v any) ([]byte, bool) {
	switch x := v.(type) {
	case nil:
		return append(b, "null"...), true
	case bool:
		return strconv.AppendBool(b, x), true
	case string:
		return appendCanonicalString(b, x)
	case json.Number:
		if !isJSONNumber(string(x)) {
			return b, false
		}
		f, err := strconv.ParseFloat(string(x), 64)
		if err != nil {
			return b, false
		}
		s, err := jcs.NumberToJSON(f)
		if err != nil {
			return b, false
		}
		return append(b, s...), true
	}
	return b, false
}

// appendCanonicalString appends s quoted as RFC 8785 requires: '"', '\\'
// and the control characters escaped (\b \t \n \f \r by name, the others
// as \u00xx in lower case), every other character as it is. It reports
// false for invalid UTF-8, which encoding/json would have replaced.
func appendCanonicalString(b []byte, s string) ([]byte, bool) {
	if !utf8.ValidString(s) {
		return b, false
	}
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\b':
			b = append(b, '\\', 'b')
		case '\f':
			b = append(b, '\\', 'f')
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		default:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		start = i + 1
	}
	b = append(b, s[start:]...)
	return append(b, '"'), true
}

// isJSONNumber reports whether s follows the RFC 8259 number grammar:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func isJSONNumber(s string) bool {
	i := 0
	if i < len(s) && s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case i < len(s) && '1' <= s[i] && s[i] <= '9':
		for i++; i < len(s) && isDigit(s[i]); i++ {
		}
	default:
		return false
	}
	if i < len(s) && s[i] == '.' {
		i++
		if i == len(s) || !isDigit(s[i]) {
			return false
		}
		for ; i < len(s) && isDigit(s[i]); i++ {
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if i == len(s) || !isDigit(s[i]) {
			return false
		}
		for ; i < len(s) && isDigit(s[i]); i++ {
		}
	}
	return i == len(s)
}
