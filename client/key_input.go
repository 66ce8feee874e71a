package client

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
)

// DefaultMaxInputBytes bounds a call's input.
const DefaultMaxInputBytes = 1 << 20

// ParseInput decodes a call's input: a JSON object of at most maxBytes
// that is I-JSON (RFC 7493, on which RFC 8785 rests): valid UTF-8, no
// escaped lone surrogate ("\ud800" without its pair), no Unicode
// noncharacter, and no two names in one object that are the same, or the
// same after Unicode normalization (NFC) and simple case folding ("amount"
// and "AMOUNT", "é" composed and decomposed). Two readers of such an input
// cannot disagree about a field: encoding/json keeps the last of two equal
// names, and matches struct fields without case. Numbers are kept as
// json.Number. It runs in time linear in the input.
func ParseInput(input []byte, maxBytes int) (map[string]any, error) {
	if maxBytes <= 0 {
		maxBytes = DefaultMaxInputBytes
	}
	if len(input) > maxBytes {
		return nil, &InputError{Err: ErrTooLarge, Msg: fmt.Sprintf("input is %d bytes, the limit is %d", len(input), maxBytes)}
	}
	// The decoder's own duplicate check is off: the name set of
	// parser.object finds every duplicate it would, and one set per object
	// is enough.
	//
	// The decoder reads a bytes.Buffer in place, without copying the
	// input; both are emptied before the parser goes back to the pool,
	// which so keeps neither the input nor a copy of it.
	p := parsers.Get().(*parser)
	p.in = *bytes.NewBuffer(input)
	p.dec.Reset(&p.in, jsontext.AllowDuplicateNames(true))
	v, err := p.value()
	if err == nil {
		if _, extra := p.dec.ReadToken(); extra != io.EOF {
			err = errors.New("data after the top-level value")
		}
	}
	p.in = bytes.Buffer{}
	p.dec.Reset(&p.in)
	parsers.Put(p)
	if err != nil {
		return nil, invalidJSON(err)
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, &InputError{Err: ErrNotObject, Msg: "input must be a JSON object"}
	}
	return obj, nil
}

// invalidJSON returns err as an *InputError, saying where the input is
// broken.
func invalidJSON(err error) *InputError {
	var ie *InputError
	if errors.As(err, &ie) {
		return ie
	}
	var se *jsontext.SyntacticError
	switch {
	case errors.As(err, &se):
		err = fmt.Errorf("%w at byte %d", se.Err, se.ByteOffset)
	case err == io.EOF:
		err = io.ErrUnexpectedEOF
	}
	return &InputError{Err: ErrInvalidJSON, Msg: "invalid JSON: " + err.Error()}
}

// parser builds the decoded value of an input from the tokens of a strict
// jsontext.Decoder, which refuses invalid UTF-8 and lone surrogates.
type parser struct {
	in  bytes.Buffer
	dec jsontext.Decoder
}

// parsers keeps decoders and their buffers between calls.
var parsers = sync.Pool{New: func() any { return new(parser) }}

func (p *parser) value() (any, error) {
	tok, err := p.dec.ReadToken()
	if err != nil {
		return nil, err
	}
	switch tok.Kind() {
	case '{':
		return p.object()
	case '[':
		arr := []any{}
		for p.dec.PeekKind() != ']' {
			v, err := p.value()
			if err != nil {
				return nil, err
			}
			arr = append(arr, v)
		}
		_, err := p.dec.ReadToken()
		return arr, err
	case '"':
		return text(tok.String())
	case '0':
		return json.Number(tok.String()), nil
	case 't', 'f':
		return tok.Bool(), nil
	default: // 'n'
		return nil, nil
	}
}

// object reads the members of an object whose '{' was read. Its set holds
// every name's folded NFC form, so a repeated name, or one that differs
// only in case or normalization, is found in one lookup.
func (p *parser) object() (map[string]any, error) {
	obj := map[string]any{}
	var seen names
	for p.dec.PeekKind() != '}' {
		tok, err := p.dec.ReadToken()
		if err != nil {
			return nil, err
		}
		name, err := text(tok.String())
		if err != nil {
			return nil, err
		}
		folded := foldNFC(name)
		if first, dup := seen.add(folded, name); dup {
			msg := fmt.Sprintf("duplicate key %q in a JSON object", name)
			if first != name {
				msg = fmt.Sprintf("keys %q and %q in one JSON object differ only in case or Unicode normalization", first, name)
			}
			return nil, &InputError{Err: ErrDuplicateKey, Msg: msg}
		}
		if obj[name], err = p.value(); err != nil {
			return nil, err
		}
	}
	_, err := p.dec.ReadToken()
	return obj, err
}

// names is the set of an object's member names by folded NFC form: a
// short list while the object is small, a map beyond.
type names struct {
	few  [8][2]string // folded form, name
	n    int
	many map[string]string
}

// add records name under its folded form, or returns the name already
// recorded there.
func (s *names) add(folded, name string) (first string, dup bool) {
	if s.many != nil {
		if first, dup = s.many[folded]; !dup {
			s.many[folded] = name
		}
		return first, dup
	}
	for _, e := range s.few[:s.n] {
		if e[0] == folded {
			return e[1], true
		}
	}
	if s.n < len(s.few) {
		s.few[s.n] = [2]string{folded, name}
		s.n++
		return "", false
	}
	s.many = make(map[string]string, 2*len(s.few))
	for _, e := range s.few {
		s.many[e[0]] = e[1]
	}
	s.many[folded] = name
	return "", false
}

// text refuses a string that holds a Unicode noncharacter (U+FDD0 to
// U+FDEF, and the last two code points of every plane), which I-JSON
// forbids. They are encoded with a lead byte of 0xEF or more.
func text(s string) (string, error) {
	for i := 0; i < len(s); i++ {
		if s[i] < 0xEF {
			continue
		}
		r, _ := utf8.DecodeRuneInString(s[i:])
		if 0xFDD0 <= r && r <= 0xFDEF || r&0xFFFE == 0xFFFE {
			return "", &InputError{Err: ErrInvalidJSON, Msg: fmt.Sprintf("invalid JSON: the Unicode noncharacter %U", r)}
		}
	}
	return s, nil
}
