package client

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/gowebpki/jcs"
	"golang.org/x/text/unicode/norm"
)

// TestJCSRFC8785Vectors checks jcs.Transform, the reference of the
// canonical identity (FuzzAppendIdentity) and its fallback, against the
// RFC's vectors.
func TestJCSRFC8785Vectors(t *testing.T) {
	t.Parallel()
	inputs, err := filepath.Glob("testdata/rfc8785/input/*.json")
	if err != nil || len(inputs) < 6 {
		t.Fatalf("want the 6 RFC 8785 vectors, found %d (%v)", len(inputs), err)
	}
	for _, in := range inputs {
		name := filepath.Base(in)
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			src, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			want, err := os.ReadFile(filepath.Join("testdata/rfc8785/output", name))
			if err != nil {
				t.Fatal(err)
			}
			got, err := jcs.Transform(src)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("canonical form differs\n got %q\nwant %q", got, want)
			}
		})
	}
}

func key(t *testing.T, tool *Tool, runID, input string) string {
	t.Helper()
	k, err := tool.Key(runID, Call{Tool: tool.Name, Input: json.RawMessage(input)}, 0)
	if err != nil {
		t.Fatalf("key of %s: %v", input, err)
	}
	if len(k) != 64 {
		t.Fatalf("key %q is not hex sha256", k)
	}
	return k
}

func TestKeySameAction(t *testing.T) {
	t.Parallel()
	refund := &Tool{Name: "refund_order", Identity: []Field{{Path: "orderId"}, {Path: "amount"}, {Path: "customer.id"}}}
	base := key(t, refund, "run1", `{"orderId":"o-1","amount":10,"customer":{"id":7},"note":"please"}`)
	same := []string{
		`{"amount":10,"orderId":"o-1","customer":{"id":7}}`,              // key order, no free text
		`{ "orderId" : "o-1" , "amount" : 10.0, "customer": {"id": 7} }`, // whitespace, 10.0
		`{"orderId":"o-1","amount":1e1,"customer":{"id":7.0},"note":"rephrased, kindly"}`,
		`{"customer":{"name":"x","id":7},"amount":1E1,"orderId":"o-1"}`,
	}
	for _, in := range same {
		if got := key(t, refund, "run1", in); got != base {
			t.Errorf("%s: key changed", in)
		}
	}
	different := map[string]string{
		"value":  `{"orderId":"o-2","amount":10,"customer":{"id":7}}`,
		"amount": `{"orderId":"o-1","amount":11,"customer":{"id":7}}`,
		"nested": `{"orderId":"o-1","amount":10,"customer":{"id":8}}`,
		"type":   `{"orderId":"o-1","amount":"10","customer":{"id":7}}`, // exact canonical JSON: "10" is not 10
	}
	for what, in := range different {
		if got := key(t, refund, "run1", in); got == base {
			t.Errorf("different %s gave the same key", what)
		}
	}
	if key(t, refund, "run2", `{"orderId":"o-1","amount":10,"customer":{"id":7}}`) == base {
		t.Error("another run gave the same key")
	}
	other := &Tool{Name: "charge_order", Identity: refund.Identity}
	if key(t, other, "run1", `{"orderId":"o-1","amount":10,"customer":{"id":7}}`) == base {
		t.Error("another tool gave the same key")
	}
}

func TestKeyScopes(t *testing.T) {
	t.Parallel()
	in := `{"email":"a@b.com"}`
	run := &Tool{Name: "invite", Identity: []Field{{Path: "email"}}}
	tenant := &Tool{Name: "invite", Identity: run.Identity, Scope: ScopeTenant}
	global := &Tool{Name: "invite", Identity: run.Identity, Scope: ScopeGlobal}
	k := func(tool *Tool, runID, ten string) string {
		t.Helper()
		s, err := tool.Key(runID, Call{Input: json.RawMessage(in), Tenant: ten}, 0)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	if k(run, "r1", "") == k(run, "r2", "") {
		t.Error("run scope: runs share a key")
	}
	if k(tenant, "r1", "acme") != k(tenant, "r2", "acme") {
		t.Error("tenant scope: runs of one tenant differ")
	}
	if k(tenant, "r1", "acme") == k(tenant, "r1", "other") {
		t.Error("tenant scope: tenants share a key")
	}
	if k(global, "r1", "a") != k(global, "r2", "b") {
		t.Error("global scope differs across runs and tenants")
	}
	if k(run, "global", "") == k(global, "x", "") {
		t.Error("a run named global shares the global key")
	}
	if _, err := tenant.Key("r1", Call{Input: json.RawMessage(in)}, 0); !errors.Is(err, ErrMissingField) {
		t.Errorf("tenant scope without tenant: %v", err)
	}
	if _, err := run.Key("", Call{Input: json.RawMessage(in)}, 0); !errors.Is(err, ErrMissingField) {
		t.Errorf("run scope without run id: %v", err)
	}
}

// Two order ids that RFC 8785 would both turn into 9007199254740992.
func TestKeyBigIntegersNeverCollide(t *testing.T) {
	t.Parallel()
	exact := &Tool{Name: "ship", Identity: []Field{{Path: "orderId"}}}
	for _, in := range []string{`{"orderId":9007199254740993}`, `{"orderId":-9007199254740993}`, `{"orderId":1.00000000000000001}`, `{"orderId":1e400}`,
		`{"orderId":1e-99999999}`, `{"orderId":-5E+123456789}`} {
		_, err := exact.Key("r", Call{Input: json.RawMessage(in)}, 0)
		if !errors.Is(err, ErrUnsafeNumber) {
			t.Errorf("%s: want ErrUnsafeNumber, got %v", in, err)
		}
		// The model reads this: it speaks of the number, not of the code.
		if ie := new(InputError); errors.As(err, &ie) && strings.Contains(ie.Msg, "client.") {
			t.Errorf("%s: developer advice in the model's text: %s", in, ie.Msg)
		}
	}
	// Exactly representable numbers, even large ones, are fine.
	key(t, exact, "r", `{"orderId":9007199254740992}`)
	key(t, exact, "r", `{"orderId":1e30}`)
	key(t, exact, "r", `{"orderId":0.1}`)

	integer := &Tool{Name: "ship", Identity: []Field{{Path: "orderId", Norm: Integer}}}
	a := key(t, integer, "r", `{"orderId":9007199254740993}`)
	b := key(t, integer, "r", `{"orderId":9007199254740992}`)
	if a == b {
		t.Fatal("9007199254740993 and 9007199254740992 share a key")
	}
	if c := key(t, integer, "r", `{"orderId":"9007199254740993"}`); c != a {
		t.Error("Integer: the string form of the same id differs")
	}
}

func TestNormalizersAbsorbDrift(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		norm      Normalizer
		same      []string // JSON values that must hash alike
		different []string // each must differ from same[0]
		invalid   []string
	}{
		{"Integer", Integer,
			[]string{`42`, `"42"`, `42.0`, `" 42 "`, `4.2e1`, `"+42"`},
			[]string{`43`, `-42`, `"420"`},
			[]string{`42.5`, `"abc"`, `true`, `"0x2a"`, `"1e99999"`, `"1/2"`}},
		{"Decimal", Decimal,
			[]string{`10`, `"10.00"`, `10.0`, `1e1`, `"10"`, `" 10.000 "`},
			[]string{`10.01`, `10.1`, `"100"`, `-10`},
			[]string{`"ten"`, `false`, `""`}},
		{"String", String,
			[]string{`"42"`, `42`},
			[]string{`"42 "`, `"043"`, `43`},
			nil},
		{"Trimmed", Trimmed,
			[]string{`"abc"`, `" abc\n"`},
			[]string{`"ABC"`, `"a bc"`},
			nil},
		{"CaseFolded", CaseFolded,
			[]string{`"Ticket-7"`, `" ticket-7 "`, `"TICKET-7"`},
			[]string{`"ticket-8"`},
			nil},
		{"Email", Email,
			[]string{`"a@b.com"`, `"A@B.com "`, `" a@B.COM"`},
			[]string{`"a@c.com"`, `"ab@b.com"`},
			[]string{`"not an address"`, `"a@"`, `"@b.com"`, `"a@b@c"`, `7`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			tool := &Tool{Name: "t", Identity: []Field{{Path: "v", Norm: c.norm}}}
			in := func(v string) string { return `{"v":` + v + `}` }
			base := key(t, tool, "r", in(c.same[0]))
			for _, v := range c.same[1:] {
				if key(t, tool, "r", in(v)) != base {
					t.Errorf("%s and %s differ", c.same[0], v)
				}
			}
			for _, v := range c.different {
				if key(t, tool, "r", in(v)) == base {
					t.Errorf("%s and %s share a key", c.same[0], v)
				}
			}
			for _, v := range c.invalid {
				if _, err := tool.Key("r", Call{Input: json.RawMessage(in(v))}, 0); !errors.Is(err, ErrFieldType) {
					t.Errorf("%s: want ErrFieldType, got %v", v, err)
				}
			}
		})
	}
}

func TestKeyBadInput(t *testing.T) {
	t.Parallel()
	tool := &Tool{Name: "send_reply", Identity: []Field{{Path: "ticketId"}, {Path: "customer.id"}}}
	cases := []struct {
		in    string
		want  error
		field string
	}{
		{`{"customer":{"id":1}}`, ErrMissingField, "ticketId"},
		{`{"ticketId":null,"customer":{"id":1}}`, ErrMissingField, "ticketId"},
		{`{"ticketId":1,"customer":{}}`, ErrMissingField, "customer.id"},
		{`{"ticketId":1,"customer":"c1"}`, ErrMissingField, "customer.id"},
		{`{"ticketId":{"id":1},"customer":{"id":1}}`, ErrFieldType, "ticketId"},
		{`{"ticketId":[1],"customer":{"id":1}}`, ErrFieldType, "ticketId"},
		{`[1,2]`, ErrNotObject, ""},
		{`"text"`, ErrNotObject, ""},
		{`null`, ErrNotObject, ""},
		{`{"ticketId":1,`, ErrInvalidJSON, ""},
		{`{"ticketId":1} {}`, ErrInvalidJSON, ""},
		{``, ErrInvalidJSON, ""},
		{`{"ticketId":1,"ticketId":2,"customer":{"id":1}}`, ErrDuplicateKey, ""},
		{`{"ticketId":1,"customer":{"id":1,"id":2}}`, ErrDuplicateKey, ""},
		{`{"ticketId":1,"customer":{"id":1},"x":"` + strings.Repeat("a", DefaultMaxInputBytes) + `"}`, ErrTooLarge, ""},
	}
	for _, c := range cases {
		_, err := tool.Key("r", Call{Input: json.RawMessage(c.in)}, 0)
		if !errors.Is(err, c.want) {
			t.Errorf("%.60s: want %v, got %v", c.in, c.want, err)
			continue
		}
		var ie *InputError
		if !errors.As(err, &ie) || ie.Field != c.field || ie.Tool != "send_reply" {
			t.Errorf("%.60s: want *InputError for field %q of send_reply, got %#v", c.in, c.field, err)
		}
	}
}

func FuzzKey(f *testing.F) {
	for _, s := range []string{`{"a":1,"b":"x"}`, `{"a":{"b":[1,2]}}`, `{"a":9007199254740993}`, `[]`, `{"a":1,"a":2}`,
		`{"a":"x","b":"10.50","c":" Σίσυφος "}`, `{"a":1,"A":2}`, "{\"a\":\"ord\xff\"}", `{"a":"\ud800"}`, `{"a":"\ud83d\ude00","c":"ſ"}`,
		`{"a":"\uffff"}`, `{"a":0,"b":"0x2a"}`, `{"a":1e99,"b":1e-100}`, `{"a":"K","c":"\u212a"}`} {
		f.Add([]byte(s))
	}
	tool := &Tool{Name: "t", Identity: []Field{{Path: "a"}}, Validated: []Field{{Path: "b", Norm: Decimal}, {Path: "c", Norm: CaseFolded}}}
	f.Fuzz(func(t *testing.T, in []byte) {
		id, err := tool.identify("r", Call{Input: in}, 0)
		if err != nil {
			var ie *InputError
			if !errors.As(err, &ie) {
				t.Fatalf("error is not an *InputError: %v", err)
			}
			// Valid JSON is refused as invalid only when it is not I-JSON.
			if errors.Is(err, ErrInvalidJSON) && json.Valid(in) && iJSON(in) {
				t.Fatalf("I-JSON refused as invalid: %v", err)
			}
			return
		}
		if !iJSON(in) {
			t.Fatalf("accepted input that is not I-JSON (invalid UTF-8, a lone surrogate or a noncharacter)")
		}
		// A re-encoding of the same document (other key order and spacing)
		// must give the same key.
		var v any
		dec := json.NewDecoder(bytes.NewReader(in))
		dec.UseNumber()
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("accepted input does not decode: %v", err)
		}
		again, _ := json.MarshalIndent(v, "", "  ")
		id2, err := tool.identify("r", Call{Input: again}, 0)
		if err != nil || id.key != id2.key || id.fingerprint != id2.fingerprint {
			t.Fatalf("re-encoded input: key %s vs %s, err %v", id.key, id2.key, err)
		}
		// What the tool binds is what the key was made of: as an input, it
		// gives the same key and fingerprint.
		bound, err := json.Marshal(id.args().doc)
		if err != nil {
			t.Fatal(err)
		}
		id3, err := tool.identify("r", Call{Input: bound}, 0)
		if err != nil || id.key != id3.key || id.fingerprint != id3.fingerprint {
			t.Fatalf("bound values %s: key %s vs %s, err %v", bound, id.key, id3.key, err)
		}
	})
}

// iJSON is an independent check that a valid JSON document is I-JSON:
// valid UTF-8, no escaped lone surrogate, no noncharacter.
func iJSON(doc []byte) bool {
	if !utf8.Valid(doc) {
		return false
	}
	hex4 := func(i int) (rune, bool) {
		if i+6 > len(doc) || doc[i] != '\\' || doc[i+1] != 'u' {
			return 0, false
		}
		n, err := strconv.ParseUint(string(doc[i+2:i+6]), 16, 32)
		return rune(n), err == nil
	}
	for i := 0; i < len(doc); i++ {
		if doc[i] != '\\' { // valid JSON: a backslash is always in a string
			continue
		}
		r, ok := hex4(i)
		switch {
		case !ok: // another escape: skip the escaped character
			i++
			continue
		case 0xD800 <= r && r < 0xDC00:
			lo, ok := hex4(i + 6)
			if !ok || lo < 0xDC00 || lo > 0xDFFF {
				return false
			}
			r = utf16.DecodeRune(r, lo)
			i += 6
		case 0xDC00 <= r && r <= 0xDFFF:
			return false
		}
		if isNoncharacter(r) {
			return false
		}
		i += 5
	}
	for _, r := range string(doc) {
		if isNoncharacter(r) {
			return false
		}
	}
	return true
}

func isNoncharacter(r rune) bool {
	return unicode.Is(unicode.Noncharacter_Code_Point, r)
}

// referenceDuplicate finds names that collide in one object (equal after
// NFC and case folding) by walking the decoder's tokens and comparing every
// pair.
func referenceDuplicate(doc []byte) (bool, error) {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var walk func() (bool, error)
	walk = func() (bool, error) {
		tok, err := dec.Token()
		if err != nil {
			return false, err
		}
		d, ok := tok.(json.Delim)
		if !ok {
			return false, nil
		}
		var names []string
		for dec.More() {
			if d == '{' {
				k, err := dec.Token()
				if err != nil {
					return false, err
				}
				for _, n := range names {
					if foldNFC(n) == foldNFC(k.(string)) {
						return true, nil
					}
				}
				names = append(names, k.(string))
			}
			if dup, err := walk(); dup || err != nil {
				return dup, err
			}
		}
		_, err = dec.Token()
		return false, err
	}
	return walk()
}

func TestDuplicateKeys(t *testing.T) {
	t.Parallel()
	for in, dup := range map[string]bool{
		`{"a":1,"\u0061":2}`:                true,
		`{"a":{"b":1,"b":2}}`:               true,
		`{"a":[{"b":1},{"b":2}]}`:           false,
		`{"a":"}{\"a\":","b":{"a":1}}`:      false,
		`{"x":"\\","a":1,"y":"\"","a":2}`:   true,
		`{"a":[1,{"c":[{"d":1,"d":1}]}]}`:   true,
		`{"é":1,"\u00e9":2}`:                true,
		`{"a\"b":1,"a\u0022b":2}`:           true,
		`{"ab":1,"a":{"b":1},"b":{"ab":1}}`: false,
		// Names that differ only in case, or in Unicode normalization.
		`{"paymentIntent":"pi_1","amount":1,"AMOUNT":1000}`: true,
		`{"amount":1,"Amount":2}`:                           true,
		`{"c":{"id":1,"ID":2}}`:                             true,
		`{"caf\u00e9":1,"cafe\u0301":2}`:                    true, // NFC and NFD
		`{"CAF\u00c9":1,"cafe\u0301":2}`:                    true,
		`{"k":1,"\u212a":2}`:                                true, // Kelvin sign
		`{"σ":1,"ς":2}`:                                     true,
		`{"s":1,"ſ":2}`:                                     true,
		`{"ss":1,"ß":2}`:                                    false, // full folding only
		`{"i":1,"ı":2}`:                                     false, // Turkic
		`{"amount":1,"c":{"AMOUNT":2}}`:                     false, // other objects
		// Objects larger than the set's short list.
		`{"a":1,"b":1,"c":1,"d":1,"e":1,"f":1,"g":1,"h":1,"i":1,"j":1}`:       false,
		`{"a":1,"b":1,"c":1,"d":1,"e":1,"f":1,"g":1,"h":1,"i":1,"B":1}`:       true,
		`{"a":1,"b":1,"c":1,"d":1,"e":1,"f":1,"g":1,"h":1,"H":1,"i":1}`:       true,
		`{"a":1,"b":1,"c":1,"d":1,"e":1,"f":1,"g":1,"h":1,"i":1,"j":1,"j":1}`: true,
		`{"a":1,"b":1,"c":1,"d":1,"e":1,"f":1,"g":1,"h":1,"i":1,"j":{"A":1}}`: false,
	} {
		_, err := ParseInput([]byte(in), 0)
		if got := errors.Is(err, ErrDuplicateKey); got != dup {
			t.Errorf("%s: duplicate %v, want %v (err %v)", in, got, dup, err)
		}
		if ref, _ := referenceDuplicate([]byte(in)); ref != dup {
			t.Errorf("%s: the reference disagrees", in)
		}
	}
}

func FuzzDuplicateKey(f *testing.F) {
	for _, s := range []string{`{"a":1,"\u0061":2}`, `{"a":[{"b":1},{"b":2}]}`, `{"a":"}{\"a\":","a":{}}`, `[{"x":1,"x":1}]`,
		`{"a":1,"A":2}`, `{"é":1,"e\u0301":2}`, `{"ς":{"Σ":1}}`, `{"K":1,"k":{"\u212a":1}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		if !json.Valid(in) || !iJSON(in) {
			return
		}
		_, err := ParseInput(in, len(in))
		got := errors.Is(err, ErrDuplicateKey)
		want, rerr := referenceDuplicate(in)
		if rerr != nil {
			t.Fatalf("reference failed on valid JSON: %v", rerr)
		}
		if got != want {
			t.Fatalf("%q: ParseInput %v, reference %v", in, err, want)
		}
	})
}

// manyKeys is an object of n distinct short names.
func manyKeys(n int) []byte {
	var b bytes.Buffer
	b.WriteByte('{')
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%q:0", strconv.FormatInt(int64(i), 36))
	}
	b.WriteByte('}')
	return b.Bytes()
}

// The duplicate check keeps one set per object: an input of 110,000 names
// is parsed in one pass (the check used to compare every pair, about 6e9
// comparisons here).
func TestParseInputManyKeys(t *testing.T) {
	t.Parallel()
	const n = 110_000
	doc := manyKeys(n)
	if len(doc) > DefaultMaxInputBytes {
		t.Fatalf("the document is %d bytes, over the default limit", len(doc))
	}
	obj, err := ParseInput(doc, 0)
	if err != nil || len(obj) != n {
		t.Fatalf("%d names: got %d, err %v", n, len(obj), err)
	}
	for name, want := range map[string]string{"zz": `"ZZ":1`, "0": `"0":1`, "2bi4": `"2BI4":1`} {
		bad := slices.Concat(doc[:len(doc)-1], []byte(","+want+"}"))
		_, err := ParseInput(bad, 2*len(bad))
		var ie *InputError
		if !errors.Is(err, ErrDuplicateKey) || !errors.As(err, &ie) || !strings.Contains(ie.Msg, strconv.Quote(name)) {
			t.Errorf("a last name %s colliding with %q: %v", want, name, err)
		}
	}
}

// BenchmarkParseInputManyKeys parses a 1 MiB object of 110,000 names:
// linear, it takes about a tenth of a second; the pairwise duplicate check
// it replaced took 16 to 23 seconds.
func BenchmarkParseInputManyKeys(b *testing.B) {
	doc := manyKeys(110_000)
	b.SetBytes(int64(len(doc)))
	for b.Loop() {
		if _, err := ParseInput(doc, 0); err != nil {
			b.Fatal(err)
		}
	}
}

func TestInvalidUnicodeRefused(t *testing.T) {
	t.Parallel()
	tool := &Tool{Name: "ship", Identity: []Field{{Path: "orderId", Norm: String}}}
	for _, in := range []string{
		"{\"orderId\":\"ord\xff\"}",
		"{\"orderId\":\"ord\xfe\"}",
		"{\"orderId\":\"ord\xc3\"}",            // a truncated sequence
		"{\"orderId\":\"ord\xed\xa0\x80\"}",    // a surrogate encoded in UTF-8
		`{"orderId":"ord\ud800"}`,              // lone high surrogate
		`{"orderId":"ord\udc00"}`,              // lone low surrogate
		`{"orderId":"ord\ud800\u0041"}`,        // high surrogate, then no low one
		`{"orderId":"ord\udc00\ud800"}`,        // reversed pair
		`{"orderId":"o","note":"\ud800"}`,      // outside the identity
		`{"orderId":"o","x":[{"y":"\udfff"}]}`, // nested
		"{\"orderId\":\"o\",\"n\xffote\":1}",   // in a name
		`{"orderId":"o","\ud800":1}`,           // escaped, in a name
		`{"orderId":"ord\uffff"}`,              // noncharacters
		`{"orderId":"ord\ufdd0"}`,              //
		"{\"orderId\":\"ord\U0010FFFE\"}",      //
		`{"orderId":"ord\udbff\udfff"}`,        // U+10FFFF, escaped
	} {
		_, err := tool.Key("r", Call{Input: json.RawMessage(in)}, 0)
		if !errors.Is(err, ErrInvalidJSON) {
			t.Errorf("%q: want ErrInvalidJSON, got %v", in, err)
		}
	}
	// U+FFFD itself, written or escaped, and valid pairs are text.
	a := key(t, tool, "r", "{\"orderId\":\"ord\uFFFD\"}")
	if key(t, tool, "r", `{"orderId":"ord\ufffd"}`) != a {
		t.Error("U+FFFD written and escaped differ")
	}
	if key(t, tool, "r", `{"orderId":"ord\ud83d\ude00"}`) != key(t, tool, "r", `{"orderId":"ord😀"}`) {
		t.Error("an escaped surrogate pair differs from its character")
	}
}

// Every rune is folded to a member of its strings.EqualFold class, the
// same member for the whole class: folded strings are equal exactly when
// EqualFold says so.
func TestSimpleFoldIsEqualFold(t *testing.T) {
	t.Parallel()
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if utf16.IsSurrogate(r) {
			continue
		}
		f := simpleFold(r)
		if !strings.EqualFold(string(r), string(f)) {
			t.Fatalf("%U folds to %U, outside its case class", r, f)
		}
		for o := unicode.SimpleFold(r); o != r; o = unicode.SimpleFold(o) {
			if simpleFold(o) != f {
				t.Fatalf("%U and %U are one case class but fold to %U and %U", r, o, f, simpleFold(o))
			}
		}
	}
}

func TestCaseFoldedUnicode(t *testing.T) {
	t.Parallel()
	for _, norm := range []Normalizer{CaseFolded, Email} {
		tool := &Tool{Name: "invite", Identity: []Field{{Path: "v", Norm: norm}}}
		k := func(v string) string {
			t.Helper()
			b, _ := json.Marshal(v)
			return key(t, tool, "r", `{"v":`+string(b)+`}`)
		}
		same := [][]string{
			{"σίσυφος@x", "ΣΊΣΥΦΟΣ@X", "ΣΊΣΥΦΟς@x"}, // final sigma
			{"s@x", "ſ@x", "S@X"},                                // long s
			{"μ@x", "µ@x", "Μ@x"},                                // micro sign
			{"k@x", "\u212a@x", "K@x"},                           // Kelvin sign
			{"straße@x", "STRAẞE@x"},                             // capital sharp s
			{"café@x", "cafe\u0301@x", "CAFE\u0301@X", "CAFÉ@x"}, // NFC and NFD
			{"\u212b@x", "å@x", "A\u030a@x"},                     // Angstrom sign
		}
		for _, group := range same {
			for _, v := range group[1:] {
				if k(v) != k(group[0]) {
					t.Errorf("%T: %q and %q differ", norm, group[0], v)
				}
			}
		}
		for _, pair := range [][2]string{{"ss@x", "ß@x"}, {"i@x", "ı@x"}, {"i@x", "İ@x"}, {"a@x", "b@x"}} {
			if k(pair[0]) == k(pair[1]) {
				t.Errorf("%T: %q and %q share a key", norm, pair[0], pair[1])
			}
		}
	}
	// String and Trimmed compare code points: NFC and NFD differ.
	for _, norm := range []Normalizer{String, Trimmed} {
		a, _ := norm.Normalize("caf\u00e9")
		b, _ := norm.Normalize("cafe\u0301")
		if a == b {
			t.Errorf("%T treats NFC and NFD alike", norm)
		}
	}
	// Folded values are stable: folding again changes nothing.
	for _, s := range []string{"ΣΊΣΥΦΟΣ", "ǅ", "ᾼ", "\u0345", "Å", "ﬀ"} {
		if f := foldNFC(s); foldNFC(f) != f {
			t.Errorf("%q folds to %q, which folds to %q", s, f, foldNFC(f))
		}
	}
}

func FuzzFold(f *testing.F) {
	f.Add("ΣΊΣΥΦΟΣ", "σίσυφος")
	f.Add("cafe\u0301", "CAFÉ")
	f.Add("\u212a", "k")
	f.Fuzz(func(t *testing.T, a, b string) {
		if !utf8.ValidString(a) || !utf8.ValidString(b) {
			return
		}
		fa, fb := foldNFC(a), foldNFC(b)
		if strings.EqualFold(norm.NFC.String(a), norm.NFC.String(b)) && fa != fb {
			t.Fatalf("%q and %q are equal without case but fold to %q and %q", a, b, fa, fb)
		}
		if norm.NFC.String(a) == norm.NFC.String(b) && fa != fb {
			t.Fatalf("%q and %q have one NFC form but fold to %q and %q", a, b, fa, fb)
		}
		if foldNFC(fa) != fa {
			t.Fatalf("%q folds to %q, which folds to %q", a, fa, foldNFC(fa))
		}
	})
}

// Integer and Decimal take plain decimal notation only, and the same limit
// of MaxNumberDigits digits applies whatever the form, as it does to
// numbers without a normalizer.
func TestNumberForms(t *testing.T) {
	t.Parallel()
	for _, nm := range []Normalizer{Integer, Decimal} {
		for _, bad := range []string{"0b101010", "0B101010", "0o52", "0x2a", "0X2A", "052o", "4_2", "1_000", "0x1p-2", "Inf", "-Inf",
			"NaN", "١٢", "４２", ".5", "5.", "1/2", "", "+", "-", "1e", "1e+", "--1", "+-1", "1 2", "42L", "1e1.5", "1,000"} {
			if v, err := nm.Normalize(bad); err == nil {
				t.Errorf("%q: accepted as %v", bad, v)
			}
		}
	}
	nines := strings.Repeat("9", MaxNumberDigits)
	one100 := "1" + strings.Repeat("0", MaxNumberDigits) // MaxNumberDigits+1 digits
	within := []string{nines, "-" + nines, "1e99", "1E+99", "0.1e100", "10e98", "1" + strings.Repeat("0", 99), "0001e99",
		"1" + strings.Repeat("0", 99) + ".000", strings.Repeat("0", 500) + "7"}
	beyond := []string{"1" + nines, one100, "1e100", "10e99", "0.1e101", one100 + ".0", "1e1000000000", "1e99999999999999999999"}
	fracWithin := []string{"1e-100", "0." + strings.Repeat("0", 99) + "1", "0.5" + strings.Repeat("0", 1000), "1.5e-99"}
	fracBeyond := []string{"1e-101", "0." + strings.Repeat("0", 100) + "1", "1." + strings.Repeat("1", 100), "-1e-99999999"}
	for _, s := range within {
		for _, nm := range []Normalizer{Integer, Decimal} {
			if _, err := nm.Normalize(s); err != nil {
				t.Errorf("%.30s (%d bytes): %v", s, len(s), err)
			}
			if _, err := nm.Normalize(json.Number(s)); err != nil && s[0] != '0' {
				t.Errorf("%.30s as a JSON number: %v", s, err)
			}
		}
	}
	for _, s := range fracWithin {
		if _, err := Decimal.Normalize(s); err != nil {
			t.Errorf("Decimal %.30s: %v", s, err)
		}
	}
	for _, s := range append(beyond, fracBeyond...) {
		for _, nm := range []Normalizer{Integer, Decimal} {
			if _, err := nm.Normalize(s); err == nil {
				t.Errorf("%.30s (%d bytes): accepted", s, len(s))
			}
		}
	}
	// Without a normalizer, the same limit (before the double's own).
	exact := &Tool{Name: "ship", Identity: []Field{{Path: "orderId"}}}
	for _, s := range []string{"1e100", one100, "1e-101", "1" + strings.Repeat("0", 101) + ".0e-1"} {
		if _, err := exact.Key("r", Call{Input: json.RawMessage(`{"orderId":` + s + `}`)}, 0); !errors.Is(err, ErrUnsafeNumber) {
			t.Errorf("%.30s without a normalizer: %v", s, err)
		}
	}
	if key(t, exact, "r", `{"orderId":1e22}`) != key(t, exact, "r", `{"orderId":10000000000000000000000.000}`) {
		t.Error("1e22 written out differs")
	}
	// The exact text is hashed and bound.
	for in, want := range map[string]string{"1e3": "1000", "-0.0": "0", "+042": "42", "4.20e1": "42", "1e99": "1" + strings.Repeat("0", 99)} {
		if got, err := Integer.Normalize(in); err != nil || got != want {
			t.Errorf("Integer(%s) = %v, %v; want %s", in, got, err, want)
		}
	}
	for in, want := range map[string]string{"10.00": "10", "-0.0150": "-0.015", "1e-3": "0.001", "12.5e1": "125", "0e7": "0", "1.5e-99": "0." + strings.Repeat("0", 98) + "15"} {
		if got, err := Decimal.Normalize(in); err != nil || got != want {
			t.Errorf("Decimal(%s) = %v, %v; want %s", in, got, err, want)
		}
	}
}

// Keys are stored in ledgers: the same call must keep its key across
// releases. These were derived before the number and folding rules were
// rewritten.
func TestKeyStable(t *testing.T) {
	t.Parallel()
	tool := &Tool{Name: "refund_order", Identity: []Field{
		{Path: "orderId", Norm: Integer}, {Path: "amount", Norm: Decimal},
		{Path: "email", Norm: Email}, {Path: "code", Norm: CaseFolded},
		{Path: "ticket", Norm: String}, {Path: "ref", Norm: Trimmed}, {Path: "raw"}}}
	for in, want := range map[string]string{
		`{"orderId":7,"amount":"10.00","email":" Ada@Example.com","code":"Ticket-7","ticket":42,"ref":" r1 ","raw":10.5}`: "f3f0f6e16cf0fda06c25d0a349fb9720e50ed2f801170054e149b67f61c64c0d",
		`{"orderId":"-9007199254740993","amount":-0.015,"email":"a@b.c","code":"x","ticket":"t","ref":"r","raw":"s"}`:     "241c5f544e0d679b04fc02fca3b44be4301d5e1adc21959cd71b475e364f7545",
	} {
		if got := key(t, tool, "run-1", in); got != want {
			t.Errorf("%s: key %s, want %s", in, got, want)
		}
	}
}

// The message of invalid input says where it is broken, the same for every
// input however the previous one, parsed by the same pooled decoder, ended.
func TestParseInputMessages(t *testing.T) {
	t.Parallel()
	cases := []struct{ in, msg string }{
		{`{"ticketId":1`, "invalid JSON: unexpected EOF at byte 13"},
		{`{"ticketId":1,`, "invalid JSON: unexpected EOF at byte 14"},
		{`{"ticketId":1} {}`, "invalid JSON: data after the top-level value"},
		{"  {\"a\":1}\n x", "invalid JSON: data after the top-level value"},
		{`{"ticketId" 1}`, "invalid JSON: invalid character '1' after object name (expecting ':') at byte 12"},
		{`{"a":[1,2,}`, "invalid JSON: invalid character ',' at start of value at byte 9"},
		{`{"a":tru}`, "invalid JSON: invalid character '}' in literal true (expecting 'e') at byte 8"},
		{`{"a":"` + "\xff" + `"}`, "invalid JSON: invalid UTF-8 at byte 6"},
		{`{"a":"\ud800"}`, "invalid JSON: invalid surrogate pair `\\ud800\"}` in string at byte 6"},
		{`{"a":"` + "\uFDD0" + `"}`, "invalid JSON: the Unicode noncharacter U+FDD0"},
		{`{"a":1,"A":2}`, `keys "a" and "A" in one JSON object differ only in case or Unicode normalization`},
		{`{"a":{"b":1,"b":2}}`, `duplicate key "b" in a JSON object`},
		{``, "invalid JSON: unexpected EOF"},
	}
	for _, c := range cases {
		_, err := ParseInput([]byte(c.in), 0)
		var ie *InputError
		if !errors.As(err, &ie) || ie.Msg != c.msg {
			t.Errorf("%q: got %v, want %q", c.in, err, c.msg)
		}
		if obj, err := ParseInput([]byte(`{"ticketId":"7"}`), 0); err != nil || len(obj) != 1 || obj["ticketId"] != "7" {
			t.Errorf("after %q: %v %v", c.in, obj, err)
		}
	}
}
