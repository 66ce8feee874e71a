//go:build !unix

package ledgerdynamo_test

import (
	"context"
	"fmt"
)

// missingTool says which program the tests need and the machine lacks.
type missingTool struct{ name, why string }

func (m *missingTool) Error() string { return fmt.Sprintf("%s not found (%s)", m.name, m.why) }

type dynalite struct{ endpoint string }

func (d *dynalite) stop() {}

// startDynalite needs process groups; elsewhere set DYNAMODB_ENDPOINT.
func startDynalite(context.Context) (*dynalite, error) {
	return nil, &missingTool{"a unix system", "the tests start dynalite in its own process group; set DYNAMODB_ENDPOINT instead"}
}
