package client

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"reflect"
	"strconv"
	"unicode/utf8"
)

// exactValue returns v, a decoded input value or a Normalizer's output, as
// key derivation hashes it: nil, a bool, a string, or a json.Number
// whose value an IEEE double holds exactly, so that canonical JSON (which
// writes a number as its double) keeps it. A json.Number is kept as it
// is written; a number of another type becomes one in plain decimal.
// It refuses, with an *InputError without Tool and Field, a string that
// is not valid UTF-8 and a value that is not a scalar (ErrFieldType), and
// a number that is not exactly a double's (ErrUnsafeNumber): it never
// rounds.
//
// Numbers may be of any Go integer or float type, json.Number, *big.Int,
// *big.Rat or *big.Float; other types are taken by their JSON form
// (MarshalJSON, MarshalText) or by their kind (a named string or integer
// type). A float is the number its shortest decimal form at its precision
// denotes (float64 0.1 is 0.1, float32 0.1 too), but an integral float only
// when its precision holds every integer around it (below 2^53 for a
// float64, 2^24 for a float32, 2^Prec for a big.Float): a larger one may be
// the rounding of another integer (float64(9007199254740993) is
// 9007199254740992), so it is refused.
func exactValue(v any) (any, *InputError) {
	switch x := v.(type) {
	case nil, bool:
		return v, nil
	case string:
		if !utf8.ValidString(x) {
			return nil, &InputError{Err: ErrFieldType, Msg: "not valid UTF-8"}
		}
		return v, nil
	case json.Number:
		if _, ie := exactNumber(x.String()); ie != nil {
			return nil, ie
		}
		return v, nil // as the model wrote it, for the texts; bound in plain decimal
	case float64:
		return exactFloat(x, 53)
	case float32:
		return exactFloat(float64(x), 24)
	case *big.Int:
		if x == nil {
			return nil, nil
		}
		return exactNumber(x.String())
	case *big.Rat:
		if x == nil {
			return nil, nil
		}
		if x.IsInt() {
			return exactNumber(x.Num().String())
		}
		n, exact := x.FloatPrec()
		if !exact {
			return nil, &InputError{Err: ErrUnsafeNumber, Msg: fmt.Sprintf("number %s has no exact decimal form", x)}
		}
		return exactNumber(x.FloatString(n))
	case *big.Float:
		if x == nil {
			return nil, nil
		}
		return exactBigFloat(x)
	case json.Marshaler, encoding.TextMarshaler:
		js, err := json.Marshal(v)
		if err != nil {
			return nil, &InputError{Err: ErrFieldType, Msg: err.Error()}
		}
		d := json.NewDecoder(bytes.NewReader(js))
		d.UseNumber()
		var s any
		if err := d.Decode(&s); err != nil {
			return nil, &InputError{Err: ErrFieldType, Msg: err.Error()}
		}
		switch s.(type) {
		case map[string]any, []any:
			return nil, notScalar(v)
		}
		return exactValue(s)
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Bool:
		return rv.Bool(), nil
	case reflect.String:
		return exactValue(rv.String())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return exactNumber(strconv.FormatInt(rv.Int(), 10))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return exactNumber(strconv.FormatUint(rv.Uint(), 10))
	case reflect.Float32:
		return exactFloat(rv.Float(), 24)
	case reflect.Float64:
		return exactFloat(rv.Float(), 53)
	case reflect.Pointer:
		if rv.IsNil() {
			return nil, nil
		}
		return exactValue(rv.Elem().Interface())
	}
	return nil, notScalar(v)
}

func notScalar(v any) *InputError {
	return &InputError{Err: ErrFieldType, Msg: fmt.Sprintf("the normalizer returned %T, not a string, number, boolean or null", v)}
}

// exactFloat is exactValue of a float of the given precision in bits.
func exactFloat(f float64, prec uint) (any, *InputError) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return nil, &InputError{Err: ErrUnsafeNumber, Msg: fmt.Sprintf("number %v is not finite", f)}
	}
	return exactBigFloat(new(big.Float).SetPrec(prec).SetFloat64(f))
}

// exactBigFloat is exactValue of a finite or infinite big.Float.
func exactBigFloat(x *big.Float) (any, *InputError) {
	switch {
	case x.IsInf():
		return nil, &InputError{Err: ErrUnsafeNumber, Msg: fmt.Sprintf("number %v is not finite", x)}
	case x.IsInt() && x.MantExp(nil) > int(x.Prec()):
		// |x| >= 2^prec: the integers around x are not all floats of
		// this precision, so x may stand for one of its neighbours.
		return nil, &InputError{Err: ErrUnsafeNumber, Msg: fmt.Sprintf("number %s is an integer too large to be exact in a %d-bit float", x.Text('g', -1), x.Prec())}
	}
	return exactNumber(x.Text('g', -1))
}

// exactNumber returns the json.Number, in plain decimal, that key
// derivation hashes for a number written in decimal, or an *InputError
// (without Tool and Field) when canonical JSON would change it: canonical
// JSON represents a number by the shortest decimal form of its IEEE
// double, so 9007199254740993 would hash like 9007199254740992 and two
// different order ids would share a key. A number passes when it has at
// most MaxNumberDigits digits written out and is that shortest form's
// value (10, 1e1, 10.0 and 0.1 pass, as 10, 10, 10 and 0.1;
// 9007199254740993 and 0.1000000000000000001 do not). Two different
// numbers that pass have different doubles.
func exactNumber(s string) (any, *InputError) {
	d, err := parseDecimal(s)
	if err != nil {
		sentinel := ErrUnsafeNumber
		if errors.Is(err, errNotDecimal) {
			sentinel = ErrFieldType
		}
		return nil, &InputError{Err: sentinel, Msg: err.Error()}
	}
	exact := d.String()
	f, err := strconv.ParseFloat(exact, 64)
	if err != nil || math.IsInf(f, 0) {
		return nil, &InputError{Err: ErrUnsafeNumber, Msg: fmt.Sprintf("number %s is out of range", s)}
	}
	// The digits of a double's shortest form are at most 17: comparing
	// them with d's needs no big arithmetic.
	if short, err := parseDecimal(strconv.FormatFloat(f, 'e', -1, 64)); err != nil || short != d {
		return nil, &InputError{Err: ErrUnsafeNumber, Msg: fmt.Sprintf("number %s is too large or too precise to be compared exactly (integers are exact up to 2^53)", s)}
	}
	return json.Number(exact), nil
}
