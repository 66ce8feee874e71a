package client

import (
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// ErrNotBound is returned by Bind for an Invocation that an Executor did
// not make (a test that builds one by hand, a reconciler's Invocation from
// the sweeper): it has no parsed input.
var ErrNotBound = errors.New("client: the invocation carries no parsed input (it was not made by an Executor)")

// Bind decodes the call's input into v, a non-nil pointer, from the same
// parse its action key was derived from, so that the tool acts on exactly
// the values that define the action:
//
//   - identity and validated fields arrive normalized: with client.Integer,
//     1000, 1000.0, "1000" and "1e3" all arrive as the JSON number 1000
//     (bind it to an integer type, or big.Int or json.Number beyond 64
//     bits); with Decimal, "10.00" arrives as 10; with Trimmed, " pi_1 "
//     as "pi_1"; with CaseFolded and Email, the folded text; a number
//     without a normalizer arrives as the value its key hashed (10.0 and
//     1e1 as 10);
//   - object member names match struct fields exactly, case included
//     (`json:"amount"` is filled from "amount" only, never from "Amount"),
//     and the input has no names that differ only in case (the Executor
//     refused it);
//   - members without a matching field are ignored.
//
// Struct tags are read as encoding/json/v2 reads them, which for decoding
// is as encoding/json does (`json:"name"`, `json:"-"`, `json:",string"`)
// but for the case of names; types with an UnmarshalJSON or UnmarshalText
// method decode themselves. A number field tagged `json:",string"` takes
// a number in a JSON string, as in encoding/json, and also the number
// bound for an identity or validated field: the model wrote "1000" for
// such a field, and its normalizer (client.Integer) made it 1000. A
// json.Number field takes a number exactly, as in encoding/json.
//
// A value the model sent that does not fit v (a string where v has an
// integer) is an error that is permanent (errclass.Of reports errclass.Permanent:
// nothing was done and the same input fails again) and wraps an
// *InputError naming the field, so a tool may return it as it is.
func (inv Invocation) Bind(v any) error {
	// The decoder is github.com/go-json-experiment/json, the module that
	// is the standard library's encoding/json/v2 (it becomes an alias of
	// it where that package is enabled): it matches names case-sensitively
	// by default. encoding/json (v1) matches them case-insensitively and
	// has no option to stop, and a reflect-based decoder of our own would
	// repeat encoding/json's field rules (tags, embedding, methods).
	if rv := reflect.ValueOf(v); rv.Kind() != reflect.Pointer || rv.IsNil() {
		return Permanent(fmt.Errorf("client: Bind needs a non-nil pointer, not %T", v))
	}
	if inv.args.doc == nil {
		return Permanent(ErrNotBound)
	}
	doc, err := json.Marshal(inv.args.doc) // encoding/json writes json.Number as a number
	if err != nil {
		return Permanent(fmt.Errorf("client: Bind: %w", err))
	}
	err = jsonv2.Unmarshal(doc, v, inv.args.options())
	var se *jsonv2.SemanticError
	switch {
	case err == nil:
		return nil
	case !errors.As(err, &se) || se.JSONKind == 0: // no JSON value is at fault: v's type cannot be decoded into
		return Permanent(fmt.Errorf("client: Bind: %w", err))
	}
	msg := "want " + describeType(se.GoType)
	if se.Err != nil {
		msg += " (" + se.Err.Error() + ")"
	}
	return Permanent(&InputError{Tool: inv.Tool, Field: dottedPath(se.JSONPointer), Err: ErrFieldType, Msg: msg})
}

// boundInput is what Invocation.Bind decodes: the parsed input with every
// identity and validated field replaced by its bound value, and where
// those values are numbers.
type boundInput struct {
	doc     map[string]any
	numbers []jsontext.Pointer
}

// options returns the decoding options of Bind, which read numbers as
// encoding/json does where encoding/json/v2 differs: a json.Number takes
// a number (v2 does not know the type), and a number bound for an
// identity or validated field fills a number field whatever its
// `,string` tag, which would otherwise take a number in a JSON string
// only. The bound number's form is the normalizer's choice, not the
// model's, so the tag cannot have been written for it.
func (b boundInput) options() jsonv2.Options {
	return jsonv2.WithUnmarshalers(jsonv2.UnmarshalFromFunc(func(dec *jsontext.Decoder, v any) error {
		n, isNumber := v.(*json.Number)
		if dec.PeekKind() != '0' || !isNumber && (!plainNumber(reflect.TypeOf(v).Elem()) || !slices.Contains(b.numbers, dec.StackPointer())) {
			return errors.ErrUnsupported // decoded as usual
		}
		num, err := dec.ReadValue()
		switch {
		case err != nil:
			return err
		case isNumber:
			*n = json.Number(num)
			return nil
		}
		return jsonv2.Unmarshal(num, v) // without the tag
	}))
}

// plainNumber reports whether t is a Go integer or float type without
// methods of its own to decode JSON.
func plainNumber(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64:
		p := reflect.PointerTo(t)
		return !p.Implements(jsonUnmarshaler) && !p.Implements(textUnmarshaler) && !p.Implements(jsonv2Unmarshaler) && !p.Implements(jsonv2UnmarshalerFrom)
	}
	return false
}

// pointerTo returns the JSON pointer of a dotted path.
func pointerTo(path string) jsontext.Pointer {
	var p jsontext.Pointer
	for part := range strings.SplitSeq(path, ".") {
		p = p.AppendToken(part)
	}
	return p
}

// describeType names what a Go type holds, in the words of the model's
// JSON.
func describeType(t reflect.Type) string {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil {
		return "another value"
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map:
		return "an object"
	case reflect.Struct:
		if p := reflect.PointerTo(t); !p.Implements(jsonUnmarshaler) && !p.Implements(textUnmarshaler) {
			return "an object"
		}
	}
	return "a value of type " + t.String()
}

var (
	jsonUnmarshaler       = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshaler       = reflect.TypeFor[encoding.TextUnmarshaler]()
	jsonv2Unmarshaler     = reflect.TypeFor[jsonv2.Unmarshaler]()
	jsonv2UnmarshalerFrom = reflect.TypeFor[jsonv2.UnmarshalerFrom]()
)

// dottedPath turns a JSON pointer into a dotted path like a Field's
// ("customer.id"; "" for the whole input).
func dottedPath(p jsontext.Pointer) string {
	var parts []string
	for tok := range p.Tokens() {
		parts = append(parts, tok)
	}
	return strings.Join(parts, ".")
}
