// Package mcpgateway is an MCP server that sits in front of another MCP
// server and makes the side-effecting tools named in its configuration
// exactly-once, so that an agent in any language gets oncely by pointing
// its MCP configuration at the gateway instead of at the server.
//
// The gateway spawns its upstream (a command spoken to over stdio) or
// connects to it (a streamable-HTTP URL), and serves its own clients over
// stdio (Serve with Stdio) or streamable HTTP (Handler). Only a tools/call
// of a configured tool takes the executor's path (package client): derive
// the action key from the configured identity fields, claim it in the
// ledger, call the upstream tool with the downstream key (as an argument
// or in _meta), and record the result. The upstream gets the model's own
// arguments, a value converted to its normalized form only where the
// tool's input schema asks for that type.
//
// Everything else passes through as it came: a forwarded request carries
// the client's own params and is answered with the upstream's own result
// (or JSON-RPC error), whatever protocol version each side speaks (the
// gateway speaks to the upstream the client's version where it can);
// progress notifications reach the client under its own token; the
// upstream's sampling, elicitation and roots requests go to the client,
// whose capabilities the upstream is told, on protocol 2026-07-28 as the
// input an upstream's result asks for; its list-changed notifications
// reach every client.
//
// When the gateway starts, and when the upstream's tool list changes, every
// configured tool must be offered by the upstream (Config.MissingTools),
// and every identity and validated path must fit its input schema.
//
// What the client gets back for a configured tool:
//
//   - the first call: the upstream's result, as it is;
//   - a repeat of a done action, or a concurrent duplicate merged into a
//     call in flight: with Replay set, the first call's result content
//     (stored in the ledger up to its result limit) followed by the text
//     "Already done earlier in this run: ... Do not repeat it."; otherwise
//     only that text. A tool that declares an outputSchema gets the first
//     result's structuredContent on every repeat (ToolConfig.Unkept says
//     what a repeat whose result was not kept is);
//   - every other outcome (in progress, uncertain, conflict, failed,
//     invalid input): a result with isError, the upstream's own content
//     when it answered, and the executor's text.
//
// Each result's _meta carries "oncely/outcome" and "oncely/key".
//
// An error before any action (an error result for arguments that violate
// the input schema, an SDK's refusal before running the tool, a JSON-RPC
// -32602, what ToolConfig.Definite marks) is a definite failure: nothing
// was done and a corrected call runs. An upstream that dies, times out
// (Config.CallTimeout) or drops the connection during a call, or answers
// another error result (ToolConfig.ErrorResult), is an ambiguous outcome:
// the record becomes uncertain and the call is never repeated blindly —
// later repeats are answered "Outcome unknown ... do not retry" until an
// operator settles the record (ledger.Resolve). A configured call runs to
// its end even when its client leaves or cancels it, so that its outcome
// is recorded. The next call after the upstream died starts it again.
//
// A call the client cancels (notifications/cancelled) is not answered.
// A client may send its own idempotency key with a call
// (ToolConfig.ClientKey says what it does).
//
// Over stdio, a message that cannot be read is answered with a JSON-RPC
// error and the session goes on (StdioTransport). Over streamable HTTP
// (Handler), a browser's cross-origin request is refused, and clients
// authenticate as HTTPConfig says.
//
// The ledger is a ledger.Store opened by the caller: oncely mcp opens it by
// URL (Config.Ledger), the embedded SQLite file by default.
package mcpgateway

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/oncely/oncely"
	"github.com/oncely/oncely/client"
	"github.com/oncely/oncely/ledger"
)

// Options are the settings of a gateway that a configuration file does
// not hold. The zero value (or nil) gives the defaults.
type Options struct {
	// Client tunes the executor (lease, retention, clock); its Logger
	// defaults to Logger.
	Client *client.Config
	// Logger receives a record per configured tool call and the upstream's
	// restarts (default: discard).
	Logger *slog.Logger
	// Stderr receives the upstream command's standard error (default:
	// this process's).
	Stderr io.Writer
	// ConnectTimeout bounds starting and initializing the upstream
	// (default 30 seconds).
	ConnectTimeout time.Duration
	// Tool, when set, wraps each configured tool before it is registered
	// (oncelyotel's Instruments.Tool traces its runs).
	Tool func(client.Tool) client.Tool
	// Executor, when set, wraps the executor the calls go through
	// (oncelyotel's Instruments.Executor gives each call a span).
	Executor func(*client.Executor) Executor
	// Token is the bearer token every client of Handler must send
	// (Authorization: Bearer TOKEN); empty: none (see HTTPConfig.Auth).
	// oncely mcp reads it from TokenEnv or a file, never from a flag,
	// which ps and --help would show.
	Token string
}

// Executor executes tool calls; *client.Executor implements it, and so do
// its wrappers.
type Executor interface {
	Execute(ctx context.Context, runID string, call client.Call) (client.Result, error)
}

// Gateway is an MCP server in front of an upstream MCP server.
type Gateway struct {
	cfg      Config
	exec     *client.Executor
	calls    Executor // exec, wrapped by Options.Executor
	wrap     func(client.Tool) client.Tool
	up       *upstream
	serverMu sync.Mutex // guards server's setting, read by listChanged
	server   *mcp.Server
	caps     *mcp.ServerCapabilities // what server tells its clients
	tools    map[string]*guarded
	log      *slog.Logger
	procRun  string // the run id of stdio sessions without another source
	token    string // Options.Token
	timeout  time.Duration
	catalog  catalog
	progress progress
	active   active
	raws     rawCache
	// inflight counts the configured tool calls in progress, which go on
	// when their client leaves: Serve and Close wait for them.
	inflight sync.WaitGroup
}

// catalog is the upstream's tools, as last listed.
type catalog struct {
	mu    sync.RWMutex
	tools map[string]*upstreamTool
}

// tool returns what the upstream's listing says of a tool, or nil.
func (c *catalog) tool(name string) *upstreamTool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.tools[name]
}

func (c *catalog) set(tools map[string]*upstreamTool) {
	c.mu.Lock()
	c.tools = tools
	c.mu.Unlock()
}

// The _meta entries and headers the gateway reads and writes.
const (
	DefaultRunMeta      = "oncely/run"
	DefaultRunHeader    = "Oncely-Run"
	DefaultTenantMeta   = "oncely/tenant"
	DefaultTenantHeader = "Oncely-Tenant"
	DefaultKeyMeta      = "oncely/key"
	// OutcomeMeta and KeyMeta are set in the _meta of every result of a
	// configured tool: the outcome ("executed", "already done", ...) and
	// the action key.
	OutcomeMeta = "oncely/outcome"
	KeyMeta     = "oncely/key"
	// RunIDEnv is the environment variable from which oncely mcp takes the
	// run id when --run-id is not given: a host that spawns one gateway per
	// conversation sets it, so that a restarted gateway is the same run.
	RunIDEnv = "ONCELY_RUN_ID"
)

// New validates cfg, starts or connects to the upstream (the gateway
// mirrors its capabilities), and returns the gateway with its tools
// registered on an executor over store. Close it when done.
func New(ctx context.Context, store ledger.Store, cfg *Config, opts *Options) (*Gateway, error) {
	if cfg == nil {
		return nil, fmt.Errorf("%w: no configuration", ErrConfig)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.ConnectTimeout <= 0 {
		o.ConnectTimeout = 30 * time.Second
	}
	cc := client.Config{}
	if o.Client != nil {
		cc = *o.Client
	}
	if cc.Logger == nil {
		cc.Logger = o.Logger
	}
	if cc.Liveness == 0 {
		cc.Liveness = time.Duration(cfg.Lease)
	}
	g := &Gateway{
		cfg: *cfg, exec: client.New(store, &cc), tools: map[string]*guarded{}, log: o.Logger,
		procRun: "session-" + randomHex(), token: o.Token, timeout: time.Duration(cfg.CallTimeout), wrap: o.Tool,
	}
	g.calls = g.exec
	if o.Executor != nil {
		g.calls = o.Executor(g.exec)
	}
	if g.timeout == 0 {
		g.timeout = DefaultCallTimeout
	}
	if g.cfg.Name == "" {
		g.cfg.Name = "oncely-mcp-gateway"
	}
	for name, tc := range cfg.Tools {
		t, err := g.register(name, tc)
		if err != nil {
			return nil, err
		}
		g.tools[name] = t
	}
	g.up = &upstream{cfg: cfg.Upstream, log: o.Logger, stderr: o.Stderr, timeout: o.ConnectTimeout, newClient: g.newClient, onProgress: g.relayRaw}
	sess, release, err := g.up.acquire(ctx, false)
	if err != nil {
		return nil, err
	}
	err = g.check(ctx, sess)
	release()
	if err != nil {
		_ = g.up.close()
		return nil, err
	}
	// Every later session (the upstream started again, or told new
	// capabilities) lists the tools again.
	g.up.setConnected(func() { go g.refresh() })
	init := sess.InitializeResult()
	caps := mirror(init.Capabilities)
	server := mcp.NewServer(&mcp.Implementation{Name: g.cfg.Name, Version: oncely.Version}, &mcp.ServerOptions{
		Instructions: init.Instructions,
		Capabilities: mirror(init.Capabilities),
		// The versions the upstream speaks: a client that can speak the
		// upstream's speaks it, and the upstream's requests for input
		// reach it the way that version sends them.
		SupportedProtocolVersions: upTo(init.ProtocolVersion),
		Logger:                    o.Logger,
		InitializedHandler:        g.initialized,
	})
	server.AddReceivingMiddleware(g.route)
	g.serverMu.Lock()
	g.server, g.caps = server, caps
	g.serverMu.Unlock()
	return g, nil
}

// newClient makes the gateway's client of the upstream, telling it the
// capabilities caps.
func (g *Gateway) newClient(caps clientCaps) *mcp.Client {
	c := mcp.NewClient(&mcp.Implementation{Name: g.cfg.Name, Version: oncely.Version}, &mcp.ClientOptions{
		Capabilities:                caps.options(),
		ToolListChangedHandler:      func(context.Context, *mcp.ToolListChangedRequest) { go g.toolsChanged() },
		PromptListChangedHandler:    func(context.Context, *mcp.PromptListChangedRequest) { go g.listChanged(changedPrompts) },
		ResourceListChangedHandler:  func(context.Context, *mcp.ResourceListChangedRequest) { go g.listChanged(changedResources) },
		ProgressNotificationHandler: g.notifyProgress,
		// An upstream's request for input (2026-07-28) goes to the client
		// (forward), not to handlers of the gateway's own.
		MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true},
	})
	c.AddReceivingMiddleware(g.toClient)
	return c
}

// check lists the upstream's tools and checks the configured tools against
// them: each must be offered (Config.MissingTools), and each identity and
// validated path must fit the tool's input schema.
func (g *Gateway) check(ctx context.Context, sess *mcp.ClientSession) error {
	lctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	tools, err := listTools(lctx, sess)
	if err != nil {
		return fmt.Errorf("mcpgateway: listing the upstream's tools: %w", err)
	}
	g.catalog.set(tools)
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(g.tools)) {
		ut := tools[name]
		if ut == nil {
			msg := fmt.Sprintf("tools.%s: the upstream offers no tool %q%s", name, name, hint(name, tools))
			if g.cfg.MissingTools == "warn" {
				g.log.Warn("mcpgateway: WARNING: a configured tool is not offered by the upstream (missingTools: warn)", slog.String("problem", msg))
				continue
			}
			errs = append(errs, errors.New(msg))
			continue
		}
		for _, f := range g.tools[name].fields {
			if why := ut.checkField(f.path, f.norm); why != "" {
				errs = append(errs, fmt.Errorf("tools.%s: field %s: %s", name, f.path.text, why))
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %w", ErrConfig, errors.Join(errs...))
	}
	return nil
}

// hint suggests the tools a missing name may have meant.
func hint(name string, tools map[string]*upstreamTool) string {
	near := nearest(name, slices.Collect(maps.Keys(tools)))
	if len(near) == 0 {
		return fmt.Sprintf(" (it offers %d tools)", len(tools))
	}
	return fmt.Sprintf(" (did you mean %s?)", strings.Join(near, " or "))
}

// refresh lists the upstream's tools again after they changed (or the
// upstream was started again), logging what no longer fits the
// configuration.
func (g *Gateway) refresh() {
	ctx, cancel := context.WithTimeout(context.Background(), g.timeout)
	defer cancel()
	sess, release, err := g.up.acquire(ctx, false)
	if err == nil {
		err = g.check(ctx, sess)
		release()
	}
	if err != nil {
		g.log.Error("mcpgateway: the upstream's tools no longer fit the configuration", slog.Any("err", err))
	}
}

// mirror returns the capabilities the gateway serves for an upstream's:
// its tools, resources, prompts and completions, with the list-changed
// notifications the upstream sends (the gateway relays them), without
// resource subscriptions, which it does not relay.
func mirror(up *mcp.ServerCapabilities) *mcp.ServerCapabilities {
	caps := &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}, Logging: &mcp.LoggingCapabilities{}}
	if up == nil {
		return caps
	}
	if up.Tools != nil {
		caps.Tools.ListChanged = up.Tools.ListChanged
	}
	if up.Resources != nil {
		caps.Resources = &mcp.ResourceCapabilities{ListChanged: up.Resources.ListChanged}
	}
	if up.Prompts != nil {
		caps.Prompts = &mcp.PromptCapabilities{ListChanged: up.Prompts.ListChanged}
	}
	caps.Completions = up.Completions
	return caps
}

// upTo returns the protocol versions the go-sdk supports up to version:
// none newer than the upstream's.
func upTo(version string) []string {
	var out []string
	for _, v := range mcp.SupportedProtocolVersions() {
		if v <= version {
			out = append(out, v)
		}
	}
	return out
}

// The lists whose changes the gateway relays.
const (
	changedTools = iota
	changedPrompts
	changedResources
)

// changeMarker names the placeholder the gateway adds to its own server's
// list and removes again to have the go-sdk notify every client that a
// list changed: the notification reaches each session the way its
// protocol version wants it (on the session, or on the subscriptions
// stream it opened). The placeholder is never listed or called, as every
// list and call goes to the upstream.
const changeMarker = "oncely-gateway-list-changed"

// toolsChanged lists the upstream's tools again after it said they
// changed, so that calls are checked and converted against the new input
// and output schemas, then tells the clients.
func (g *Gateway) toolsChanged() {
	g.refresh()
	g.listChanged(changedTools)
}

// listChanged tells every client of the gateway that the upstream's list
// changed.
func (g *Gateway) listChanged(which int) {
	g.serverMu.Lock()
	s, caps := g.server, g.caps
	g.serverMu.Unlock()
	if s == nil {
		return // not serving yet: clients list what is there when they come
	}
	// Only what the gateway told its clients it would notify.
	switch {
	case which == changedTools && !caps.Tools.ListChanged,
		which == changedPrompts && (caps.Prompts == nil || !caps.Prompts.ListChanged),
		which == changedResources && (caps.Resources == nil || !caps.Resources.ListChanged):
		return
	}
	switch which {
	case changedTools:
		s.AddTool(&mcp.Tool{Name: changeMarker, InputSchema: &jsonschema.Schema{Type: "object"}}, markerTool)
		s.RemoveTools(changeMarker)
	case changedPrompts:
		s.AddPrompt(&mcp.Prompt{Name: changeMarker}, markerPrompt)
		s.RemovePrompts(changeMarker)
	case changedResources:
		s.AddResource(&mcp.Resource{URI: changeMarker + ":marker", Name: changeMarker}, markerResource)
		s.RemoveResources(changeMarker + ":marker")
	}
}

var errMarker = errors.New("mcpgateway: no such tool, prompt or resource")

func markerTool(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	return nil, errMarker
}

func markerPrompt(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
	return nil, errMarker
}

func markerResource(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	return nil, errMarker
}

// Serve serves one client over t (Stdio for a client that spawns the
// gateway) until the client disconnects or ctx ends, then waits for the
// configured tool calls still running to be recorded.
func (g *Gateway) Serve(ctx context.Context, t mcp.Transport) error {
	if g.cfg.Run.ID == "" {
		g.log.Warn("mcpgateway: no run id is configured: this process is one run, and a new process (a restart of the gateway) is another, in which the calls of the last one are done again; set one (oncely mcp --run-id or " + RunIDEnv + "), or have the client send the _meta entry " + or(g.cfg.Run.Meta, DefaultRunMeta))
	}
	err := g.server.Run(ctx, t)
	g.inflight.Wait()
	return err
}

// Stdio returns the transport that serves one client over this process's
// standard input and output, with the configuration's Limits: pass it to
// Serve.
func (g *Gateway) Stdio() *StdioTransport {
	return &StdioTransport{Limits: g.cfg.Limits, idempotency: g.cfg.usesClientKeys()}
}

// Handler serves clients over streamable HTTP; opts may be nil. Unless
// opts says otherwise, a request body is bounded by the configuration's
// Limits.MaxFrameBytes. It refuses cross-origin browser requests but those
// of HTTPConfig.AllowedOrigins (and, on loopback, a Host header that is
// not loopback's, against DNS rebinding), and requires the credentials
// HTTPConfig.Auth and Options.Token set (see Authenticated).
func (g *Gateway) Handler(opts *mcp.StreamableHTTPOptions) http.Handler {
	var o mcp.StreamableHTTPOptions
	if opts != nil {
		o = *opts
	}
	if o.MaxRequestBodyBytes == 0 {
		o.MaxRequestBodyBytes = int64(g.cfg.Limits.withDefaults().MaxFrameBytes)
	}
	if g.cfg.Run.ID == "" {
		g.log.Warn("mcpgateway: no run id is configured: a call without the " + or(g.cfg.Run.Header, DefaultRunHeader) + " header or the _meta entry " + or(g.cfg.Run.Meta, DefaultRunMeta) + " is scoped by its MCP session, and a client that reconnects starts a new run, in which its calls are done again")
	}
	return g.secure(withRawParams(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return g.server }, &o), int(o.MaxRequestBodyBytes), g.cfg.usesClientKeys()))
}

// Close waits for the configured tool calls still running to be recorded,
// then disconnects from the upstream, stopping its command.
func (g *Gateway) Close() error {
	g.inflight.Wait()
	return g.up.close()
}

// route sends each request where it belongs: configured tool calls through
// the executor, everything a server lists or reads to the upstream, and
// the protocol's own requests (initialize, ping, logging) to the gateway's
// server.
func (g *Gateway) route(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		switch p := req.GetParams().(type) {
		case *mcp.CallToolParamsRaw:
			if t := g.tools[p.Name]; t != nil {
				return g.call(ctx, t, req.(*mcp.CallToolRequest))
			}
			return forward(ctx, g, req, &mcp.CallToolParams{Meta: p.Meta, Name: p.Name, Arguments: p.Arguments,
				InputResponses: p.InputResponses, RequestState: p.RequestState}, (*mcp.ClientSession).CallTool)
		case *mcp.ListToolsParams:
			return forward(ctx, g, req, p, (*mcp.ClientSession).ListTools)
		case *mcp.ListResourcesParams:
			return forward(ctx, g, req, p, (*mcp.ClientSession).ListResources)
		case *mcp.ListResourceTemplatesParams:
			return forward(ctx, g, req, p, (*mcp.ClientSession).ListResourceTemplates)
		case *mcp.ReadResourceParams:
			return forward(ctx, g, req, p, (*mcp.ClientSession).ReadResource)
		case *mcp.ListPromptsParams:
			return forward(ctx, g, req, p, (*mcp.ClientSession).ListPrompts)
		case *mcp.GetPromptParams:
			return forward(ctx, g, req, p, (*mcp.ClientSession).GetPrompt)
		case *mcp.CompleteParams:
			return forward(ctx, g, req, p, (*mcp.ClientSession).Complete)
		}
		return next(ctx, method, req)
	}
}

// forward passes one request to the upstream as it came, bounded by
// CallTimeout, and returns the upstream's answer as it came: its result,
// or its JSON-RPC error. Progress notifications of the request are
// relayed to the client. An upstream that asks for input in its result
// (protocol 2026-07-28) has it passed to a client that speaks that
// protocol, which answers by repeating the request; for a client on an
// earlier protocol the gateway asks it with requests of its own and
// repeats the request to the upstream with the answers.
func forward[P mcp.Params, R mcp.Result](ctx context.Context, g *Gateway, req mcp.Request, p P, call func(*mcp.ClientSession, context.Context, P) (R, error)) (mcp.Result, error) {
	ss, _ := req.GetSession().(*mcp.ServerSession)
	_ = g.adoptCaps(ss) // initialized said why not, if not
	sess, release, err := g.up.acquire(ctx, true)
	if err != nil {
		return nil, err
	}
	defer release()
	defer g.active.begin(ctx, req)()
	raw := rawParams(req)
	if v := reflect.ValueOf(p); v.Kind() == reflect.Pointer && !v.IsNil() { // no params: none to rewrite
		var meta mcp.Meta
		var end func()
		raw, meta, end = g.withProgress(ctx, req, raw, withoutProtocolMeta(p.GetMeta()))
		defer end()
		p.SetMeta(meta)
	}
	version := clientVersion(ss)
	for round := 1; ; round++ {
		res, r, err := send(ctx, g, raw, func(cctx context.Context) (R, error) { return call(sess, cctx, p) })
		if err != nil {
			return nil, err
		}
		inputs, state, needs := needsInput(res)
		if !needs || newProtocol(version) {
			if r != nil {
				return &rawResult{raw: forClient(r, version)}, nil
			}
			return res, nil
		}
		if round >= maxInputRounds {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("the upstream asked for input %d times in a row", round)}
		}
		answers, err := askClient(ctx, ss, inputs)
		if err != nil {
			return nil, err
		}
		setInputResponses(p, answers, state)
		raw = withInputResponses(raw, answers, state)
	}
}

// maxInputRounds bounds the rounds of input an upstream may ask for in one
// request, as the go-sdk's client does.
const maxInputRounds = 10

// send makes one upstream request with raw params (nil: the typed ones),
// bounded by CallTimeout, and returns its result, typed and as it came
// (nil when unknown).
func send[R mcp.Result](ctx context.Context, g *Gateway, raw json.RawMessage, call func(context.Context) (R, error)) (R, json.RawMessage, error) {
	cctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	cctx, slot := withSlot(cctx, raw)
	res, err := call(cctx)
	switch {
	case err != nil && cctx.Err() == context.DeadlineExceeded && ctx.Err() == nil:
		return res, nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("the upstream did not answer within %s (callTimeout); the request was cancelled", g.timeout)}
	case err != nil:
		return res, nil, unwrapRPC(err)
	}
	r := slot.get()
	if r != nil {
		g.raws.keep(res, r)
	} else {
		// On protocol 2026-07-28 the go-sdk's client answers a list or a
		// read from its cache while the upstream's time to live lasts:
		// the same result it was sent, whose JSON the gateway kept.
		r = g.raws.of(res)
	}
	return res, r, nil
}

// upstream is the connection to the upstream server, started again after
// it ended.
type upstream struct {
	cfg        Upstream
	newClient  func(clientCaps) *mcp.Client
	onProgress func(json.RawMessage) bool // relays a progress notification
	log        *slog.Logger
	stderr     io.Writer
	timeout    time.Duration

	mu        sync.Mutex
	connected func()      // told of every new session, when set
	client    *mcp.Client // made with caps
	caps      clientCaps
	version   string // the protocol version to ask for ("": the newest)
	sess      *mcp.ClientSession
	inUse     int  // acquired and not released
	clientUse int  // of inUse, those serving a client's request
	served    bool // sess has served a client's request
	// replace: sess is to be replaced by a session of client (adopt) once
	// the gateway's own uses of it (a listing) end; acquire waits for them.
	replace bool
	freed   *sync.Cond // signalled when a use is released
}

// acquire returns the live session, connecting first when there is none;
// release it when done. forClient says it serves a client's request.
func (u *upstream) acquire(ctx context.Context, forClient bool) (*mcp.ClientSession, func(), error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.freed == nil {
		u.freed = sync.NewCond(&u.mu)
	}
	for u.replace && u.sess != nil && u.inUse > 0 {
		u.freed.Wait() // the gateway's own listing, bounded by CallTimeout
	}
	if u.replace && u.sess != nil {
		sess := u.sess
		u.sess = nil
		u.log.Info("mcpgateway: connecting to the upstream again with the client's capabilities")
		_ = sess.Close()
	}
	u.replace = false
	sess, err := u.connect(ctx)
	if err != nil {
		return nil, nil, err
	}
	u.inUse++
	if forClient {
		u.clientUse++
	}
	u.served = u.served || forClient
	var once sync.Once
	return sess, func() {
		once.Do(func() {
			u.mu.Lock()
			u.inUse--
			if forClient {
				u.clientUse--
			}
			u.freed.Broadcast()
			u.mu.Unlock()
		})
	}, nil
}

// connect returns the live session or makes one; u.mu is held.
func (u *upstream) connect(ctx context.Context) (*mcp.ClientSession, error) {
	if u.sess != nil {
		return u.sess, nil
	}
	var t mcp.Transport
	if u.cfg.URL != "" {
		hc := &http.Client{Transport: rawRoundTripper{next: headerTransport{header: u.cfg.Header, next: http.DefaultTransport}, onProgress: u.onProgress}}
		t = &mcp.StreamableClientTransport{Endpoint: u.cfg.URL, HTTPClient: hc}
	} else {
		cmd := exec.Command(u.cfg.Command[0], u.cfg.Command[1:]...)
		cmd.Dir = u.cfg.Dir
		cmd.Env = os.Environ()
		for k, v := range u.cfg.Env {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		cmd.Stderr = os.Stderr
		if u.stderr != nil {
			cmd.Stderr = u.stderr
		}
		t = rawTransport{Transport: &mcp.CommandTransport{Command: cmd}, onProgress: u.onProgress}
	}
	if u.client == nil {
		u.client = u.newClient(u.caps)
	}
	cctx, cancel := context.WithTimeout(ctx, u.timeout)
	defer cancel()
	sess, err := u.client.Connect(cctx, t, &mcp.ClientSessionOptions{ProtocolVersion: u.version})
	if err != nil {
		return nil, fmt.Errorf("mcpgateway: connecting to the upstream: %w", err)
	}
	u.sess, u.served = sess, false
	u.log.Info("mcpgateway: upstream connected", slog.String("session", sess.ID()))
	if u.connected != nil {
		u.connected()
	}
	go func() {
		err := sess.Wait()
		u.mu.Lock()
		if u.sess == sess {
			u.sess = nil
		}
		u.mu.Unlock()
		u.log.Info("mcpgateway: upstream session ended", slog.Any("err", err))
	}()
	return sess, nil
}

func (u *upstream) setConnected(f func()) {
	u.mu.Lock()
	u.connected = f
	u.mu.Unlock()
}

func (u *upstream) close() error {
	u.mu.Lock()
	sess := u.sess
	u.sess = nil
	u.mu.Unlock()
	if sess == nil {
		return nil
	}
	return sess.Close()
}

// headerTransport adds fixed headers to every request.
type headerTransport struct {
	header map[string]string
	next   http.RoundTripper
}

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if len(h.header) > 0 {
		r = r.Clone(r.Context())
		for k, v := range h.header {
			r.Header.Set(k, v)
		}
	}
	return h.next.RoundTrip(r)
}

func randomHex() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
