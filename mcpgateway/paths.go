package mcpgateway

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/oncely/oncely/client"
)

// segment is one step of a field path: an object member, an array index,
// or every element of an array ([*]).
type segment struct {
	key   string
	index int  // for an index: its value; -1 otherwise
	every bool // [*]
}

// fieldPath is a parsed identity or validated path.
type fieldPath struct {
	text  string    // as configured
	segs  []segment // parsed
	dot   string    // the dotted form client.Field reads: array indexes as segments ("a.0.b"), [*] kept as written
	every bool      // has a [*] segment
}

// parsePath reads a field path: members separated by dots, an array
// element by its index as a segment ("observations.0.entityName") or in
// brackets ("observations[0].entityName"), and every element of an array
// as [*] ("observations[*].contents").
func parsePath(s string) (fieldPath, error) {
	p := fieldPath{text: s}
	if s == "" {
		return p, errors.New("empty path")
	}
	var dot []string
	for part := range strings.SplitSeq(s, ".") {
		name, rest, _ := strings.Cut(part, "[")
		if rest != "" || strings.HasSuffix(part, "[") {
			rest = "[" + rest
		}
		switch {
		case name == "" && rest == "":
			return p, fmt.Errorf("path %q has an empty segment", s)
		case name == "" && len(p.segs) == 0:
			return p, fmt.Errorf("path %q starts with an index", s)
		case name != "":
			if strings.ContainsAny(name, "]*") {
				return p, fmt.Errorf("path %q: %q is not a member name", s, name)
			}
			if i, ok := index(name); ok {
				p.segs = append(p.segs, segment{key: name, index: i})
			} else {
				p.segs = append(p.segs, segment{key: name, index: -1})
			}
			dot = append(dot, name)
		}
		for rest != "" {
			end := strings.IndexByte(rest, ']')
			if rest[0] != '[' || end < 0 {
				return p, fmt.Errorf("path %q: unbalanced brackets", s)
			}
			in := rest[1:end]
			rest = rest[end+1:]
			switch i, ok := index(in); {
			case in == "*":
				p.segs = append(p.segs, segment{index: -1, every: true})
				p.every = true
				dot[len(dot)-1] += "[*]"
			case ok:
				p.segs = append(p.segs, segment{key: in, index: i})
				dot = append(dot, in)
			default:
				return p, fmt.Errorf("path %q: [%s] is not an index or [*]", s, in)
			}
		}
	}
	p.dot = strings.Join(dot, ".")
	return p, nil
}

// index reads a segment that is an array index: decimal, no leading zeros.
func index(s string) (int, bool) {
	i, err := strconv.Atoi(s)
	return i, err == nil && i >= 0 && s == strconv.Itoa(i)
}

// lookup finds the value at a path without [*] in parsed arguments.
func (p fieldPath) lookup(args map[string]any) (any, bool) {
	var cur any = args
	for _, s := range p.segs {
		switch c := cur.(type) {
		case map[string]any:
			v, ok := c[s.key]
			if !ok {
				return nil, false
			}
			cur = v
		case []any:
			if s.index < 0 || s.index >= len(c) {
				return nil, false
			}
			cur = c[s.index]
		default:
			return nil, false
		}
	}
	return cur, true
}

// errNotFound: a value the path names is missing (or null).
var errNotFound = errors.New("missing or null")

// every returns the canonical JSON, as a string, of the values a path with
// [*] names: one list per [*], in the arrays' order, each scalar
// normalized by norm, and a value that is itself an array of scalars
// taken as such. It fails when an element lacks the value, when a value
// is an object, or when there is no element at all.
func (p fieldPath) everyValue(args map[string]any, norm client.Normalizer) (string, error) {
	leaf := normalizer(norm)
	var walk func(cur any, segs []segment) (any, error)
	walk = func(cur any, segs []segment) (any, error) {
		if len(segs) == 0 {
			return leaf(cur)
		}
		s := segs[0]
		switch c := cur.(type) {
		case map[string]any:
			if s.every {
				return nil, errors.New("want an array where the path has [*]")
			}
			v, ok := c[s.key]
			if !ok || v == nil {
				return nil, errNotFound
			}
			return walk(v, segs[1:])
		case []any:
			if s.every {
				if len(c) == 0 {
					return nil, errors.New("empty")
				}
				out := make([]any, len(c))
				for i, e := range c {
					v, err := walk(e, segs[1:])
					if err != nil {
						return nil, err
					}
					out[i] = v
				}
				return out, nil
			}
			if s.index < 0 || s.index >= len(c) {
				return nil, errNotFound
			}
			return walk(c[s.index], segs[1:])
		case nil:
			return nil, errNotFound
		}
		return nil, errors.New("want an object or an array on the way")
	}
	v, err := walk(args, p.segs)
	if err != nil {
		return "", err
	}
	// The leaves are canonical JSON already (normalizer) and the rest is
	// arrays: encoding it is canonical. (A JCS pass would read numbers as
	// float64, and two ids above 2^53 would share a key.)
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "", err
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}

// normalizer returns the function that gives the canonical JSON of one
// value at the end of a [*] path: a scalar normalized and checked as key
// derivation does it (through a client.Tool), or an array of such.
func normalizer(norm client.Normalizer) func(any) (any, error) {
	probe := client.Tool{Name: "leaf", Identity: []client.Field{{Path: "v", Norm: norm}}}
	var leaf func(v any) (any, error)
	leaf = func(v any) (any, error) {
		switch x := v.(type) {
		case []any:
			out := make([]any, len(x))
			for i, e := range x {
				n, err := leaf(e)
				if err != nil {
					return nil, err
				}
				out[i] = n
			}
			return out, nil
		case map[string]any:
			return nil, errors.New("want a string, number, boolean or an array of them, not an object")
		case nil:
			return nil, errNotFound
		}
		in, err := json.Marshal(map[string]any{"v": v})
		if err != nil {
			return nil, err
		}
		canon, err := probe.CanonicalIdentity("r", client.Call{Tool: "leaf", Input: in}, 0)
		if err != nil {
			var ie *client.InputError
			if errors.As(err, &ie) && ie.Msg != "" {
				return nil, errors.New(ie.Msg)
			}
			return nil, err
		}
		// ["run:r","leaf",[["v",VALUE]]]
		var doc []json.RawMessage
		var pairs [][]json.RawMessage
		if err := json.Unmarshal(canon, &doc); err != nil || len(doc) != 3 || json.Unmarshal(doc[2], &pairs) != nil || len(pairs) != 1 || len(pairs[0]) != 2 {
			return nil, fmt.Errorf("mcpgateway: unexpected canonical identity %s", canon)
		}
		return pairs[0][1], nil
	}
	return leaf
}
