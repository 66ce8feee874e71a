package client

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/gowebpki/jcs"
)

// viaJCS is the reference: encoding/json, then jcs.Transform.
func viaJCS(prefix, paths []string, values []any) ([]byte, error) {
	doc := []any{}
	for _, s := range prefix {
		doc = append(doc, s)
	}
	pairs := []any{}
	for i := range paths {
		pairs = append(pairs, []any{paths[i], values[i]})
	}
	js, err := json.Marshal(append(doc, pairs))
	if err != nil {
		return nil, err
	}
	return jcs.Transform(js)
}

// checkIdentity fails when the direct encoder accepts a document and
// encodes it differently from the reference, or refuses one made only of
// the values it claims to handle.
func checkIdentity(t *testing.T, prefix, paths []string, values []any) {
	t.Helper()
	got, ok := appendIdentity(nil, prefix, paths, values)
	want, err := viaJCS(prefix, paths, values)
	if !ok {
		if err == nil && handled(prefix, paths, values) {
			t.Errorf("direct encoder refused %q %q %#v, which jcs encodes as %s", prefix, paths, values, want)
		}
		return
	}
	if err != nil {
		t.Fatalf("direct encoder accepted %q %q %#v (%s), jcs refused it: %v", prefix, paths, values, got, err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%q %q %#v:\n direct %s\n jcs    %s", prefix, paths, values, got, want)
	}
}

// handled reports whether every part is one the direct encoder must take.
func handled(prefix, paths []string, values []any) bool {
	for _, s := range append(append([]string(nil), prefix...), paths...) {
		if !validUTF8(s) {
			return false
		}
	}
	for _, v := range values {
		switch x := v.(type) {
		case nil, bool:
		case string:
			if !validUTF8(x) {
				return false
			}
		case json.Number:
			f, err := strconv.ParseFloat(string(x), 64)
			if !isJSONNumber(string(x)) || err != nil || math.IsInf(f, 0) {
				return false
			}
		default:
			return false
		}
	}
	return true
}

func validUTF8(s string) bool { return string([]rune(s)) == s }

func FuzzAppendIdentity(f *testing.F) {
	for _, seed := range []struct{ scope, path, s, num string }{
		{"run:run-1", "ticketId", "T-1", "42"},
		{"tenant:ä", "order.id", "<&>\u2028\u2029\x7f", "-0"},
		{"global", "a\"b\\c", "\x00\x01\x1f\b\f\n\r\t", "1e400"},
		{"run:\xff", "é", "\ud7ff\ue000\U0010ffff", "0.1000000000000000001"},
		{"", "", "\xed\xa0\x80", "9007199254740993"},
		{"x", "y", "😀", "1E+21"},
		{"x", "y", "z", "1e-7"},
		{"x", "y", "z", "00"},
		{"x", "y", "z", "+1"},
		{"x", "y", "z", ".5"},
		{"x", "y", "z", "0x10"},
		{"x", "y", "z", ""},
		{"x", "y", "z", "123456789012345678901234567890"},
		{"x", "y", "z", "-1.5e-324"},
		{"x", "y", "z", "4.9e-324"},
		{"x", "y", "z", "1.7976931348623157e308"},
	} {
		f.Add(seed.scope, seed.path, seed.s, seed.num)
	}
	f.Fuzz(func(t *testing.T, scope, path, s, num string) {
		checkIdentity(t, []string{scope, "tool"}, []string{path, "n", "b", "z"}, []any{s, json.Number(num), true, nil})
		checkIdentity(t, []string{"tool"}, []string{path}, []any{json.Number(num)})
		checkIdentity(t, []string{scope}, []string{s}, []any{false})
	})
}

// TestAppendIdentityMatchesJCS compares the direct encoder with the
// reference on random strings (every byte value and many code points) and
// random numbers in every form RFC 8785 formats differently.
func TestAppendIdentityMatchesJCS(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	randString := func() string {
		var b []byte
		for n := rng.IntN(12); n > 0; n-- {
			switch rng.IntN(4) {
			case 0:
				b = append(b, byte(rng.IntN(256)))
			case 1:
				b = append(b, byte(rng.IntN(0x80)))
			default:
				b = append(b, string(rune(rng.IntN(0x110000)))...)
			}
		}
		return string(b)
	}
	randNumber := func() string {
		switch rng.IntN(5) {
		case 0:
			return strconv.FormatInt(rng.Int64()>>rng.IntN(64), 10)
		case 1:
			return strconv.FormatFloat(math.Float64frombits(rng.Uint64()), 'g', -1, 64)
		case 2:
			return strconv.FormatFloat(rng.NormFloat64()*math.Pow(10, float64(rng.IntN(60)-30)), 'e', rng.IntN(20)-1, 64)
		case 3:
			return strconv.FormatFloat(rng.Float64()*1e6, 'f', rng.IntN(25), 64)
		default:
			return strconv.Itoa(rng.IntN(1000)) + "." + strconv.Itoa(rng.IntN(1000)) + "e" + strconv.Itoa(rng.IntN(50)-25)
		}
	}
	for range 20000 {
		checkIdentity(t,
			[]string{randString(), randString()},
			[]string{randString(), randString(), randString(), randString()},
			[]any{randString(), json.Number(randNumber()), rng.IntN(2) == 0, nil})
	}
	// Values the direct encoder leaves to the reference.
	for _, v := range []any{3.5, 7, map[string]any{"a": 1}, []any{1}, json.Number("1e400"), json.Number("+1"), "\xff"} {
		if _, ok := appendIdentity(nil, []string{"s"}, []string{"p"}, []any{v}); ok {
			t.Errorf("direct encoder took %#v", v)
		}
	}
}
