// Package eino runs the tools of a CloudWeGo Eino agent or graph through an
// oncely Executor: Register returns each oncely tool as an Eino
// InvokableTool, for a ReAct agent's ToolsConfig or a graph's ToolsNode.
//
// Each call is executed with the run id of its context (WithRunID, or
// Config.RunID) and the tool call id Eino's ToolsNode gives it; the output
// is the outcome's model-facing message (package client). However often
// Eino runs the tool again for the same action — the model calling it
// again with a new call id and drifted arguments, the application retrying
// the agent, a graph resumed from a checkpoint taken before the tools node
// ran — the action happens once and the output says so truthfully.
//
// The package is its own module, so that only its users compile Eino.
package oncelyeino

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/cloudwego/eino/components/tool"
	"github.com/cloudwego/eino/compose"
	"github.com/cloudwego/eino/schema"
	"github.com/eino-contrib/jsonschema"

	"github.com/oncely/oncely/agent"
	"github.com/oncely/oncely/client"
)

// Executor executes one tool call of a run. *client.Executor implements
// it, and so do wrappers of it (tracing, metrics).
type Executor interface {
	Execute(ctx context.Context, runID string, call client.Call) (client.Result, error)
}

// Tool is an oncely tool together with its declaration for the model.
type Tool struct {
	client.Tool
	// Description tells the model what the tool does and when to use it.
	Description string
	// Properties is the "properties" object of the parameters' JSON
	// schema: field name to the field's schema.
	Properties map[string]any
	// Required lists the fields the model must send besides the identity
	// fields, which are always required.
	Required []string
}

// ErrSchema is matched by the errors of Register and New for a tool whose
// schema does not declare one of its identity fields.
var ErrSchema = errors.New("eino: tool schema")

// ErrNoRunID is returned by a tool run whose context carries no run id
// (see WithRunID and Config.RunID); nothing was done.
var ErrNoRunID = errors.New("eino: no run id in the context")

// Config tunes the tools of Register and New. The zero value (or nil)
// gives the defaults.
type Config struct {
	// RunID returns the run id of a tool call's context (default:
	// RunIDFrom, the id WithRunID put there). The run scopes action keys:
	// the same action in the same run happens once. Use the id that stays
	// the same when Eino repeats the work: the conversation, or the
	// checkpoint id a graph is resumed with.
	RunID func(ctx context.Context) string
	// OnCall, when set, is called after each call with its result and the
	// executor's error (oncely could not guard the call; the output still
	// says truthfully what happened, and the agent goes on).
	OnCall func(ctx context.Context, c Call)
}

// Call is one executed tool call.
type Call struct {
	// ID is the tool call id (compose.GetToolCallID; empty outside a
	// ToolsNode).
	ID string
	// Name is the tool's name.
	Name string
	// Arguments is the JSON the model sent.
	Arguments string
	// Result is the executor's answer.
	Result client.Result
	// Err is the executor's error.
	Err error
}

type runIDKey struct{}

// WithRunID returns ctx carrying the run id the tools execute under: pass
// it to the agent's Generate or the graph's Invoke.
func WithRunID(ctx context.Context, runID string) context.Context {
	return context.WithValue(ctx, runIDKey{}, runID)
}

// RunIDFrom returns the run id WithRunID put in ctx ("" when none).
func RunIDFrom(ctx context.Context) string {
	id, _ := ctx.Value(runIDKey{}).(string)
	return id
}

// InvokableTool is an oncely tool as an Eino tool.InvokableTool.
type InvokableTool struct {
	exec   Executor
	info   *schema.ToolInfo
	name   string
	runID  func(context.Context) string
	onCall func(context.Context, Call)
}

var _ tool.InvokableTool = (*InvokableTool)(nil)

// New returns t as an Eino tool executed through exec. t must be
// registered with exec (Register does both).
func New(exec Executor, t Tool, cfg *Config) (*InvokableTool, error) {
	var c Config
	if cfg != nil {
		c = *cfg
	}
	if c.RunID == nil {
		c.RunID = RunIDFrom
	}
	params, err := parameters(t)
	if err != nil {
		return nil, err
	}
	raw, err := json.Marshal(params)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrSchema, t.Name, err)
	}
	js := &jsonschema.Schema{}
	if err := json.Unmarshal(raw, js); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrSchema, t.Name, err)
	}
	info := &schema.ToolInfo{Name: t.Name, Desc: t.Description, ParamsOneOf: schema.NewParamsOneOfByJSONSchema(js)}
	return &InvokableTool{exec: exec, info: info, name: t.Name, runID: c.RunID, onCall: c.OnCall}, nil
}

// Register registers tools with exec and returns them as Eino tools, for
// react.AgentConfig.ToolsConfig.Tools or compose.ToolsNodeConfig.Tools.
// Nothing is registered when a declaration is invalid.
func Register(exec *client.Executor, cfg *Config, tools ...Tool) ([]tool.BaseTool, error) {
	out := make([]tool.BaseTool, len(tools))
	ct := make([]client.Tool, len(tools))
	for i, t := range tools {
		it, err := New(exec, t, cfg)
		if err != nil {
			return nil, err
		}
		out[i], ct[i] = it, t.Tool
	}
	if err := exec.Register(ct...); err != nil {
		return nil, err
	}
	return out, nil
}

// Info returns the tool's declaration: its name, description and the
// JSON schema of its parameters, every identity field required.
func (t *InvokableTool) Info(context.Context) (*schema.ToolInfo, error) { return t.info, nil }

// InvokableRun executes the call through the executor under the context's
// run id and returns the outcome's model-facing message. Every outcome is
// an output, not an error, so that the model is told what happened; only a
// context without a run id is an error (ErrNoRunID), and then nothing runs.
func (t *InvokableTool) InvokableRun(ctx context.Context, argumentsInJSON string, _ ...tool.Option) (string, error) {
	runID := t.runID(ctx)
	if runID == "" {
		return "", fmt.Errorf("%w: %s", ErrNoRunID, t.name)
	}
	args := argumentsInJSON
	if strings.TrimSpace(args) == "" {
		args = "{}"
	}
	c := Call{ID: compose.GetToolCallID(ctx), Name: t.name, Arguments: argumentsInJSON}
	c.Result, c.Err = t.exec.Execute(ctx, runID, client.Call{Tool: t.name, Input: json.RawMessage(args), ID: c.ID})
	if t.onCall != nil {
		t.onCall(ctx, c)
	}
	return c.Result.Text, nil
}

// parameters returns the JSON schema of t's parameters, every identity
// field (and each object on its dotted path) required.
func parameters(t Tool) (map[string]any, error) {
	props, required, err := agent.RequireIdentity(t.Properties, t.Required, t.Identity)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrSchema, t.Name, err)
	}
	return map[string]any{"type": "object", "properties": props, "required": required}, nil
}
