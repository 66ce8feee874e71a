package client

import (
	"bytes"
	"crypto/sha256"
	"encoding"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/gowebpki/jcs"
)

// DefaultMaxInputBytes bounds a call's input.
const DefaultMaxInputBytes = 1 << 20

// Canonicalize returns the RFC 8785 (JSON Canonicalization Scheme) form of
// a JSON document: sorted keys, no white space, numbers in their shortest
// IEEE double form, strings minimally escaped.
func Canonicalize(doc []byte) ([]byte, error) {
	return jcs.Transform(doc)
}

// identity is what key derivation yields for one call.
type identity struct {
	key         string
	fingerprint string
	// input is the parsed input, as the model sent it.
	input map[string]any
	// hashed holds the hashed value of every identity field, then of
	// every present validated field, in the order of their declaration.
	// The texts and the bound input that need them are built from it only
	// when a call needs them (described, args).
	hashed []hashedField
}

// hashedField is a field and the value that was hashed for it.
type hashedField struct {
	field Field
	value any
}

// described returns "orderId 123, amount 10", the hashed values of t's
// identity fields, for model-facing text.
func (id *identity) described(t *Tool) string {
	var desc strings.Builder
	for i, h := range id.hashed[:len(t.Identity)] {
		if i > 0 {
			desc.WriteString(", ")
		}
		desc.WriteString(h.field.Path)
		desc.WriteByte(' ')
		if s, ok := h.value.(string); ok {
			desc.WriteString(s)
		} else {
			fmt.Fprint(&desc, h.value)
		}
	}
	return desc.String()
}

// args returns the parsed input with every identity and validated field
// replaced by its bound value (bindValue), for Invocation.Bind. It
// changes the input in place; calling it again changes nothing more.
func (id *identity) args() boundInput {
	b := boundInput{doc: id.input}
	for _, h := range id.hashed {
		v := bindValue(h.field, h.value)
		setPath(id.input, h.field.Path, v)
		if _, ok := v.(json.Number); ok {
			b.numbers = append(b.numbers, pointerTo(h.field.Path))
		}
	}
	return b
}

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

// lookup finds a dotted path in a decoded object. A segment names an
// object member, or an array element by its index in decimal without
// leading zeros ("observations.0.entityName"), as the MCP gateway reads
// a path.
func lookup(obj map[string]any, path string) (any, bool) {
	var cur any = obj
	for part := range strings.SplitSeq(path, ".") {
		var ok bool
		switch c := cur.(type) {
		case map[string]any:
			cur, ok = c[part]
		case []any:
			var i int
			if i, ok = arrayIndex(part, len(c)); ok {
				cur = c[i]
			}
		}
		if !ok {
			return nil, false
		}
	}
	return cur, true
}

// arrayIndex reads a path segment as the index of an element of an array
// of n elements.
func arrayIndex(seg string, n int) (int, bool) {
	i, err := strconv.Atoi(seg)
	return i, err == nil && i >= 0 && i < n && seg == strconv.Itoa(i)
}

// fieldValue extracts and normalizes one field. required: identity fields
// must be present, non-null scalars, and not empty after normalization
// (nil or ""). present reports whether the field had a value.
func fieldValue(tool string, obj map[string]any, f Field, required bool) (v any, present bool, err error) {
	v, ok := lookup(obj, f.Path)
	if !ok || v == nil {
		if required {
			return nil, false, &InputError{Tool: tool, Field: f.Path, Err: ErrMissingField, Msg: "missing or null"}
		}
		return nil, false, nil
	}
	switch v.(type) {
	case map[string]any, []any:
		return nil, false, &InputError{Tool: tool, Field: f.Path, Err: ErrFieldType, Msg: "want a string, number or boolean, not an object or array"}
	}
	if f.Norm != nil {
		if v, err = f.Norm.Normalize(v); err != nil {
			return nil, false, &InputError{Tool: tool, Field: f.Path, Err: ErrFieldType, Msg: err.Error()}
		}
	}
	v, ie := exactValue(v)
	if ie != nil {
		ie.Tool, ie.Field = tool, f.Path
		return nil, false, ie
	}
	if required && (v == nil || v == "") {
		// An empty identity would make every empty call one action.
		return nil, false, &InputError{Tool: tool, Field: f.Path, Err: ErrMissingField, Msg: "empty"}
	}
	return v, true, nil
}

// exactValue returns v, a decoded input value or a Normalizer's output, as
// key derivation hashes it: nil, a bool, a string, or a json.Number
// whose value an IEEE double holds exactly, so that canonical JSON (which
// writes a number as its double) keeps it. A json.Number is kept as it
// is written; a number of another type becomes one in plain decimal.
// It refuses, with an *InputError without Tool and Field, a string that
// is not valid UTF-8 and a value that is not a scalar (ErrFieldType), and
// a number that is not exactly a double's (ErrUnsafeNumber): it never
// rounds.
//
// Numbers may be of any Go integer or float type, json.Number, *big.Int,
// *big.Rat or *big.Float; other types are taken by their JSON form
// (MarshalJSON, MarshalText) or by their kind (a named string or integer
// type). A float is the number its shortest decimal form at its precision
// denotes (float64 0.1 is 0.1, float32 0.1 too), but an integral float only
// when its precision holds every integer around it (below 2^53 for a
// float64, 2^24 for a float32, 2^Prec for a big.Float): a larger one may be
// the rounding of another integer (float64(9007199254740993) is
// 9007199254740992), so it is refused.
func exactValue(v any) (any, *InputError) {
	switch x := v.(type) {
	case nil, bool:
		return v, nil
	case string:
		if !utf8.ValidString(x) {
			return nil, &InputError{Err: ErrFieldType, Msg: "not valid UTF-8"}
		}
		return v, nil
	case json.Number:
		if _, ie := exactNumber(x.String()); ie != nil {
			return nil, ie
		}
		return v, nil // as the model wrote it, for the texts; bound in plain decimal
	case float64:
		return exactFloat(x, 53)
	case float32:
		return exactFloat(float64(x), 24)
	case *big.Int:
		if x == nil {
			return nil, nil
		}
		return exactNumber(x.String())
	case *big.Rat:
		if x == nil {
			return nil, nil
		}
		if x.IsInt() {
			return exactNumber(x.Num().String())
		}
		n, exact := x.FloatPrec()
		if !exact {
			return nil, &InputError{Err: ErrUnsafeNumber, Msg: fmt.Sprintf("number %s has no exact decimal form", x)}
		}
		return exactNumber(x.FloatString(n))
	case *big.Float:
		if x == nil {
			return nil, nil
		}
		return exactBigFloat(x)
	case json.Marshaler, encoding.TextMarshaler:
		js, err := json.Marshal(v)
		if err != nil {
			return nil, &InputError{Err: ErrFieldType, Msg: err.Error()}
		}
		d := json.NewDecoder(bytes.NewReader(js))
		d.UseNumber()
		var s any
		if err := d.Decode(&s); err != nil {
			return nil, &InputError{Err: ErrFieldType, Msg: err.Error()}
		}
		switch s.(type) {
		case map[string]any, []any:
			return nil, notScalar(v)
		}
		return exactValue(s)
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Bool:
		return rv.Bool(), nil
	case reflect.String:
		return exactValue(rv.String())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return exactNumber(strconv.FormatInt(rv.Int(), 10))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return exactNumber(strconv.FormatUint(rv.Uint(), 10))
	case reflect.Float32:
		return exactFloat(rv.Float(), 24)
	case reflect.Float64:
		return exactFloat(rv.Float(), 53)
	case reflect.Pointer:
		if rv.IsNil() {
			return nil, nil
		}
		return exactValue(rv.Elem().Interface())
	}
	return nil, notScalar(v)
}

func notScalar(v any) *InputError {
	return &InputError{Err: ErrFieldType, Msg: fmt.Sprintf("the normalizer returned %T, not a string, number, boolean or null", v)}
}

// exactFloat is exactValue of a float of the given precision in bits.
func exactFloat(f float64, prec uint) (any, *InputError) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return nil, &InputError{Err: ErrUnsafeNumber, Msg: fmt.Sprintf("number %v is not finite", f)}
	}
	return exactBigFloat(new(big.Float).SetPrec(prec).SetFloat64(f))
}

// exactBigFloat is exactValue of a finite or infinite big.Float.
func exactBigFloat(x *big.Float) (any, *InputError) {
	switch {
	case x.IsInf():
		return nil, &InputError{Err: ErrUnsafeNumber, Msg: fmt.Sprintf("number %v is not finite", x)}
	case x.IsInt() && x.MantExp(nil) > int(x.Prec()):
		// |x| >= 2^prec: the integers around x are not all floats of
		// this precision, so x may stand for one of its neighbours.
		return nil, &InputError{Err: ErrUnsafeNumber, Msg: fmt.Sprintf("number %s is an integer too large to be exact in a %d-bit float", x.Text('g', -1), x.Prec())}
	}
	return exactNumber(x.Text('g', -1))
}

// exactNumber returns the json.Number, in plain decimal, that key
// derivation hashes for a number written in decimal, or an *InputError
// (without Tool and Field) when canonical JSON would change it: canonical
// JSON represents a number by the shortest decimal form of its IEEE
// double, so 9007199254740993 would hash like 9007199254740992 and two
// different order ids would share a key. A number passes when it has at
// most MaxNumberDigits digits written out and is that shortest form's
// value (10, 1e1, 10.0 and 0.1 pass, as 10, 10, 10 and 0.1;
// 9007199254740993 and 0.1000000000000000001 do not). Two different
// numbers that pass have different doubles.
func exactNumber(s string) (any, *InputError) {
	d, err := parseDecimal(s)
	if err != nil {
		sentinel := ErrUnsafeNumber
		if errors.Is(err, errNotDecimal) {
			sentinel = ErrFieldType
		}
		return nil, &InputError{Err: sentinel, Msg: err.Error()}
	}
	exact := d.String()
	f, err := strconv.ParseFloat(exact, 64)
	if err != nil || math.IsInf(f, 0) {
		return nil, &InputError{Err: ErrUnsafeNumber, Msg: fmt.Sprintf("number %s is out of range", s)}
	}
	// The digits of a double's shortest form are at most 17: comparing
	// them with d's needs no big arithmetic.
	if short, err := parseDecimal(strconv.FormatFloat(f, 'e', -1, 64)); err != nil || short != d {
		return nil, &InputError{Err: ErrUnsafeNumber, Msg: fmt.Sprintf("number %s is too large or too precise to be compared exactly (integers are exact up to 2^53)", s)}
	}
	return json.Number(exact), nil
}

// bindValue is the value the tool binds for a field whose hashed value is
// v: the number a key was derived from is bound in plain decimal (10.0 and
// 1e1 without a normalizer both hash and bind as 10); Integer and Decimal
// hash their number as exact decimal text and bind it as that number;
// every other value is bound as it was hashed.
func bindValue(f Field, v any) any {
	switch x := v.(type) {
	case json.Number:
		if d, err := parseDecimal(x.String()); err == nil {
			return json.Number(d.String())
		}
	case string:
		if _, ok := f.Norm.(numberNormalizer); ok {
			return json.Number(x)
		}
	}
	return v
}

// setPath replaces the value at a dotted path that lookup found.
func setPath(obj map[string]any, path string, v any) {
	var cur any = obj
	for {
		part, rest, nested := strings.Cut(path, ".")
		switch c := cur.(type) {
		case map[string]any:
			if !nested {
				c[part] = v
				return
			}
			cur = c[part]
		case []any:
			i, _ := arrayIndex(part, len(c))
			if !nested {
				c[i] = v
				return
			}
			cur = c[i]
		default:
			return
		}
		path = rest
	}
}

// hashFields returns the hex sha256 of the canonical JSON of
// [prefix..., [[path, value], ...]], and appends every present field and
// its hashed value to *hashed.
func hashFields(prefix []string, tool string, obj map[string]any, fields []Field, required bool, hashed *[]hashedField) (string, error) {
	var buf [256]byte
	canon, err := canonicalFields(buf[:0], prefix, tool, obj, fields, required, hashed)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(canon)
	var hexSum [2 * sha256.Size]byte
	hex.Encode(hexSum[:], sum[:])
	return string(hexSum[:]), nil
}

// canonicalFields appends the canonical JSON that hashFields hashes to b.
func canonicalFields(b []byte, prefix []string, tool string, obj map[string]any, fields []Field, required bool, hashed *[]hashedField) ([]byte, error) {
	paths := make([]string, len(fields))
	values := make([]any, len(fields))
	for i, f := range fields {
		v, present, err := fieldValue(tool, obj, f, required)
		if err != nil {
			return nil, err
		}
		paths[i], values[i] = f.Path, v
		if present {
			*hashed = append(*hashed, hashedField{f, v})
		}
	}
	if canon, ok := appendIdentity(b, prefix, paths, values); ok {
		return canon, nil
	}
	// Every value is one the direct encoder takes (exactValue); a run id,
	// tenant, tool name or path that is not valid UTF-8 is not:
	// canonicalize through encoding/json, which replaces its invalid bytes.
	doc := make([]any, 0, len(prefix)+1)
	for _, s := range prefix {
		doc = append(doc, s)
	}
	pairs := make([]any, len(fields))
	for i := range fields {
		pairs[i] = []any{paths[i], values[i]}
	}
	js, err := json.Marshal(append(doc, pairs))
	if err != nil {
		return nil, &InputError{Tool: tool, Err: ErrFieldType, Msg: err.Error()}
	}
	canon, err := jcs.Transform(js)
	if err != nil {
		return nil, &InputError{Tool: tool, Err: ErrFieldType, Msg: "cannot canonicalize: " + err.Error()}
	}
	return append(b, canon...), nil
}

// scopeOf returns the scope element of the key.
func (t *Tool) scopeOf(runID, tenant string) (string, error) {
	switch t.Scope {
	case ScopeTenant:
		if tenant == "" {
			return "", &InputError{Tool: t.Name, Err: ErrMissingField, Msg: "tool is tenant-scoped but the call has no tenant"}
		}
		return "tenant:" + tenant, nil
	case ScopeGlobal:
		return "global", nil
	default:
		if runID == "" {
			return "", &InputError{Tool: t.Name, Err: ErrMissingField, Msg: "run id is empty"}
		}
		return "run:" + runID, nil
	}
}

// Key derives the action key of a call to t: the hex sha256 of the RFC
// 8785 canonical JSON of [scope, tool, [[field, value], ...]], where the
// values are the normalized identity fields. It fails with an *InputError
// when an identity field is missing, null, not a scalar, or a number that
// cannot be hashed exactly.
func (t *Tool) Key(runID string, call Call, maxInputBytes int) (string, error) {
	id, err := t.identify(runID, call, maxInputBytes)
	return id.key, err
}

// CanonicalIdentity returns the RFC 8785 canonical JSON that Key hashes,
// [scope, tool, [[field, value], ...]] with the normalized identity
// values: what two calls must share to be the same action.
func (t *Tool) CanonicalIdentity(runID string, call Call, maxInputBytes int) ([]byte, error) {
	obj, scope, err := t.parse(runID, call, maxInputBytes)
	if err != nil {
		return nil, err
	}
	var hashed []hashedField
	return canonicalFields(nil, []string{scope, t.Name}, t.Name, obj, t.Identity, true, &hashed)
}

// parse decodes a call's input and resolves the key's scope.
func (t *Tool) parse(runID string, call Call, maxInputBytes int) (map[string]any, string, error) {
	obj, err := ParseInput(call.Input, maxInputBytes)
	if err != nil {
		var ie *InputError
		if errors.As(err, &ie) {
			ie.Tool = t.Name
		}
		return nil, "", err
	}
	scope, err := t.scopeOf(runID, call.Tenant)
	return obj, scope, err
}

func (t *Tool) identify(runID string, call Call, maxInputBytes int) (identity, error) {
	obj, scope, err := t.parse(runID, call, maxInputBytes)
	if err != nil {
		return identity{}, err
	}
	id := identity{input: obj, hashed: make([]hashedField, 0, len(t.Identity)+len(t.Validated))}
	if id.key, err = hashFields([]string{scope, t.Name}, t.Name, obj, t.Identity, true, &id.hashed); err != nil {
		return identity{}, err
	}
	if len(t.Validated) > 0 {
		if id.fingerprint, err = hashFields([]string{t.Name}, t.Name, obj, t.Validated, false, &id.hashed); err != nil {
			return identity{}, err
		}
	}
	return id, nil
}
