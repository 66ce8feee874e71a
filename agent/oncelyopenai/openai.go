// Package openai runs the tool calls of an OpenAI conversation through an
// oncely Executor, on the official Go SDK (openai-go/v3): the tool calls
// of a Chat Completions answer and the function calls of a Responses
// answer.
//
// ChatResults executes the tool calls of one assistant message, each call
// through the Executor with the run id, concurrently, and returns the tool
// messages to append to the conversation; ResponseResults does the same
// for the function_call items of a response and returns function_call_output
// items. The output text is the outcome's model-facing message (package
// client): a repeat of a done action is answered from the ledger, whatever
// the new call id and however the arguments drifted. RunChat drives a whole
// Chat Completions conversation and resumes a saved transcript: the tool
// calls of its last assistant message that have no tool message yet are
// executed (and, when already done, answered from the ledger) before the
// model is asked again.
//
// Tool declarations are written once: a Tool carries the oncely tool and
// the description and parameter schema the model sees, and every identity
// field is marked required in that schema.
//
// The package is its own module, so that only its users compile the SDK.
package oncelyopenai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

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

// ErrSchema is matched by the errors of Parameters, ChatTools,
// ResponseTools and Register for a tool whose schema does not declare one
// of its identity fields.
var ErrSchema = errors.New("openai: tool schema")

// Parameters returns the JSON schema of t's parameters: an object with
// t.Properties, every identity field (and each object on its dotted path)
// required. A tool whose Properties do not declare an identity field is an
// error, since the model could not know it must send it.
func Parameters(t Tool) (map[string]any, error) {
	props, required, err := agent.RequireIdentity(t.Properties, t.Required, t.Identity)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrSchema, t.Name, err)
	}
	return map[string]any{"type": "object", "properties": props, "required": required}, nil
}

// ChatTools returns the declarations of tools for
// openai.ChatCompletionNewParams.Tools (see Parameters).
func ChatTools(tools ...Tool) ([]openai.ChatCompletionToolUnionParam, error) {
	out := make([]openai.ChatCompletionToolUnionParam, 0, len(tools))
	for _, t := range tools {
		params, err := Parameters(t)
		if err != nil {
			return nil, err
		}
		def := shared.FunctionDefinitionParam{Name: t.Name, Parameters: params}
		if t.Description != "" {
			def.Description = openai.String(t.Description)
		}
		out = append(out, openai.ChatCompletionFunctionTool(def))
	}
	return out, nil
}

// ResponseTools returns the declarations of tools for
// responses.ResponseNewParams.Tools (see Parameters), not strict: strict
// mode would require every property.
func ResponseTools(tools ...Tool) ([]responses.ToolUnionParam, error) {
	out := make([]responses.ToolUnionParam, 0, len(tools))
	for _, t := range tools {
		params, err := Parameters(t)
		if err != nil {
			return nil, err
		}
		u := responses.ToolParamOfFunction(t.Name, params, false)
		if t.Description != "" {
			u.OfFunction.Description = openai.String(t.Description)
		}
		out = append(out, u)
	}
	return out, nil
}

// Register checks the declarations of tools (see Parameters) and registers
// the tools with exec. Nothing is registered when a declaration is
// invalid.
func Register(exec *client.Executor, tools ...Tool) error {
	ct := make([]client.Tool, len(tools))
	for i, t := range tools {
		if _, err := Parameters(t); err != nil {
			return err
		}
		ct[i] = t.Tool
	}
	return exec.Register(ct...)
}

// Call is one executed tool call or function call.
type Call struct {
	// ID is the model's call id (tool_call id, or a function call's
	// call_id).
	ID string
	// Name is the tool's name.
	Name string
	// Arguments is the JSON the model sent.
	Arguments string
	// Result is the executor's answer.
	Result client.Result
	// Err is the executor's error: oncely could not guard the call (the
	// Result still says truthfully what happened).
	Err error
}

// execute runs calls through exec concurrently and joins their errors.
func execute(ctx context.Context, exec Executor, runID string, calls []Call) error {
	var wg sync.WaitGroup
	for i := range calls {
		c := &calls[i]
		wg.Go(func() {
			args := c.Arguments
			if strings.TrimSpace(args) == "" {
				args = "{}" // a function without parameters
			}
			c.Result, c.Err = exec.Execute(ctx, runID, client.Call{Tool: c.Name, Input: json.RawMessage(args), ID: c.ID})
		})
	}
	wg.Wait()
	var errs []error
	for _, c := range calls {
		if c.Err != nil {
			errs = append(errs, fmt.Errorf("openai: %s (%s): %w", c.Name, c.ID, c.Err))
		}
	}
	return errors.Join(errs...)
}

// chatCalls lists the calls of an assistant message's tool calls. A custom
// tool call (free text) is passed as a JSON string, which no oncely tool
// accepts: its output says the input is invalid.
func chatCalls(tcs []openai.ChatCompletionMessageToolCallUnionParam) []Call {
	var calls []Call
	for _, tc := range tcs {
		switch {
		case tc.OfFunction != nil:
			calls = append(calls, Call{ID: tc.OfFunction.ID, Name: tc.OfFunction.Function.Name, Arguments: tc.OfFunction.Function.Arguments})
		case tc.OfCustom != nil:
			in, _ := json.Marshal(tc.OfCustom.Custom.Input)
			calls = append(calls, Call{ID: tc.OfCustom.ID, Name: tc.OfCustom.Custom.Name, Arguments: string(in)})
		}
	}
	return calls
}

func toolMessages(calls []Call) []openai.ChatCompletionMessageParamUnion {
	out := make([]openai.ChatCompletionMessageParamUnion, len(calls))
	for i, c := range calls {
		out[i] = openai.ToolMessage(c.Result.Text, c.ID)
	}
	return out
}

// ChatResults executes the tool calls of msg (a Chat Completions answer's
// message) through exec under runID, concurrently, and returns one tool
// message per call, in their order, ready to append after msg.ToParam(),
// and the calls with their results. Every message carries a truthful text,
// also when exec returned an error for its call; the error (all of them,
// joined) is returned beside the messages. A message without tool calls
// gives none.
func ChatResults(ctx context.Context, exec Executor, runID string, msg openai.ChatCompletionMessage) ([]openai.ChatCompletionMessageParamUnion, []Call, error) {
	asst := msg.ToAssistantMessageParam()
	calls := chatCalls(asst.ToolCalls)
	err := execute(ctx, exec, runID, calls)
	return toolMessages(calls), calls, err
}

// ResponseResults executes the function_call items of resp (a Responses
// answer) through exec under runID, concurrently, and returns one
// function_call_output item per call, in their order, and the calls with
// their results. Send the items as the next request's input (with
// PreviousResponseID set to resp.ID, or after the response's output items
// in a stateless conversation). Every item carries a truthful text; the
// executor's errors are returned joined beside them. A response without
// function calls gives none.
func ResponseResults(ctx context.Context, exec Executor, runID string, resp *responses.Response) ([]responses.ResponseInputItemUnionParam, []Call, error) {
	var calls []Call
	for _, item := range resp.Output {
		if item.Type == "function_call" {
			fc := item.AsFunctionCall()
			calls = append(calls, Call{ID: fc.CallID, Name: fc.Name, Arguments: fc.Arguments})
		}
	}
	err := execute(ctx, exec, runID, calls)
	items := make([]responses.ResponseInputItemUnionParam, len(calls))
	for i, c := range calls {
		items[i] = responses.ResponseInputItemParamOfFunctionCallOutput(c.Result.Text)
		items[i].OfFunctionCallOutput.CallID = openai.String(c.ID)
	}
	return items, calls, err
}

// ChatCompletions creates chat completions: the SDK's
// *openai.ChatCompletionService.
type ChatCompletions interface {
	New(ctx context.Context, params openai.ChatCompletionNewParams, opts ...option.RequestOption) (*openai.ChatCompletion, error)
}

// Turn is one model answer and the tool calls executed for it.
type Turn struct {
	// N counts answers from 1; 0 is the resumption of a transcript whose
	// last assistant message had tool calls without tool messages.
	N int
	// Message is the model's answer (the zero value for N = 0).
	Message openai.ChatCompletionMessage
	// Calls are its tool calls with their results (none on the last turn).
	Calls []Call
	// Err is the executor's error for some calls (see ChatResults); the
	// conversation goes on with their truthful results.
	Err error
}

// Config tunes RunChat. The zero value (or nil) gives the defaults.
type Config struct {
	// MaxTurns bounds the model answers of one RunChat (default 20).
	// RunChat returns ErrMaxTurns when the model still calls tools after
	// it.
	MaxTurns int
	// OnAnswer is called with each answer once it is appended to the
	// transcript, before its tool calls run: the place to save the
	// transcript ahead of the effects. A run that stops while they run
	// resumes from it with the calls pending (see RunChat). An error stops
	// RunChat and is returned; no tool call of that answer runs.
	OnAnswer func(ctx context.Context, n int, messages []openai.ChatCompletionMessageParamUnion) error
	// OnTurn is called after each turn, once its tool calls were executed
	// and their tool messages appended: the place to save the transcript.
	// An error stops RunChat and is returned.
	OnTurn func(ctx context.Context, t Turn, messages []openai.ChatCompletionMessageParamUnion) error
	// RequestOptions are passed to every ChatCompletions.New call.
	RequestOptions []option.RequestOption
}

// ErrMaxTurns is returned by RunChat when the model still called tools
// after Config.MaxTurns answers.
var ErrMaxTurns = errors.New("openai: too many turns")

// Conversation is what RunChat leaves: every message sent and received.
type Conversation struct {
	// Messages is the transcript: the params' messages followed by each
	// answer and its tool messages. It marshals to JSON and back; to
	// resume after an error or a crash, call RunChat again with these as
	// the params' messages and the same run id.
	Messages []openai.ChatCompletionMessageParamUnion
	// Final is the model's last answer (nil when none arrived).
	Final *openai.ChatCompletion
	// Turns counts the model's answers.
	Turns int
}

// pending returns the tool calls of the transcript's last assistant
// message that no later tool message answers.
func pending(msgs []openai.ChatCompletionMessageParamUnion) []Call {
	answered := map[string]bool{}
	i := len(msgs) - 1
	for ; i >= 0 && msgs[i].OfTool != nil; i-- {
		answered[msgs[i].OfTool.ToolCallID] = true
	}
	if i < 0 || msgs[i].OfAssistant == nil {
		return nil
	}
	var out []Call
	for _, c := range chatCalls(msgs[i].OfAssistant.ToolCalls) {
		if !answered[c.ID] {
			out = append(out, c)
		}
	}
	return out
}

// RunChat drives a Chat Completions conversation: it sends params,
// executes the tool calls of each answer through exec under runID, appends
// their tool messages and asks again, until an answer calls no tool.
// params.Tools should declare the executor's tools (see ChatTools).
//
// When params.Messages is a saved transcript that ends in tool calls
// without tool messages (the process stopped while they ran), those calls
// are executed first, under their own call ids: a call that had done its
// action is answered from the ledger. An API error (after the SDK's own
// retries) stops RunChat; the returned Conversation holds everything up to
// then, including tool messages not yet delivered.
func RunChat(ctx context.Context, m ChatCompletions, exec Executor, runID string, params openai.ChatCompletionNewParams, cfg *Config) (Conversation, error) {
	var c Config
	if cfg != nil {
		c = *cfg
	}
	if c.MaxTurns <= 0 {
		c.MaxTurns = 20
	}
	conv := Conversation{Messages: append([]openai.ChatCompletionMessageParamUnion(nil), params.Messages...)}
	if calls := pending(conv.Messages); len(calls) > 0 {
		err := execute(ctx, exec, runID, calls)
		conv.Messages = append(conv.Messages, toolMessages(calls)...)
		if c.OnTurn != nil {
			if err := c.OnTurn(ctx, Turn{Calls: calls, Err: err}, conv.Messages); err != nil {
				return conv, err
			}
		}
	}
	for {
		if conv.Turns == c.MaxTurns {
			return conv, fmt.Errorf("%w: %d answers, the last still calling tools", ErrMaxTurns, c.MaxTurns)
		}
		params.Messages = conv.Messages
		comp, err := m.New(ctx, params, c.RequestOptions...)
		if err != nil {
			return conv, fmt.Errorf("openai: turn %d: %w", conv.Turns+1, err)
		}
		if len(comp.Choices) == 0 {
			return conv, fmt.Errorf("openai: turn %d: the answer has no choices", conv.Turns+1)
		}
		conv.Turns++
		conv.Final = comp
		msg := comp.Choices[0].Message
		conv.Messages = append(conv.Messages, msg.ToParam())
		if c.OnAnswer != nil {
			if err := c.OnAnswer(ctx, conv.Turns, conv.Messages); err != nil {
				return conv, err
			}
		}
		tms, calls, execErr := ChatResults(ctx, exec, runID, msg)
		conv.Messages = append(conv.Messages, tms...)
		if c.OnTurn != nil {
			if err := c.OnTurn(ctx, Turn{N: conv.Turns, Message: msg, Calls: calls, Err: execErr}, conv.Messages); err != nil {
				return conv, err
			}
		}
		if len(calls) == 0 {
			return conv, nil
		}
	}
}
