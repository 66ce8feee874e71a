package mcpgateway_test

import (
	"testing"
)

// The upstream gets the model's own value where its input schema
// takes it, and the normalized value only where the schema asks for that
// type. Before, {"amount": "10.50"} with a decimal identity reached a
// string parameter as 10.5 and the upstream's schema refused it, while the
// model was told "Outcome unknown ... do not retry".
func TestArgumentsConform(t *testing.T) {
	t.Parallel()
	s := newSetup(t, map[string]any{
		"transfer": map[string]any{
			"identity":  []any{map[string]any{"path": "account", "norm": "integer"}},
			"validated": []any{map[string]any{"path": "amount", "norm": "decimal"}},
		},
	}, nil)
	cs := s.stdio(t, nil, nil, "--run-id", "arguments")

	// account: integer in the schema, "42" from the model: converted.
	// amount: string in the schema, "10.50" from the model: as sent.
	first := callOK(t, cs, "transfer", map[string]any{"account": "42", "amount": "10.50"})
	if first.IsError || outcome(first) != "executed" {
		t.Fatalf("first: %s %q", outcome(first), allText(first))
	}
	// The same action in other spellings: a repeat.
	again := callOK(t, cs, "transfer", map[string]any{"account": 42, "amount": "10.5"})
	if again.IsError || outcome(again) != "already done" {
		t.Fatalf("repeat: %s %q", outcome(again), allText(again))
	}
	// amount 10.5 as a number, which the schema does not take: converted
	// to the normalized decimal's text.
	number := callOK(t, cs, "transfer", map[string]any{"account": 43, "amount": 10.5})
	if number.IsError || outcome(number) != "executed" {
		t.Fatalf("a number for a string parameter: %s %q", outcome(number), allText(number))
	}
	j := journal(t, s.dir)
	if len(j) != 2 || j[0] != "transfer 42 10.50" || j[1] != "transfer 43 10.5" {
		t.Fatalf("journal: %q", j)
	}
}
