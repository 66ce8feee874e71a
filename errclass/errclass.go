// Package errclass says what a failed request's error means for its side
// effect: it may exist (Ambiguous), or nothing happened and a retry may
// succeed (Definite), or nothing happened and the same request will fail
// again (Permanent).
//
// It is the vocabulary shared by the executor (package client), which
// decides from the class whether an action is failed or uncertain, and
// the HTTP layer (package providers), whose errors carry their class,
// without either depending on the other. Tools mark their own errors with
// client.Definite, client.Permanent and client.Ambiguous.
package errclass

import "errors"

// Class says what an error means for the side effect of the request that
// failed.
type Class int

const (
	// Ambiguous: the effect may have happened (a timeout after the request
	// was sent, a reset, a 5xx, a panic). The record becomes uncertain and
	// nobody acts again before reconciling. It is the class of every error
	// that does not say otherwise: assuming "nothing happened" when
	// something did is how duplicates are made.
	Ambiguous Class = iota
	// Definite: nothing happened and a retry may succeed (a dial error
	// before the request was written, a 429, a 503 with Retry-After).
	Definite
	// Permanent: nothing happened and the same call will fail again (a
	// validation error, a declined card).
	Permanent
)

// String returns "ambiguous", "definite" or "permanent".
func (c Class) String() string {
	switch c {
	case Definite:
		return "definite"
	case Permanent:
		return "permanent"
	default:
		return "ambiguous"
	}
}

// Classified is implemented by errors that know what happened to the side
// effect; provider errors and the errors client.Definite, client.Permanent
// and client.Ambiguous return implement it. Of finds it with errors.As.
type Classified interface {
	error
	ErrorClass() Class
}

// Of returns the class of an error: the class of the first Classified
// error in its chain, else Ambiguous.
func Of(err error) Class {
	var c Classified
	if errors.As(err, &c) {
		return c.ErrorClass()
	}
	return Ambiguous
}
