package legacy

// A 2025-11-25 Streamable HTTP *client*, used by the reverse route (2026-07-28 clients in
// front of a legacy upstream) and by same-era pass-through.
//
// Protocol flow (one UpstreamSession):
//
//	POST initialize                      → result + Mcp-Session-Id header
//	POST notifications/initialized       → 202
//	POST request (Mcp-Session-Id, MCP-Protocol-Version)
//	     ← application/json response, or
//	     ← text/event-stream: notifications, server→client requests, then the response
//	POST response to a server request    → 202   (the RequestHandler's answer)
//	DELETE                               → session ends
//
// A 404 on a request that carries Mcp-Session-Id means the server dropped the session
// (ErrSessionGone); the Pool then opens a new one on the next Get.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/taskbridge/taskbridge/internal/hop"
	"github.com/taskbridge/taskbridge/internal/jsonrpc"
	"github.com/taskbridge/taskbridge/internal/redact"
	"github.com/taskbridge/taskbridge/internal/sse"
	"github.com/taskbridge/taskbridge/internal/trace"
	"github.com/taskbridge/taskbridge/internal/upstream"
)

// ErrSessionGone is returned (wrapped) when the upstream answers 404 to a request of an
// established session: the session expired or the server restarted. Requests sent with
// it never reached a handler, so they may be retried on a new session.
var ErrSessionGone = errors.New("legacy upstream: session not found")

// DefaultClientCapabilities are declared in initialize unless ClientOptions says otherwise:
// everything a relaying client can answer on behalf of its own clients.
const DefaultClientCapabilities = `{"elicitation":{"form":{},"url":{}},"sampling":{},"roots":{}}`

// ClientOptions configure a Client. URL is required.
type ClientOptions struct {
	URL string
	// HTTPClient defaults to a client whose transport keeps up to 64 idle connections to
	// the upstream (a proxy hop churns connections otherwise; design §10).
	HTTPClient *http.Client
	ClientInfo Implementation
	// Capabilities are the ClientCapabilities sent in initialize (raw JSON); default
	// DefaultClientCapabilities.
	Capabilities json.RawMessage
	// Header is added to every request (e.g. upstream credentials from config).
	Header http.Header
	// MaxMessageBytes caps one response or SSE event (default 16 MiB).
	MaxMessageBytes int64
	// OnError, when set, is told of every failed request (method and error; initialize
	// included): the era router watches for answers that no longer match the upstream's
	// recorded faces. It must not block.
	OnError func(method string, err error)
	// Transport, when set, carries every message instead of Streamable HTTP: a child
	// process over stdio (transport.go). URL, HTTPClient and Header are then unused, and
	// every session opened is the child's one session, shared (UpstreamSession.Shared).
	Transport *StdioTransport
}

// Client opens sessions to one legacy upstream. It holds no session itself; see Session
// and Pool. Safe for concurrent use.
type Client struct {
	url    string // where requests go, credentials and all
	shown  string // url redacted (internal/redact): the only form that leaves this type
	http   *http.Client
	info   Implementation
	caps   json.RawMessage
	header http.Header
	max    int64
	tr     *StdioTransport // nil: Streamable HTTP
	onErr  func(method string, err error)
}

// NewClient returns a Client for o.URL.
func NewClient(o ClientOptions) *Client {
	hc := o.HTTPClient
	if hc == nil {
		hc = &http.Client{Transport: hop.NewTransport(hop.Options{MaxIdleConnsPerHost: 64})}
	}
	if o.ClientInfo.Name == "" {
		o.ClientInfo = Implementation{Name: "taskbridge", Version: "dev"}
	}
	if len(o.Capabilities) == 0 {
		o.Capabilities = json.RawMessage(DefaultClientCapabilities)
	}
	if o.MaxMessageBytes <= 0 {
		o.MaxMessageBytes = 16 << 20
	}
	c := &Client{url: o.URL, shown: redact.URL(o.URL), http: hc, info: o.ClientInfo, caps: o.Capabilities, header: o.Header, max: o.MaxMessageBytes, tr: o.Transport, onErr: o.OnError}
	if c.tr != nil && c.url == "" {
		c.url, c.shown = c.tr.Name(), c.tr.Name()
	}
	return c
}

// URL returns the upstream endpoint in its redacted form (no userinfo, no query): what
// logs, records and errors may show.
func (c *Client) URL() string { return c.shown }

// RequestHandler answers one server→client request (elicitation/create,
// sampling/createMessage, roots/list, ping, …) that arrived on a response stream. It runs
// on its own goroutine, may block until the answer is known, and returns the result or an
// error (sent as a JSON-RPC error). The UpstreamSession POSTs the answer back, unless the
// error is ErrNoReply (the answer goes later, through UpstreamSession.Respond).
type RequestHandler func(ctx context.Context, req *jsonrpc.Message) (json.RawMessage, error)

// CallOptions are the optional hooks of one Call.
type CallOptions struct {
	// OnRequest answers server requests on this call's stream; nil answers them -32601
	// (ping gets {}).
	OnRequest RequestHandler
	// OnNotify receives notifications on this call's stream (progress, log messages).
	OnNotify func(*jsonrpc.Message)
}

// UpstreamSession is one initialized session with a legacy upstream (this package is also
// the client of 2025-11-25 servers). Safe for concurrent use.
type UpstreamSession struct {
	c       *Client
	id      string // Mcp-Session-Id; "" when the server is stateless
	version string
	init    InitializeResult
	initRaw json.RawMessage
	nextID  atomic.Int64
	gone    atomic.Bool
	handler sync.WaitGroup // RequestHandler goroutines
	gen     uint64         // over a StdioTransport: the child generation it belongs to
}

// Connect opens a session with the Client's own identity and capabilities: initialize,
// then notifications/initialized.
func (c *Client) Connect(ctx context.Context) (*UpstreamSession, error) {
	return c.ConnectAs(ctx, InitializeParams{ProtocolVersion: ProtocolVersion, Capabilities: c.caps, ClientInfo: c.info})
}

// ConnectAs opens a session presenting p (pass-through: a legacy client's own
// initialize params, so the upstream sees its real capabilities and clientInfo).
//
// Over a StdioTransport the child has one session, initialized once per child run with the
// Client's own identity; p is then not sent, and the session returned is shared.
func (c *Client) ConnectAs(ctx context.Context, p InitializeParams) (*UpstreamSession, error) {
	if c.tr != nil {
		return c.tr.session(ctx, c)
	}
	s := &UpstreamSession{c: c}
	if len(p.Capabilities) == 0 {
		p.Capabilities = json.RawMessage(`{}`)
	}
	params, err := json.Marshal(p)
	if err != nil {
		return nil, err
	}
	res, hdr, err := s.roundTrip(ctx, "initialize", params, CallOptions{})
	if err != nil {
		return nil, fmt.Errorf("legacy upstream initialize: %w", err)
	}
	if err := json.Unmarshal(res, &s.init); err != nil {
		return nil, &upstream.Error{Legacy: true, URL: c.shown, Method: "initialize", Err: fmt.Errorf("%w: bad initialize result: %w", upstream.ErrInvalidReply, err)}
	}
	if !supportedVersion(s.init.ProtocolVersion) {
		return nil, &upstream.Error{Legacy: true, URL: c.shown, Method: "initialize", Err: fmt.Errorf("unsupported protocol version %q", s.init.ProtocolVersion)}
	}
	s.initRaw = res
	s.version = s.init.ProtocolVersion
	s.id = hdr.Get("Mcp-Session-Id")
	if err := s.Notify(ctx, "notifications/initialized", nil); err != nil {
		return nil, err
	}
	return s, nil
}

// ID returns the Mcp-Session-Id ("" for a stateless server).
func (s *UpstreamSession) ID() string { return s.id }

// ProtocolVersion returns the negotiated version.
func (s *UpstreamSession) ProtocolVersion() string { return s.version }

// InitializeResult returns the server's initialize result (decoded, and raw).
func (s *UpstreamSession) InitializeResult() (InitializeResult, json.RawMessage) {
	return s.init, s.initRaw
}

// Gone reports whether the server dropped this session (a request got 404, or the stdio
// child it lived in exited).
func (s *UpstreamSession) Gone() bool {
	return s.gone.Load() || (s.c.tr != nil && s.c.tr.Generation() != s.gen)
}

// Shared reports whether other callers use the same server-side session (a stdio child has
// only one): its tasks, notifications and server requests are not this caller's alone.
func (s *UpstreamSession) Shared() bool { return s.c.tr != nil }

// Call sends one request and returns its result. A JSON-RPC error reply is returned as a
// *jsonrpc.Error; a transport failure as *upstream.Error (wrapping ErrSessionGone on 404).
// Cancelling ctx closes the response stream and sends notifications/cancelled.
func (s *UpstreamSession) Call(ctx context.Context, method string, params json.RawMessage, o CallOptions) (json.RawMessage, error) {
	res, _, err := s.roundTrip(ctx, method, params, o)
	return res, err
}

// Notify sends a notification.
func (s *UpstreamSession) Notify(ctx context.Context, method string, params json.RawMessage) error {
	if s.c.tr != nil {
		return s.c.tr.notify(ctx, s, method, params)
	}
	msg := &jsonrpc.Message{JSONRPC: jsonrpc.Version, Method: method, Params: params}
	resp, err := s.post(ctx, msg)
	if err != nil {
		return err
	}
	drain(resp.Body)
	return s.checkAccepted(resp, method)
}

// Close ends the session with DELETE (best effort) and waits for running handlers.
func (s *UpstreamSession) Close(ctx context.Context) error {
	s.gone.Store(true)
	if s.id != "" && s.c.tr == nil {
		req, err := http.NewRequestWithContext(ctx, http.MethodDelete, s.c.url, nil)
		if err == nil {
			s.headers(req.Header)
			if resp, err := s.c.http.Do(req); err == nil {
				drain(resp.Body)
			}
		}
	}
	s.handler.Wait()
	return nil
}

func (s *UpstreamSession) upErr(method string, status int, err error) *upstream.Error {
	return &upstream.Error{Legacy: true, URL: s.c.shown, Method: method, Status: status, Err: err}
}

func (s *UpstreamSession) headers(h http.Header) {
	for k, v := range s.c.header {
		h[k] = v
	}
	h.Set("Content-Type", "application/json")
	h.Set("Accept", "application/json, text/event-stream")
	if s.id != "" {
		h.Set("Mcp-Session-Id", s.id)
	}
	if s.version != "" {
		h.Set("MCP-Protocol-Version", s.version)
	}
}

func (s *UpstreamSession) post(ctx context.Context, msg *jsonrpc.Message) (*http.Response, error) {
	body, err := jsonrpc.Encode(msg)
	if err != nil {
		return nil, err
	}
	method := msg.Method
	if method == "" {
		method = "response"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.c.url, bytes.NewReader(body))
	if err != nil {
		return nil, s.upErr(method, 0, err)
	}
	s.headers(req.Header)
	trace.InjectHeaders(ctx, req.Header)
	resp, err := s.c.http.Do(req)
	if err != nil {
		return nil, s.upErr(method, 0, err)
	}
	if resp.StatusCode == http.StatusNotFound && s.id != "" {
		drain(resp.Body)
		s.gone.Store(true)
		return nil, s.upErr(method, http.StatusNotFound, ErrSessionGone)
	}
	return resp, nil
}

func (s *UpstreamSession) checkAccepted(resp *http.Response, method string) error {
	if resp.StatusCode/100 != 2 {
		return s.upErr(method, resp.StatusCode, errors.New("not accepted"))
	}
	return nil
}

// roundTrip sends a request and reads its reply (JSON or SSE), returning the result and
// the response headers.
func (s *UpstreamSession) roundTrip(ctx context.Context, method string, params json.RawMessage, o CallOptions) (_ json.RawMessage, _ http.Header, err error) {
	ctx, end := trace.StartUpstream(ctx, trace.Legacy, method)
	defer func() { end(err) }()
	res, h, err := s.exchange(ctx, method, params, o)
	if err != nil && s.c.onErr != nil {
		s.c.onErr(method, err)
	}
	return res, h, err
}

func (s *UpstreamSession) exchange(ctx context.Context, method string, params json.RawMessage, o CallOptions) (json.RawMessage, http.Header, error) {
	if s.c.tr != nil {
		res, err := s.c.tr.call(ctx, s, method, trace.InjectMeta(ctx, params), o)
		return res, nil, err
	}
	id := jsonrpc.IntID(s.nextID.Add(1))
	msg := &jsonrpc.Message{JSONRPC: jsonrpc.Version, ID: id, Method: method, Params: trace.InjectMeta(ctx, params)}
	resp, err := s.post(ctx, msg)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	reply, err := s.readReply(ctx, resp, method, id, o)
	if err != nil {
		if ctx.Err() != nil && method != "initialize" {
			s.cancelUpstream(id, method)
		}
		return nil, resp.Header, err
	}
	if reply.Error != nil {
		return nil, resp.Header, reply.Error
	}
	return reply.Result, resp.Header, nil
}

// cancelUpstream tells the server we gave up on request id (best effort, bounded).
func (s *UpstreamSession) cancelUpstream(id jsonrpc.ID, method string) {
	if method == "tasks/result" || s.gone.Load() {
		// tasks/result abandonment is not a cancellation of the task.
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	p, _ := json.Marshal(map[string]any{"requestId": json.RawMessage(id.Raw()), "reason": "client gave up"})
	_ = s.Notify(ctx, "notifications/cancelled", p)
}

func (s *UpstreamSession) readReply(ctx context.Context, resp *http.Response, method string, id jsonrpc.ID, o CallOptions) (*jsonrpc.Message, error) {
	ct := strings.ToLower(resp.Header.Get("Content-Type"))
	switch {
	case strings.HasPrefix(ct, "text/event-stream"):
		return s.readSSE(ctx, resp.Body, method, id, o)
	case strings.HasPrefix(ct, "application/json"):
		b, err := io.ReadAll(io.LimitReader(resp.Body, s.c.max+1))
		if err != nil {
			return nil, s.upErr(method, resp.StatusCode, err)
		}
		if int64(len(b)) > s.c.max {
			return nil, s.upErr(method, resp.StatusCode, errors.New("response too large"))
		}
		m, derr := jsonrpc.Decode(b)
		if derr != nil || !m.IsResponse() {
			return nil, s.upErr(method, resp.StatusCode, fmt.Errorf("%w: not a JSON-RPC response: %q", upstream.ErrInvalidReply, truncateBytes(b, 200)))
		}
		return m, nil
	}
	drain(resp.Body)
	return nil, s.upErr(method, resp.StatusCode, fmt.Errorf("%w: unexpected Content-Type %q", upstream.ErrInvalidReply, ct))
}

// readSSE reads events until the response to id arrives. Server requests are answered on
// their own goroutines so the stream keeps flowing while an answer is pending.
func (s *UpstreamSession) readSSE(ctx context.Context, body io.Reader, method string, id jsonrpc.ID, o CallOptions) (*jsonrpc.Message, error) {
	var reply *jsonrpc.Message
	err := readEvents(body, int(s.c.max), func(data []byte) bool {
		m, err := jsonrpc.Decode(data)
		if err != nil {
			return true // not a JSON-RPC message: ignore, as the spec lets clients do
		}
		switch {
		case m.IsResponse():
			if m.ID.Raw() == id.Raw() {
				reply = m
				return false
			}
		case m.IsRequest():
			s.answer(ctx, m, o.OnRequest)
		case o.OnNotify != nil:
			o.OnNotify(m)
		}
		return true
	})
	if reply != nil {
		return reply, nil
	}
	if err == nil {
		err = errors.New("stream ended without a response")
	}
	if ctx.Err() != nil {
		err = ctx.Err()
	}
	return nil, s.upErr(method, http.StatusOK, err)
}

// answer runs h for a server request and POSTs the answer back. The handler's ctx is the
// call's ctx: when the call ends (answered or abandoned) a pending handler is released.
func (s *UpstreamSession) answer(ctx context.Context, req *jsonrpc.Message, h RequestHandler) {
	s.handler.Add(1)
	go func() {
		defer s.handler.Done()
		var out *jsonrpc.Message
		switch {
		case h != nil:
			res, err := h(ctx, req)
			if errors.Is(err, ErrNoReply) {
				return // answered later by Respond (adopt.go)
			}
			if err != nil {
				out = jsonrpc.NewErrorResponse(req.ID, err)
			} else {
				if res == nil {
					res = json.RawMessage("{}")
				}
				out = &jsonrpc.Message{JSONRPC: jsonrpc.Version, ID: req.ID, Result: res}
			}
		case req.Method == "ping":
			out = &jsonrpc.Message{JSONRPC: jsonrpc.Version, ID: req.ID, Result: json.RawMessage("{}")}
		default:
			out = jsonrpc.NewErrorResponse(req.ID, jsonrpc.ErrMethodNotFound.Wrapf("%s", req.Method))
		}
		pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if resp, err := s.post(pctx, out); err == nil {
			drain(resp.Body)
		}
	}()
}

// readEvents calls fn with the data of each SSE event (internal/sse) until fn returns
// false or r ends. Comments (keep-alives), events without data and the id, event and
// retry fields are skipped.
func readEvents(r io.Reader, max int, fn func(data []byte) bool) error {
	rd := sse.NewReader(r, max)
	for {
		ev, err := rd.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if ev.HasData && !fn(ev.Data) {
			return nil
		}
	}
}

func drain(b io.ReadCloser) {
	io.Copy(io.Discard, io.LimitReader(b, 64<<10))
	b.Close()
}

func truncateBytes(b []byte, n int) []byte {
	if len(b) > n {
		return b[:n]
	}
	return b
}

// Pool keeps one live session per key (a principal, or "" for anonymous callers) and
// re-initializes when the upstream drops one. Safe for concurrent use.
type Pool struct {
	c  *Client
	mu sync.Mutex // guards m and closed
	m  map[string]*poolEntry
	// closed refuses new sessions after Close.
	closed bool
	onOpen func(key string, s *UpstreamSession)
	caps   func(key string) json.RawMessage
}

type poolEntry struct {
	ready chan struct{} // closed when s/err are set
	s     *UpstreamSession
	err   error
}

// NewPool returns an empty pool over c.
func NewPool(c *Client) *Pool { return &Pool{c: c, m: map[string]*poolEntry{}} }

// OnOpen sets a function called with every session the pool opens from now on (the route
// starts what a session needs, such as its standalone stream, and ends it when the session
// is gone or closed).
func (p *Pool) OnOpen(f func(key string, s *UpstreamSession)) {
	p.mu.Lock()
	p.onOpen = f
	p.mu.Unlock()
}

// DeclareFor sets the ClientCapabilities each session the pool opens from now on declares
// in initialize: f(key) for key's session (the reverse route keys its sessions by caller and
// capability set, so the upstream learns what each caller can answer). Without it, a
// session declares the Client's own capabilities. Over a StdioTransport the child's one
// session is initialized with the Client's own, whatever f says.
func (p *Pool) DeclareFor(f func(key string) json.RawMessage) {
	p.mu.Lock()
	p.caps = f
	p.mu.Unlock()
}

// connect opens key's session.
func (p *Pool) connect(ctx context.Context, key string) (*UpstreamSession, error) {
	p.mu.Lock()
	caps := p.caps
	p.mu.Unlock()
	if caps == nil {
		return p.c.Connect(ctx)
	}
	return p.c.ConnectAs(ctx, InitializeParams{ProtocolVersion: ProtocolVersion, Capabilities: caps(key), ClientInfo: p.c.info})
}

// Client returns the pool's client.
func (p *Pool) Client() *Client { return p.c }

// Get returns the live session for key, opening one when there is none or the last one
// is gone. Concurrent callers share one initialize.
func (p *Pool) Get(ctx context.Context, key string) (*UpstreamSession, error) {
	for {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return nil, errors.New("legacy pool closed")
		}
		e := p.m[key]
		if e == nil {
			e = &poolEntry{ready: make(chan struct{})}
			p.m[key] = e
			p.mu.Unlock()
			e.s, e.err = p.connect(context.WithoutCancel(ctx), key)
			close(e.ready)
			if e.err != nil {
				p.forget(key, e)
				return nil, e.err
			}
			p.mu.Lock()
			onOpen := p.onOpen
			p.mu.Unlock()
			if onOpen != nil {
				onOpen(key, e.s)
			}
			return e.s, nil
		}
		p.mu.Unlock()
		select {
		case <-e.ready:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if e.err != nil {
			return nil, e.err
		}
		if !e.s.Gone() {
			return e.s, nil
		}
		p.forget(key, e)
	}
}

// Call runs method on key's session. When the session turns out to be gone (the request
// never reached a handler) it retries once on a fresh session. It returns the session the
// call ran in, so callers can bind state (a task) to it.
func (p *Pool) Call(ctx context.Context, key, method string, params json.RawMessage, o CallOptions) (json.RawMessage, *UpstreamSession, error) {
	for attempt := 0; ; attempt++ {
		s, err := p.Get(ctx, key)
		if err != nil {
			return nil, nil, err
		}
		res, err := s.Call(ctx, method, params, o)
		if err != nil && errors.Is(err, ErrSessionGone) && attempt == 0 {
			continue
		}
		return res, s, err
	}
}

func (p *Pool) forget(key string, e *poolEntry) {
	p.mu.Lock()
	if p.m[key] == e {
		delete(p.m, key)
	}
	p.mu.Unlock()
}

// Close ends every pooled session (DELETE, best effort). Safe to call twice.
func (p *Pool) Close(ctx context.Context) {
	p.mu.Lock()
	p.closed = true
	entries := p.m
	p.m = map[string]*poolEntry{}
	p.mu.Unlock()
	for _, e := range entries {
		select {
		case <-e.ready:
			if e.s != nil {
				e.s.Close(ctx)
			}
		default:
		}
	}
}
