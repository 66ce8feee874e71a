package mcpgateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/errclass"
)

// field is a configured identity or validated field.
type field struct {
	path     fieldPath
	norm     string
	identity bool
}

// guarded is a configured tool.
type guarded struct {
	name     string
	cfg      ToolConfig
	fields   []field
	definite []errorMatch
	// byFields derives the identity of a call without a client key, for a
	// tool whose ClientKey is "identity".
	byFields client.Tool
}

// errorMatch is a compiled ErrorMatch.
type errorMatch struct {
	text *regexp.Regexp
	code int64
}

// register declares a configured tool on the executor.
func (g *Gateway) register(name string, tc ToolConfig) (*guarded, error) {
	t := &guarded{name: name, cfg: tc}
	fields := func(fcs []FieldConfig, identity bool) []client.Field {
		out := make([]client.Field, len(fcs))
		for i, f := range fcs {
			p, _ := parsePath(f.Path) // Validate checked it
			out[i] = client.Field{Path: p.dot, Norm: norms[f.Norm]}
			if p.every {
				// The gateway hashes the canonical list of the
				// normalized values itself (fieldPath.everyValue).
				out[i].Norm = nil
			}
			t.fields = append(t.fields, field{path: p, norm: f.Norm, identity: identity})
		}
		return out
	}
	for _, m := range tc.Definite {
		em := errorMatch{code: m.Code}
		if m.Text != "" {
			em.text = regexp.MustCompile(m.Text) // Validate checked it
		}
		t.definite = append(t.definite, em)
	}
	ct := client.Tool{
		Name:      name,
		Identity:  fields(tc.Identity, true),
		Validated: fields(tc.Validated, false),
		Scope:     scopes[tc.Scope],
		Run:       g.runUpstream(t, errorClasses[tc.ErrorResult]),
	}
	key, args := client.Field{Path: keyField}, client.Field{Path: argsField}
	switch tc.ClientKey {
	case ClientKeyIdentity:
		// The key is the identity; the identity fields, like the rest of
		// the arguments, must match on a repeat with the same key.
		t.byFields = client.Tool{Name: name, Identity: ct.Identity}
		ct.Validated = append(append(ct.Identity, ct.Validated...), args)
		ct.Identity = []client.Field{key}
	case ClientKeyCombine:
		ct.Identity = append(ct.Identity, key)
		ct.Validated = append(ct.Validated, args)
	}
	if g.wrap != nil {
		ct = g.wrap(ct)
	}
	if err := g.exec.Register(ct); err != nil {
		return nil, fmt.Errorf("%w: tools.%s: %v", ErrConfig, name, err)
	}
	return t, nil
}

// callKey carries a call's upstream request to the tool's Run.
type callKey struct{}

// upCall is one tools/call of a configured tool on its way upstream.
type upCall struct {
	args   map[string]any
	meta   mcp.Meta
	req    *mcp.CallToolRequest
	ctx    context.Context     // the client's request, for what is relayed to it
	result *mcp.CallToolResult // the upstream's answer, when this call ran the tool
	failed *mcp.CallToolResult // the upstream's error answer, when this call ran the tool
	err    error               // why this call's upstream call failed, when it did
	key    *clientKey          // the key the client sent, if any
	inputs *mcp.CallToolResult // the upstream's request for the client's input (2026-07-28)
}

// call runs one tools/call of a configured tool through the executor.
func (g *Gateway) call(ctx context.Context, t *guarded, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	g.inflight.Add(1)
	defer g.inflight.Done()
	p := req.Params
	raw := p.Arguments
	if len(raw) == 0 {
		raw = json.RawMessage(`{}`)
	}
	uc := &upCall{meta: maps.Clone(p.Meta), req: req, ctx: ctx}
	input := []byte(raw) // invalid input: the executor says why
	if obj, err := client.ParseInput(raw, 0); err == nil {
		uc.args = obj
		projected, refused := g.project(t, obj)
		if refused != nil {
			return refused, nil
		}
		k, err := findClientKey(rawParams(req), obj)
		if err != nil {
			return refusal(client.InvalidInput, fmt.Sprintf("%s: the idempotency key is invalid: %v. Nothing was done.", t.name, err)), nil
		}
		uc.key = k
		if t.cfg.ClientKey == ClientKeyIdentity || t.cfg.ClientKey == ClientKeyCombine {
			if err := t.withClientKey(projected, obj, k); err != nil {
				var ie *client.InputError
				if errors.As(err, &ie) && ie.Field != "" {
					return refusal(client.InvalidInput, fmt.Sprintf("%s needs %q to run safely (%s). Nothing was done.", t.name, ie.Field, ie.Msg)), nil
				}
				return refusal(client.InvalidInput, fmt.Sprintf("%s: %v. Nothing was done.", t.name, err)), nil
			}
		}
		if input, err = json.Marshal(projected); err != nil {
			return nil, fmt.Errorf("mcpgateway: %w", err)
		}
	}
	run := g.source(req, g.cfg.Run, DefaultRunMeta, DefaultRunHeader)
	if run == "" {
		if run = req.Session.ID(); run == "" {
			run = g.procRun
		}
	}
	tenant := g.source(req, g.cfg.Tenant, DefaultTenantMeta, DefaultTenantHeader)
	delete(uc.meta, or(g.cfg.Run.Meta, DefaultRunMeta))
	delete(uc.meta, or(g.cfg.Tenant.Meta, DefaultTenantMeta))

	start := time.Now()
	// The call goes on when the client goes away or cancels it: an
	// upstream call cut short is one whose effect may exist and is never
	// recorded; run to its end (within CallTimeout), it is recorded done
	// or failed, and a repeat is answered from the record.
	ectx := context.WithValue(context.WithoutCancel(ctx), callKey{}, uc)
	res, err := g.calls.Execute(ectx, run, client.Call{Tool: t.name, Input: input, Tenant: tenant})
	g.log.LogAttrs(ctx, levelOf(err), "mcpgateway: call",
		slog.String("tool", t.name), slog.String("run", run), slog.String("key", res.Key),
		slog.String("outcome", res.Outcome.String()), slog.Bool("merged", res.Shared && uc.result == nil && uc.failed == nil),
		slog.Int("attempt", res.Attempt), slog.Duration("latency", time.Since(start)), slog.Any("err", err))
	return g.answer(t, uc, res), nil
}

func levelOf(err error) slog.Level {
	if err != nil {
		return slog.LevelError
	}
	return slog.LevelInfo
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// source finds a run id or tenant in the request's _meta, then its HTTP
// header, then the configuration.
func (g *Gateway) source(req *mcp.CallToolRequest, s Source, defMeta, defHeader string) string {
	if v, ok := req.Params.Meta[or(s.Meta, defMeta)].(string); ok && v != "" {
		return v
	}
	if req.Extra != nil && req.Extra.Header != nil {
		if v := req.Extra.Header.Get(or(s.Header, defHeader)); v != "" {
			return v
		}
	}
	return s.ID
}

// project returns the parts of args the key is made of: each configured
// path's value at its dotted path (client.Field's), with arrays on the way
// turned into objects keyed by index, so that "observations.0.entityName"
// is a dotted object path for the executor; and for a path with [*], the
// canonical list of its normalized values as one string. Missing values
// stay missing: the executor reports them. A value the configuration
// cannot use, or a [*] path that finds nothing, is refused here with the
// result to return.
func (g *Gateway) project(t *guarded, args map[string]any) (map[string]any, *mcp.CallToolResult) {
	out := map[string]any{}
	for _, f := range t.fields {
		var v any
		if f.path.every {
			s, err := f.path.everyValue(args, norms[f.norm])
			switch {
			case err == nil:
				v = s
			case errors.Is(err, errNotFound) && !f.identity:
				continue // a missing validated field hashes as null
			default:
				return nil, refusal(client.InvalidInput, fmt.Sprintf("%s needs %q to run safely (%s). Nothing was done.", t.name, f.path.text, err))
			}
		} else {
			var ok bool
			if v, ok = f.path.lookup(args); !ok {
				continue
			}
			switch v.(type) {
			case map[string]any, []any:
				// The configuration names a value the key cannot be made
				// of; the start-up check finds this where the upstream's
				// schema says so. Not the model's fault.
				g.log.Error("mcpgateway: a configured field is not a string, number or boolean", slog.String("tool", t.name), slog.String("field", f.path.text))
				return nil, refusal(client.InvalidInput, fmt.Sprintf("%s could not run because of a configuration error in the gateway, not in your input: %q is an object or array, which cannot identify an action (use [*] for the elements of an array). Nothing was done; retrying will not help.", t.name, f.path.text))
			}
		}
		parts := strings.Split(f.path.dot, ".")
		dst := out
		for _, seg := range parts[:len(parts)-1] {
			next, ok := dst[seg].(map[string]any)
			if !ok {
				next = map[string]any{}
				dst[seg] = next
			}
			dst = next
		}
		dst[parts[len(parts)-1]] = v
	}
	return out, nil
}

// refusal is the result of a call the gateway answers without the
// executor.
func refusal(o client.Outcome, text string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Meta: mcp.Meta{OutcomeMeta: o.String()}, Content: []mcp.Content{&mcp.TextContent{Text: text}}, IsError: true}
}

// forwarded returns the arguments the upstream gets: the model's own,
// with the downstream key added, and an identity or validated value
// converted only where the upstream's input schema does not take the
// model's value and takes the normalized one ("42" for an integer
// parameter arrives as 42, an amount "10.50" for a string parameter
// arrives as "10.50"). Values under [*] are forwarded as the model sent
// them.
func forwarded(args map[string]any, inv client.Invocation, t *guarded, ut *upstreamTool) (map[string]any, error) {
	var bound map[string]json.RawMessage
	if err := inv.Bind(&bound); err != nil {
		return nil, err
	}
	out := deepCopy(args).(map[string]any)
	for _, f := range t.fields {
		if f.path.every || f.norm == "" {
			continue // forwarded as sent: the key was made of exactly that value
		}
		model, ok := f.path.lookup(args)
		if !ok {
			continue
		}
		nb, ok := rawAt(bound, strings.Split(f.path.dot, "."))
		if !ok {
			continue
		}
		nodes, _ := ut.at(f.path)
		types, known := typesAt(nodes)
		if !known {
			continue
		}
		if v, ok := conform(model, nb, types); ok {
			setAt(out, f.path, v)
		}
	}
	return out, nil
}

// conform returns the value to forward in place of model, when the schema
// types do not take model's type but take a form of the normalized value
// bound.
func conform(model any, bound json.RawMessage, types []string) (any, bool) {
	has := func(t string) bool { return slices.Contains(types, t) }
	switch mt := jsonType(model); {
	case has(mt), mt == "integer" && has("number"):
		return nil, false // the model's own value conforms
	}
	var b any
	dec := json.NewDecoder(strings.NewReader(string(bound)))
	dec.UseNumber()
	if dec.Decode(&b) != nil {
		return nil, false
	}
	text := ""
	switch x := b.(type) {
	case string:
		text = x
	case json.Number:
		text = x.String()
	case bool:
		text = fmt.Sprint(x)
	default:
		return nil, false
	}
	for _, t := range types {
		switch t {
		case "integer", "number":
			var n json.Number
			if json.Unmarshal([]byte(text), &n) == nil && n != "" {
				if t == "number" || jsonType(n) == "integer" {
					return n, true
				}
			}
		case "string":
			return text, true
		case "boolean":
			if text == "true" || text == "false" {
				return text == "true", true
			}
		}
	}
	return nil, false
}

// rawAt returns the JSON at path in the projected identity document (whose
// arrays are objects keyed by index, as project makes them).
func rawAt(doc map[string]json.RawMessage, path []string) (json.RawMessage, bool) {
	for i, seg := range path {
		v, ok := doc[seg]
		if !ok {
			return nil, false
		}
		if i == len(path)-1 {
			return v, true
		}
		doc = nil
		if json.Unmarshal(v, &doc) != nil {
			return nil, false
		}
	}
	return nil, false
}

// setAt replaces the value at a path without [*] in v, where a value is
// present.
func setAt(v any, p fieldPath, val any) {
	for i, s := range p.segs {
		last := i == len(p.segs)-1
		switch c := v.(type) {
		case map[string]any:
			if _, ok := c[s.key]; !ok {
				return
			}
			if last {
				c[s.key] = val
				return
			}
			v = c[s.key]
		case []any:
			if s.index < 0 || s.index >= len(c) {
				return
			}
			if last {
				c[s.index] = val
				return
			}
			v = c[s.index]
		default:
			return
		}
	}
}

// deepCopy copies the objects and arrays of a parsed JSON value.
func deepCopy(v any) any {
	switch c := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(c))
		for k, x := range c {
			m[k] = deepCopy(x)
		}
		return m
	case []any:
		a := make([]any, len(c))
		for i, x := range c {
			a[i] = deepCopy(x)
		}
		return a
	}
	return v
}

// runUpstream is a configured tool's Run: the upstream call with the
// downstream key.
func (g *Gateway) runUpstream(t *guarded, onError errclass.Class) func(context.Context, client.Invocation) (client.Effect, error) {
	return func(ctx context.Context, inv client.Invocation) (client.Effect, error) {
		uc, _ := ctx.Value(callKey{}).(*upCall)
		if uc == nil || uc.args == nil {
			return client.Effect{}, client.Permanent(errors.New("mcpgateway: the call carries no arguments"))
		}
		ut := g.catalog.tool(t.name)
		args, err := forwarded(uc.args, inv, t, ut)
		if err != nil {
			return client.Effect{}, client.Permanent(fmt.Errorf("mcpgateway: %w", err))
		}
		meta := maps.Clone(uc.meta)
		if t.cfg.Key.Argument != "" {
			args[t.cfg.Key.Argument] = inv.DownstreamKey
		} else {
			if meta == nil {
				meta = mcp.Meta{}
			}
			meta[or(t.cfg.Key.Meta, DefaultKeyMeta)] = inv.DownstreamKey
		}
		_ = g.adoptCaps(uc.req.Session) // initialized said why not, if not
		sess, release, err := g.up.acquire(ctx, true)
		if err != nil {
			// Nothing was sent: the upstream could not be started or
			// initialized.
			return client.Effect{}, client.Definite(err)
		}
		defer release()
		cctx, cancel := context.WithTimeout(ctx, g.timeout)
		defer cancel()
		defer g.active.begin(uc.ctx, uc.req)()
		_, meta, end := g.withProgress(uc.ctx, uc.req, nil, meta)
		defer end()
		params := &mcp.CallToolParams{Meta: withoutProtocolMeta(meta), Name: t.name, Arguments: args}
		if newProtocol(clientVersion(uc.req.Session)) {
			// A client on 2026-07-28 answering the upstream's request for
			// input (below) repeats its call with the answers.
			params.InputResponses, params.RequestState = uc.req.Params.InputResponses, uc.req.Params.RequestState
		}
		callUp := func() (*mcp.CallToolResult, error) {
			// An HTTP upstream's answer stream is read for progress; the
			// client's params.idempotencyKey, which the go-sdk's params do
			// not hold, is sent as it came.
			sctx, _ := withSlot(cctx, uc.key.paramsWith(params))
			return sess.CallTool(sctx, params)
		}
		res, err := callUp()
		for round := 1; err == nil && res.NeedsInput(); round++ {
			// The upstream asks for input (2026-07-28) before it acts: a
			// client on that protocol gets the request as it came and
			// calls again with the answers, and the record says nothing
			// was done (a definite failure), so that the call with the
			// answers runs; a client on an earlier protocol is asked with
			// requests, and the upstream called again here.
			ss := uc.req.Session
			if newProtocol(clientVersion(ss)) {
				uc.inputs = res
				return client.Effect{}, client.Definite(fmt.Errorf("mcpgateway: %s asked the client for input before acting", t.name))
			}
			if round >= maxInputRounds {
				return client.Effect{}, client.Definite(fmt.Errorf("mcpgateway: %s asked for input %d times in a row", t.name, round))
			}
			answers, aerr := askClient(uc.ctx, ss, res.InputRequests)
			if aerr != nil {
				return client.Effect{}, client.Definite(aerr)
			}
			params.InputResponses, params.RequestState = answers, res.RequestState
			res, err = callUp()
		}
		if err != nil {
			uc.err = t.classify(err)
			return client.Effect{}, uc.err
		}
		if res.IsError {
			uc.failed = res
			return client.Effect{}, t.classifyResult(res, args, ut, onError)
		}
		payload, err := json.Marshal(res)
		if err != nil {
			return client.Effect{}, fmt.Errorf("mcpgateway: storing the result of %s: %w", t.name, err)
		}
		uc.result = res
		return client.Effect{Summary: summary(t.name, res), Result: payload}, nil
	}
}

// classify tells what a failed upstream call means: a JSON-RPC error by
// which the upstream refused the request did nothing (-32602, invalid
// params: a corrected call may succeed; -32700, -32600, -32601: it will
// not), as does one whose code the tool's Definite lists; anything else
// (the connection closed, the upstream died, the call timed out, another
// error code) may have acted.
func (t *guarded) classify(err error) error {
	var we *jsonrpc.Error
	if errors.As(err, &we) {
		switch {
		case we.Code == jsonrpc.CodeInvalidParams || slices.ContainsFunc(t.definite, func(m errorMatch) bool { return m.code != 0 && m.code == we.Code }):
			return client.Definite(fmt.Errorf("%s was refused before it acted: %s (JSON-RPC error %d)", t.name, clip(we.Message, 500), we.Code))
		case we.Code == jsonrpc.CodeInvalidRequest || we.Code == jsonrpc.CodeMethodNotFound || we.Code == jsonrpc.CodeParseError:
			return client.Permanent(fmt.Errorf("%s was refused before it acted: %s (JSON-RPC error %d)", t.name, clip(we.Message, 500), we.Code))
		}
	}
	return client.Ambiguous(fmt.Errorf("mcpgateway: the upstream call of %s did not complete: %w", t.name, err))
}

// beforeAction matches the error texts by which the MCP SDKs refuse a
// tool call before running it: the TypeScript SDK's input validation and
// unknown or disabled tools, and the go-sdk's input validation.
var beforeAction = regexp.MustCompile(`^(MCP error -32602: (Input validation error|Tool \S+ (not found|disabled))|validating "arguments": )`)

// classifyResult tells what an error result means. It is a definite
// failure (nothing was done) when the arguments do not conform to the
// tool's input schema (an SDK server checks them before the tool runs),
// when its text is an SDK's refusal before running the tool, or when the
// tool's Definite matches its text; otherwise errorResult decides.
func (t *guarded) classifyResult(res *mcp.CallToolResult, args map[string]any, ut *upstreamTool, onError errclass.Class) error {
	text := firstText(res)
	err := fmt.Errorf("%s answered with an error: %s", t.name, clip(text, 500))
	ok, known := ut.conforms(args)
	switch {
	case known && !ok, beforeAction.MatchString(text),
		slices.ContainsFunc(t.definite, func(m errorMatch) bool { return m.text != nil && m.text.MatchString(text) }):
		return client.Definite(err)
	case onError == errclass.Definite:
		return client.Definite(err)
	case onError == errclass.Permanent:
		return client.Permanent(err)
	}
	return err
}

// summary is the one line a repeat is told: the start of the result's text.
func summary(tool string, res *mcp.CallToolResult) string {
	s := strings.Join(strings.Fields(firstText(res)), " ")
	if s == "" {
		return tool + " succeeded"
	}
	if len(s) > 200 {
		s = clip(s, 200) + "…"
	}
	return tool + ": " + s
}

// clip cuts s to at most n bytes without splitting a character.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

func firstText(res *mcp.CallToolResult) string {
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			return tc.Text
		}
	}
	return ""
}

// notKept is added to a repeat whose first result is not shown again.
const notKept = " The first call's result was not kept, so it is not shown again."

// answer is what the client gets for an executor's result.
func (g *Gateway) answer(t *guarded, uc *upCall, res client.Result) *mcp.CallToolResult {
	outcome := res.Outcome
	text := res.Text
	if uc.inputs != nil && outcome == client.Failed {
		// The upstream's request for input, as it came (its result type
		// with it), for the client to answer by calling again.
		out := *uc.inputs
		meta := maps.Clone(out.Meta)
		if meta == nil {
			meta = mcp.Meta{}
		}
		meta[OutcomeMeta], meta[KeyMeta] = "input required", res.Key
		out.Meta = meta
		return &out
	}
	if res.Shared && outcome == client.Executed && uc.result == nil {
		// A concurrent duplicate merged into another call, which ran the
		// tool: this call did not, and is told so.
		outcome = client.AlreadyDone
		text = "Already done " + earlier(t) + ": " + res.Summary + ". Do not repeat it."
	}
	meta := mcp.Meta{OutcomeMeta: outcome.String(), KeyMeta: res.Key}
	textContent := func(s string) []mcp.Content { return []mcp.Content{&mcp.TextContent{Text: s}} }
	switch outcome {
	case client.Executed:
		if uc.result != nil {
			out := *uc.result
			maps.Copy(meta, out.Meta) // the upstream's entries, and ours
			meta[OutcomeMeta], meta[KeyMeta] = outcome.String(), res.Key
			out.Meta = meta
			return &out
		}
		return &mcp.CallToolResult{Meta: meta, Content: textContent(text)}
	case client.AlreadyDone:
		out := &mcp.CallToolResult{Meta: meta, Content: textContent(text)}
		var first mcp.CallToolResult
		kept := len(res.Payload) > 0 && json.Unmarshal(res.Payload, &first) == nil
		if t.cfg.Replay && kept {
			out.Content = append(first.Content, out.Content...)
		}
		if t.cfg.Replay && !kept {
			// Too large to keep, or settled without it (an operator's
			// ledger.Resolve, a reconciler).
			out.Content = textContent(text + notKept)
		}
		if ut := g.catalog.tool(t.name); ut != nil && ut.output {
			// A tool with an outputSchema: a result that is not an error
			// carries structuredContent conforming to it.
			if kept && first.StructuredContent != nil {
				out.StructuredContent = first.StructuredContent
			} else if t.cfg.Unkept != "text" {
				out.Content = textContent(text + notKept)
				out.IsError = true
			}
		} else if t.cfg.Replay && kept {
			out.StructuredContent = first.StructuredContent
		}
		return out
	default:
		out := &mcp.CallToolResult{Meta: meta, IsError: true}
		if uc.failed != nil {
			// The upstream's own words first.
			out.Content = append(slices.Clone(uc.failed.Content), textContent(text)...)
			maps.Copy(meta, uc.failed.Meta)
			meta[OutcomeMeta], meta[KeyMeta] = outcome.String(), res.Key
			return out
		}
		if outcome == client.Uncertain {
			// This call's own upstream error, or, for a repeat that did not
			// call the upstream, the cause the record keeps: the upstream's
			// words of the call that left it uncertain.
			cause := uc.err
			if cause == nil {
				cause = res.Err
			}
			if cause != nil {
				text += " (" + strings.TrimSuffix(clip(cause.Error(), 500), ".") + ".)"
			}
		}
		out.Content = textContent(text)
		return out
	}
}

// earlier is how a repeat's text places the first call.
func earlier(t *guarded) string {
	if scopes[t.cfg.Scope] == client.ScopeRun {
		return "earlier in this run"
	}
	return "earlier"
}
