package mcpgateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/idemkit/idemkit/client"
	"github.com/idemkit/idemkit/errclass"
	"github.com/idemkit/idemkit/internal/clip"
)

// register declares a configured tool on the executor.
func (g *Gateway) register(name string, tc ToolConfig) (*guarded, error) {
	t := &guarded{name: name, cfg: tc}
	fields := func(fcs []FieldConfig) []client.Field {
		out := make([]client.Field, len(fcs))
		for i, f := range fcs {
			out[i] = client.Field{Path: f.Path, Norm: norms[f.Norm]}
			t.paths = append(t.paths, strings.Split(f.Path, "."))
		}
		return out
	}
	ct := client.Tool{
		Name:      name,
		Identity:  fields(tc.Identity),
		Validated: fields(tc.Validated),
		Scope:     scopes[tc.Scope],
		Run:       g.runUpstream(t, errorClasses[tc.ErrorResult]),
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
	result *mcp.CallToolResult // the upstream's answer, when this call ran the tool
}

// call runs one tools/call of a configured tool through the executor.
func (g *Gateway) call(ctx context.Context, t *guarded, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	p := req.Params
	raw := p.Arguments
	if len(raw) == 0 {
		raw = json.RawMessage(`{}`)
	}
	uc := &upCall{meta: maps.Clone(p.Meta)}
	input := []byte(raw) // invalid input: the executor says why
	if obj, err := client.ParseInput(raw, 0); err == nil {
		uc.args = obj
		if input, err = json.Marshal(project(obj, t.paths)); err != nil {
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
	res, err := g.calls.Execute(context.WithValue(ctx, callKey{}, uc), run, client.Call{Tool: t.name, Input: input, Tenant: tenant})
	g.log.LogAttrs(ctx, levelOf(err), "mcpgateway: call",
		slog.String("tool", t.name), slog.String("run", run), slog.String("key", res.Key),
		slog.String("outcome", res.Outcome.String()), slog.Int("attempt", res.Attempt),
		slog.Duration("latency", time.Since(start)), slog.Any("err", err))
	return t.answer(uc, res), nil
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
// path's value at the same path, with arrays on the way turned into
// objects keyed by index, so that "observations.0.entityName" is a dotted
// object path for the executor. Missing values stay missing: the executor
// reports them.
func project(args map[string]any, paths [][]string) map[string]any {
	out := map[string]any{}
	for _, path := range paths {
		var cur any = args
		found := true
		for _, seg := range path {
			switch c := cur.(type) {
			case map[string]any:
				cur, found = c[seg]
			case []any:
				i, err := strconv.Atoi(seg)
				found = err == nil && i >= 0 && i < len(c) && seg == strconv.Itoa(i)
				if found {
					cur = c[i]
				}
			default:
				found = false
			}
			if !found {
				break
			}
		}
		if !found {
			continue
		}
		dst := out
		for _, seg := range path[:len(path)-1] {
			next, ok := dst[seg].(map[string]any)
			if !ok {
				next = map[string]any{}
				dst[seg] = next
			}
			dst = next
		}
		dst[path[len(path)-1]] = cur
	}
	return out
}

// withBound returns a copy of args in which every identity and validated
// value is the one the action key was derived from, normalized ("42"
// arrives as 42 for an integer field, " pi_1 " as "pi_1" for a trimmed
// one): the upstream acts on exactly what the key names, never on a
// reading of its own.
func withBound(args map[string]any, inv client.Invocation, paths [][]string) (map[string]any, error) {
	var doc map[string]json.RawMessage
	if err := inv.Bind(&doc); err != nil {
		return nil, err
	}
	out := deepCopy(args).(map[string]any)
	for _, path := range paths {
		if v, ok := rawAt(doc, path); ok {
			setAt(out, path, v)
		}
	}
	return out, nil
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

// setAt replaces the value at path in v (objects by key, arrays by index),
// where a value is present.
func setAt(v any, path []string, val json.RawMessage) {
	for i, seg := range path {
		last := i == len(path)-1
		switch c := v.(type) {
		case map[string]any:
			if _, ok := c[seg]; !ok {
				return
			}
			if last {
				c[seg] = val
				return
			}
			v = c[seg]
		case []any:
			n, err := strconv.Atoi(seg)
			if err != nil || n < 0 || n >= len(c) {
				return
			}
			if last {
				c[n] = val
				return
			}
			v = c[n]
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
		args, err := withBound(uc.args, inv, t.paths)
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
		sess, err := g.up.session(ctx)
		if err != nil {
			// Nothing was sent: the upstream could not be started or
			// initialized.
			return client.Effect{}, client.Definite(err)
		}
		cctx, cancel := context.WithTimeout(ctx, g.timeout)
		defer cancel()
		res, err := sess.CallTool(cctx, &mcp.CallToolParams{Meta: meta, Name: t.name, Arguments: args})
		if err != nil {
			return client.Effect{}, classify(t.name, err)
		}
		if res.IsError {
			err := fmt.Errorf("mcpgateway: %s answered with an error: %s", t.name, clip.String(firstText(res), 500))
			if onError == errclass.Definite {
				return client.Effect{}, client.Definite(err)
			}
			if onError == errclass.Permanent {
				return client.Effect{}, client.Permanent(err)
			}
			return client.Effect{}, err
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
// which the upstream refused the request did nothing; anything else (the
// connection closed, the upstream died, the call timed out) may have acted.
func classify(tool string, err error) error {
	var we *jsonrpc.Error
	if errors.As(err, &we) {
		switch we.Code {
		case jsonrpc.CodeInvalidRequest, jsonrpc.CodeMethodNotFound, jsonrpc.CodeInvalidParams, jsonrpc.CodeParseError:
			return client.Permanent(fmt.Errorf("mcpgateway: the upstream refused %s: %w", tool, err))
		}
	}
	return client.Ambiguous(fmt.Errorf("mcpgateway: the upstream call of %s did not complete: %w", tool, err))
}

// summary is the one line a repeat is told: the start of the result's text.
func summary(tool string, res *mcp.CallToolResult) string {
	s := strings.Join(strings.Fields(firstText(res)), " ")
	if s == "" {
		return tool + " succeeded"
	}
	if len(s) > 200 {
		s = clip.String(s, 200) + "…"
	}
	return tool + ": " + s
}

func firstText(res *mcp.CallToolResult) string {
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			return tc.Text
		}
	}
	return ""
}

// answer is what the client gets for an executor's result.
func (t *guarded) answer(uc *upCall, res client.Result) *mcp.CallToolResult {
	meta := mcp.Meta{OutcomeMeta: res.Outcome.String(), KeyMeta: res.Key}
	text := func(s string) []mcp.Content { return []mcp.Content{&mcp.TextContent{Text: s}} }
	switch res.Outcome {
	case client.Executed, client.AlreadyDone:
		if res.Outcome == client.Executed && uc.result != nil {
			out := *uc.result
			maps.Copy(meta, out.Meta) // the upstream's entries, and ours
			meta[OutcomeMeta], meta[KeyMeta] = res.Outcome.String(), res.Key
			out.Meta = meta
			return &out
		}
		out := &mcp.CallToolResult{Meta: meta, Content: text(res.Text)}
		if !t.cfg.Replay {
			return out
		}
		var first mcp.CallToolResult
		if len(res.Payload) == 0 || json.Unmarshal(res.Payload, &first) != nil {
			// Too large to keep, or settled without it (an operator's
			// ledger.Resolve, a reconciler).
			out.Content = text(res.Text + " The first call's result was not kept, so it is not shown again.")
			return out
		}
		out.Content = append(first.Content, out.Content...)
		out.StructuredContent = first.StructuredContent
		return out
	default:
		return &mcp.CallToolResult{Meta: meta, Content: text(res.Text), IsError: true}
	}
}
