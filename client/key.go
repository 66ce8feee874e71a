package client

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"slices"
	"strconv"
	"strings"

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
	// described is "orderId 123, amount 10" for model-facing text.
	described string
}

// ParseInput decodes a call's input: a JSON object of at most maxBytes,
// with no duplicate keys. Numbers are kept as json.Number.
func ParseInput(input []byte, maxBytes int) (map[string]any, error) {
	if maxBytes <= 0 {
		maxBytes = DefaultMaxInputBytes
	}
	if len(input) > maxBytes {
		return nil, &InputError{Err: ErrTooLarge, Msg: fmt.Sprintf("input is %d bytes, the limit is %d", len(input), maxBytes)}
	}
	dec := json.NewDecoder(bytes.NewReader(input))
	dec.UseNumber()
	var v any
	err := dec.Decode(&v)
	if err == nil && dec.InputOffset() < int64(len(input)) {
		if _, extra := dec.Token(); extra != io.EOF {
			err = errors.New("data after the top-level value")
		}
	}
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	if err != nil {
		return nil, &InputError{Err: ErrInvalidJSON, Msg: "invalid JSON: " + err.Error()}
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, &InputError{Err: ErrNotObject, Msg: "input must be a JSON object"}
	}
	if k, dup := duplicateKey(input); dup {
		return nil, &InputError{Err: ErrDuplicateKey, Msg: fmt.Sprintf("duplicate key %q in a JSON object", k)}
	}
	return obj, nil
}

// duplicateKey reports the first object key that occurs twice in one
// object of doc, which must be valid JSON. encoding/json would silently
// keep the last one, so two readers of the same input could disagree
// about a field. Keys compare after unescaping ("a" and "\u0061" are the
// same key).
func duplicateKey(doc []byte) (string, bool) {
	type frame struct {
		object    bool
		expectKey bool
		keys      []string // objects are small: a slice beats a map
	}
	var stack []frame
	for i := 0; i < len(doc); i++ {
		switch doc[i] {
		case '{':
			stack = append(stack, frame{object: true, expectKey: true})
		case '[':
			stack = append(stack, frame{})
		case '}', ']':
			stack = stack[:len(stack)-1]
		case ',':
			if top := &stack[len(stack)-1]; top.object {
				top.expectKey = true
			}
		case '"':
			end, escaped := i+1, false
			for ; doc[end] != '"'; end++ {
				if doc[end] == '\\' {
					end++
					escaped = true
				}
			}
			if len(stack) > 0 {
				if top := &stack[len(stack)-1]; top.object && top.expectKey {
					key := string(doc[i+1 : end])
					if escaped {
						_ = json.Unmarshal(doc[i:end+1], &key) // valid JSON: cannot fail
					}
					if slices.Contains(top.keys, key) {
						return key, true
					}
					top.keys = append(top.keys, key)
					top.expectKey = false
				}
			}
			i = end
		}
	}
	return "", false
}

// lookup finds a dotted path in a decoded object.
func lookup(obj map[string]any, path string) (any, bool) {
	var cur any = obj
	for part := range strings.SplitSeq(path, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[part]; !ok {
			return nil, false
		}
	}
	return cur, true
}

// fieldValue extracts and normalizes one field. required: identity fields
// must be present, non-null scalars.
func fieldValue(tool string, obj map[string]any, f Field, required bool) (any, error) {
	v, ok := lookup(obj, f.Path)
	if !ok || v == nil {
		if required {
			return nil, &InputError{Tool: tool, Field: f.Path, Err: ErrMissingField, Msg: "missing or null"}
		}
		return nil, nil
	}
	switch v.(type) {
	case map[string]any, []any:
		return nil, &InputError{Tool: tool, Field: f.Path, Err: ErrFieldType, Msg: "want a string, number or boolean, not an object or array"}
	}
	if f.Norm != nil {
		n, err := f.Norm.Normalize(v)
		if err != nil {
			return nil, &InputError{Tool: tool, Field: f.Path, Err: ErrFieldType, Msg: err.Error()}
		}
		return n, nil
	}
	if num, ok := v.(json.Number); ok {
		if err := exactDouble(num); err != nil {
			return nil, &InputError{Tool: tool, Field: f.Path, Err: ErrUnsafeNumber, Msg: err.Error()}
		}
	}
	return v, nil
}

// exactDouble rejects numbers that RFC 8785 would change: canonical JSON
// represents a number by its IEEE double, so 9007199254740993 would hash
// like 9007199254740992 and two different order ids would share a key.
// A number passes when its shortest double form denotes the same value.
func exactDouble(n json.Number) error {
	s := n.String()
	if len(s) > maxNumberText {
		return fmt.Errorf("number %.20s... is too long to hash exactly; declare the field with client.Integer or client.Decimal", s)
	}
	// No double has a decimal exponent beyond ±400 even with a 100-digit
	// mantissa; refusing longer exponents also keeps big.Rat from
	// expanding 1e-99999999 (which ParseFloat quietly rounds to 0).
	if i := strings.IndexAny(s, "eE"); i >= 0 && len(strings.TrimLeft(s[i+1:], "+-0")) > 3 {
		return fmt.Errorf("number %s is out of range", s)
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsInf(f, 0) {
		return fmt.Errorf("number %s is out of range", s)
	}
	if strings.ContainsAny(s, ".eE") || math.Abs(f) >= 1<<53 {
		exact, ok1 := new(big.Rat).SetString(s)
		back, ok2 := new(big.Rat).SetString(strconv.FormatFloat(f, 'g', -1, 64))
		if !ok1 || !ok2 || exact.Cmp(back) != 0 {
			return fmt.Errorf("number %s cannot be hashed exactly (beyond the 2^53 integer range of canonical JSON); declare the field with client.Integer or client.Decimal", s)
		}
	}
	return nil
}

// hashFields returns the hex sha256 of the canonical JSON of
// [prefix..., [[path, value], ...]] and a human description of the fields.
func hashFields(prefix []any, tool string, obj map[string]any, fields []Field, required bool) (string, string, error) {
	canon, desc, err := canonicalFields(prefix, tool, obj, fields, required)
	if err != nil {
		return "", "", err
	}
	sum := sha256.Sum256(canon)
	return hex.EncodeToString(sum[:]), desc, nil
}

// canonicalFields returns the canonical JSON that hashFields hashes.
func canonicalFields(prefix []any, tool string, obj map[string]any, fields []Field, required bool) ([]byte, string, error) {
	pairs := make([]any, 0, len(fields))
	var desc strings.Builder
	for i, f := range fields {
		v, err := fieldValue(tool, obj, f, required)
		if err != nil {
			return nil, "", err
		}
		pairs = append(pairs, []any{f.Path, v})
		if i > 0 {
			desc.WriteString(", ")
		}
		fmt.Fprintf(&desc, "%s %v", f.Path, v)
	}
	doc, err := json.Marshal(append(prefix, pairs))
	if err != nil {
		return nil, "", &InputError{Tool: tool, Err: ErrFieldType, Msg: err.Error()}
	}
	canon, err := jcs.Transform(doc)
	if err != nil {
		return nil, "", &InputError{Tool: tool, Err: ErrFieldType, Msg: "cannot canonicalize: " + err.Error()}
	}
	return canon, desc.String(), nil
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
	canon, _, err := canonicalFields([]any{scope, t.Name}, t.Name, obj, t.Identity, true)
	return canon, err
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
	var id identity
	if id.key, id.described, err = hashFields([]any{scope, t.Name}, t.Name, obj, t.Identity, true); err != nil {
		return identity{}, err
	}
	if len(t.Validated) > 0 {
		if id.fingerprint, _, err = hashFields([]any{t.Name}, t.Name, obj, t.Validated, false); err != nil {
			return identity{}, err
		}
	}
	return id, nil
}
