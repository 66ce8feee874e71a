// Package claude runs the tool calls of a Claude conversation through an
// oncely Executor, on the official Go SDK (anthropic-sdk-go/v2).
//
// Results executes the tool_use blocks of one assistant message, each call
// through the Executor with the run id, concurrently, and returns the
// tool_result blocks to send back as the next user message: the text is the
// outcome's model-facing message and is_error follows the outcome table of
// package client. Run drives a whole conversation: it calls the Messages
// API, executes the tool calls, appends the results and asks again until the
// model stops calling tools.
//
// Tool declarations are written once: a Tool carries the oncely tool and
// the description and input schema the model sees, and ToolParams marks
// every identity field as required, so the model is told to always send the
// fields the action key is made of.
package oncelyclaude

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

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
	// Properties is the "properties" object of the input's JSON schema:
	// field name to the field's schema.
	Properties map[string]any
	// Required lists the input fields the model must send besides the
	// identity fields, which are always required.
	Required []string
}

// ErrSchema is matched by the errors of ToolParams and Register for a tool
// whose schema does not declare one of its identity fields.
var ErrSchema = errors.New("claude: tool schema")

// ToolParams returns the declarations of tools for MessageNewParams.Tools.
// Each identity field (and each object on its dotted path) is required in
// the schema; a tool whose Properties do not declare an identity field is
// an error, since the model could not know it must send it.
func ToolParams(tools ...Tool) ([]anthropic.ToolUnionParam, error) {
	out := make([]anthropic.ToolUnionParam, 0, len(tools))
	for _, t := range tools {
		props, required, err := agent.RequireIdentity(t.Properties, t.Required, t.Identity)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrSchema, t.Name, err)
		}
		tp := anthropic.ToolParam{
			Name:        t.Name,
			InputSchema: anthropic.ToolInputSchemaParam{Properties: props, Required: required},
		}
		if t.Description != "" {
			tp.Description = anthropic.String(t.Description)
		}
		out = append(out, anthropic.ToolUnionParam{OfTool: &tp})
	}
	return out, nil
}

// Register registers the tools with exec and returns their declarations
// (see ToolParams). Nothing is registered when a declaration is invalid.
func Register(exec *client.Executor, tools ...Tool) ([]anthropic.ToolUnionParam, error) {
	params, err := ToolParams(tools...)
	if err != nil {
		return nil, err
	}
	ct := make([]client.Tool, len(tools))
	for i := range tools {
		ct[i] = tools[i].Tool
	}
	if err := exec.Register(ct...); err != nil {
		return nil, err
	}
	return params, nil
}

// Call is one executed tool_use block.
type Call struct {
	// ToolUse is the model's block.
	ToolUse anthropic.ToolUseBlock
	// Result is the executor's answer.
	Result client.Result
	// Err is the executor's error: oncely could not guard the call (the
	// Result still says truthfully what happened).
	Err error
}

// Results executes the tool_use blocks of msg through exec under runID,
// concurrently, and returns one tool_result block per tool_use block, in
// their order, ready to be sent as the next user message
// (anthropic.NewUserMessage(blocks...)), and the calls with their results.
// Every block carries a truthful text, also when exec returned an error for
// its call; the error (all of them, joined) is returned beside the blocks.
// A message without tool_use blocks gives no blocks.
func Results(ctx context.Context, exec Executor, runID string, msg *anthropic.Message) ([]anthropic.ContentBlockParamUnion, []Call, error) {
	var calls []Call
	for _, b := range msg.Content {
		if b.Type == "tool_use" {
			calls = append(calls, Call{ToolUse: b.AsToolUse()})
		}
	}
	var wg sync.WaitGroup
	for i := range calls {
		c := &calls[i]
		wg.Go(func() {
			c.Result, c.Err = exec.Execute(ctx, runID, client.Call{Tool: c.ToolUse.Name, Input: c.ToolUse.Input, ID: c.ToolUse.ID})
		})
	}
	wg.Wait()
	blocks := make([]anthropic.ContentBlockParamUnion, len(calls))
	var errs []error
	for i, c := range calls {
		blocks[i] = anthropic.NewToolResultBlock(c.ToolUse.ID, c.Result.Text, c.Result.IsError)
		if c.Err != nil {
			errs = append(errs, fmt.Errorf("claude: %s (%s): %w", c.ToolUse.Name, c.ToolUse.ID, c.Err))
		}
	}
	return blocks, calls, errors.Join(errs...)
}

// Messages creates messages: the SDK's *anthropic.MessageService.
type Messages interface {
	New(ctx context.Context, params anthropic.MessageNewParams, opts ...option.RequestOption) (*anthropic.Message, error)
}

// Turn is one model answer and the tool calls executed for it.
type Turn struct {
	// N counts turns from 1.
	N int
	// Message is the model's answer.
	Message *anthropic.Message
	// Calls are its tool calls with their results (none on the last turn).
	Calls []Call
	// Err is the executor's error for some calls (see Results); the
	// conversation goes on with their truthful results.
	Err error
}

// Config tunes Run. The zero value (or nil) gives the defaults.
type Config struct {
	// MaxTurns bounds the model answers of one Run (default 20). Run
	// returns ErrMaxTurns when the model still calls tools after it.
	MaxTurns int
	// OnTurn is called after each turn, once its tool calls were executed.
	// An error stops Run and is returned.
	OnTurn func(ctx context.Context, t Turn) error
	// RequestOptions are passed to every Messages.New call.
	RequestOptions []option.RequestOption
}

// ErrMaxTurns is returned by Run when the model still called tools after
// Config.MaxTurns answers.
var ErrMaxTurns = errors.New("claude: too many turns")

// Conversation is what Run leaves: every message sent and received.
type Conversation struct {
	// Messages is the conversation: the params' messages followed by each
	// answer and each tool_result message. To resume after an error, call
	// Run again with these as the params' messages (and the same run id):
	// tools already done are answered from the ledger.
	Messages []anthropic.MessageParam
	// Final is the model's last answer (nil when none arrived).
	Final *anthropic.Message
	// Turns counts the model's answers.
	Turns int
}

// Run drives a conversation: it sends params, executes the tool calls of
// each answer through exec under runID, sends their results back, and
// repeats until an answer calls no tool. params.Tools should declare the
// executor's tools (see ToolParams).
//
// A Messages API error (after the SDK's own retries) stops Run; the
// returned Conversation holds everything up to then, including tool
// results that were computed but not delivered, so a resumed Run delivers
// them or, if the model asks again, gets them replayed from the ledger.
func Run(ctx context.Context, m Messages, exec Executor, runID string, params anthropic.MessageNewParams, cfg *Config) (Conversation, error) {
	var c Config
	if cfg != nil {
		c = *cfg
	}
	if c.MaxTurns <= 0 {
		c.MaxTurns = 20
	}
	conv := Conversation{Messages: append([]anthropic.MessageParam(nil), params.Messages...)}
	for {
		if conv.Turns == c.MaxTurns {
			return conv, fmt.Errorf("%w: %d answers, the last still calling tools", ErrMaxTurns, c.MaxTurns)
		}
		params.Messages = conv.Messages
		msg, err := m.New(ctx, params, c.RequestOptions...)
		if err != nil {
			return conv, fmt.Errorf("claude: turn %d: %w", conv.Turns+1, err)
		}
		conv.Turns++
		conv.Final = msg
		conv.Messages = append(conv.Messages, msg.ToParam())
		blocks, calls, execErr := Results(ctx, exec, runID, msg)
		if len(blocks) > 0 {
			conv.Messages = append(conv.Messages, anthropic.NewUserMessage(blocks...))
		}
		if c.OnTurn != nil {
			if err := c.OnTurn(ctx, Turn{N: conv.Turns, Message: msg, Calls: calls, Err: execErr}); err != nil {
				return conv, err
			}
		}
		if len(blocks) == 0 {
			return conv, nil
		}
	}
}
