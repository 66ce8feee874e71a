package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestStackSynthesizes type-checks the CDK app in infra/ against
// aws-cdk-lib's types (tsc, strict), synthesizes it with the CDK CLI
// (offline: no lookups, no notices), and checks the template: the ledger
// table as ledgerdynamo.CreateTable makes it, arm64 provided.al2023
// functions, the scheduled sweeper, the dead-letter queue, least-privilege
// policies and no secret in the environment. The packages come from the
// committed lockfile (npm ci).
func TestStackSynthesizes(t *testing.T) {
	t.Parallel()
	npm, err := exec.LookPath("npm")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("npm is needed to check the CDK stack: %v", err)
		}
		t.Skipf("npm is needed to check the CDK stack: %v", err)
	}
	dir, err := filepath.Abs("infra")
	if err != nil {
		t.Fatal(err)
	}
	run := func(name string, args ...string) {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "CDK_DISABLE_VERSION_CHECK=1", "CDK_DISABLE_CLI_TELEMETRY=true")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
	}
	if !upToDate(filepath.Join(dir, "node_modules", ".package-lock.json"), filepath.Join(dir, "package-lock.json")) {
		run(npm, "ci", "--no-audit", "--no-fund", "--loglevel=error")
	}
	asset := t.TempDir() // the template does not depend on the binary's bytes
	if err := os.WriteFile(filepath.Join(asset, "bootstrap"), []byte("placeholder"), 0o755); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	// The app compiles into infra/build (gitignored), beside the
	// node_modules it loads.
	run(filepath.Join(dir, "node_modules", ".bin", "tsc"), "-p", dir)
	run(filepath.Join(dir, "node_modules", ".bin", "cdk"), "synth", "--no-notices", "--quiet",
		"-c", "assetDir="+asset, "-o", filepath.Join(out, "cdk.out"))

	raw, err := os.ReadFile(filepath.Join(out, "cdk.out", "OncelyLambda.template.json"))
	if err != nil {
		t.Fatal(err)
	}
	var tpl struct {
		Resources map[string]struct {
			Type       string
			Properties map[string]any
		}
	}
	if err := json.Unmarshal(raw, &tpl); err != nil {
		t.Fatal(err)
	}
	byType := map[string][]map[string]any{}
	for _, r := range tpl.Resources {
		byType[r.Type] = append(byType[r.Type], r.Properties)
	}
	str := func(v any) string { b, _ := json.Marshal(v); return string(b) }

	tables := byType["AWS::DynamoDB::GlobalTable"]
	if len(tables) != 1 {
		t.Fatalf("%d ledger tables, want 1", len(tables))
	}
	tbl := str(tables[0])
	for _, want := range []string{
		`"KeySchema":[{"AttributeName":"pk","KeyType":"HASH"}]`,
		`"IndexName":"state-lease_until","KeySchema":[{"AttributeName":"state","KeyType":"HASH"},{"AttributeName":"lease_until","KeyType":"RANGE"}]`,
		`"TimeToLiveSpecification":{"AttributeName":"expires_at","Enabled":true}`,
	} {
		if !strings.Contains(tbl, want) {
			t.Errorf("ledger table lacks %s:\n%s", want, tbl)
		}
	}

	fns := byType["AWS::Lambda::Function"]
	if len(fns) != 2 {
		t.Fatalf("%d functions, want 2 (tool and sweeper)", len(fns))
	}
	sweepers := 0
	for _, fn := range fns {
		s := str(fn)
		for _, want := range []string{`"Runtime":"provided.al2023"`, `"Architectures":["arm64"]`, `"Handler":"bootstrap"`, `"STRIPE_API_KEY_PARAMETER":`} {
			if !strings.Contains(s, want) {
				t.Errorf("function lacks %s: %s", want, s)
			}
		}
		if strings.Contains(s, `"STRIPE_API_KEY":`) {
			t.Errorf("a secret in plain environment: %s", s)
		}
		if strings.Contains(s, `"ONCELY_MODE":"sweeper"`) {
			sweepers++
		} else if !strings.Contains(s, `"DeadLetterConfig"`) {
			t.Errorf("tool function without a dead-letter queue: %s", s)
		}
	}
	if sweepers != 1 {
		t.Errorf("%d sweeper functions, want 1", sweepers)
	}
	rules := byType["AWS::Events::Rule"]
	if len(rules) != 1 || !strings.Contains(str(rules[0]), `"ScheduleExpression":"rate(5 minutes)"`) {
		t.Errorf("sweep schedule: %s", str(rules))
	}

	// Least privilege: exactly these actions, on the table, its index and
	// the parameter; the DLQ send is added by Lambda's own wiring.
	var actions []string
	for _, p := range byType["AWS::IAM::Policy"] {
		doc := p["PolicyDocument"].(map[string]any)
		for _, st := range doc["Statement"].([]any) {
			switch a := st.(map[string]any)["Action"].(type) {
			case string:
				actions = append(actions, a)
			case []any:
				for _, x := range a {
					actions = append(actions, x.(string))
				}
			}
		}
	}
	slices.Sort(actions)
	actions = slices.Compact(actions)
	want := []string{"dynamodb:GetItem", "dynamodb:Query", "dynamodb:UpdateItem", "sqs:SendMessage", "ssm:GetParameter"}
	if !slices.Equal(actions, want) {
		t.Errorf("policy actions %v, want %v", actions, want)
	}
}

// upToDate reports whether target exists and is not older than source.
func upToDate(target, source string) bool {
	ti, err := os.Stat(target)
	if err != nil {
		return false
	}
	si, err := os.Stat(source)
	return err == nil && !ti.ModTime().Before(si.ModTime())
}
