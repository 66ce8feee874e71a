package client

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"
)

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
		if _, builtin := f.Norm.(BuiltinNormalizer); f.Norm != nil && !builtin {
			// The program's normalizer returned what no key can hold
			// (a number a double does not hold exactly, a non-scalar):
			// the program must fix it, not the model.
			ie.Err = errors.Join(ErrHostInput, ie.Err)
			ie.Msg = "the custom normalizer's value: " + ie.Msg
		}
		return nil, false, ie
	}
	if required && (v == nil || v == "") {
		// An empty identity would make every empty call one action.
		return nil, false, &InputError{Tool: tool, Field: f.Path, Err: ErrMissingField, Msg: "empty"}
	}
	return v, true, nil
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
		if b, ok := f.Norm.(BuiltinNormalizer); ok && b.isNumber() {
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
