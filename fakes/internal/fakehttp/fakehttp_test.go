package fakehttp

import (
	"strings"
	"testing"
)

func TestIDsAreSeeded(t *testing.T) {
	t.Parallel()
	a, b, c := NewIDs(1), NewIDs(1), NewIDs(2)
	first := a.New("pi_", 24)
	if len(first) != 27 || !strings.HasPrefix(first, "pi_") || strings.Trim(first[3:], idAlphabet) != "" {
		t.Fatalf("id %q", first)
	}
	if b.New("pi_", 24) != first || c.New("pi_", 24) == first {
		t.Fatal("ids do not follow the seed")
	}
	second := a.New("pi_", 24)
	a.Reset()
	if a.New("pi_", 24) != first || second == first {
		t.Fatal("Reset does not restart the sequence")
	}
}

func TestStrictJSON(t *testing.T) {
	t.Parallel()
	type v struct {
		A int `json:"a"`
	}
	for body, ok := range map[string]bool{
		`{"a":1}`: true, ` {"a":1} `: true, ``: false, `{"a":1} x`: false, `{"a":1}{}`: false,
		`{"b":1}`: false, `{"a":"1"}`: false, `[1]`: false,
	} {
		var out v
		if err := StrictJSON([]byte(body), &out); (err == nil) != ok {
			t.Errorf("StrictJSON(%q) = %v, want ok %v", body, err, ok)
		}
	}
}

func TestValidEmail(t *testing.T) {
	t.Parallel()
	for s, ok := range map[string]bool{
		"ada@example.test": true, "a.b+c@d.test": true, "": false, "ada": false,
		"Ada <ada@example.test>": false, "ada@example.test ": false, strings.Repeat("a", 250) + "@b.test": false,
	} {
		if ValidEmail(s) != ok {
			t.Errorf("ValidEmail(%q) != %v", s, ok)
		}
	}
}
