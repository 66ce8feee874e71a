package oncelyfunc

import (
	"strings"
	"testing"
)

// Numbers selected by an identity keep their exact text, whatever
// JMESPath function reaches them; a number the library computed in
// floating point is refused unless no rounding can have made it.
func TestSelectNumbersExact(t *testing.T) {
	t.Parallel()
	type event struct {
		Body string `json:"body"`
	}
	cases := []struct {
		expr, body string
		want       string // the selection document, or the start of the error
	}{
		{"to_number(json_parse(body).id)", `{"id": "9007199254740993"}`, `{"id0":9007199254740993}`},
		{"to_number(json_parse(body).id)", `{"id": "9007199254740992"}`, `{"id0":9007199254740992}`},
		{"to_number(json_parse(body).id)", `{"id": 9007199254740993}`, `{"id0":9007199254740993}`},
		{"to_number(json_parse(body).id)", `{"id": "-0.10"}`, `{"id0":-0.10}`},
		{"to_number(json_parse(body).id)", `{"id": "1e400"}`, `{"id0":1e400}`}, // the executor refuses it
		{"json_parse(body).id", `{"id": 12345678901234567890}`, `{"id0":12345678901234567890}`},
		{"to_number('42')", `{}`, `{"id0":42}`},
		{"to_number(`42`)", `{}`, `{"id0":42}`},
		{"length(json_parse(body).name)", `{"name": "Ada"}`, `{"id0":3}`},

		// Not a JSON number: null, so no identity.
		{"to_number(json_parse(body).id)", `{"id": "0x10"}`, "expression"},
		{"to_number(json_parse(body).id)", `{"id": " 12"}`, "expression"},
		{"to_number(json_parse(body).id)", `{"id": "12."}`, "expression"},
		{"to_number(json_parse(body).id)", `{"id": "Infinity"}`, "expression"},
		{"to_number(json_parse(body).id)", `{"id": true}`, "expression"},

		// Computed in float64: refused when it may be rounded.
		{"`9007199254740993`", `{}`, "expression \"`9007199254740993`\" computes the number 9.007199254740992e+15 in floating point"},
		{"`0.5`", `{}`, "expression \"`0.5`\" computes"},
		{"length(json_parse(body).name) / `5`", `{"name": "Ada Lovelace"}`, "expression"},
	}
	for _, c := range cases {
		sel, err := compile("t", "id", []Key{{Expr: c.expr}})
		if err != nil {
			t.Fatalf("%s: %v", c.expr, err)
		}
		got, err := selectInput(event{Body: c.body}, sel)
		switch {
		case c.want[0] == '{' && (err != nil || string(got) != c.want):
			t.Errorf("%s over %s: %s, %v; want %s", c.expr, c.body, got, err, c.want)
		case c.want[0] != '{' && (err == nil || !strings.HasPrefix(err.Error(), c.want)):
			t.Errorf("%s over %s: %s, %v; want an error %q...", c.expr, c.body, got, err, c.want)
		}
	}
}
