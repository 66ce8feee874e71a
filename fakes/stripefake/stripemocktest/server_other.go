//go:build !unix

package stripemocktest

import "context"

type process struct{ url, httpsURL string }

func (p *process) stop() {}

func ensureInstalled(context.Context) (string, error) {
	return "", &MissingError{What: "a unix system", Why: "the install is serialised with flock(2)"}
}

func startProcess(context.Context, string) (*process, error) { return nil, nil }
