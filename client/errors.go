package client

import (
	"errors"
	"fmt"
)

// ErrorClass says what a tool's error means for its side effect.
type ErrorClass int

const (
	// ClassAmbiguous: the effect may have happened (a timeout after the
	// request was sent, a reset, a 5xx, a panic). The record becomes
	// uncertain and nobody acts again before reconciling. It is the class of
	// every error that does not say otherwise: assuming "nothing happened"
	// when something did is how duplicates are made.
	ClassAmbiguous ErrorClass = iota
	// ClassDefinite: nothing happened and a retry may succeed (a dial error
	// before the request was written, a 429, a 503 with Retry-After).
	ClassDefinite
	// ClassPermanent: nothing happened and the same call will fail again
	// (a validation error, a declined card).
	ClassPermanent
)

func (c ErrorClass) String() string {
	switch c {
	case ClassDefinite:
		return "definite"
	case ClassPermanent:
		return "permanent"
	default:
		return "ambiguous"
	}
}

// Classified is implemented by errors that know what happened to the side
// effect; provider errors implement it. ClassOf finds it with errors.As.
type Classified interface {
	error
	ErrorClass() ErrorClass
}

// ClassOf returns the class of a tool's error: the class of the first
// Classified error in its chain, else ClassAmbiguous.
func ClassOf(err error) ErrorClass {
	var c Classified
	if errors.As(err, &c) {
		return c.ErrorClass()
	}
	return ClassAmbiguous
}

type classifiedError struct {
	err   error
	class ErrorClass
}

func (e *classifiedError) Error() string          { return e.err.Error() }
func (e *classifiedError) Unwrap() error          { return e.err }
func (e *classifiedError) ErrorClass() ErrorClass { return e.class }

// Definite marks err as a failure that did nothing and may succeed later.
func Definite(err error) error { return classify(err, ClassDefinite) }

// Permanent marks err as a failure that did nothing and will not succeed on
// retry with the same input.
func Permanent(err error) error { return classify(err, ClassPermanent) }

// Ambiguous marks err as a failure after which the effect may exist.
// Unmarked errors are treated the same way; Ambiguous documents intent.
func Ambiguous(err error) error { return classify(err, ClassAmbiguous) }

func classify(err error, c ErrorClass) error {
	if err == nil {
		return nil
	}
	return &classifiedError{err: err, class: c}
}

// ErrLeaseLost is the cause (context.Cause) of the context a tool and its
// reconciler run under when the call's claim ends before they return: the
// lease ran out without renewal, or a renewal found the record taken over
// by another caller. No request of the action may leave after it; a tool
// that sees it should stop sending.
var ErrLeaseLost = errors.New("client: lease lost")

// InputError says why a call's input cannot be turned into an action key.
// Nothing runs and nothing is recorded for such a call.
type InputError struct {
	Tool  string
	Field string // the identity or validated field at fault, if any
	Err   error  // one of the ErrInput sentinels
	Msg   string
}

func (e *InputError) Error() string {
	switch {
	case e.Field != "":
		return fmt.Sprintf("client: %s: field %q: %s", e.Tool, e.Field, e.Msg)
	case e.Tool != "":
		return fmt.Sprintf("client: %s: %s", e.Tool, e.Msg)
	}
	return "client: " + e.Msg
}

func (e *InputError) Unwrap() error { return e.Err }

// Sentinels for InputError.Err.
var (
	ErrUnknownTool  = errors.New("client: unknown tool")
	ErrMissingField = errors.New("client: identity field missing")
	ErrFieldType    = errors.New("client: field has the wrong type")
	ErrNotObject    = errors.New("client: input is not a JSON object")
	ErrInvalidJSON  = errors.New("client: invalid JSON")
	ErrTooLarge     = errors.New("client: input too large")
	ErrDuplicateKey = errors.New("client: duplicate key in JSON object")
	ErrUnsafeNumber = errors.New("client: integer beyond 2^53 cannot be hashed exactly")
)
