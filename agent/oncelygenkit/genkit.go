// Package genkit runs the tools of a Firebase Genkit (Go) application
// through an oncely Executor: Wrap turns a tool function, as written for
// genkit.DefineTool, into one whose every call is executed once per action,
// and DefineTool does both in one line.
//
// Each call is executed with the run id of its context (WithRunID, or
// Config.RunID). The tool function receives the input bound from the call
// (identity fields normalized, see client.Invocation.Bind) and finds the
// key to hand to its provider with InvocationFrom. The tool's output to the
// model is an Output: the outcome, the model-facing message (package
// client) and the function's result, from this call or replayed from the
// ledger. However often Genkit runs the tool again for the same action —
// the model calling it again with drifted arguments, the application
// retrying or resuming a flow — the action happens once and the model is
// told so truthfully.
//
// The package is its own module, so that only its users compile Genkit.
// It cannot share one build list with agent/oncelyclaude: Genkit compiles only
// against github.com/invopop/jsonschema v0.13, which anthropic-sdk-go/v2
// raises to v0.14.
package oncelygenkit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/firebase/genkit/go/ai"
	"github.com/firebase/genkit/go/genkit"

	"github.com/oncely/oncely/client"
)

// Output is what a wrapped tool returns to the model.
type Output[Out any] struct {
	// Outcome is the call's outcome in words ("executed", "already done",
	// "uncertain", ...: client.Outcome.String).
	Outcome string `json:"outcome"`
	// Message says truthfully what happened (client.Result.Text).
	Message string `json:"message"`
	// Result is the tool function's output: from this call (executed) or
	// replayed from the ledger (already done); absent otherwise.
	Result *Out `json:"result,omitempty"`
}

// ErrNoRunID is returned by a wrapped tool whose context carries no run id
// (see WithRunID and Config.RunID); nothing was done.
var ErrNoRunID = errors.New("genkit: no run id in the context")

// ErrTool is matched by the errors of Wrap for a tool it cannot wrap.
var ErrTool = errors.New("genkit: tool")

// Config tunes Wrap. The zero value (or nil) gives the defaults.
type Config struct {
	// RunID returns the run id of a call's context (default: RunIDFrom,
	// the id WithRunID put there). Use an id that stays the same when the
	// work is repeated: the conversation, the flow's business key.
	RunID func(ctx context.Context) string
	// Summary describes an executed call's output in one line for the
	// model's message and the ledger, which replays it to a repeat
	// (default: the output's Summary() or String() method when it has
	// one, else "<tool> done"). The output itself reaches the model as
	// Output.Result, not inside the message.
	Summary func(out any) string
	// OnCall, when set, is called after each call with its result and the
	// executor's error (oncely could not guard the call; the Output still
	// says truthfully what happened).
	OnCall func(ctx context.Context, name string, res client.Result, err error)
}

type runIDKey struct{}

// WithRunID returns ctx carrying the run id the wrapped tools execute
// under: pass it to the flow, or to genkit.Generate. It also carries the
// place where CallIDs leaves the model's tool request refs for the tools.
func WithRunID(ctx context.Context, runID string) context.Context {
	ctx = context.WithValue(ctx, runIDKey{}, runID)
	if _, ok := ctx.Value(callIDsKey{}).(*callIDs); !ok {
		ctx = context.WithValue(ctx, callIDsKey{}, &callIDs{})
	}
	return ctx
}

type callIDsKey struct{}

// callIDs holds the tool request refs of the model's latest answer, per
// tool, for the tool calls to take: Genkit runs a tool function without
// its request's ref.
type callIDs struct {
	mu      sync.Mutex
	pending map[string][]pendingCall
}

type pendingCall struct{ input, ref string }

// CallIDs is a model middleware (ai.WithMiddleware(oncelygenkit.CallIDs))
// that hands each wrapped tool call the ref of the tool request it runs
// for, which the executor records as the call's id (client.Call.ID), as
// the other agent integrations do: Genkit (v1.4) passes a tool function
// its input but not its request's ref. It needs a context made by
// WithRunID. Requests with the same tool and input take their refs in
// order.
func CallIDs(next ai.ModelFunc) ai.ModelFunc {
	return func(ctx context.Context, req *ai.ModelRequest, cb ai.ModelStreamCallback) (*ai.ModelResponse, error) {
		resp, err := next(ctx, req, cb)
		h, ok := ctx.Value(callIDsKey{}).(*callIDs)
		if err != nil || !ok || resp == nil || resp.Message == nil {
			return resp, err
		}
		pending := map[string][]pendingCall{}
		for _, p := range resp.Message.Content {
			if p.IsToolRequest() && p.ToolRequest.Ref != "" {
				tr := p.ToolRequest
				pending[tr.Name] = append(pending[tr.Name], pendingCall{input: canonical(tr.Input), ref: tr.Ref})
			}
		}
		h.mu.Lock()
		h.pending = pending // the tools of the previous answer have run
		h.mu.Unlock()
		return resp, nil
	}
}

// take returns the ref of a pending request of tool with input (the first
// of that tool when none has the same input), and removes it.
func (h *callIDs) take(tool string, input any) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	calls := h.pending[tool]
	if len(calls) == 0 {
		return ""
	}
	i, in := 0, canonical(input)
	for j, c := range calls {
		if c.input == in {
			i = j
			break
		}
	}
	ref := calls[i].ref
	h.pending[tool] = append(calls[:i:i], calls[i+1:]...)
	return ref
}

// canonical is v's JSON with object keys sorted ("" when it does not
// encode).
func canonical(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	var x any
	if json.Unmarshal(b, &x) != nil {
		return ""
	}
	b, _ = json.Marshal(x)
	return string(b)
}

// RunIDFrom returns the run id WithRunID put in ctx ("" when none).
func RunIDFrom(ctx context.Context) string {
	id, _ := ctx.Value(runIDKey{}).(string)
	return id
}

type invocationKey struct{}

// InvocationFrom returns the oncely invocation a wrapped tool function
// runs for: its DownstreamKey is the key to hand to the provider.
func InvocationFrom(ctx context.Context) (client.Invocation, bool) {
	inv, ok := ctx.Value(invocationKey{}).(client.Invocation)
	return inv, ok
}

type toolContextKey struct{}

// Wrap registers t with exec, its Run being fn, and returns the tool
// function to define with genkit.DefineTool. t names the tool and says
// what identifies its action (Identity, Validated, Reconciler, ...); its
// Run must be nil. fn receives its input bound from the call
// (client.Invocation.Bind) and a context InvocationFrom reads.
func Wrap[In, Out any](exec *client.Executor, t client.Tool, fn ai.ToolFunc[In, Out], cfg *Config) (ai.ToolFunc[In, Output[Out]], error) {
	var c Config
	if cfg != nil {
		c = *cfg
	}
	if c.RunID == nil {
		c.RunID = RunIDFrom
	}
	if c.Summary == nil {
		name := t.Name
		c.Summary = func(out any) string { return defaultSummary(name, out) }
	}
	if t.Run != nil {
		return nil, fmt.Errorf("%w: %s: Run is set; Wrap runs fn", ErrTool, t.Name)
	}
	if fn == nil {
		return nil, fmt.Errorf("%w: %s: no tool function", ErrTool, t.Name)
	}
	t.Run = func(ctx context.Context, inv client.Invocation) (client.Effect, error) {
		var in In
		if err := inv.Bind(&in); err != nil {
			return client.Effect{}, err
		}
		tc := &ai.ToolContext{Context: context.WithValue(ctx, invocationKey{}, inv)}
		if orig, ok := ctx.Value(toolContextKey{}).(*ai.ToolContext); ok {
			tc.Resumed, tc.OriginalInput = orig.Resumed, orig.OriginalInput
		}
		out, err := fn(tc, in)
		if err != nil {
			return client.Effect{}, err
		}
		payload, err := json.Marshal(out)
		if err != nil {
			return client.Effect{}, fmt.Errorf("genkit: %s: the output does not marshal to JSON: %w", t.Name, err)
		}
		return client.Effect{Summary: c.Summary(out), Result: payload}, nil
	}
	if err := exec.Register(t); err != nil {
		return nil, err
	}
	name := t.Name
	return func(tc *ai.ToolContext, in In) (Output[Out], error) {
		runID := c.RunID(tc)
		if runID == "" {
			return Output[Out]{}, fmt.Errorf("%w: %s", ErrNoRunID, name)
		}
		input, err := json.Marshal(in)
		if err != nil {
			return Output[Out]{}, fmt.Errorf("genkit: %s: input: %w", name, err)
		}
		ctx := context.WithValue(tc.Context, toolContextKey{}, tc)
		var id string
		if h, ok := tc.Value(callIDsKey{}).(*callIDs); ok {
			id = h.take(name, in)
		}
		res, execErr := exec.Execute(ctx, runID, client.Call{Tool: name, Input: input, ID: id})
		if c.OnCall != nil {
			c.OnCall(tc, name, res, execErr)
		}
		o := Output[Out]{Outcome: res.Outcome.String(), Message: res.Text}
		if (res.Outcome == client.Executed || res.Outcome == client.AlreadyDone) && len(res.Payload) > 0 {
			var out Out
			if err := json.Unmarshal(res.Payload, &out); err == nil {
				o.Result = &out
			}
		}
		return o, nil
	}, nil
}

// DefineTool wraps fn (see Wrap) and defines it with genkit.DefineTool
// under t.Name.
func DefineTool[In, Out any](g *genkit.Genkit, exec *client.Executor, t client.Tool, description string, fn ai.ToolFunc[In, Out], cfg *Config, opts ...ai.ToolOption) (*ai.ToolDef[In, Output[Out]], error) {
	wrapped, err := Wrap(exec, t, fn, cfg)
	if err != nil {
		return nil, err
	}
	return genkit.DefineTool(g, t.Name, description, wrapped, opts...), nil
}

// defaultSummary is the output's own one-line description when it has
// one, else "<tool> done": never the output's JSON, which the model gets
// as Output.Result.
func defaultSummary(tool string, out any) string {
	switch o := out.(type) {
	case interface{ Summary() string }:
		return o.Summary()
	case fmt.Stringer:
		return o.String()
	}
	return tool + " done"
}
