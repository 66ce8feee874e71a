package stripefake

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// kind is the shape of a form parameter.
type kind int

const (
	scalar     kind = iota // name=v
	list                   // name[]=v or name[0]=v
	hash                   // name[any key]=v (metadata)
	object                 // name[field]=v with fixed fields
	rangeKind              // name=v or name[gt|gte|lt|lte]=v
	notModeled             // a parameter Stripe accepts here that the fake does not model
)

// spec lists the parameters an endpoint accepts.
type spec map[string]kind

// objectFields are the fixed fields of object parameters.
var objectFields = map[string][]string{
	"automatic_payment_methods": {"enabled", "allow_redirects"},
	"created":                   {"gt", "gte", "lt", "lte"},
}

// params is a parsed, validated Stripe form.
type params struct {
	scalars map[string]string
	lists   map[string][]string
	hashes  map[string]map[string]string
}

type indexed struct {
	index int
	value string
}

// parseParams decodes a form-encoded body or query string against sp.
// Unknown parameters are rejected like Stripe does.
func parseParams(raw string, sp spec) (params, *apiError) {
	p := params{scalars: map[string]string{}, lists: map[string][]string{}, hashes: map[string]map[string]string{}}
	values, err := url.ParseQuery(raw)
	if err != nil {
		return p, &apiError{Type: typeInvalidRequest, Message: "Invalid request: the body could not be decoded as application/x-www-form-urlencoded (" + err.Error() + ")."}
	}
	keys := make([]string, 0, len(values))
	for k := range values {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	indexedLists := map[string][]indexed{}
	for _, k := range keys {
		vs := values[k]
		last := vs[len(vs)-1]
		if top, _, _ := strings.Cut(k, "["); sp[top] == notModeled {
			return p, notModeledParam(k)
		}
		name, sub, hasSub, ok := splitKey(k)
		if !ok {
			// metadata[k][x]: the value of metadata[k] is not a string.
			if outer, _, found := strings.Cut(k, "]["); found && sp[strings.SplitN(outer, "[", 2)[0]] == hash {
				return p, notAString(outer + "]")
			}
			return p, unknownParam(k)
		}
		kd, known := sp[name]
		if !known {
			return p, unknownParam(k)
		}
		switch kd {
		case scalar:
			if hasSub {
				return p, notAString(name)
			}
			p.scalars[name] = last
		case rangeKind, object:
			if !hasSub {
				if kd == object {
					return p, &apiError{Type: typeInvalidRequest, Message: "Invalid object", Param: name}
				}
				p.scalars[name] = last
				continue
			}
			if !slices.Contains(objectFields[name], sub) {
				return p, unknownParam(k)
			}
			setHash(p.hashes, name, sub, last)
		case hash:
			switch {
			case !hasSub && last == "":
				if p.hashes[name] == nil {
					p.hashes[name] = map[string]string{}
				}
			case !hasSub || sub == "":
				return p, &apiError{Type: typeInvalidRequest, Message: "Invalid object", Param: name}
			default:
				setHash(p.hashes, name, sub, last)
			}
		case list:
			switch {
			case !hasSub:
				return p, &apiError{Type: typeInvalidRequest, Message: "Invalid array", Param: name}
			case sub == "":
				p.lists[name] = append(p.lists[name], vs...)
			default:
				i, err := strconv.Atoi(sub)
				if err != nil || i < 0 {
					return p, unknownParam(k)
				}
				indexedLists[name] = append(indexedLists[name], indexed{i, last})
			}
		}
	}
	for name, items := range indexedLists {
		slices.SortStableFunc(items, func(a, b indexed) int { return a.index - b.index })
		for _, it := range items {
			p.lists[name] = append(p.lists[name], it.value)
		}
	}
	return p, nil
}

func setHash(h map[string]map[string]string, name, sub, v string) {
	if h[name] == nil {
		h[name] = map[string]string{}
	}
	h[name][sub] = v
}

// splitKey splits "name", "name[]" or "name[sub]"; ok is false for deeper
// nesting or stray brackets.
func splitKey(k string) (name, sub string, hasSub, ok bool) {
	i := strings.IndexByte(k, '[')
	if i < 0 {
		return k, "", false, k != "" && !strings.Contains(k, "]")
	}
	name, rest := k[:i], k[i+1:]
	if name == "" || !strings.HasSuffix(rest, "]") {
		return "", "", false, false
	}
	sub = rest[:len(rest)-1]
	if strings.ContainsAny(sub, "[]") {
		return "", "", false, false
	}
	return name, sub, true, true
}

// canonical encodes p so that two requests with the same parameters, in any
// order or array notation, compare equal.
func (p params) canonical() string {
	v := url.Values{}
	for k, s := range p.scalars {
		v.Set(k, s)
	}
	for k, l := range p.lists {
		for i, s := range l {
			v.Set(k+"["+strconv.Itoa(i)+"]", s)
		}
	}
	for k, h := range p.hashes {
		if len(h) == 0 {
			v.Set(k, "")
		}
		for sub, s := range h {
			v.Set(k+"["+sub+"]", s)
		}
	}
	return v.Encode()
}

func (p params) str(name string) string { return p.scalars[name] }

func (p params) has(name string) bool {
	_, ok := p.scalars[name]
	return ok
}

func (p params) required(name string) (string, *apiError) {
	v, ok := p.scalars[name]
	if !ok || v == "" {
		return "", &apiError{Type: typeInvalidRequest, Code: "parameter_missing", Message: "Missing required param: " + name + ".", Param: name}
	}
	return v, nil
}

// integer parses name as an integer of at least minimum; ok is false when
// the parameter is absent.
func (p params) integer(name string, minimum int64) (n int64, ok bool, e *apiError) {
	v, present := p.scalars[name]
	if !present {
		return 0, false, nil
	}
	return parseInteger(name, v, minimum)
}

func parseInteger(name, v string, minimum int64) (int64, bool, *apiError) {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, true, &apiError{Type: typeInvalidRequest, Code: "parameter_invalid_integer", Message: "Invalid integer: " + v, Param: name}
	}
	if n < minimum {
		return 0, true, &apiError{Type: typeInvalidRequest, Code: "parameter_invalid_integer", Message: fmt.Sprintf("This value must be greater than or equal to %d.", minimum), Param: name}
	}
	return n, true, nil
}

func (p params) boolean(name string) (bool, *apiError) {
	return parseBool(name, p.scalars[name])
}

func parseBool(name, v string) (bool, *apiError) {
	switch v {
	case "", "false":
		return false, nil
	case "true":
		return true, nil
	}
	return false, &apiError{Type: typeInvalidRequest, Message: "Invalid boolean: " + v, Param: name}
}

// metadata validates the metadata hash against Stripe's limits.
func (p params) metadata() (map[string]string, *apiError) {
	md := p.hashes["metadata"]
	if len(md) > 50 {
		return nil, &apiError{Type: typeInvalidRequest, Message: "Metadata can have up to 50 keys.", Param: "metadata"}
	}
	out := make(map[string]string, len(md))
	for k, v := range md {
		if len(k) > 40 {
			return nil, &apiError{Type: typeInvalidRequest, Message: fmt.Sprintf("Metadata keys can have up to 40 characters, but you passed in a key that is %d characters.", len(k)), Param: "metadata[" + k + "]"}
		}
		if len(v) > 500 {
			return nil, &apiError{Type: typeInvalidRequest, Message: fmt.Sprintf("Metadata values can have up to 500 characters, but you passed in a value that is %d characters.", len(v)), Param: "metadata[" + k + "]"}
		}
		if v != "" { // an empty value unsets the key
			out[k] = v
		}
	}
	return out, nil
}

// notAString is the answer to a parameter that needs a single value and
// was sent as an object (amount[x]=1, metadata[k][x]=v).
func notAString(name string) *apiError {
	return &apiError{Type: typeInvalidRequest, Message: "Invalid value for " + name + ": expected a string or a number, not an object.", Param: name}
}

// notModeledParam is the answer to a parameter Stripe accepts but the fake
// does not model: a 501 that says so, never Stripe's "unknown parameter",
// so that no test takes it for Stripe refusing the parameter.
func notModeledParam(k string) *apiError {
	return &apiError{Type: typeInvalidRequest, Code: codeNotModeled, Param: k, status: http.StatusNotImplemented,
		Message: "stripefake does not model the parameter " + k + ": Stripe accepts it, the fake cannot tell what Stripe would do with it."}
}

// codeNotModeled is the error code of what the fake does not model; Stripe
// never sends it.
const codeNotModeled = "stripefake_not_modeled"

func unknownParam(k string) *apiError {
	return &apiError{Type: typeInvalidRequest, Code: "parameter_unknown", Message: "Received unknown parameter: " + k, Param: k, status: http.StatusBadRequest}
}
