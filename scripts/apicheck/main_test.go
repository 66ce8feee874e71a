package main

import (
	"slices"
	"testing"
)

func TestParse(t *testing.T) {
	t.Parallel()
	report := `- ./client.Canonicalize: removed
- ./client.Config.Clock: changed from github.com/oncely/oncely/ledger.Clock to github.com/oncely/oncely/clock.Clock
- ./ledger/ledgerpg.OpenURL: changed from func(context.Context, string, *Config) (*Store, func(), error) to func(context.Context, string, *Config) (*Store, error)
- ./providers/stripe.(*Refund).Check: removed
- ./.Version: changed from "0.2.0" to "1.0.0"
- package github.com/oncely/oncely/providers/oncelyhttp: removed
something apidiff may print that is not a change
`
	var pkgs, names []string
	for _, c := range parse(report) {
		pkgs = append(pkgs, c.pkg)
		names = append(names, c.name)
	}
	if want := []string{"client", "client", "ledger/ledgerpg", "providers/stripe", "", "providers/oncelyhttp"}; !slices.Equal(pkgs, want) {
		t.Errorf("packages %q, want %q", pkgs, want)
	}
	if want := []string{"client.Canonicalize", "client.Config.Clock", "ledgerpg.OpenURL", "stripe.Refund.Check", "oncely.Version", "providers/oncelyhttp"}; !slices.Equal(names, want) {
		t.Errorf("names %q, want %q", names, want)
	}
}

func TestUnreleasedAndMentions(t *testing.T) {
	t.Parallel()
	log := "# Changelog\n\n## What 1.0 promises\n`client.Gone` is not a change\n\n## [1.1.0] — unreleased\n\n### Changed\n- `client.Config.Clock` and `ledgerpg.OpenURL`.\n\n## [1.0.0] — 2027-01-01\n- `client.Old`\n"
	section := unreleased(log)
	for name, want := range map[string]bool{
		"client.Config.Clock": true, "ledgerpg.OpenURL": true,
		"client.Config": false, // a prefix of a named change is not named
		"client.Gone":   false, // outside the unreleased section
		"client.Old":    false,
	} {
		if got := mentions(section, name); got != want {
			t.Errorf("mentions(%s) = %v, want %v", name, got, want)
		}
	}
	if unreleased("## [1.0.0] — 2027-01-01\n- `client.Old`\n") != "" {
		t.Error("a released section counted as unreleased")
	}
}

func TestExperimental(t *testing.T) {
	t.Parallel()
	p := prefixes{"mcpgateway", "examples/", "agent/"}
	for pkg, want := range map[string]bool{
		"mcpgateway": true, "mcpgateway/x": false, "examples/claude": true, "agent/oncelyclaude": true,
		"client": false, "examples": false,
	} {
		if got := p.has(pkg); got != want {
			t.Errorf("has(%q) = %v, want %v", pkg, got, want)
		}
	}
}
