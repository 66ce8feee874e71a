package client

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/gowebpki/jcs"
)

// Key derivation turns a call into its action key. Its files:
//
//	key.go           the identity of one call: Tool.Key, Tool.CanonicalIdentity
//	key_input.go     ParseInput: the I-JSON parse of a call's input
//	key_fields.go    field paths: lookup, the value hashed, the value bound
//	key_numbers.go   numbers hashed exactly, whatever their Go type
//	key_normalize.go the Normalizers (String, Integer, Email, ...)
//	key_canon.go     the RFC 8785 canonical form of [scope, tool, fields]
//
// bind.go reads the hashed values back for the tool (Invocation.Bind).

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
