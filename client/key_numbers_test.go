package client

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"math/big"
	"net/netip"
	"testing"

	"github.com/oncely/oncely/ledger/ledgermem"
)

// normalizeTo is a Normalizer that returns out whatever the input.
func normalizeTo(out any) Normalizer {
	return NormalizerFunc(func(any) (any, error) { return out, nil })
}

type (
	namedInt    int64
	namedString string
	namedFloat  float32
)

// A number a custom Normalizer returns is hashed exactly, whatever its Go
// type, or refused: it is never rounded. Values that are exact hash like
// the same JSON number without a normalizer, so their keys are those they
// always had.
func TestNormalizerNumbersExact(t *testing.T) {
	t.Parallel()
	two53p1 := new(big.Int).Add(new(big.Int).Lsh(big.NewInt(1), 53), big.NewInt(1))
	i64 := int64(42)
	cases := []struct {
		name string
		out  any
		same string // the raw JSON value whose key it must have; "" when refused
		err  error
	}{
		{"json.Number", json.Number("42"), `42`, nil},
		{"json.Number other form", json.Number("4.2e1"), `42`, nil},
		{"int", 42, `42`, nil},
		{"int8", int8(-42), `-42`, nil},
		{"uint8", uint8(42), `42`, nil},
		{"int64", int64(9007199254740992), `9007199254740992`, nil},
		{"uint64 small", uint64(42), `42`, nil},
		{"named int", namedInt(42), `42`, nil},
		{"pointer", &i64, `42`, nil},
		{"*big.Int", big.NewInt(42), `42`, nil},
		{"*big.Rat integer", big.NewRat(84, 2), `42`, nil},
		{"*big.Rat decimal", big.NewRat(1, 4), `0.25`, nil},
		{"*big.Float", big.NewFloat(0.5), `0.5`, nil},
		{"float64 integer", float64(42), `42`, nil},
		{"float64 0.1", 0.1, `0.1`, nil},
		{"float32 0.1", float32(0.1), `0.1`, nil},
		{"named float32", namedFloat(0.1), `0.1`, nil},
		{"float64 below 2^53", float64(1<<53 - 1), `9007199254740991`, nil},
		{"named string", namedString("o-1"), `"o-1"`, nil},
		{"TextMarshaler", netip.MustParseAddr("10.0.0.1"), `"10.0.0.1"`, nil},
		{"bool", true, `true`, nil},

		// Beyond what canonical JSON holds exactly: refused, not rounded
		// to 9007199254740992 or 18446744073709551616.
		{"json.Number 2^53+1", json.Number("9007199254740993"), "", ErrUnsafeNumber},
		{"int64 2^53+1", int64(9007199254740993), "", ErrUnsafeNumber},
		{"uint64 max", uint64(math.MaxUint64), "", ErrUnsafeNumber},
		{"*big.Int 2^53+1", two53p1, "", ErrUnsafeNumber},
		{"*big.Float 2^53+1", new(big.Float).SetInt(two53p1), "", ErrUnsafeNumber},
		{"*big.Rat 1/3", big.NewRat(1, 3), "", ErrUnsafeNumber},
		{"*big.Rat too precise", new(big.Rat).SetFrac(big.NewInt(1), new(big.Int).Lsh(big.NewInt(1), 60)), "", ErrUnsafeNumber},
		{"float64 2^53 (may be 2^53+1 rounded)", float64(1 << 53), "", ErrUnsafeNumber},
		{"float64 1e20", 1e20, "", ErrUnsafeNumber},
		{"float32 2^24", float32(1 << 24), "", ErrUnsafeNumber},
		{"NaN", math.NaN(), "", ErrUnsafeNumber},
		{"+Inf", math.Inf(1), "", ErrUnsafeNumber},
		{"too many digits", json.Number("1e100"), "", ErrUnsafeNumber},

		// Not a JSON scalar, or a string that no JSON text holds.
		{"not a number", json.Number("0x2a"), "", ErrFieldType},
		{"slice", []int{1}, "", ErrFieldType},
		{"map", map[string]any{"a": 1}, "", ErrFieldType},
		{"struct", struct{ A int }{1}, "", ErrFieldType},
		{"invalid UTF-8", "\xff", "", ErrFieldType},
	}
	raw := &Tool{Name: "pay", Identity: []Field{{Path: "v"}}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			tool := &Tool{Name: "pay", Identity: []Field{{Path: "v", Norm: normalizeTo(c.out)}}}
			got, err := tool.Key("r", Call{Input: json.RawMessage(`{"v":0}`)}, 0)
			if c.err != nil {
				var ie *InputError
				if !errors.Is(err, c.err) || !errors.As(err, &ie) || ie.Field != "v" || ie.Tool != "pay" {
					t.Fatalf("%#v: got key %q, %v; want %v for field v of pay", c.out, got, err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("%#v: %v", c.out, err)
			}
			if want := key(t, raw, "r", `{"v":`+c.same+`}`); got != want {
				t.Errorf("%#v does not hash like %s", c.out, c.same)
			}
		})
	}
}

// Two ids that a double cannot tell apart never share a key, whatever the
// normalizer returns for them: one of them is refused.
func TestNormalizerBigIdsNeverCollide(t *testing.T) {
	t.Parallel()
	passThrough := NormalizerFunc(func(v any) (any, error) { return v, nil })
	toInt64 := NormalizerFunc(func(v any) (any, error) { return v.(json.Number).Int64() })
	toFloat := NormalizerFunc(func(v any) (any, error) { return v.(json.Number).Float64() })
	for name, norm := range map[string]Normalizer{"pass-through": passThrough, "int64": toInt64, "float64": toFloat} {
		tool := &Tool{Name: "pay_invoice", Identity: []Field{{Path: "invoiceId", Norm: norm}}}
		k1, err1 := tool.Key("r", Call{Input: json.RawMessage(`{"invoiceId":9007199254740993}`)}, 0)
		k2, err2 := tool.Key("r", Call{Input: json.RawMessage(`{"invoiceId":9007199254740992}`)}, 0)
		if !errors.Is(err1, ErrUnsafeNumber) {
			t.Errorf("%s: invoice 9007199254740993: key %.8s, %v; want ErrUnsafeNumber (9007199254740992: key %.8s, %v)", name, k1, err1, k2, err2)
		}
	}
}

// An identity value that is empty once normalized is a missing one: two
// calls with an empty id are not one action. A validated field may still
// be empty.
func TestEmptyIdentityIsMissing(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		norm Normalizer
		in   string
		msg  string
	}{
		{"exact", nil, `""`, "empty"},
		{"String", String, `""`, "empty"},
		{"Trimmed blanks", Trimmed, `"   "`, "empty"},
		{"Trimmed newline", Trimmed, `"\n\t"`, "empty"},
		{"CaseFolded", CaseFolded, `" "`, "empty"},
		{"normalizer returns nil", normalizeTo(nil), `"x"`, "empty"},
		{"normalizer returns a nil *big.Int", normalizeTo((*big.Int)(nil)), `"x"`, "empty"},
		{"null", Trimmed, `null`, "missing or null"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			tool := &Tool{Name: "refund_order", Identity: []Field{{Path: "orderId", Norm: c.norm}, {Path: "amount"}}}
			_, err := tool.Key("r", Call{Input: json.RawMessage(`{"orderId":` + c.in + `,"amount":10}`)}, 0)
			var ie *InputError
			if !errors.Is(err, ErrMissingField) || !errors.As(err, &ie) || ie.Field != "orderId" || ie.Msg != c.msg {
				t.Errorf("orderId %s: %v; want ErrMissingField for orderId (%s)", c.in, err, c.msg)
			}
		})
	}
	// Not empty: white space kept by String, zero, false.
	for in, norm := range map[string]Normalizer{`" "`: String, `0`: nil, `false`: nil, `"0"`: Integer} {
		tool := &Tool{Name: "refund_order", Identity: []Field{{Path: "orderId", Norm: norm}}}
		key(t, tool, "r", `{"orderId":`+in+`}`)
	}
	validated := &Tool{Name: "refund_order", Identity: []Field{{Path: "orderId"}}, Validated: []Field{{Path: "note", Norm: Trimmed}}}
	if _, err := validated.identify("r", Call{Input: json.RawMessage(`{"orderId":"o-1","note":"  "}`)}, 0); err != nil {
		t.Errorf("an empty validated field: %v", err)
	}
}

// A refund with an empty order id is refused, not done once for every
// empty id: the second caller is not told "refunded 10" for its 99.
func TestEmptyIdentityNotOneAction(t *testing.T) {
	t.Parallel()
	runs := 0
	exec := New(ledgermem.New(nil), nil)
	err := exec.Register(Tool{
		Name:     "refund_order",
		Identity: []Field{{Path: "orderId", Norm: Trimmed}},
		Run: func(context.Context, Invocation) (Effect, error) {
			runs++
			return Effect{Summary: "refunded"}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range []string{`{"orderId": "", "amount": 10}`, `{"orderId": "", "amount": 99}`, `{"orderId": "   ", "amount": 99}`} {
		res, err := exec.Execute(context.Background(), "run-1", Call{Tool: "refund_order", Input: json.RawMessage(in)})
		want := `refund_order needs "orderId" to run safely (empty). Nothing was done.`
		if err != nil || res.Outcome != InvalidInput || !res.IsError || res.Text != want || !errors.Is(res.Err, ErrMissingField) {
			t.Errorf("%s: %v %q %v %v; want InvalidInput %q", in, res.Outcome, res.Text, res.Err, err, want)
		}
	}
	if runs != 0 {
		t.Errorf("the tool ran %d times on an empty order id", runs)
	}
}

// A value a custom normalizer returns that no key can hold (a number a
// double does not hold exactly, a non-scalar) is the program's mistake:
// Execute returns ErrHostInput (still matching the value's own sentinel)
// and tells the model the application is at fault, not its input; the
// tool does not run. Before, the model was told its input was invalid, and
// Execute returned no error. A value the model sends with no custom
// normalizer stays the model's invalid input.
func TestCustomNormalizerRefusalIsHostInput(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		norm  Normalizer
		cause error
	}{
		{"float beyond 2^53", normalizeTo(float64(1 << 60)), ErrUnsafeNumber},
		{"pass-through", NormalizerFunc(func(v any) (any, error) { return v, nil }), ErrUnsafeNumber},
		{"NaN", normalizeTo(math.NaN()), ErrUnsafeNumber},
		{"a map", normalizeTo(map[string]any{"a": 1}), ErrFieldType},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			runs := 0
			exec := New(ledgermem.New(nil), nil)
			if err := exec.Register(Tool{Name: "pay_invoice", Identity: []Field{{Path: "invoiceId", Norm: c.norm}},
				Run: func(context.Context, Invocation) (Effect, error) { runs++; return Effect{Summary: "paid"}, nil }}); err != nil {
				t.Fatal(err)
			}
			res, err := exec.Execute(context.Background(), "run-1", Call{Tool: "pay_invoice", Input: json.RawMessage(`{"invoiceId":9007199254740993}`)})
			if !errors.Is(err, ErrHostInput) || !errors.Is(err, c.cause) || !errors.Is(res.Err, ErrHostInput) {
				t.Errorf("error %v (result's %v); want ErrHostInput and %v", err, res.Err, c.cause)
			}
			if res.Outcome != InvalidInput || !res.IsError || res.Text != textHostError("pay_invoice") || runs != 0 {
				t.Errorf("%v %q, ran %d times; want InvalidInput with the host error's text, not run", res.Outcome, res.Text, runs)
			}
		})
	}
	// Without a custom normalizer the model's number is its own input.
	exec := New(ledgermem.New(nil), nil)
	if err := exec.Register(Tool{Name: "pay_invoice", Identity: []Field{{Path: "invoiceId"}},
		Run: func(context.Context, Invocation) (Effect, error) { return Effect{}, nil }}); err != nil {
		t.Fatal(err)
	}
	res, err := exec.Execute(context.Background(), "run-1", Call{Tool: "pay_invoice", Input: json.RawMessage(`{"invoiceId":9007199254740993}`)})
	if err != nil || errors.Is(res.Err, ErrHostInput) || !errors.Is(res.Err, ErrUnsafeNumber) || res.Outcome != InvalidInput {
		t.Errorf("no normalizer: %v %v %q; want the model's invalid input", err, res.Err, res.Text)
	}
}
