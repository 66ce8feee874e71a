package errclass_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/oncely/oncely/errclass"
)

// quotaError is a provider's error that knows what happened: the request
// was refused before anything was done, and a retry may succeed.
type quotaError struct{}

func (quotaError) Error() string              { return "429: quota exceeded" }
func (quotaError) ErrorClass() errclass.Class { return errclass.Definite }

// Of reads the class of the first classified error in the chain; an
// error that does not say is ambiguous, since "nothing happened" must
// never be assumed.
func ExampleOf() {
	for _, err := range []error{
		quotaError{},
		fmt.Errorf("sending the refund: %w", quotaError{}),
		context.DeadlineExceeded,
		errors.New("connection reset by peer"),
	} {
		fmt.Printf("%v: %v\n", err, errclass.Of(err))
	}
	// Output:
	// 429: quota exceeded: definite
	// sending the refund: 429: quota exceeded: definite
	// context deadline exceeded: ambiguous
	// connection reset by peer: ambiguous
}

// What each class means for the executor: an ambiguous outcome leaves
// the action uncertain, the others leave it failed (retryable or not).
func ExampleClass() {
	for _, c := range []errclass.Class{errclass.Ambiguous, errclass.Definite, errclass.Permanent} {
		switch c {
		case errclass.Ambiguous:
			fmt.Println(c, "→ uncertain: reconcile before acting again")
		case errclass.Definite:
			fmt.Println(c, "→ failed: the model may retry")
		case errclass.Permanent:
			fmt.Println(c, "→ failed: a retry fails too")
		}
	}
	// Output:
	// ambiguous → uncertain: reconcile before acting again
	// definite → failed: the model may retry
	// permanent → failed: a retry fails too
}
