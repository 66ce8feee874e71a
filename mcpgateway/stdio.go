package mcpgateway

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Limits bound one JSON-RPC message from a client. A message beyond them
// is answered with a JSON-RPC error (-32600, invalid request) under its id
// where the id can be read, and the session goes on.
type Limits struct {
	// MaxFrameBytes bounds one message: a line on stdio, a request body
	// on streamable HTTP (default DefaultMaxFrameBytes).
	MaxFrameBytes int `json:"maxFrameBytes,omitempty"`
	// MaxDepth bounds the nesting of objects and arrays in one message
	// (default and maximum DefaultMaxDepth, the go-sdk decoder's own
	// bound).
	MaxDepth int `json:"maxDepth,omitempty"`
}

// The default limits of a client's message.
const (
	DefaultMaxFrameBytes = 16 << 20
	DefaultMaxDepth      = 1000
)

func (l Limits) withDefaults() Limits {
	if l.MaxFrameBytes <= 0 {
		l.MaxFrameBytes = DefaultMaxFrameBytes
	}
	if l.MaxDepth <= 0 || l.MaxDepth > DefaultMaxDepth {
		l.MaxDepth = DefaultMaxDepth
	}
	return l
}

// StdioTransport serves one MCP client over newline-delimited JSON-RPC on
// Reader and Writer (os.Stdin and os.Stdout when nil), for a client that
// spawns the gateway. Gateway.Stdio returns one with the configuration's
// limits.
//
// Unlike the go-sdk's mcp.StdioTransport, whose connection ends at the
// first message it cannot decode, a message that cannot be read is
// answered and skipped, as the TypeScript SDK's stdio transport skips it:
// a line that is not JSON gets -32700 (parse error); a message that is not
// a JSON-RPC 2.0 request, notification or response (an id that is not a
// string or an integer, a missing method, an empty batch, a batch under
// protocol 2025-06-18 or later), or beyond Limits, gets -32600 (invalid
// request). The error carries the message's id when it can be read, null
// otherwise. A request whose id is that of a request still in flight is
// answered -32600 too, instead of being dropped without an answer.
// Batches are served under the protocol versions that have them.
type StdioTransport struct {
	Reader io.Reader
	Writer io.Writer
	Limits Limits
	// idempotency: the initialize result advertises tools.idempotency
	// (Gateway.Stdio sets it when a configured tool takes client keys).
	idempotency bool
}

// Connect implements mcp.Transport.
func (t *StdioTransport) Connect(context.Context) (mcp.Connection, error) {
	r, w := t.Reader, t.Writer
	if r == nil {
		r = os.Stdin
	}
	if w == nil {
		w = os.Stdout
	}
	c := &stdioConn{
		limits:      t.Limits.withDefaults(),
		in:          r,
		out:         w,
		frames:      make(chan frame),
		closed:      make(chan struct{}),
		inflight:    map[string]*batch{},
		idempotency: t.idempotency,
	}
	go c.readFrames()
	return c, nil
}

// stdioConn is a StdioTransport's connection.
type stdioConn struct {
	limits Limits
	in     io.Reader
	out    io.Writer
	wmu    sync.Mutex // one message written at a time

	frames    chan frame
	closed    chan struct{}
	closeOnce sync.Once

	queue []jsonrpc.Message // the rest of a batch; Read is not concurrent

	mu       sync.Mutex
	inflight map[string]*batch // the client's requests not yet answered, by id; the batch they came in, if any
	// cancelled holds the requests in flight that the client cancelled
	// (notifications/cancelled): their answers are not written, as the
	// specification says a receiver should not answer a cancelled
	// request (and the client no longer expects one).
	cancelled   map[string]bool
	initID      string // the initialize request's id
	idempotency bool   // StdioTransport.idempotency
	version     string // the negotiated protocol version
}

// frame is one line read from the client, or the error that ended the
// input.
type frame struct {
	data []byte
	// size is set when the line was longer than the limit: its length;
	// data then holds its first and last bytes, for the id.
	size int64
	err  error
}

// batch collects the answers to the requests of one incoming batch.
type batch struct {
	answers []json.RawMessage
	pending int
}

func (c *stdioConn) SessionID() string { return "" }

// Close ends the connection; a Read in progress returns io.EOF.
func (c *stdioConn) Close() error {
	var err error
	c.closeOnce.Do(func() {
		close(c.closed)
		if cl, ok := c.in.(io.Closer); ok {
			err = cl.Close()
		}
	})
	return err
}

// sniffEdge is how many bytes of each end of an oversized line are kept
// to find its id.
const sniffEdge = 4 << 10

// readFrames reads lines until the input ends, each bounded by
// MaxFrameBytes: a longer line is read to its end without being kept.
func (c *stdioConn) readFrames() {
	br := bufio.NewReaderSize(c.in, 64<<10)
	for {
		var (
			line []byte
			size int64
			tail []byte
		)
		for {
			chunk, err := br.ReadSlice('\n')
			size += int64(len(chunk))
			switch {
			case size <= int64(c.limits.MaxFrameBytes):
				line = append(line, chunk...)
			default:
				if len(line) > sniffEdge {
					line = line[:sniffEdge:sniffEdge]
				}
				tail = append(tail, chunk...)
				if len(tail) > sniffEdge {
					tail = append(tail[:0], tail[len(tail)-sniffEdge:]...)
				}
			}
			if errors.Is(err, bufio.ErrBufferFull) {
				continue
			}
			f := frame{data: line}
			if size > int64(c.limits.MaxFrameBytes) {
				f = frame{data: append(append(line, '\n'), tail...), size: size}
			}
			if len(bytes.TrimSpace(f.data)) > 0 && !c.send(f) {
				return
			}
			if err != nil {
				c.send(frame{err: err})
				return
			}
			break
		}
	}
}

func (c *stdioConn) send(f frame) bool {
	select {
	case c.frames <- f:
		return true
	case <-c.closed:
		return false
	}
}

// Read returns the next message the gateway's server must handle,
// answering every frame it cannot pass on.
func (c *stdioConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	for {
		if len(c.queue) > 0 {
			m := c.queue[0]
			c.queue = c.queue[1:]
			return m, nil
		}
		var f frame
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-c.closed:
			return nil, io.EOF
		case f = <-c.frames:
		}
		if f.err != nil {
			return nil, f.err
		}
		msgs, err := c.decode(f)
		if err != nil {
			return nil, err
		}
		if len(msgs) > 0 {
			c.queue = msgs[1:]
			return msgs[0], nil
		}
	}
}

// rpcError is a JSON-RPC error answer the connection writes itself.
type rpcError struct {
	id   json.RawMessage // null when unknown
	code int64
	msg  string
}

func (e rpcError) encode() json.RawMessage {
	id := e.id
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	b, _ := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   jsonrpc.Error   `json:"error"`
	}{"2.0", id, jsonrpc.Error{Code: e.code, Message: e.msg}})
	return b
}

// decode turns one frame into the messages to pass on, writing the
// answers to what it refuses.
func (c *stdioConn) decode(f frame) ([]jsonrpc.Message, error) {
	data := bytes.TrimSpace(f.data)
	switch {
	case f.size > 0:
		return nil, c.refuse(rpcError{c.idle(sniffID(data)), jsonrpc.CodeInvalidRequest,
			fmt.Sprintf("Invalid request: the message is %d bytes, more than the limit of %d (limits.maxFrameBytes)", f.size, c.limits.MaxFrameBytes)})
	case !json.Valid(data):
		return nil, c.refuse(rpcError{c.idle(sniffID(data)), jsonrpc.CodeParseError, "Parse error: the message is not valid JSON"})
	case depth(data) > c.limits.MaxDepth:
		return nil, c.refuse(rpcError{c.idle(shallowID(data)), jsonrpc.CodeInvalidRequest,
			fmt.Sprintf("Invalid request: the message nests deeper than %d levels (limits.maxDepth)", c.limits.MaxDepth)})
	case data[0] == '[':
		return c.decodeBatch(data)
	}
	m, rerr := c.message(data, nil)
	if rerr != nil {
		return nil, c.refuse(*rerr)
	}
	if m == nil {
		return nil, nil
	}
	return []jsonrpc.Message{m}, nil
}

// refuse writes the answer to a message that is not passed on.
func (c *stdioConn) refuse(e rpcError) error {
	return c.write(append(e.encode(), '\n'))
}

// idle returns an id read from a message that could not be decoded, or
// nil when a request in flight has it: the error would be taken for that
// request's answer.
func (c *stdioConn) idle(raw json.RawMessage) json.RawMessage {
	var v any
	if raw == nil || json.Unmarshal(raw, &v) != nil {
		return nil
	}
	id, err := jsonrpc.MakeID(v)
	if err != nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, busy := c.inflight[idKey(id)]; busy {
		return nil
	}
	return raw
}

func (c *stdioConn) write(b []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_, err := c.out.Write(b)
	return err
}

// batchVersion is the first protocol version without JSON-RPC batches.
const batchVersion = "2025-06-18"

func (c *stdioConn) decodeBatch(data []byte) ([]jsonrpc.Message, error) {
	var elems []json.RawMessage
	if err := json.Unmarshal(data, &elems); err != nil {
		return nil, c.refuse(rpcError{nil, jsonrpc.CodeParseError, "Parse error: " + err.Error()})
	}
	if len(elems) == 0 {
		return nil, c.refuse(rpcError{nil, jsonrpc.CodeInvalidRequest, "Invalid request: an empty batch"})
	}
	c.mu.Lock()
	version := c.version
	c.mu.Unlock()
	b := &batch{}
	var msgs []jsonrpc.Message
	if version >= batchVersion {
		for _, e := range elems {
			if id := shallowID(e); id != nil {
				b.answers = append(b.answers, rpcError{id, jsonrpc.CodeInvalidRequest,
					fmt.Sprintf("Invalid request: JSON-RPC batches are not supported in protocol version %s", version)}.encode())
			}
		}
		if len(b.answers) == 0 {
			return nil, c.refuse(rpcError{nil, jsonrpc.CodeInvalidRequest,
				fmt.Sprintf("Invalid request: JSON-RPC batches are not supported in protocol version %s", version)})
		}
		return nil, c.writeBatch(b.answers)
	}
	for _, e := range elems {
		m, rerr := c.message(bytes.TrimSpace(e), b)
		switch {
		case rerr != nil:
			b.answers = append(b.answers, rerr.encode())
		case m != nil:
			msgs = append(msgs, m)
		}
	}
	c.mu.Lock()
	complete := b.pending == 0
	c.mu.Unlock()
	if complete && len(b.answers) > 0 {
		// Nothing in the batch waits for an answer from the server.
		if err := c.writeBatch(b.answers); err != nil {
			return nil, err
		}
	}
	return msgs, nil
}

func (c *stdioConn) writeBatch(answers []json.RawMessage) error {
	b, err := json.Marshal(answers)
	if err != nil {
		return err
	}
	return c.write(append(b, '\n'))
}

// intID is an integer request id; jsonrpc.ID decodes it as a float64, so
// it must be one that an IEEE double holds exactly.
var intID = regexp.MustCompile(`^-?(0|[1-9][0-9]{0,15})$`)

// message validates one JSON-RPC message and decodes it, tracking the
// requests that await an answer. It returns nil, nil for a message that is
// dropped without an answer (a malformed response: there is nobody to
// answer).
func (c *stdioConn) message(data []byte, in *batch) (jsonrpc.Message, *rpcError) {
	var w map[string]json.RawMessage
	if len(data) == 0 || data[0] != '{' || json.Unmarshal(data, &w) != nil {
		return nil, &rpcError{nil, jsonrpc.CodeInvalidRequest, "Invalid request: a message is a JSON object"}
	}
	id, hasID := w["id"]
	if hasID {
		switch {
		case bytes.Equal(id, []byte("null")):
			return nil, &rpcError{nil, jsonrpc.CodeInvalidRequest, "Invalid request: the id is null"}
		case id[0] == '"':
			var s string
			if json.Unmarshal(id, &s) != nil {
				return nil, &rpcError{nil, jsonrpc.CodeInvalidRequest, "Invalid request: the id is not a valid string"}
			}
		case intID.Match(id):
			if n, err := strconv.ParseInt(string(id), 10, 64); err != nil || n > 1<<53 || n < -(1<<53) {
				return nil, &rpcError{nil, jsonrpc.CodeInvalidRequest, "Invalid request: the id is an integer too large to be kept exactly"}
			}
		default:
			return nil, &rpcError{nil, jsonrpc.CodeInvalidRequest, "Invalid request: an id is a string or an integer"}
		}
	}
	if v, ok := w["jsonrpc"]; !ok || string(v) != `"2.0"` {
		return nil, &rpcError{id, jsonrpc.CodeInvalidRequest, `Invalid request: "jsonrpc" must be "2.0"`}
	}
	method, isRequest := w["method"]
	if isRequest {
		var s string
		if json.Unmarshal(method, &s) != nil {
			return nil, &rpcError{id, jsonrpc.CodeInvalidRequest, "Invalid request: the method is not a string"}
		}
		if p, ok := w["params"]; ok && p[0] != '{' && p[0] != '[' && string(p) != "null" {
			return nil, &rpcError{id, jsonrpc.CodeInvalidRequest, "Invalid request: params is not an object"}
		}
	} else {
		_, res := w["result"]
		_, rerr := w["error"]
		if !hasID || res == rerr {
			return nil, nil // a response that answers nothing: nobody to tell
		}
	}
	m, err := jsonrpc.DecodeMessage(data)
	if err != nil {
		return nil, &rpcError{id, jsonrpc.CodeInvalidRequest, "Invalid request: " + err.Error()}
	}
	req, isReq := m.(*jsonrpc.Request)
	if p := w["params"]; isReq && len(p) > 0 && p[0] == '{' {
		// The params as the client sent them, for what the gateway
		// forwards (rawParams).
		req.Extra = &mcp.RequestExtra{Header: http.Header{rawParamsHeader: {string(p)}}}
	}
	if isReq && !req.IsCall() && req.Method == "notifications/cancelled" {
		c.cancel(w["params"])
	}
	if isReq && req.IsCall() {
		key := idKey(req.ID)
		c.mu.Lock()
		defer c.mu.Unlock()
		if _, busy := c.inflight[key]; busy {
			return nil, &rpcError{id, jsonrpc.CodeInvalidRequest,
				fmt.Sprintf("Invalid request: id %s is already in use by a request in flight", id)}
		}
		c.inflight[key] = in
		if in != nil {
			in.pending++
		}
		if req.Method == "initialize" {
			c.initID = key
		}
	}
	return m, nil
}

// Write sends a message to the client; an answer to a request of a batch
// waits for the batch's other answers.
func (c *stdioConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	data, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		return fmt.Errorf("mcpgateway: encoding a message: %w", err)
	}
	if resp, ok := msg.(*jsonrpc.Response); ok {
		key := idKey(resp.ID)
		c.mu.Lock()
		b, tracked := c.inflight[key]
		delete(c.inflight, key)
		if c.cancelled[key] {
			delete(c.cancelled, key)
			var complete []json.RawMessage
			if b != nil {
				b.pending--
				if b.pending == 0 {
					complete = b.answers
				}
			}
			c.mu.Unlock()
			if len(complete) > 0 {
				return c.writeBatch(complete)
			}
			return nil
		}
		if tracked && key == c.initID && resp.Error == nil {
			if c.idempotency {
				cp := *resp
				cp.Result = withIdempotencyCapability(resp.Result)
				if d, err := jsonrpc.EncodeMessage(&cp); err == nil {
					data = d
				}
			}
			var r struct {
				ProtocolVersion string `json:"protocolVersion"`
			}
			if json.Unmarshal(resp.Result, &r) == nil {
				c.version = r.ProtocolVersion
			}
		}
		var complete []json.RawMessage
		if b != nil {
			b.answers = append(b.answers, data)
			b.pending--
			if b.pending == 0 {
				complete = b.answers
			}
		}
		c.mu.Unlock()
		if b != nil {
			if complete == nil {
				return nil
			}
			return c.writeBatch(complete)
		}
	}
	return c.write(append(data, '\n'))
}

// cancel marks the request that a notifications/cancelled names, if it is
// in flight and not the initialize request (which cannot be cancelled).
func (c *stdioConn) cancel(params json.RawMessage) {
	var p struct {
		RequestID any `json:"requestId"`
	}
	if json.Unmarshal(params, &p) != nil {
		return
	}
	id, err := jsonrpc.MakeID(p.RequestID)
	if err != nil || !id.IsValid() {
		return
	}
	key := idKey(id)
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.inflight[key]; !ok || key == c.initID {
		return
	}
	if c.cancelled == nil {
		c.cancelled = map[string]bool{}
	}
	c.cancelled[key] = true
}

func idKey(id jsonrpc.ID) string { return fmt.Sprintf("%T:%v", id.Raw(), id.Raw()) }

// depth returns the deepest nesting of objects and arrays in valid JSON.
func depth(data []byte) int {
	d, deepest := 0, 0
	inString, escaped := false, false
	for _, b := range data {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case b == '\\':
				escaped = true
			case b == '"':
				inString = false
			}
		case b == '"':
			inString = true
		case b == '{' || b == '[':
			d++
			deepest = max(deepest, d)
		case b == '}' || b == ']':
			d--
		}
	}
	return deepest
}

// shallowID reads the top-level id of a valid JSON object however deep
// its other members are, or returns nil.
func shallowID(data []byte) json.RawMessage {
	dec := json.NewDecoder(bytes.NewReader(data))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil
		}
		if t == "id" {
			var id json.RawMessage
			if dec.Decode(&id) != nil || !validID(id) {
				return nil
			}
			return id
		}
		if skipValue(dec) != nil {
			return nil
		}
	}
	return nil
}

// skipValue reads past one value without keeping it, at any depth.
func skipValue(dec *json.Decoder) error {
	n := 0
	for {
		t, err := dec.Token()
		if err != nil {
			return err
		}
		switch t {
		case json.Delim('{'), json.Delim('['):
			n++
		case json.Delim('}'), json.Delim(']'):
			n--
		}
		if n == 0 {
			return nil
		}
	}
}

func validID(id json.RawMessage) bool {
	if len(id) > 0 && id[0] == '"' {
		var s string
		return json.Unmarshal(id, &s) == nil
	}
	return intID.Match(id)
}

// An id at the start of a message ({"jsonrpc":"2.0","id":1,...}, as the
// go-sdk and Python write it) or at its end (...,"jsonrpc":"2.0","id":1},
// as the TypeScript SDK writes it).
var (
	headID = regexp.MustCompile(`^\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?"id"\s*:\s*(-?[0-9]+|"(?:[^"\\]|\\.)*")\s*[,}]`)
	tailID = regexp.MustCompile(`"jsonrpc"\s*:\s*"2\.0"\s*,\s*"id"\s*:\s*(-?[0-9]+|"(?:[^"\\]|\\.)*")\s*\}\s*$`)
)

// sniffID finds the id of a message that cannot be parsed (not JSON, or
// too large to keep) where it stands at the start or the end, or returns
// nil.
func sniffID(data []byte) json.RawMessage {
	head, tail := data, data
	if i := bytes.IndexByte(data, '\n'); i >= 0 { // an oversized line: its head, a newline, its tail
		head, tail = data[:i], data[i+1:]
	}
	for _, m := range [][][]byte{headID.FindSubmatch(head), tailID.FindSubmatch(tail)} {
		if m != nil && validID(m[1]) {
			return append(json.RawMessage(nil), m[1]...)
		}
	}
	return nil
}
