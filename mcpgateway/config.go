package mcpgateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/errclass"
)

// ErrConfig is matched by every error about a configuration.
var ErrConfig = errors.New("mcpgateway: configuration")

// Config is the gateway's configuration, usually read from a JSON (or
// YAML) file with LoadConfig. For @modelcontextprotocol/server-memory,
// whose add_observations is made exactly-once per entity and observation
// (ExampleParseConfig):
//
//	{
//	  "upstream": {
//	    "command": ["npx", "-y", "@modelcontextprotocol/server-memory"],
//	    "env": {"MEMORY_FILE_PATH": "/Users/me/.local/share/memory.jsonl"}
//	  },
//	  "tools": {
//	    "add_observations": {
//	      "identity": [
//	        {"path": "observations[*].entityName", "norm": "trimmed"},
//	        {"path": "observations[*].contents", "norm": "trimmed"}
//	      ],
//	      "replay": true
//	    }
//	  }
//	}
//
// The identity names the action, what is observed of whom: keyed by the
// entity alone, a second, different observation of the same entity would
// be answered "Already done" and never stored. With the observation's text
// in it, a retry, a replay or a resumed run (which send the same text) is
// one observation, and a reworded one is another.
type Config struct {
	// Upstream is the MCP server the gateway fronts. Required.
	Upstream Upstream `json:"upstream"`
	// Ledger is the URL of the ledger, for the program that opens it
	// (oncely mcp opens it by URL; empty: the embedded SQLite file). New
	// takes the opened ledger.Store and does not read this field.
	Ledger string `json:"ledger,omitempty"`
	// Tools are the upstream tools made exactly-once, by name. Every other
	// tool, resource and prompt passes through unchanged.
	Tools map[string]ToolConfig `json:"tools"`
	// Run says where a call's run id comes from (see Source); the action
	// keys of tools with scope "run" are scoped by it.
	Run Source `json:"run,omitzero"`
	// Tenant says where a call's tenant comes from, for tools with scope
	// "tenant".
	Tenant Source `json:"tenant,omitzero"`
	// CallTimeout bounds one upstream call of a configured tool (default
	// DefaultCallTimeout). A call that runs out is ambiguous: the record
	// becomes uncertain and the call is not repeated. It bounds every
	// request the gateway forwards as well (a passthrough tool call, a
	// list, a read): one that runs out is cancelled on the upstream and
	// answered with a JSON-RPC error.
	CallTimeout Duration `json:"callTimeout,omitzero"`
	// Name is the gateway's MCP implementation name (default
	// "oncely-mcp-gateway").
	Name string `json:"name,omitempty"`
	// Limits bound one message from a client; a message beyond them is
	// answered with a JSON-RPC error and the session goes on.
	Limits Limits `json:"limits,omitzero"`
	// Lease is how long a configured tool's claim stands after its last
	// heartbeat while the upstream runs it (client.Config.Liveness;
	// default client.DefaultLiveness, 12 seconds): heartbeats renew it
	// for as long as the run lasts. Options.Client's Liveness, when set,
	// takes precedence.
	Lease Duration `json:"lease,omitzero"`
	// MissingTools says what a configured tool the upstream does not offer
	// is, when the gateway starts and when the upstream's tool list
	// changes: "error" (default: New fails, naming the closest tools the
	// upstream offers; after a change, an error in the log), or "warn" (a
	// warning in the log, and the gateway starts). A misspelt name would
	// otherwise leave the tool it meant unguarded.
	MissingTools string `json:"missingTools,omitempty"`
	// HTTP configures the streamable-HTTP transport (Handler): the
	// origins it serves besides its own, and how clients authenticate.
	HTTP HTTPConfig `json:"http,omitzero"`
}

// DefaultCallTimeout is Config.CallTimeout's default.
const DefaultCallTimeout = 5 * time.Minute

// Upstream names the MCP server the gateway fronts: a command it spawns and
// talks to over stdio, or a streamable-HTTP endpoint.
type Upstream struct {
	// Command and its arguments; the gateway starts it, and starts it
	// again when it exited, at the next call.
	Command []string `json:"command,omitempty"`
	// Env adds variables to the command's environment (the gateway's own
	// environment is inherited).
	Env map[string]string `json:"env,omitempty"`
	// Dir is the command's working directory (default: the gateway's).
	Dir string `json:"dir,omitempty"`
	// URL is a streamable-HTTP endpoint, instead of a command.
	URL string `json:"url,omitempty"`
	// Header is sent with every HTTP request to URL (authorization).
	Header map[string]string `json:"header,omitempty"`
}

// Source says where a call's run id (or tenant) comes from. The first that
// gives a value wins, in this order:
//
//  1. the tools/call request's _meta entry named Meta (default
//     "oncely/run" for the run id, "oncely/tenant" for the tenant): for
//     clients whose host program sets it;
//  2. the HTTP header named Header (default "Oncely-Run",
//     "Oncely-Tenant") on the streamable-HTTP transport;
//  3. ID, a fixed value from the configuration (flag --run-id of oncely
//     mcp): one run for every call through this gateway;
//  4. for the run id only, the MCP session: the Mcp-Session-Id of a
//     streamable-HTTP session, or one id per gateway process on stdio.
//
// A session-scoped run ends with its session: a client that reconnects,
// or a desktop app that restarts the gateway, starts a new run and may do
// the same action again. Where repeats across reconnects must be caught,
// set ID (or have the client send the _meta entry or header), or declare
// the tool's scope "tenant" or "global".
type Source struct {
	ID     string `json:"id,omitempty"`
	Meta   string `json:"meta,omitempty"`
	Header string `json:"header,omitempty"`
}

// ToolConfig makes one upstream tool exactly-once.
type ToolConfig struct {
	// Identity fields define the action (see client.Tool.Identity): the
	// values that say what the tool does, so that two calls with the same
	// values are the same action and two different actions never share
	// them. A path is dotted; a segment of digits, or [n], indexes an
	// array ("order.id", "observations.0.entityName"); [*] takes every
	// element of an array ("observations[*].contents"), and the value is
	// then the list of every element's value. Every path must exist in the
	// upstream tool's input schema, and name a string, number or boolean
	// (after [*], or an array of them). Required.
	Identity []FieldConfig `json:"identity"`
	// Validated fields must not change between repeats (a repeat with
	// another value is a conflict).
	Validated []FieldConfig `json:"validated,omitempty"`
	// Scope of the action key: "run" (default), "tenant" or "global".
	Scope string `json:"scope,omitempty"`
	// Key says how the downstream key reaches the upstream tool.
	Key KeyConfig `json:"key,omitzero"`
	// Replay: a repeat returns the first call's result content (as stored,
	// within the ledger's result limit) with the outcome's text appended.
	// Otherwise a repeat returns the outcome's text only.
	Replay bool `json:"replay,omitempty"`
	// ErrorResult says what a result with isError means when nothing
	// below marks it definite: "ambiguous" (default: the tool may have
	// acted before it failed; the record becomes uncertain), "definite"
	// (nothing was done, a retry may succeed) or "permanent" (nothing was
	// done, a retry will fail too). Choose definite or permanent only for
	// servers whose tools report errors before acting.
	//
	// Whatever it says, these are definite failures, which a corrected
	// call may retry: an error result for arguments that do not conform
	// to the tool's input schema (the MCP SDKs check it before running the
	// tool); an error result whose text is an SDK's refusal before running
	// the tool ("MCP error -32602: Input validation error...", "MCP error
	// -32602: Tool x not found", "validating \"arguments\": ..."); a
	// JSON-RPC error -32602 (invalid params); and what Definite matches.
	// The model is shown the upstream's own message in every case.
	ErrorResult string `json:"errorResult,omitempty"`
	// Definite marks more of this tool's errors as definite failures:
	// error results whose text matches a Text, and JSON-RPC errors whose
	// code is a Code.
	Definite []ErrorMatch `json:"definite,omitempty"`
	// Unkept says what a repeat of a tool that declares an outputSchema
	// returns when the first call's structuredContent is not at hand (too
	// large to keep, or settled by an operator): "error" (default: an
	// error result, which need not carry structuredContent, saying it was
	// already done) or "text" (a result without structuredContent, which
	// does not conform to the output schema: clients that check it, like
	// the TypeScript SDK, refuse it). Repeats whose first result was kept
	// carry its structuredContent, with or without Replay.
	Unkept string `json:"unkept,omitempty"`
	// ClientKey says what an idempotency key the client sends with a
	// call does (see ClientKeyIgnore): "ignore" (default: the identity
	// fields alone say what the action is), "identity" (the key is the
	// action's identity) or "combine" (the key and the identity fields
	// together). With a key, the same key and the same arguments get the
	// first call's answer, and the same key with other arguments is
	// refused as a conflict, never replayed. The key is read from
	// params.idempotencyKey (MCP SEP-3182), arguments.meta.idempotency_key
	// (the Agentic Commerce Protocol) and arguments.meta["idempotency-key"]
	// (the Universal Commerce Protocol), and reaches the upstream where
	// the client put it, whatever ClientKey says.
	ClientKey string `json:"clientKey,omitempty"`
}

// ErrorMatch matches an upstream error that means nothing was done: an
// error result whose text matches Text (a regular expression, RE2
// syntax, unanchored), or a JSON-RPC error whose code is Code. Set one of
// them.
type ErrorMatch struct {
	Text string `json:"text,omitempty"`
	Code int64  `json:"code,omitempty"`
}

// FieldConfig is an identity or validated field.
type FieldConfig struct {
	Path string `json:"path"`
	// Norm is the normalizer: "" (exact canonical JSON), "string",
	// "trimmed", "casefolded", "email", "integer" or "decimal".
	Norm string `json:"norm,omitempty"`
}

// KeyConfig says where the downstream key goes: into the tool's arguments
// under Argument, or into the request's _meta under Meta. With neither,
// Meta "oncely/key" is used: servers ignore _meta entries they do not
// know, so only a server that reads it deduplicates by it.
type KeyConfig struct {
	Argument string `json:"argument,omitempty"`
	Meta     string `json:"meta,omitempty"`
}

// Duration is a time.Duration written as a string ("90s", "5m") in JSON.
type Duration time.Duration

// UnmarshalJSON reads a duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("a duration is a string like \"90s\": %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// MarshalJSON writes a duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

var norms = map[string]client.Normalizer{
	"": nil, "string": client.String, "trimmed": client.Trimmed, "casefolded": client.CaseFolded,
	"email": client.Email, "integer": client.Integer, "decimal": client.Decimal,
}

var scopes = map[string]client.Scope{"": client.ScopeRun, "run": client.ScopeRun, "tenant": client.ScopeTenant, "global": client.ScopeGlobal}

var errorClasses = map[string]errclass.Class{
	"": errclass.Ambiguous, "ambiguous": errclass.Ambiguous,
	"definite": errclass.Definite, "permanent": errclass.Permanent,
}

// metaKey is the form of a _meta key: an optional prefix of dot-separated
// labels ending in a slash, then a name.
var metaKey = regexp.MustCompile(`^([a-zA-Z]([a-zA-Z0-9-]*[a-zA-Z0-9])?(\.[a-zA-Z]([a-zA-Z0-9-]*[a-zA-Z0-9])?)*/)?[a-zA-Z0-9]([a-zA-Z0-9._-]*[a-zA-Z0-9])?$`)

// LoadConfig reads and validates a configuration file: YAML when its name
// ends in .yaml or .yml (the same fields as the JSON), JSON otherwise.
// Unknown fields are errors, so that a misspelt setting is not silently
// ignored.
func LoadConfig(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	if ext := strings.ToLower(filepath.Ext(path)); ext == ".yaml" || ext == ".yml" {
		return ParseYAMLConfig(b)
	}
	return ParseConfig(b)
}

// ParseYAMLConfig decodes and validates a YAML configuration. It is
// converted to JSON first, so that both forms obey the same rules.
func ParseYAMLConfig(b []byte) (*Config, error) {
	var doc any
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	j, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("%w: the YAML is not a JSON-compatible document: %v", ErrConfig, err)
	}
	return ParseConfig(j)
}

// ParseConfig decodes and validates a JSON configuration.
func ParseConfig(b []byte) (*Config, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var c Config
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: data after the configuration object", ErrConfig)
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

// Validate checks the configuration; New calls it.
func (c *Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	switch up := c.Upstream; {
	case len(up.Command) == 0 && up.URL == "":
		bad("upstream: a command or a url is required")
	case len(up.Command) > 0 && up.URL != "":
		bad("upstream: a command or a url, not both")
	case up.URL != "" && !strings.HasPrefix(up.URL, "http://") && !strings.HasPrefix(up.URL, "https://"):
		bad("upstream: url %q is not http(s)", up.URL)
	case len(up.Command) > 0 && up.Command[0] == "":
		bad("upstream: empty command")
	}
	if c.CallTimeout < 0 {
		bad("callTimeout: negative")
	}
	if c.Limits.MaxFrameBytes < 0 || c.Limits.MaxDepth < 0 {
		bad("limits: negative")
	}
	if c.Limits.MaxDepth > DefaultMaxDepth {
		bad("limits.maxDepth: %d is more than %d, the most the MCP SDK decodes", c.Limits.MaxDepth, DefaultMaxDepth)
	}
	for _, s := range []struct {
		name string
		src  Source
	}{{"run", c.Run}, {"tenant", c.Tenant}} {
		if s.src.Meta != "" && !metaKey.MatchString(s.src.Meta) {
			bad("%s.meta: %q is not a _meta key", s.name, s.src.Meta)
		}
	}
	if c.Lease < 0 {
		bad("lease: negative")
	}
	if c.MissingTools != "" && c.MissingTools != "error" && c.MissingTools != "warn" {
		bad("missingTools: %q is not error or warn", c.MissingTools)
	}
	for _, o := range c.HTTP.AllowedOrigins {
		if u, err := url.Parse(o); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
			bad("http.allowedOrigins: %q is not an origin (scheme://host[:port])", o)
		} else if err := http.NewCrossOriginProtection().AddTrustedOrigin(o); err != nil {
			bad("http.allowedOrigins: %v", err)
		}
	}
	if oc := c.HTTP.Auth.OAuth; oc != nil {
		for _, f := range []struct{ name, v string }{{"issuer", oc.Issuer}, {"resource", oc.Resource}, {"jwksUrl", oc.JWKSURL}} {
			if f.v == "" && f.name == "jwksUrl" {
				continue
			}
			if u, err := url.Parse(f.v); err != nil || (u.Scheme != "https" && !(u.Scheme == "http" && loopbackHost(u.Hostname()))) || u.Host == "" {
				bad("http.auth.oauth.%s: %q is not an https URL (http only on loopback)", f.name, f.v)
			}
		}
	}
	for name, t := range c.Tools {
		if len(t.Identity) == 0 {
			bad("tools.%s: no identity fields", name)
		}
		seen := map[string]bool{}
		for _, f := range append(append([]FieldConfig(nil), t.Identity...), t.Validated...) {
			if _, ok := norms[f.Norm]; !ok {
				bad("tools.%s: field %s: unknown norm %q", name, f.Path, f.Norm)
			}
			p, err := parsePath(f.Path)
			if err != nil {
				bad("tools.%s: field path %q is not a path: %v", name, f.Path, err)
				continue
			}
			if strings.HasPrefix(p.dot, "oncely:") {
				bad("tools.%s: field path %q: names starting with oncely: are the gateway's", name, f.Path)
			}
			if seen[p.dot] {
				bad("tools.%s: field %s is named twice", name, f.Path)
			}
			seen[p.dot] = true
		}
		for i, m := range t.Definite {
			switch {
			case (m.Text == "") == (m.Code == 0):
				bad("tools.%s: definite[%d]: set text or code", name, i)
			case m.Text != "":
				if _, err := regexp.Compile(m.Text); err != nil {
					bad("tools.%s: definite[%d]: %v", name, i, err)
				}
			}
		}
		switch t.ClientKey {
		case "", ClientKeyIgnore, ClientKeyIdentity, ClientKeyCombine:
		default:
			bad("tools.%s: clientKey %q is not ignore, identity or combine", name, t.ClientKey)
		}
		if t.Unkept != "" && t.Unkept != "error" && t.Unkept != "text" {
			bad("tools.%s: unkept %q is not error or text", name, t.Unkept)
		}
		if _, ok := scopes[t.Scope]; !ok {
			bad("tools.%s: scope %q is not run, tenant or global", name, t.Scope)
		}
		if _, ok := errorClasses[t.ErrorResult]; !ok {
			bad("tools.%s: errorResult %q is not ambiguous, definite or permanent", name, t.ErrorResult)
		}
		switch k := t.Key; {
		case k.Argument != "" && k.Meta != "":
			bad("tools.%s: key: an argument or a meta entry, not both", name)
		case k.Meta != "" && !metaKey.MatchString(k.Meta):
			bad("tools.%s: key.meta: %q is not a _meta key", name, k.Meta)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %w", ErrConfig, errors.Join(errs...))
	}
	return nil
}

// loopbackHost reports whether host (a name or an address, without a
// port) is this machine's loopback.
func loopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
