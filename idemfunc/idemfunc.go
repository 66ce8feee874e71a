// Package idemfunc makes any function of the shape
// func(ctx, In) (Out, error) — a Lambda handler, a queue consumer, a
// plain Go function — happen once per identity, with the executor's key
// derivation, outcomes, leases, fencing and reconciliation. A repeat
// returns the first call's full Out.
//
// The identity is selected from the JSON form of In by JMESPath
// expressions (github.com/jmespath-community/go-jmespath): "orderId",
// "detail.order.id", or json_parse(body).orderId for a JSON-encoded body
// such as API Gateway's (powertools_json is the same function under the
// name Powertools users know). Each expression must yield a scalar; its
// value is normalized by the Key's Normalizer like a tool's identity
// field.
package idemfunc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	jmespath "github.com/jmespath-community/go-jmespath"

	"github.com/idemkit/idemkit/client"
)

// Errors a wrapped function returns for outcomes that carry no Out.
var (
	// ErrInProgress: another call of the same identity holds the claim.
	ErrInProgress = errors.New("idemfunc: already in progress")
	// ErrUncertain: the effect may exist; it is left to reconciliation.
	ErrUncertain = errors.New("idemfunc: outcome unknown")
	// ErrConflict: the identity was done with different validated values.
	ErrConflict = errors.New("idemfunc: done earlier with different values")
	// ErrInvalidInput: the input has no identity (a missing or non-scalar
	// value).
	ErrInvalidInput = errors.New("idemfunc: invalid input")
	// ErrResultNotKept: a repeat found the action done, but its Out was
	// over the ledger's result limit and was not stored.
	ErrResultNotKept = errors.New("idemfunc: done earlier, but the result was too large to keep")
)

// Key selects one identity or validated value by a JMESPath expression.
type Key struct {
	// Expr is the JMESPath expression over the JSON form of In.
	Expr string
	// Norm normalizes the value (nil: exact canonical JSON).
	Norm client.Normalizer
}

// Options describe a wrapped function. Identity is required.
type Options[Out any] struct {
	// Identity selects the values that define "the same call".
	Identity []Key
	// Validated selects values that must not change between repeats.
	Validated []Key
	// Scope of the key; ScopeRun by default, where RunID names the run.
	// A function's repeats usually come from redeliveries of one event,
	// so ScopeGlobal (the identity alone) is the common choice.
	Scope client.Scope
	// RunID names the run of a call (default: the function's name). It is
	// part of the key under ScopeRun and stored with the record.
	RunID func(ctx context.Context) string
	// Retention of the records (default: the executor's).
	Retention time.Duration
	// Summary describes a done call in the ledger (default "<name> done").
	Summary func(Out) string
	// Ref is the provider reference of a done call (default "").
	Ref func(Out) string
	// Reconciler is asked after an ambiguous outcome (see client.Tool).
	Reconciler client.Reconciler
	// ZeroOnLostResult: a repeat whose Out was too large to store returns
	// Out's zero value and no error, instead of ErrResultNotKept.
	ZeroOnLostResult bool
}

// holder carries one call's input into the tool and its output back.
type holder[In, Out any] struct {
	in  In
	out Out
	ran bool
}

type holderKey struct{ name string }

// Wrap registers a tool named name with exec and returns fn made
// exactly-once per identity. The returned function answers:
//   - the tool ran now: fn's Out and nil;
//   - done earlier: the first call's Out (decoded from the ledger) and nil;
//   - fn failed definitely: fn's error;
//   - otherwise an error matching ErrInProgress, ErrUncertain,
//     ErrConflict, ErrInvalidInput or ErrResultNotKept, wrapping the cause.
//
// fn's errors are classified with client.ClassOf: mark a failure that
// did nothing with client.Definite or client.Permanent; an unmarked error
// leaves the call uncertain.
func Wrap[In, Out any](exec *client.Executor, name string, opts Options[Out], fn func(context.Context, In) (Out, error)) (func(context.Context, In) (Out, error), error) {
	if fn == nil {
		return nil, fmt.Errorf("idemfunc: %s: nil function", name)
	}
	if len(opts.Identity) == 0 {
		return nil, fmt.Errorf("idemfunc: %s: no identity expressions", name)
	}
	idn, err := compile(name, "id", opts.Identity)
	if err != nil {
		return nil, err
	}
	val, err := compile(name, "v", opts.Validated)
	if err != nil {
		return nil, err
	}
	hk := &holderKey{name}
	tool := client.Tool{
		Name:       name,
		Scope:      opts.Scope,
		Retention:  opts.Retention,
		Reconciler: opts.Reconciler,
		Run: func(ctx context.Context, inv client.Invocation) (client.Effect, error) {
			h, ok := ctx.Value(hk).(*holder[In, Out])
			if !ok {
				return client.Effect{}, client.Permanent(fmt.Errorf("idemfunc: %s is called through its wrapper only", name))
			}
			out, err := fn(ctx, h.in)
			if err != nil {
				return client.Effect{}, err
			}
			h.out, h.ran = out, true
			result, err := json.Marshal(out)
			eff := client.Effect{Summary: name + " done", Result: result}
			if opts.Summary != nil {
				eff.Summary = opts.Summary(out)
			}
			if err != nil {
				// The effect happened; only its replay copy is lost. The
				// record says why, not "too large", for repeats and
				// operators (idem ledger show).
				eff.Result = nil
				eff.Summary += " (result not kept: it does not encode as JSON: " + err.Error() + ")"
			}
			if opts.Ref != nil {
				eff.Ref = opts.Ref(out)
			}
			return eff, nil
		},
	}
	for _, s := range idn {
		tool.Identity = append(tool.Identity, client.Field{Path: s.field, Norm: s.norm})
	}
	for _, s := range val {
		tool.Validated = append(tool.Validated, client.Field{Path: s.field, Norm: s.norm})
	}
	if err := exec.Register(tool); err != nil {
		return nil, err
	}
	selectors := append(idn, val...)
	return func(ctx context.Context, in In) (Out, error) {
		var zero Out
		input, err := selectInput(in, selectors)
		if err != nil {
			return zero, fmt.Errorf("%w: %s: %w", ErrInvalidInput, name, err)
		}
		runID := name
		if opts.RunID != nil {
			runID = opts.RunID(ctx)
		}
		h := &holder[In, Out]{in: in}
		res, err := exec.Execute(context.WithValue(ctx, hk, h), runID, client.Call{Tool: name, Input: input})
		if err != nil {
			return zero, err
		}
		switch res.Outcome {
		case client.Executed:
			if h.ran {
				return h.out, nil
			}
			return decode[Out](res.Payload, opts.ZeroOnLostResult) // merged with a concurrent call
		case client.AlreadyDone:
			return decode[Out](res.Payload, opts.ZeroOnLostResult)
		case client.Failed:
			return zero, res.Err
		case client.InProgress:
			return zero, fmt.Errorf("%w: %s", ErrInProgress, name)
		case client.Conflict:
			return zero, fmt.Errorf("%w: %s", ErrConflict, res.Text)
		case client.InvalidInput:
			return zero, fmt.Errorf("%w: %s: %w", ErrInvalidInput, name, res.Err)
		default:
			return zero, fmt.Errorf("%w: %s: %w", ErrUncertain, name, res.Err)
		}
	}, nil
}

func decode[Out any](payload json.RawMessage, zeroOK bool) (Out, error) {
	var out Out
	if len(payload) == 0 {
		if zeroOK {
			return out, nil
		}
		return out, ErrResultNotKept
	}
	if err := json.Unmarshal(payload, &out); err != nil {
		return out, fmt.Errorf("idemfunc: stored result does not decode: %w", err)
	}
	return out, nil
}

// selector is one compiled expression and the field it fills in the
// identity document handed to the executor.
type selector struct {
	field string
	expr  string
	q     jmespath.JMESPath
	norm  client.Normalizer
}

func compile(name, prefix string, keys []Key) ([]selector, error) {
	var out []selector
	for i, k := range keys {
		q, err := jmespath.Compile(k.Expr, jsonFunctions...)
		if err != nil {
			return nil, fmt.Errorf("idemfunc: %s: expression %q: %w", name, k.Expr, err)
		}
		out = append(out, selector{field: prefix + strconv.Itoa(i), expr: k.Expr, q: q, norm: k.Norm})
	}
	return out, nil
}

// selectInput evaluates the selectors over in's JSON form and returns the
// document {"id0": v, ..., "v0": v, ...} the executor derives the key from.
// Numbers stay exact (json.Number), so large ids never round.
func selectInput[In any](in In, sel []selector) (json.RawMessage, error) {
	raw, err := json.Marshal(in)
	if err != nil {
		return nil, fmt.Errorf("input does not encode as JSON: %w", err)
	}
	doc, err := decodeExact(raw)
	if err != nil {
		return nil, err
	}
	fields := make(map[string]any, len(sel))
	for _, s := range sel {
		v, err := s.q.Search(doc)
		if err != nil {
			return nil, fmt.Errorf("expression %q: %w", s.expr, err)
		}
		if v == nil && s.field[0] == 'i' {
			return nil, fmt.Errorf("expression %q selects nothing", s.expr)
		}
		fields[s.field] = v
	}
	return json.Marshal(fields)
}

func decodeExact(raw []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

// jsonFunctions adds json_parse (alias powertools_json): the value of a
// JSON-encoded string, for bodies such as API Gateway's and SQS's.
var jsonFunctions = func() []jmespath.FunctionEntry {
	parse := func(args []any) (any, error) {
		s, ok := args[0].(string)
		if !ok {
			return nil, errors.New("json_parse: argument is not a string")
		}
		return decodeExact([]byte(s))
	}
	var fs []jmespath.FunctionEntry
	for _, name := range []string{"json_parse", "powertools_json"} {
		fs = append(fs, jmespath.FunctionEntry{
			Name:      name,
			Arguments: []jmespath.ArgSpec{{Types: []jmespath.JpType{jmespath.JpString}}},
			Handler:   parse,
		})
	}
	return fs
}()
