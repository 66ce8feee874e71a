package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/oncely/oncely/client"
)

// normalizers are the names --identity accepts after a field's path.
var normalizers = map[string]client.Normalizer{
	"exact":      nil,
	"string":     client.String,
	"trimmed":    client.Trimmed,
	"casefolded": client.CaseFolded,
	"email":      client.Email,
	"integer":    client.Integer,
	"decimal":    client.Decimal,
}

const normalizerNames = "exact, string, trimmed, casefolded, email, integer, decimal"

// parseIdentity reads 'path[:norm],...'.
func parseIdentity(s string) ([]client.Field, error) {
	var fields []client.Field
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		path, norm, _ := strings.Cut(part, ":")
		if path == "" {
			return nil, usageErr("--identity is 'path[:normalizer],...', e.g. 'orderId:integer,amount:decimal'", "empty field in --identity %q", s)
		}
		if norm == "" {
			norm = "exact"
		}
		n, ok := normalizers[norm]
		if !ok {
			return nil, usageErr("normalizers: "+normalizerNames, "unknown normalizer %q for %s", norm, path)
		}
		fields = append(fields, client.Field{Path: path, Norm: n})
	}
	return fields, nil
}

func newKeyCmd() *cobra.Command {
	var (
		tool, run, tenant, identity, input string
		global, asJSON                     bool
	)
	cmd := &cobra.Command{
		Use:   "key --tool T (--run R | --tenant X | --global) --identity 'path[:norm],...' --input '{...}'",
		Short: "Print the action key of a call and the canonical identity it hashes",
		Long: `Print the action key oncely derives for a call, and the canonical JSON it
is the sha256 of: [scope, tool, [[field, value], ...]] with the normalized
identity values. Two calls are the same action exactly when this JSON is
the same; use it to check identity fields and the model's type drift.

The scope is the run (--run), a tenant (--tenant) or global (--global), as
the tool declares it (client.ScopeRun, ScopeTenant, ScopeGlobal). A path
is dotted; a segment is an object member or an array index
(observations.0.entityName), as in client.Field and the MCP gateway's
configuration.

Normalizers: ` + normalizerNames + ` (default exact).`,
		Example: `  oncely key --tool refund_order --run run-1 --identity 'orderId:integer,amount:decimal' --input '{"orderId": "42", "amount": 10}'
  oncely key --tool add_observations --global --identity 'observations.0.entityName:trimmed' --input '{"observations": [{"entityName": "alice"}]}'`,
		Args: cobra.NoArgs,
	}
	f := cmd.Flags()
	f.StringVar(&tool, "tool", "", "tool name (required)")
	f.StringVar(&run, "run", "", "run id (the scope of a run-scoped tool)")
	f.StringVar(&tenant, "tenant", "", "tenant: the key is tenant-scoped instead of run-scoped")
	f.BoolVar(&global, "global", false, "the key is global (the same action whoever asks) instead of run-scoped")
	f.StringVar(&identity, "identity", "", "identity fields, 'path[:normalizer],...' (required)")
	f.StringVar(&input, "input", "", "the call's input, a JSON object (required)")
	f.BoolVar(&asJSON, "json", false, "print JSON")
	for _, name := range []string{"tool", "identity", "input"} {
		_ = cmd.MarkFlagRequired(name)
	}
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		fields, err := parseIdentity(identity)
		if err != nil {
			return err
		}
		t := client.Tool{Name: tool, Identity: fields}
		switch {
		case btoi(run != "")+btoi(tenant != "")+btoi(global) > 1:
			return usageErr("a key has one scope: give one of --run, --tenant and --global", "more than one scope")
		case tenant != "":
			t.Scope = client.ScopeTenant
		case global:
			t.Scope = client.ScopeGlobal
		case run == "":
			return usageErr("give --run (or --tenant or --global, as the tool's scope is)", "no scope: --run is empty")
		}
		call := client.Call{Tool: tool, Input: json.RawMessage(input), Tenant: tenant}
		key, err := t.Key(run, call, 0)
		if err != nil {
			return inputErr(err)
		}
		canon, err := t.CanonicalIdentity(run, call, 0)
		if err != nil {
			return inputErr(err)
		}
		if asJSON {
			return writeJSON(cmd.OutOrStdout(), map[string]any{"key": key, "identity": json.RawMessage(canon)})
		}
		fmt.Fprintf(cmd.OutOrStdout(), "key       %s\nidentity  %s\n", key, canon)
		return nil
	}
	return cmd
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// inputErr reports a call input that cannot give a key.
func inputErr(err error) error {
	var ie *client.InputError
	if errors.As(err, &ie) {
		return usageErr("--input is the call's JSON object, with every identity field present and a scalar", "%v", err)
	}
	return opErr(err, "")
}
