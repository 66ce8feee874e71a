package mcpgateway

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// upstreamTool is what the gateway knows of an upstream tool from the
// upstream's tools/list.
type upstreamTool struct {
	// input is the input schema as JSON (nil: none, or not an object).
	input map[string]any
	// validator checks arguments against input; nil when the schema is
	// not one the validator reads.
	validator *jsonschema.Resolved
	// output: the tool declares an outputSchema, so that every result
	// that is not an error must carry structuredContent.
	output bool
}

// listTools reads every page of the upstream's tools/list.
func listTools(ctx context.Context, sess *mcp.ClientSession) (map[string]*upstreamTool, error) {
	out := map[string]*upstreamTool{}
	for t, err := range sess.Tools(ctx, nil) {
		if err != nil {
			return nil, err
		}
		ut := &upstreamTool{output: t.OutputSchema != nil}
		if m, ok := asObject(t.InputSchema); ok {
			ut.input = m
			ut.validator = resolve(m)
		}
		out[t.Name] = ut
	}
	return out, nil
}

// asObject returns a schema as a JSON object.
func asObject(schema any) (map[string]any, bool) {
	if m, ok := schema.(map[string]any); ok {
		return m, true
	}
	b, err := json.Marshal(schema)
	if err != nil {
		return nil, false
	}
	var m map[string]any
	return m, json.Unmarshal(b, &m) == nil && m != nil
}

// resolve makes a validator of a schema, or returns nil when the validator
// cannot read it (another draft, a remote reference).
func resolve(m map[string]any) *jsonschema.Resolved {
	b, err := json.Marshal(m)
	if err != nil {
		return nil
	}
	var s jsonschema.Schema
	if json.Unmarshal(b, &s) != nil {
		return nil
	}
	if s.Schema == "" {
		s.Schema = "https://json-schema.org/draft/2020-12/schema"
	}
	r, err := s.Resolve(nil)
	if err != nil {
		return nil
	}
	return r
}

// conforms reports whether args are valid for the tool's input schema:
// true or false when it can tell, and known false when it cannot.
func (u *upstreamTool) conforms(args any) (ok, known bool) {
	if u == nil || u.validator == nil {
		return false, false
	}
	b, err := json.Marshal(args)
	if err != nil {
		return false, false
	}
	var v any
	if json.Unmarshal(b, &v) != nil {
		return false, false
	}
	return u.validator.Validate(v) == nil, true
}

// node is one schema object met on a path, with the root it refers into.
type node struct {
	root, s map[string]any
}

// deref follows a local $ref ("#/$defs/x", "#/definitions/x").
func (n node) deref() node {
	for range 32 { // a cycle of references ends here
		ref, ok := n.s["$ref"].(string)
		if !ok || !strings.HasPrefix(ref, "#") {
			return n
		}
		var cur any = n.root
		for part := range strings.SplitSeq(strings.TrimPrefix(ref, "#"), "/") {
			if part == "" {
				continue
			}
			part = strings.NewReplacer("~1", "/", "~0", "~").Replace(part)
			m, ok := cur.(map[string]any)
			if !ok {
				return n
			}
			cur = m[part]
		}
		m, ok := cur.(map[string]any)
		if !ok {
			return n
		}
		n.s = m
	}
	return n
}

// branches returns the schema and the alternatives it allows (anyOf,
// oneOf, allOf members), each dereferenced.
func (n node) branches() []node {
	n = n.deref()
	out := []node{n}
	for _, k := range []string{"anyOf", "oneOf", "allOf"} {
		if list, ok := n.s[k].([]any); ok {
			for _, b := range list {
				if m, ok := b.(map[string]any); ok {
					out = append(out, node{n.root, m}.branches()...)
				}
			}
		}
	}
	return out
}

// types returns the JSON types a schema allows ("integer" also allows
// "number"'s integers), and whether it says.
func (n node) types() (set []string, known bool) {
	for _, b := range n.branches() {
		switch t := b.s["type"].(type) {
		case string:
			set, known = append(set, t), true
		case []any:
			for _, x := range t {
				if s, ok := x.(string); ok {
					set, known = append(set, s), true
				}
			}
		}
		if _, ok := b.s["properties"]; ok && !slices.Contains(set, "object") {
			set, known = append(set, "object"), true
		}
		if _, ok := b.s["items"]; ok && !slices.Contains(set, "array") {
			set, known = append(set, "array"), true
		}
		if c, ok := b.s["const"]; ok {
			set, known = append(set, jsonType(c)), true
		}
		if e, ok := b.s["enum"].([]any); ok {
			for _, c := range e {
				set, known = append(set, jsonType(c)), true
			}
		}
	}
	return set, known
}

// jsonType names the JSON type of a decoded value.
func jsonType(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case string:
		return "string"
	case float64:
		if x == float64(int64(x)) {
			return "integer"
		}
		return "number"
	case json.Number:
		if _, err := x.Int64(); err == nil {
			return "integer"
		}
		return "number"
	case []any:
		return "array"
	}
	return "object"
}

// step follows one path segment: a member's schema, or an element's. It
// reports whether the schema declares the step (found), and whether it
// rules it out (refused).
func (n node) step(s segment) (next []node, refused string) {
	var saw bool
	for _, b := range n.branches() {
		props, hasProps := b.s["properties"].(map[string]any)
		items, hasItems := b.s["items"]
		switch {
		case !s.every && hasProps:
			saw = true
			if p, ok := props[s.key].(map[string]any); ok {
				next = append(next, node{b.root, p})
				continue
			}
			if ap, ok := b.s["additionalProperties"].(map[string]any); ok {
				next = append(next, node{b.root, ap})
			}
		case (s.every || s.index >= 0) && hasItems:
			saw = true
			if m, ok := items.(map[string]any); ok {
				next = append(next, node{b.root, m})
			}
			if pre, ok := b.s["prefixItems"].([]any); ok && s.index >= 0 && s.index < len(pre) {
				if m, ok := pre[s.index].(map[string]any); ok {
					next = append(next, node{b.root, m})
				}
			}
		}
	}
	switch {
	case len(next) > 0:
		return next, ""
	case (s.every || s.index >= 0) && !n.allows("array") && !(s.index >= 0 && n.allows("object")):
		return nil, "is not an array"
	case !s.every && !n.allows("object") && !(s.index >= 0 && n.allows("array")):
		return nil, "is not an object"
	case saw && !s.every:
		return nil, fmt.Sprintf("has no member %q (it has %s)", s.key, n.members())
	}
	return nil, ""
}

// allows reports whether the schema may be of JSON type t.
func (n node) allows(t string) bool {
	set, known := n.types()
	return !known || slices.Contains(set, t)
}

// members lists the properties a schema declares.
func (n node) members() string {
	var names []string
	for _, b := range n.branches() {
		if props, ok := b.s["properties"].(map[string]any); ok {
			for k := range props {
				names = append(names, k)
			}
		}
	}
	sort.Strings(names)
	names = slices.Compact(names)
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// at returns the schemas a path leads to in the tool's input schema, or
// why the schema rules the path out. No schemas and no reason: the schema
// does not say.
func (u *upstreamTool) at(p fieldPath) ([]node, string) {
	if u == nil || u.input == nil {
		return nil, ""
	}
	cur := []node{{u.input, u.input}}
	for i, s := range p.segs {
		var next []node
		var refused string
		for _, n := range cur {
			nx, r := n.step(s)
			next = append(next, nx...)
			if r != "" && refused == "" {
				refused = r
			}
		}
		if len(next) == 0 {
			if refused != "" {
				return nil, fmt.Sprintf("%s %s in the upstream's input schema", prefixText(p, i), refused)
			}
			return nil, ""
		}
		cur = next
	}
	return cur, ""
}

// prefixText writes the first i+1 segments' parent: the part of the path
// the refused step starts from.
func prefixText(p fieldPath, i int) string {
	if i == 0 {
		return "the arguments object"
	}
	var b strings.Builder
	for _, s := range p.segs[:i] {
		switch {
		case s.every:
			b.WriteString("[*]")
		case b.Len() > 0:
			b.WriteString("." + s.key)
		default:
			b.WriteString(s.key)
		}
	}
	return b.String()
}

// typesAt returns the JSON types the schema allows at the end of a path,
// and whether it says.
func typesAt(nodes []node) (set []string, known bool) {
	for _, n := range nodes {
		t, k := n.types()
		if !k {
			return nil, false
		}
		set = append(set, t...)
	}
	return set, len(nodes) > 0
}

var scalarTypes = []string{"string", "number", "integer", "boolean", "null"}

// checkField tells why a configured field cannot work with the upstream
// tool's input schema, or returns "".
func (u *upstreamTool) checkField(p fieldPath, norm string) string {
	nodes, refused := u.at(p)
	if refused != "" {
		return refused
	}
	set, known := typesAt(nodes)
	if !known {
		return ""
	}
	scalar := slices.ContainsFunc(set, func(t string) bool { return slices.Contains(scalarTypes, t) })
	if !scalar {
		switch {
		case !p.every && slices.Contains(set, "array"):
			return fmt.Sprintf("%s is an array in the upstream's input schema; an identity or validated field is a string, number or boolean — to take every element of an array, write [*] (%s[*], or %s[*].member for arrays of objects)", p.text, p.text, p.text)
		case p.every && slices.Contains(set, "array"):
			for _, n := range nodes {
				if nx, _ := n.step(segment{index: -1, every: true}); len(nx) > 0 {
					if it, k := typesAt(nx); !k || slices.ContainsFunc(it, func(t string) bool { return slices.Contains(scalarTypes, t) }) {
						return ""
					}
				}
			}
			return fmt.Sprintf("%s holds arrays of objects in the upstream's input schema; name a member of them (%s[*].member)", p.text, p.text)
		default:
			return fmt.Sprintf("%s is an object in the upstream's input schema; name one of its members (%s.member)", p.text, p.text)
		}
	}
	if (norm == "integer" || norm == "decimal") && !slices.ContainsFunc(set, func(t string) bool { return t == "string" || t == "number" || t == "integer" }) {
		return fmt.Sprintf("%s is %s in the upstream's input schema, which the %q normalizer does not take", p.text, strings.Join(set, " or "), norm)
	}
	return ""
}

// nearest returns the names among have closest to name, for a "did you
// mean" hint: those within a third of its length in edits.
func nearest(name string, have []string) []string {
	best, out := len(name)/3+1, []string(nil)
	for _, h := range have {
		switch d := editDistance(name, h); {
		case d < best:
			best, out = d, []string{h}
		case d == best:
			out = append(out, h)
		}
	}
	sort.Strings(out)
	return out
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}
