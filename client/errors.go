package client

import (
	"errors"
	"fmt"

	"github.com/oncely/oncely/errclass"
)

// classifiedError is an error marked by Definite, Permanent or Ambiguous.
type classifiedError struct {
	err   error
	class errclass.Class
}

func (e *classifiedError) Error() string              { return e.err.Error() }
func (e *classifiedError) Unwrap() error              { return e.err }
func (e *classifiedError) ErrorClass() errclass.Class { return e.class }

// Definite marks err as a failure that did nothing and may succeed later.
func Definite(err error) error { return classify(err, errclass.Definite) }

// Permanent marks err as a failure that did nothing and will not succeed on
// retry with the same input.
func Permanent(err error) error { return classify(err, errclass.Permanent) }

// Ambiguous marks err as a failure after which the effect may exist.
// Unmarked errors are treated the same way; Ambiguous documents intent.
func Ambiguous(err error) error { return classify(err, errclass.Ambiguous) }

func classify(err error, c errclass.Class) error {
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
	Tool  string // the tool called
	Field string // the identity or validated field at fault, if any
	Err   error  // one of the sentinels below
	Msg   string // what is wrong, in words
}

// Error names the tool, the field and what is wrong.
func (e *InputError) Error() string {
	switch {
	case e.Field != "":
		return fmt.Sprintf("client: %s: field %q: %s", e.Tool, e.Field, e.Msg)
	case e.Tool != "":
		return fmt.Sprintf("client: %s: %s", e.Tool, e.Msg)
	}
	return "client: " + e.Msg
}

// Unwrap returns the sentinel.
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
