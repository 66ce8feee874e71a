package mcpgateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"mime"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// What the gateway does not guard it forwards as it came. The go-sdk's
// typed structs lose what they do not know (a tool's execution, a prompt
// argument's required: false, a completion's hasMore: false) and add what
// the client did not send (ttlMs, cacheScope, default annotation hints),
// so a forwarded request carries the client's own params, and its answer
// is the upstream's own result, byte for byte, whatever protocol version
// each side speaks. Only what belongs to a session is the session's: the
// protocol entries of a request's _meta (2026-07-28) are those of the
// gateway's session with the upstream, and a client before 2026-07-28 gets
// no resultType. The gateway also speaks to the upstream the client's
// version where it can (Gateway.adoptCaps). The raw JSON travels beside
// the typed values: the client's params in the request's RequestExtra, the
// upstream's result in a rawSlot the upstream connection fills.

// rawSlot is one upstream request's raw JSON: the params to send in place
// of the typed ones, and the result as it came back.
type rawSlot struct {
	params json.RawMessage // nil: send the typed params

	mu     sync.Mutex
	result json.RawMessage
}

func (s *rawSlot) set(r json.RawMessage) {
	s.mu.Lock()
	s.result = append(json.RawMessage(nil), r...)
	s.mu.Unlock()
}

func (s *rawSlot) get() json.RawMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.result
}

type slotKey struct{}

func withSlot(ctx context.Context, params json.RawMessage) (context.Context, *rawSlot) {
	s := &rawSlot{params: params}
	return context.WithValue(ctx, slotKey{}, s), s
}

func slotOf(ctx context.Context) *rawSlot {
	s, _ := ctx.Value(slotKey{}).(*rawSlot)
	return s
}

// rawTransport is a command upstream's transport whose connection fills
// the slots of the requests it sends, and relays progress notifications
// (onProgress) as it reads them: in order with the answers, which the
// go-sdk's client reads ahead of the notifications it queues, so that a
// notification would reach the client after its request's answer.
type rawTransport struct {
	mcp.Transport
	onProgress func(json.RawMessage) bool
}

func (t rawTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &rawConn{Connection: c, slots: map[string]*rawSlot{}, onProgress: t.onProgress}, nil
}

type rawConn struct {
	mcp.Connection
	onProgress func(json.RawMessage) bool // reports that it relayed it
	mu         sync.Mutex
	slots      map[string]*rawSlot
}

func (c *rawConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if req, ok := msg.(*jsonrpc.Request); ok && req.IsCall() {
		if s := slotOf(ctx); s != nil {
			if s.params != nil {
				cp := *req
				cp.Params = withSessionMeta(s.params, req.Params)
				msg = &cp
			}
			c.mu.Lock()
			c.slots[idKey(req.ID)] = s
			c.mu.Unlock()
		}
	}
	return c.Connection.Write(ctx, msg)
}

func (c *rawConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	m, err := c.Connection.Read(ctx)
	for err == nil && c.onProgress != nil {
		req, ok := m.(*jsonrpc.Request)
		if !ok || req.Method != "notifications/progress" || !c.onProgress(req.Params) {
			break
		}
		m, err = c.Connection.Read(ctx) // relayed: the client's session need not see it
	}
	if resp, ok := m.(*jsonrpc.Response); ok {
		c.mu.Lock()
		s := c.slots[idKey(resp.ID)]
		delete(c.slots, idKey(resp.ID))
		c.mu.Unlock()
		if s != nil && resp.Error == nil {
			s.set(resp.Result)
		}
	}
	return m, err
}

// rawRoundTripper does for a streamable-HTTP upstream what rawConn does
// for a command: it sends a slot's params and fills the slot with the
// result, from a JSON answer or from the event stream of the request, and
// relays the progress notifications of that stream as they pass.
type rawRoundTripper struct {
	next       http.RoundTripper
	onProgress func(json.RawMessage) bool
}

func (t rawRoundTripper) RoundTrip(r *http.Request) (*http.Response, error) {
	s := slotOf(r.Context())
	if s == nil || r.Method != http.MethodPost || r.Body == nil {
		return t.next.RoundTrip(r)
	}
	body, err := io.ReadAll(r.Body)
	_ = r.Body.Close()
	if err != nil {
		return nil, err
	}
	var msg map[string]json.RawMessage
	if json.Unmarshal(body, &msg) != nil || msg["id"] == nil || msg["method"] == nil {
		r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
		return t.next.RoundTrip(r)
	}
	if s.params != nil {
		msg["params"] = withSessionMeta(s.params, msg["params"])
		if b, err := json.Marshal(msg); err == nil {
			body = b
		}
	}
	r = r.Clone(r.Context())
	r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	resp, err := t.next.RoundTrip(r)
	if err != nil {
		return resp, err
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch mt {
	case "application/json":
		b, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		resp.Body = io.NopCloser(bytes.NewReader(b))
		if err == nil {
			fill(s, msg["id"], b, nil)
		}
	case "text/event-stream":
		resp.Body = &sseSniffer{ReadCloser: resp.Body, id: msg["id"], slot: s, onProgress: t.onProgress}
	}
	return resp, nil
}

// fill sets the slot from a JSON-RPC answer to the request with id, or
// relays a progress notification.
func fill(s *rawSlot, id json.RawMessage, data []byte, onProgress func(json.RawMessage) bool) {
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
		Result json.RawMessage `json:"result"`
	}
	switch {
	case json.Unmarshal(data, &m) != nil:
	case m.Method == "notifications/progress" && onProgress != nil:
		onProgress(m.Params)
	case bytes.Equal(bytes.TrimSpace(m.ID), bytes.TrimSpace(id)) && m.Result != nil:
		s.set(m.Result)
	}
}

// sseSniffer reads the data of each event of a stream as it passes.
type sseSniffer struct {
	io.ReadCloser
	id         json.RawMessage
	slot       *rawSlot
	onProgress func(json.RawMessage) bool
	line       []byte
	data       []byte
}

func (s *sseSniffer) Read(p []byte) (int, error) {
	n, err := s.ReadCloser.Read(p)
	for _, b := range p[:n] {
		if b != '\n' {
			s.line = append(s.line, b)
			continue
		}
		line := bytes.TrimSuffix(s.line, []byte("\r"))
		s.line = s.line[:0]
		switch {
		case len(line) == 0:
			if len(s.data) > 0 {
				fill(s.slot, s.id, s.data, s.onProgress)
			}
			s.data = s.data[:0]
		case bytes.HasPrefix(line, []byte("data:")):
			if len(s.data) > 0 {
				s.data = append(s.data, '\n')
			}
			s.data = append(s.data, bytes.TrimPrefix(bytes.TrimPrefix(line, []byte("data:")), []byte(" "))...)
		}
	}
	return n, err
}

// rawResult is a result the gateway returns as the upstream sent it.
type rawResult struct {
	mcp.ResultBase
	raw json.RawMessage
}

// MarshalJSON writes the upstream's result.
func (r *rawResult) MarshalJSON() ([]byte, error) { return r.raw, nil }

// rawParamsHeader carries a client request's params, as it sent them, in
// the RequestExtra of the request: the stdio transport sets it, and
// Handler sets it from the body of a POST (having removed any the client
// sent). It is no HTTP header the gateway sends anywhere.
const rawParamsHeader = "Oncely-Gateway-Raw-Params"

// rawParams returns a request's params as the client sent them, or nil.
func rawParams(req mcp.Request) json.RawMessage {
	if e := req.GetExtra(); e != nil && e.Header != nil {
		if v := e.Header.Get(rawParamsHeader); v != "" {
			return json.RawMessage(v)
		}
	}
	return nil
}

// withRawParams is an http.Handler that puts a single request's params
// into rawParamsHeader for the gateway's server, and answers a request
// that reuses the id of a request of its session still in flight with an
// error (the go-sdk's connection would drop it without an answer, and the
// client would wait forever).
func withRawParams(next http.Handler, limit int, idempotency bool) http.Handler {
	var mu sync.Mutex
	inflight := map[string]*atomic.Bool{} // session and id: whether the client cancelled it
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Header.Del(rawParamsHeader)
		if r.Method != http.MethodPost || r.Body == nil {
			next.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, int64(limit)+1))
		rest := r.Body
		r.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(body), rest), rest}
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		}
		if err != nil || len(body) > limit || json.Unmarshal(body, &msg) != nil {
			next.ServeHTTP(w, r)
			return
		}
		if len(msg.Params) > 0 && msg.Params[0] == '{' {
			r.Header.Set(rawParamsHeader, string(msg.Params))
		}
		if msg.Method == "initialize" && idempotency {
			next.ServeHTTP(&initializeWriter{ResponseWriter: w}, r)
			return
		}
		session := r.Header.Get("Mcp-Session-Id")
		if session != "" && msg.Method == "notifications/cancelled" {
			// The client cancelled a request in flight: its answer is not
			// written (the specification says a receiver should not answer
			// a cancelled request), though the call may run to its end.
			var p struct {
				RequestID json.RawMessage `json:"requestId"`
			}
			if json.Unmarshal(msg.Params, &p) == nil && len(p.RequestID) > 0 {
				mu.Lock()
				if c := inflight[session+"\x00"+string(p.RequestID)]; c != nil {
					c.Store(true)
				}
				mu.Unlock()
			}
		}
		if session == "" || msg.Method == "" || len(msg.ID) == 0 || string(msg.ID) == "null" {
			next.ServeHTTP(w, r)
			return
		}
		key := session + "\x00" + string(msg.ID)
		cancelled := new(atomic.Bool)
		mu.Lock()
		busy := inflight[key] != nil
		if !busy {
			inflight[key] = cancelled
		}
		mu.Unlock()
		if busy {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(rpcError{msg.ID, jsonrpc.CodeInvalidRequest,
				fmt.Sprintf("Invalid request: id %s is already in use by a request in flight", msg.ID)}.encode())
			return
		}
		defer func() {
			mu.Lock()
			delete(inflight, key)
			mu.Unlock()
		}()
		next.ServeHTTP(&unlessCancelled{ResponseWriter: w, cancelled: cancelled}, r)
	})
}

// initializeWriter adds tools.idempotency to the capabilities of the
// initialize result it writes (as JSON or as the one event of a stream).
type initializeWriter struct {
	http.ResponseWriter
	done bool
}

func (i *initializeWriter) Write(b []byte) (int, error) {
	if !i.done && bytes.Contains(b, []byte(`"capabilities":`)) {
		i.done = true
		if _, err := i.ResponseWriter.Write(withIdempotencyCapability(b)); err != nil {
			return 0, err
		}
		return len(b), nil
	}
	return i.ResponseWriter.Write(b)
}

func (i *initializeWriter) Flush() {
	if f, ok := i.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (i *initializeWriter) Unwrap() http.ResponseWriter { return i.ResponseWriter }

// unlessCancelled writes a request's response stream until the client
// cancels the request; what follows (its answer, its progress) is not
// sent, and the stream ends when the request does.
type unlessCancelled struct {
	http.ResponseWriter
	cancelled *atomic.Bool
}

func (u *unlessCancelled) Write(b []byte) (int, error) {
	if u.cancelled.Load() {
		return len(b), nil
	}
	return u.ResponseWriter.Write(b)
}

func (u *unlessCancelled) Flush() {
	if f, ok := u.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (u *unlessCancelled) Unwrap() http.ResponseWriter { return u.ResponseWriter }

// progress routes the upstream's progress notifications to the clients
// whose requests asked for them: each forwarded request with a progress
// token gets a token of the gateway's own (clients' tokens may collide
// on the one upstream session), mapped back when a notification comes.
type progress struct {
	next   atomic.Int64
	mu     sync.Mutex
	routes map[string]*progressRoute
}

type progressRoute struct {
	ctx   context.Context // the client's request
	ss    *mcp.ServerSession
	token any
	// relayed: the upstream's transport relays this route's notifications
	// (relayRaw), so the client session's handler leaves them.
	relayed atomic.Bool
}

// route gives a request's progress token a gateway token; the function
// it returns ends the route.
func (p *progress) route(ctx context.Context, ss *mcp.ServerSession, token any) (string, func()) {
	t := "oncely-progress-" + strconv.FormatInt(p.next.Add(1), 10)
	p.mu.Lock()
	if p.routes == nil {
		p.routes = map[string]*progressRoute{}
	}
	p.routes[t] = &progressRoute{ctx: ctx, ss: ss, token: token}
	p.mu.Unlock()
	return t, func() {
		p.mu.Lock()
		delete(p.routes, t)
		p.mu.Unlock()
	}
}

// notifyProgress relays one of the upstream's progress notifications that
// its transport did not: one that came outside a request's stream.
func (g *Gateway) notifyProgress(ctx context.Context, req *mcp.ProgressNotificationClientRequest) {
	if r := g.progress.lookup(req.Params.ProgressToken); r != nil && !r.relayed.Load() {
		g.sendProgress(r, req.Params)
	}
}

// relayRaw relays a progress notification as the upstream's transport
// reads it, reporting whether it was one of a forwarded request.
func (g *Gateway) relayRaw(params json.RawMessage) bool {
	var p mcp.ProgressNotificationParams
	if json.Unmarshal(params, &p) != nil {
		return false
	}
	r := g.progress.lookup(p.ProgressToken)
	if r == nil {
		return false
	}
	r.relayed.Store(true)
	g.sendProgress(r, &p)
	return true
}

func (p *progress) lookup(token any) *progressRoute {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.routes[fmt.Sprint(token)]
}

func (g *Gateway) sendProgress(r *progressRoute, p *mcp.ProgressNotificationParams) {
	out := *p
	out.ProgressToken = r.token
	if err := r.ss.NotifyProgress(r.ctx, &out); err != nil {
		g.log.Debug("mcpgateway: relaying progress", slog.Any("err", err))
	}
}

// withProgress returns raw params, and typed meta, whose progress token
// is the gateway's; the function ends its route.
func (g *Gateway) withProgress(ctx context.Context, req mcp.Request, raw json.RawMessage, meta mcp.Meta) (json.RawMessage, mcp.Meta, func()) {
	token, ok := meta["progressToken"]
	ss, _ := req.GetSession().(*mcp.ServerSession)
	if !ok || token == nil || ss == nil {
		return raw, meta, func() {}
	}
	t, end := g.progress.route(ctx, ss, token)
	m := make(mcp.Meta, len(meta))
	for k, v := range meta {
		m[k] = v
	}
	m["progressToken"] = t
	if raw != nil {
		var p map[string]json.RawMessage
		var pm map[string]json.RawMessage
		if json.Unmarshal(raw, &p) == nil && json.Unmarshal(p["_meta"], &pm) == nil && pm != nil {
			pm["progressToken"], _ = json.Marshal(t)
			p["_meta"], _ = json.Marshal(pm)
			if b, err := json.Marshal(p); err == nil {
				raw = b
			}
		} else {
			raw = nil // the typed form carries the token
		}
	}
	return raw, m, end
}

// active are the client requests being served by the upstream, most
// recent last: the upstream's own requests (sampling, elicitation, roots)
// go to the client of the latest one.
type active struct {
	mu   sync.Mutex
	reqs []*activeReq
}

type activeReq struct {
	ctx context.Context
	ss  *mcp.ServerSession
}

func (a *active) begin(ctx context.Context, req mcp.Request) func() {
	ss, _ := req.GetSession().(*mcp.ServerSession)
	ar := &activeReq{ctx, ss}
	a.mu.Lock()
	a.reqs = append(a.reqs, ar)
	a.mu.Unlock()
	return func() {
		a.mu.Lock()
		defer a.mu.Unlock()
		for i, r := range a.reqs {
			if r == ar {
				a.reqs = append(a.reqs[:i], a.reqs[i+1:]...)
				return
			}
		}
	}
}

// latest returns the most recent client request whose client has the
// capability.
func (a *active) latest(has func(*mcp.ClientCapabilities) bool) *activeReq {
	a.mu.Lock()
	defer a.mu.Unlock()
	for i := len(a.reqs) - 1; i >= 0; i-- {
		r := a.reqs[i]
		if r.ss == nil {
			continue
		}
		if ip := r.ss.InitializeParams(); ip != nil && ip.Capabilities != nil && has(ip.Capabilities) {
			return r
		}
	}
	return nil
}

// toClient forwards the upstream's requests to a client: sampling,
// elicitation and roots, which the gateway answers for no one itself.
func (g *Gateway) toClient(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		var has func(*mcp.ClientCapabilities) bool
		switch req.GetParams().(type) {
		case *mcp.CreateMessageWithToolsParams, *mcp.CreateMessageParams:
			has = func(c *mcp.ClientCapabilities) bool { return c.Sampling != nil }
		case *mcp.ElicitParams:
			has = func(c *mcp.ClientCapabilities) bool { return c.Elicitation != nil }
		case *mcp.ListRootsParams:
			has = func(c *mcp.ClientCapabilities) bool { return c.RootsV2 != nil }
		default:
			return next(ctx, method, req)
		}
		r := g.active.latest(has)
		if r == nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: fmt.Sprintf("%s: no client of the gateway that supports it is waiting on this server", method)}
		}
		// The client's request's context: over streamable HTTP, the
		// request goes on that request's stream.
		cctx, cancel := context.WithCancel(r.ctx)
		defer cancel()
		stop := context.AfterFunc(ctx, cancel)
		defer stop()
		var (
			res mcp.Result
			err error
		)
		switch p := req.GetParams().(type) {
		case *mcp.CreateMessageWithToolsParams:
			res, err = r.ss.CreateMessageWithTools(cctx, p)
		case *mcp.CreateMessageParams:
			res, err = r.ss.CreateMessage(cctx, p)
		case *mcp.ElicitParams:
			res, err = r.ss.Elicit(cctx, p)
		case *mcp.ListRootsParams:
			res, err = r.ss.ListRoots(cctx, p)
		}
		return res, unwrapRPC(err)
	}
}

// unwrapRPC returns the JSON-RPC error inside err, as the peer sent it,
// or err.
func unwrapRPC(err error) error {
	var we *jsonrpc.Error
	if !errors.As(err, &we) {
		return err
	}
	if we.Code == jsonrpc.CodeMethodNotFound {
		// The go-sdk's connection rewrites the message of an error that
		// is a -32601 to its own ("method not found: ..."); this one
		// carries the code without being one.
		return methodNotFound{we}
	}
	return we
}

// methodNotFound is an upstream's -32601 error, kept as it came (its data
// aside).
type methodNotFound struct{ e *jsonrpc.Error }

func (m methodNotFound) Error() string { return m.e.Message }

// As gives the JSON-RPC error, for its code.
func (m methodNotFound) As(target any) bool {
	if p, ok := target.(**jsonrpc.Error); ok {
		*p = m.e
		return true
	}
	return false
}

// clientCaps are the capabilities the upstream is told the gateway's
// client has: the client's own (for a gateway serving several, every
// capability one of them has).
type clientCaps struct {
	Sampling    *mcp.SamplingCapabilities    `json:"sampling,omitempty"`
	Elicitation *mcp.ElicitationCapabilities `json:"elicitation,omitempty"`
	Roots       *mcp.RootCapabilities        `json:"roots,omitempty"`
}

func (c clientCaps) union(o clientCaps) clientCaps {
	if c.Sampling == nil {
		c.Sampling = o.Sampling
	}
	if c.Elicitation == nil {
		c.Elicitation = o.Elicitation
	}
	if c.Roots == nil {
		c.Roots = o.Roots
	}
	return c
}

func (c clientCaps) options() *mcp.ClientCapabilities {
	return &mcp.ClientCapabilities{Sampling: c.Sampling, Elicitation: c.Elicitation, RootsV2: c.Roots}
}

// initialized takes a new client's capabilities to the upstream: when the
// client can do what the upstream was not told of (sampling, elicitation,
// roots), the gateway connects to the upstream again telling it, as long
// as the upstream's session has served no client's request (a command
// upstream is started again: whatever state it keeps in memory would be
// lost) and none is in flight (it would be cut short). A listing of the
// gateway's own in flight (the upstream said its tools changed as it
// started, as server-everything does) is let end first.
func (g *Gateway) initialized(ctx context.Context, req *mcp.InitializedRequest) {
	if err := g.adoptCaps(req.Session); err != nil {
		g.log.Warn("mcpgateway: the upstream keeps the client capabilities it was told", slog.Any("err", err))
	}
}

// adoptCaps takes a session's client capabilities to the upstream
// (initialized); every forwarded request does it again, as the first
// request of a streamable-HTTP session may be handled before its
// initialized notification.
func (g *Gateway) adoptCaps(ss *mcp.ServerSession) error {
	if ss == nil {
		return nil
	}
	ip := ss.InitializeParams()
	if ip == nil || ip.Capabilities == nil {
		return nil
	}
	return g.up.adopt(clientCaps{Sampling: ip.Capabilities.Sampling, Elicitation: ip.Capabilities.Elicitation, Roots: ip.Capabilities.RootsV2}, ip.ProtocolVersion)
}

// adopt makes the next session tell the upstream the union of its
// capabilities and c, and speak the client's protocol version, closing
// the current one, when that adds to them or changes the version, and the
// session has served no client and is not in use. Speaking the client's
// version, the upstream answers what it would answer the client.
func (u *upstream) adopt(c clientCaps, version string) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	next := u.caps.union(c)
	newVersion := version != "" && version != u.version && u.sess != nil && u.sess.InitializeResult() != nil &&
		u.sess.InitializeResult().ProtocolVersion != version
	if reflect.DeepEqual(next, u.caps) && !newVersion {
		return nil
	}
	if u.clientUse > 0 || u.served {
		return errors.New("mcpgateway: the upstream has served a client's request since it started")
	}
	if newVersion {
		u.version = version
	}
	u.caps = next
	u.client = u.newClient(next)
	if u.sess != nil && u.inUse > 0 {
		// The gateway lists the upstream's tools on it (the upstream
		// said they changed as it started): the next acquire replaces
		// it once that ends.
		u.replace = true
		u.log.Info("mcpgateway: the upstream is told the client's capabilities once the gateway's listing of its tools ends")
		return nil
	}
	if u.sess != nil {
		sess := u.sess
		u.sess = nil
		u.log.Info("mcpgateway: connecting to the upstream again with the client's capabilities")
		_ = sess.Close()
	}
	return nil
}

// rawCache keeps the JSON of the upstream's cacheable results (lists, a
// resource read) by the typed result the go-sdk's client made of it, which
// its cache hands out again.
type rawCache struct {
	mu sync.Mutex
	m  map[mcp.Result]json.RawMessage
}

// maxRawCache bounds the results kept; the oldest go when it is reached
// (all of them: the go-sdk's client re-fetches what expired).
const maxRawCache = 256

func cacheable(res mcp.Result) bool {
	switch res.(type) {
	case *mcp.ListToolsResult, *mcp.ListPromptsResult, *mcp.ListResourcesResult, *mcp.ListResourceTemplatesResult, *mcp.ReadResourceResult:
		return true
	}
	return false
}

func (c *rawCache) keep(res mcp.Result, raw json.RawMessage) {
	if !cacheable(res) || reflect.ValueOf(res).IsNil() {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= maxRawCache {
		c.m = map[mcp.Result]json.RawMessage{}
	}
	c.m[res] = raw
}

func (c *rawCache) of(res mcp.Result) json.RawMessage {
	if !cacheable(res) {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[res]
}

// newProtocol reports whether a protocol version is one of multi-round-trip
// requests (2026-07-28 and later): a server asks its client for input
// (sampling, elicitation, roots) in a result, never in a request of its
// own, and the client repeats its request with the answers.
func newProtocol(version string) bool { return version >= "2026-07-28" }

// clientVersion is the protocol version of a client's session.
func clientVersion(ss *mcp.ServerSession) string {
	if ss == nil {
		return ""
	}
	if ip := ss.InitializeParams(); ip != nil {
		return ip.ProtocolVersion
	}
	return ""
}

// protocolMeta are the _meta entries by which a request of protocol
// 2026-07-28 carries its session (version, client, capabilities): the
// upstream is told those of the gateway's own session with it.
var protocolMeta = []string{mcp.MetaKeyProtocolVersion, mcp.MetaKeyClientInfo, mcp.MetaKeyClientCapabilities, mcp.MetaKeyLogLevel}

// withoutProtocolMeta returns meta without the client's protocol entries.
func withoutProtocolMeta(meta mcp.Meta) mcp.Meta {
	if meta == nil {
		return nil
	}
	var out mcp.Meta
	for k, v := range meta {
		if slices.Contains(protocolMeta, k) {
			continue
		}
		if out == nil {
			out = mcp.Meta{}
		}
		out[k] = v
	}
	return out
}

// withSessionMeta returns a client's raw params with the protocol entries
// of _meta taken from typed, the params the gateway's session with the
// upstream made: the client's own session is not the upstream's.
func withSessionMeta(raw, typed json.RawMessage) json.RawMessage {
	var p map[string]json.RawMessage
	if json.Unmarshal(raw, &p) != nil || p == nil {
		return raw
	}
	var meta, tm map[string]json.RawMessage
	_ = json.Unmarshal(p["_meta"], &meta)
	var t struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	_ = json.Unmarshal(typed, &t)
	tm = t.Meta
	changed := false
	for _, k := range protocolMeta {
		if _, ok := meta[k]; ok {
			delete(meta, k)
			changed = true
		}
		if v, ok := tm[k]; ok {
			if meta == nil {
				meta = map[string]json.RawMessage{}
			}
			meta[k] = v
			changed = true
		}
	}
	if !changed {
		return raw
	}
	if len(meta) == 0 {
		delete(p, "_meta")
	} else {
		p["_meta"], _ = json.Marshal(meta)
	}
	b, err := json.Marshal(p)
	if err != nil {
		return raw
	}
	return b
}

// forClient returns an upstream's raw result for a client on protocol
// version: a client before 2026-07-28 gets no resultType, which such an
// upstream sets only for a client of that protocol.
func forClient(raw json.RawMessage, version string) json.RawMessage {
	if newProtocol(version) || !bytes.Contains(raw, []byte(`"resultType"`)) {
		return raw
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return raw
	}
	if _, ok := m["resultType"]; !ok {
		return raw
	}
	delete(m, "resultType")
	b, err := json.Marshal(m)
	if err != nil {
		return raw
	}
	return b
}

// needsInput returns the input an upstream's result asks for.
func needsInput(res mcp.Result) (mcp.InputRequestMap, string, bool) {
	switch r := res.(type) {
	case *mcp.CallToolResult:
		if r != nil && r.NeedsInput() {
			return r.InputRequests, r.RequestState, true
		}
	case *mcp.GetPromptResult:
		if r != nil && r.NeedsInput() {
			return r.InputRequests, r.RequestState, true
		}
	case *mcp.ReadResourceResult:
		if r != nil && r.NeedsInput() {
			return r.InputRequests, r.RequestState, true
		}
	}
	return nil, "", false
}

// setInputResponses sets the answers and state of the next round of a
// request.
func setInputResponses(p mcp.Params, answers mcp.InputResponseMap, state string) {
	switch q := p.(type) {
	case *mcp.CallToolParams:
		q.InputResponses, q.RequestState = answers, state
	case *mcp.GetPromptParams:
		q.InputResponses, q.RequestState = answers, state
	case *mcp.ReadResourceParams:
		q.InputResponses, q.RequestState = answers, state
	}
}

// withInputResponses is setInputResponses for raw params.
func withInputResponses(raw json.RawMessage, answers mcp.InputResponseMap, state string) json.RawMessage {
	var p map[string]json.RawMessage
	if raw == nil || json.Unmarshal(raw, &p) != nil || p == nil {
		return nil // the typed params carry them
	}
	a, err := json.Marshal(answers)
	if err != nil {
		return nil
	}
	p["inputResponses"] = a
	delete(p, "requestState")
	if state != "" {
		p["requestState"], _ = json.Marshal(state)
	}
	b, err := json.Marshal(p)
	if err != nil {
		return nil
	}
	return b
}

// askClient asks a client on a protocol before 2026-07-28 for the input an
// upstream's result asks for, with a request per input, as an upstream of
// that protocol would have.
func askClient(ctx context.Context, ss *mcp.ServerSession, inputs mcp.InputRequestMap) (mcp.InputResponseMap, error) {
	if ss == nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the upstream asked for input, and there is no client to ask"}
	}
	answers := make(mcp.InputResponseMap, len(inputs))
	for _, id := range slices.Sorted(maps.Keys(inputs)) {
		var (
			res mcp.InputResponse
			err error
		)
		switch q := inputs[id].(type) {
		case *mcp.CreateMessageParams:
			res, err = ss.CreateMessage(ctx, q)
		case *mcp.CreateMessageWithToolsParams:
			res, err = ss.CreateMessageWithTools(ctx, q)
		case *mcp.ElicitParams:
			res, err = ss.Elicit(ctx, q)
		case *mcp.ListRootsParams:
			res, err = ss.ListRoots(ctx, q)
		default:
			err = fmt.Errorf("an input of type %T", q)
		}
		if err != nil {
			return nil, fmt.Errorf("mcpgateway: asking the client for the upstream's input %q: %w", id, unwrapRPC(err))
		}
		answers[id] = res
	}
	return answers, nil
}
