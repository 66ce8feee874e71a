package mcpgateway

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"unicode/utf8"

	"github.com/oncely/oncely/client"
)

// Client-sent idempotency keys. Clients and protocols carry their own
// key into a tools/call, in one of three places:
//
//   - params.idempotencyKey, beside name and arguments (MCP SEP-3182, with
//     the server capability tools.idempotency, which the gateway
//     advertises when a configured tool uses keys);
//   - arguments.meta.idempotency_key (the Agentic Commerce Protocol's MCP
//     binding, where meta carries what its REST binding sends as headers);
//   - arguments.meta["idempotency-key"] (the Universal Commerce Protocol's
//     MCP binding).
//
// ToolConfig.ClientKey says what the key does for a configured tool. In
// every case the call reaches the upstream with the key where the client
// put it.
const (
	// ClientKeyIgnore: the key does not change the action's identity.
	ClientKeyIgnore = "ignore"
	// ClientKeyIdentity: the key is the action's identity; the identity
	// fields and the rest of the arguments must be the same on a repeat
	// with the same key, or it is refused as a conflict. A call without a
	// key is identified by its identity fields.
	ClientKeyIdentity = "identity"
	// ClientKeyCombine: the key and the identity fields together are the
	// action's identity; the rest of the arguments must be the same on a
	// repeat, or it is refused as a conflict.
	ClientKeyCombine = "combine"
)

// MaxClientKeyBytes bounds a client-sent key (the Agentic Commerce
// Protocol's limit is 255 characters).
const MaxClientKeyBytes = 255

// The synthetic fields of the executor's input that carry a client key and
// the fingerprint of the arguments. A configured path never starts with
// them (Validate).
const (
	keyField  = "oncely:clientKey"
	argsField = "oncely:arguments"
)

// clientKey is a key a client sent, and where.
type clientKey struct {
	value string
	where string          // "params.idempotencyKey", "arguments.meta.idempotency_key", ...
	meta  bool            // in the arguments' meta (the commerce protocols)
	raw   json.RawMessage // params.idempotencyKey as sent, forwarded
}

// findClientKey reads the client's key from the raw params and the parsed
// arguments. Two different keys, or one that is not a non-empty string of
// valid UTF-8 within MaxClientKeyBytes, are an error.
func findClientKey(params json.RawMessage, args map[string]any) (*clientKey, error) {
	var found []*clientKey
	if len(params) > 0 {
		var p struct {
			IdempotencyKey json.RawMessage `json:"idempotencyKey"`
		}
		if json.Unmarshal(params, &p) == nil && len(p.IdempotencyKey) > 0 && !bytes.Equal(p.IdempotencyKey, []byte("null")) {
			var s string
			if json.Unmarshal(p.IdempotencyKey, &s) != nil {
				return nil, errors.New("params.idempotencyKey is not a string")
			}
			found = append(found, &clientKey{value: s, where: "params.idempotencyKey", raw: p.IdempotencyKey})
		}
	}
	if meta, ok := args["meta"].(map[string]any); ok {
		for _, name := range []string{"idempotency_key", "idempotency-key"} {
			v, ok := meta[name]
			if !ok || v == nil {
				continue
			}
			s, ok := v.(string)
			if !ok {
				return nil, fmt.Errorf("arguments.meta[%q] is not a string", name)
			}
			found = append(found, &clientKey{value: s, where: fmt.Sprintf("arguments.meta[%q]", name), meta: true})
		}
	}
	if len(found) == 0 {
		return nil, nil
	}
	for _, k := range found {
		switch {
		case k.value == "":
			return nil, fmt.Errorf("%s is empty", k.where)
		case len(k.value) > MaxClientKeyBytes:
			return nil, fmt.Errorf("%s is %d bytes, the limit is %d", k.where, len(k.value), MaxClientKeyBytes)
		case !utf8.ValidString(k.value):
			return nil, fmt.Errorf("%s is not valid UTF-8", k.where)
		case k.value != found[0].value:
			return nil, fmt.Errorf("%s and %s differ", found[0].where, k.where)
		}
	}
	k := found[0]
	for _, f := range found[1:] {
		k.meta = k.meta || f.meta
		if f.raw != nil {
			k.raw = f.raw
		}
	}
	return k, nil
}

// withClientKey adds the synthetic fields of a tool that uses client keys
// to its projected input: the key (or, for a call without one, "none" when
// the key is combined with the identity fields, and the identity fields'
// canonical values when it is the identity), and the fingerprint of the
// arguments the key must come with (those beside the commerce protocols'
// meta, which carries per-request headers), empty without a key.
func (t *guarded) withClientKey(projected, args map[string]any, k *clientKey) error {
	switch {
	case k != nil:
		rest := args
		if k.meta {
			rest = maps.Clone(args)
			delete(rest, "meta")
		}
		b, err := json.Marshal(rest) // sorted keys, numbers as written
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		projected[keyField] = "key:" + k.value
		projected[argsField] = hex.EncodeToString(sum[:])
	case t.cfg.ClientKey == ClientKeyIdentity:
		in, err := json.Marshal(projected)
		if err != nil {
			return err
		}
		canon, err := t.byFields.CanonicalIdentity("r", client.Call{Tool: t.name, Input: in}, 0)
		if err != nil {
			return err
		}
		var doc []json.RawMessage
		if err := json.Unmarshal(canon, &doc); err != nil || len(doc) != 3 {
			return fmt.Errorf("mcpgateway: unexpected canonical identity %s", canon)
		}
		projected[keyField] = "fields:" + string(doc[2])
		projected[argsField] = ""
	default:
		projected[keyField] = "none"
		projected[argsField] = ""
	}
	return nil
}

// usesClientKeys reports whether a configured tool takes client keys.
func (c *Config) usesClientKeys() bool {
	for _, t := range c.Tools {
		if t.ClientKey == ClientKeyIdentity || t.ClientKey == ClientKeyCombine {
			return true
		}
	}
	return false
}

// withIdempotencyCapability adds tools.idempotency to the capabilities of
// an initialize result (SEP-3182), which the go-sdk's types do not hold.
func withIdempotencyCapability(result []byte) []byte {
	if bytes.Contains(result, []byte(`"idempotency":`)) {
		return result
	}
	if i := bytes.Index(result, []byte(`"tools":{}`)); i >= 0 {
		return slicesConcat(result[:i], []byte(`"tools":{"idempotency":{}}`), result[i+len(`"tools":{}`):])
	}
	if i := bytes.Index(result, []byte(`"tools":{`)); i >= 0 {
		return slicesConcat(result[:i], []byte(`"tools":{"idempotency":{},`), result[i+len(`"tools":{`):])
	}
	return result
}

func slicesConcat(parts ...[]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// paramsWith returns the JSON of params with the client's
// params.idempotencyKey, or nil (the typed params) without one.
func (k *clientKey) paramsWith(params any) json.RawMessage {
	if k == nil || k.raw == nil {
		return nil
	}
	b, err := json.Marshal(params)
	if err != nil || len(b) < 2 || b[0] != '{' {
		return nil
	}
	if string(b) == "{}" {
		return slicesConcat([]byte(`{"idempotencyKey":`), k.raw, []byte(`}`))
	}
	return slicesConcat([]byte(`{"idempotencyKey":`), k.raw, []byte(`,`), b[1:])
}
