package client

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCanonicalizeRFC8785Vectors(t *testing.T) {
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
			got, err := Canonicalize(src)
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
	for _, s := range []string{`{"a":1,"b":"x"}`, `{"a":{"b":[1,2]}}`, `{"a":9007199254740993}`, `[]`, `{"a":1,"a":2}`} {
		f.Add([]byte(s))
	}
	tool := &Tool{Name: "t", Identity: []Field{{Path: "a"}}, Validated: []Field{{Path: "b", Norm: Decimal}}}
	f.Fuzz(func(t *testing.T, in []byte) {
		k1, err := tool.Key("r", Call{Input: in}, 0)
		if err != nil {
			var ie *InputError
			if !errors.As(err, &ie) {
				t.Fatalf("error is not an *InputError: %v", err)
			}
			return
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
		k2, err := tool.Key("r", Call{Input: again}, 0)
		if err != nil || k1 != k2 {
			t.Fatalf("re-encoded input: key %s vs %s, err %v", k1, k2, err)
		}
	})
}

// referenceDuplicate finds a duplicate key by walking the decoder's tokens.
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
		seen := map[string]bool{}
		for dec.More() {
			if d == '{' {
				k, err := dec.Token()
				if err != nil {
					return false, err
				}
				if seen[k.(string)] {
					return true, nil
				}
				seen[k.(string)] = true
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
	for _, s := range []string{`{"a":1,"\u0061":2}`, `{"a":[{"b":1},{"b":2}]}`, `{"a":"}{\"a\":","a":{}}`, `[{"x":1,"x":1}]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		if !json.Valid(in) {
			return
		}
		_, got := duplicateKey(in)
		want, err := referenceDuplicate(in)
		if err != nil {
			t.Fatalf("reference failed on valid JSON: %v", err)
		}
		if got != want {
			t.Fatalf("%q: duplicateKey %v, reference %v", in, got, want)
		}
	})
}
