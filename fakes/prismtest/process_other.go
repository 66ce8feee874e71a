//go:build !unix

package prismtest

import (
	"context"
	"errors"
)

type process struct{ proxy *Proxy }

func (p *process) stop() {}

// start needs process groups.
func start(context.Context, string, string, string, string) (*process, error) {
	return nil, errors.New("prismtest: Prism is run in its own process group, which needs a unix system")
}
