//go:build !unix

package dynalitetest

import "context"

type process struct{ endpoint string }

func (p *process) stop() {}

// startProcess needs process groups; elsewhere set DYNAMODB_ENDPOINT.
func startProcess(context.Context, string) (*process, error) {
	return nil, &MissingError{What: "a unix system", Why: "dynalite is run in its own process group"}
}
