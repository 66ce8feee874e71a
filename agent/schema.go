// Package agent holds what the agent framework integrations (the modules
// under agent/) share: the input schema a model is given for a tool, with
// the fields that identify its action required.
package agent

import (
	"fmt"
	"slices"
	"strings"

	"github.com/oncely/oncely/client"
)

// RequireIdentity returns copies of a tool's input-schema properties and
// required names in which every identity field is required: a field's
// top-level name joins required, and each object its dotted path crosses
// requires the next name. props and required are not changed. A field
// that props does not declare is an error naming it, since a model could
// not know it must send it.
func RequireIdentity(props map[string]any, required []string, identity []client.Field) (map[string]any, []string, error) {
	props = copySchema(props)
	required = slices.Clone(required)
	for _, f := range identity {
		top, err := requirePath(props, strings.Split(f.Path, "."))
		if err != nil {
			return nil, nil, fmt.Errorf("identity field %s: %v", f.Path, err)
		}
		required = appendUnique(required, top)
	}
	return props, required, nil
}

// requirePath marks path as required inside props, descending into nested
// object schemas, and returns the top-level field name.
func requirePath(props map[string]any, path []string) (string, error) {
	field, ok := props[path[0]].(map[string]any)
	if !ok {
		return "", fmt.Errorf("%q is not declared in the properties", path[0])
	}
	if len(path) > 1 {
		inner, ok := field["properties"].(map[string]any)
		if !ok {
			return "", fmt.Errorf("%q declares no properties", path[0])
		}
		next, err := requirePath(inner, path[1:])
		if err != nil {
			return "", err
		}
		req, _ := field["required"].([]string)
		field["required"] = appendUnique(slices.Clone(req), next)
	}
	return path[0], nil
}

// copySchema deep-copies the maps of a schema.
func copySchema(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		if inner, ok := v.(map[string]any); ok {
			v = copySchema(inner)
		}
		out[k] = v
	}
	return out
}

func appendUnique(list []string, s string) []string {
	if slices.Contains(list, s) {
		return list
	}
	return append(list, s)
}
