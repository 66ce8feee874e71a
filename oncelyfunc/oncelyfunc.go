// Package oncelyfunc makes any function of the shape
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
// field, and an identity value that is empty once normalized ("", or
// blanks under client.Trimmed) is a missing one. Numbers are never
// rounded: the input's numbers keep their digits, so does to_number
// ("9007199254740993" stays 9007199254740993, where the library's own
// to_number parses a float64), and a number JMESPath computes in floating
// point (a literal, length(), arithmetic) is refused unless it is an
// integer below 2^53.
package oncelyfunc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	jmespath "github.com/jmespath-community/go-jmespath"

	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/errclass"
)

// Errors a wrapped function returns for outcomes that carry no Out.
var (
	// ErrInProgress: another call of the same identity holds the claim.
	ErrInProgress = errors.New("oncelyfunc: already in progress")
	// ErrUncertain: the effect may exist; it is left to reconciliation.
	ErrUncertain = errors.New("oncelyfunc: outcome unknown")
	// ErrConflict: the identity was done with different validated values.
	ErrConflict = errors.New("oncelyfunc: done earlier with different values")
	// ErrInvalidInput: the input has no identity (a missing, empty or
	// non-scalar value).
	ErrInvalidInput = errors.New("oncelyfunc: invalid input")
	// ErrResultNotKept: the action is done, but its Out was not stored:
	// it was over the ledger's result limit, or the action was settled
	// without it (a Reconciler found the effect, or an operator resolved
	// the record with ledger.Resolve).
	ErrResultNotKept = errors.New("oncelyfunc: done, but the result was not kept")
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
	// When it finds the effect, the provider's reference and summary it
	// returned are what a repeat learns of the action (Done.Ref,
	// Done.Summary): Out itself was never recorded.
	Reconciler client.Reconciler
	// ErrorsAreDefinite: fn's unmarked errors mean that nothing happened,
	// so a retry runs fn again (Powertools' behaviour, which deletes the
	// record when the function throws). By default an unmarked error may
	// have happened, and the call stays uncertain until it is reconciled
	// or resolved. Set it only for a function whose side effect is the
	// last thing it does, or that returns an error only when the effect
	// did not happen; errors marked with client.Ambiguous stay ambiguous.
	ErrorsAreDefinite bool
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
//   - done earlier: the first call's Out (decoded from the ledger, where
//     a number in an interface value is an exact json.Number) and nil;
//   - fn failed definitely: fn's error;
//   - otherwise an error matching ErrInProgress, ErrUncertain,
//     ErrConflict, ErrInvalidInput or ErrResultNotKept, wrapping the cause.
//
// fn's errors are classified with errclass.Of: mark a failure that
// did nothing with client.Definite or client.Permanent; an unmarked error
// leaves the call uncertain, unless Options.ErrorsAreDefinite.
func Wrap[In, Out any](exec *client.Executor, name string, opts Options[Out], fn func(context.Context, In) (Out, error)) (func(context.Context, In) (Out, error), error) {
	call, err := wrap(exec, name, opts, fn)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, in In) (Out, error) {
		out, _, err := call(ctx, in)
		return out, err
	}, nil
}

// WrapResult is Wrap whose function also returns the executor's Result:
// its Outcome tells a first run (client.Executed) from a repeat answered
// from the ledger (client.AlreadyDone), as Powertools' response hook
// does, and it carries the action key and attempt. For an input without
// an identity it is an InvalidInput Result without a key.
func WrapResult[In, Out any](exec *client.Executor, name string, opts Options[Out], fn func(context.Context, In) (Out, error)) (func(context.Context, In) (Out, client.Result, error), error) {
	return wrap(exec, name, opts, fn)
}

// Done is a done action as a value: the function's output when it is
// known, and the provider's reference to the effect either way.
//
// An action can be done without its output: a Reconciler found the effect
// after the run that made it died before recording its output, an
// operator resolved the record (ledger.Resolve), or the output was over
// the ledger's result limit. Then Known is false, Value is Out's zero
// value and must not be read as data, and Ref and Summary are what the
// reconciler's lookup returned (the provider's object id and a line
// describing it) or what the operator recorded. Test Known before using
// Value:
//
//	if d.Known { use(d.Value) } else { useRef(d.Ref) }
//
// The zero Done is "result unknown" with no reference: it never claims
// data it does not have.
type Done[Out any] struct {
	// Value is the function's output, this call's or the first call's
	// replayed from the ledger; Out's zero value when Known is false.
	Value Out `json:"value"`
	// Known reports whether Value is the function's real output.
	Known bool `json:"known"`
	// Ref is the provider's reference to the effect: Options.Ref of the
	// output, or what a reconciler's lookup found ("" when unknown).
	Ref string `json:"ref,omitempty"`
	// Summary describes the effect: Options.Summary of the output, or the
	// line a reconciler's lookup returned.
	Summary string `json:"summary,omitempty"`
	// Replayed: the action was done by an earlier call (the executor's
	// AlreadyDone, or this call reconciled an earlier attempt's effect),
	// not by this call's run of the function.
	Replayed bool `json:"replayed,omitempty"`
}

// WrapDone is WrapResult whose function answers a done action with a
// Done rather than an error when its output was not kept: "done, result
// unknown" is a value (Done.Known false, with the provider's reference),
// not ErrResultNotKept. Every other outcome is answered as by Wrap.
func WrapDone[In, Out any](exec *client.Executor, name string, opts Options[Out], fn func(context.Context, In) (Out, error)) (func(context.Context, In) (Done[Out], client.Result, error), error) {
	call, err := wrap(exec, name, opts, fn)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, in In) (Done[Out], client.Result, error) {
		out, res, err := call(ctx, in)
		return DoneOf(out, res, err)
	}, nil
}

// DoneOf turns the answer of a function made by WrapResult into a Done:
// a done outcome (client.Executed, client.AlreadyDone), with or without
// its output, is a Done and no error; anything else is err as it is.
func DoneOf[Out any](out Out, res client.Result, err error) (Done[Out], client.Result, error) {
	done := res.Outcome == client.Executed || res.Outcome == client.AlreadyDone
	if !done || err != nil && !errors.Is(err, ErrResultNotKept) {
		return Done[Out]{}, res, err
	}
	d := Done[Out]{Known: err == nil, Ref: res.Ref, Summary: res.Summary, Replayed: res.Outcome == client.AlreadyDone}
	if d.Known {
		d.Value = out
	} else {
		// Without a kept output the effect was not made by this call's
		// run of the function: a reconciler found it, or it was settled
		// without its output.
		d.Replayed = true
	}
	return d, res, nil
}

// DownstreamKey returns, inside a function wrapped by Wrap, the key to pass
// to the provider so that it recognises a repeat of this action's attempt
// (an Idempotency-Key header, a client reference); "" outside one.
func DownstreamKey(ctx context.Context) string {
	k, _ := ctx.Value(downstreamKey{}).(string)
	return k
}

type downstreamKey struct{}

// wrap is Wrap whose function also returns the executor's Result (an
// InvalidInput one, without a key, when the input has no identity).
func wrap[In, Out any](exec *client.Executor, name string, opts Options[Out], fn func(context.Context, In) (Out, error)) (func(context.Context, In) (Out, client.Result, error), error) {
	if fn == nil {
		return nil, fmt.Errorf("oncelyfunc: %s: nil function", name)
	}
	if len(opts.Identity) == 0 {
		return nil, fmt.Errorf("oncelyfunc: %s: no identity expressions", name)
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
				return client.Effect{}, client.Permanent(fmt.Errorf("oncelyfunc: %s is called through its wrapper only", name))
			}
			out, err := fn(context.WithValue(ctx, downstreamKey{}, inv.DownstreamKey), h.in)
			if err != nil {
				var c errclass.Classified
				if opts.ErrorsAreDefinite && !errors.As(err, &c) {
					err = client.Definite(err)
				}
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
				// operators (oncely ledger show).
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
	return func(ctx context.Context, in In) (Out, client.Result, error) {
		var out Out
		input, err := selectInput(in, selectors)
		if err != nil {
			err = fmt.Errorf("%w: %s: %w", ErrInvalidInput, name, err)
			return out, client.Result{Outcome: client.InvalidInput, IsError: true, Err: err}, err
		}
		runID := name
		if opts.RunID != nil {
			runID = opts.RunID(ctx)
		}
		h := &holder[In, Out]{in: in}
		res, err := exec.Execute(context.WithValue(ctx, hk, h), runID, client.Call{Tool: name, Input: input})
		if err != nil {
			return out, res, err
		}
		switch res.Outcome {
		case client.Executed:
			if h.ran {
				return h.out, res, nil
			}
			out, err = decode[Out](res.Payload) // merged with a concurrent call, or reconciled
		case client.AlreadyDone:
			out, err = decode[Out](res.Payload)
		case client.Failed:
			err = res.Err
		case client.InProgress:
			err = fmt.Errorf("%w: %s", ErrInProgress, name)
		case client.Conflict:
			err = fmt.Errorf("%w: %s", ErrConflict, res.Text)
		case client.InvalidInput:
			err = fmt.Errorf("%w: %s: %w", ErrInvalidInput, name, res.Err)
		default:
			err = fmt.Errorf("%w: %s: %w", ErrUncertain, name, res.Err)
		}
		return out, res, err
	}, nil
}

func decode[Out any](payload json.RawMessage) (Out, error) {
	var out Out
	if len(payload) == 0 {
		return out, ErrResultNotKept
	}
	out, err := decodeExact[Out](payload)
	if err != nil {
		return out, fmt.Errorf("oncelyfunc: stored result does not decode: %w", err)
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
			return nil, fmt.Errorf("oncelyfunc: %s: expression %q: %w", name, k.Expr, err)
		}
		out = append(out, selector{field: prefix + strconv.Itoa(i), expr: k.Expr, q: q, norm: k.Norm})
	}
	return out, nil
}

// selectInput evaluates the selectors over in's JSON form and returns the
// document {"id0": v, ..., "v0": v, ...} the executor derives the key from.
// Numbers stay exact (json.Number), so large ids never round: to_number
// keeps the number's text (see toNumber), and a number the library
// computed in float64 (a literal, length(), arithmetic) is refused unless
// it is an integer below 2^53, which no rounding made.
func selectInput[In any](in In, sel []selector) (json.RawMessage, error) {
	raw, err := json.Marshal(in)
	if err != nil {
		return nil, fmt.Errorf("input does not encode as JSON: %w", err)
	}
	doc, err := decodeExact[any](raw)
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
		if f, ok := v.(float64); ok && (f != math.Trunc(f) || math.Abs(f) >= 1<<53) {
			return nil, fmt.Errorf("expression %q computes the number %v in floating point, which may be rounded: select a number of the input, or use to_number, which keeps its digits", s.expr, f)
		}
		fields[s.field] = v
	}
	return json.Marshal(fields)
}

// decodeExact decodes JSON into a T whose interface values hold numbers
// as json.Number, not as a float64 that would round a large id.
func decodeExact[T any](raw []byte) (T, error) {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v T
	err := d.Decode(&v)
	return v, err
}

// jsonFunctions adds json_parse (alias powertools_json): the value of a
// JSON-encoded string, for bodies such as API Gateway's and SQS's; and
// replaces to_number with toNumber.
var jsonFunctions = func() []jmespath.FunctionEntry {
	parse := func(args []any) (any, error) {
		s, ok := args[0].(string)
		if !ok {
			return nil, errors.New("json_parse: argument is not a string")
		}
		return decodeExact[any]([]byte(s))
	}
	var fs []jmespath.FunctionEntry
	for _, name := range []string{"json_parse", "powertools_json"} {
		fs = append(fs, jmespath.FunctionEntry{
			Name:      name,
			Arguments: []jmespath.ArgSpec{{Types: []jmespath.JpType{jmespath.JpString}}},
			Handler:   parse,
		})
	}
	// Functions given to Compile take the place of the built-in ones of
	// the same name.
	return append(fs, jmespath.FunctionEntry{
		Name:      "to_number",
		Arguments: []jmespath.ArgSpec{{Types: []jmespath.JpType{jmespath.JpAny}}},
		Handler:   toNumber,
	})
}()

// toNumber is JMESPath's to_number without rounding. The library's parses
// a string into a float64, so to_number("9007199254740993") was
// 9007199254740992 and two orders were one action, and it fails on the
// input's numbers, which are json.Number here. This one returns a number
// as it is, a string that is a JSON number (RFC 8259, as the JMESPath
// specification says) as that number's exact text, and null for anything
// else.
func toNumber(args []any) (any, error) {
	switch x := args[0].(type) {
	case json.Number, float64:
		return x, nil
	case string:
		// A JSON number starts with '-' or a digit and ends with a digit;
		// json.Valid checks the rest, and that nothing surrounds it.
		if x != "" && (x[0] == '-' || isDigit(x[0])) && isDigit(x[len(x)-1]) && json.Valid([]byte(x)) {
			return json.Number(x), nil
		}
	}
	return nil, nil
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }
