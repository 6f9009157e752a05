package legacy

// A 2025-11-25 server reached as a child process over stdio (2025-11-25 §Transports/stdio):
// the client side of "taskbridge serve --upstream-cmd" for a legacy child. The process
// itself (restarts, the shutdown sequence, wire ids, routing) is internal/child's Proc;
// this file adapts it to UpstreamSession, above the HTTP round trip: an UpstreamSession
// whose Client has a StdioTransport sends through call and notify here instead of POSTing.
//
// A stdio server has exactly one session, so every UpstreamSession opened over one
// transport is a view of that one session (Shared): the child is initialized once per run
// (generation) with the Client's own capabilities and clientInfo, and a view of an earlier
// run is Gone. Server requests that belong to a call (by related task, or the one call in
// flight that can ask) are answered by that call's OnRequest; the rest — stdio's
// equivalent of the standalone GET stream — go to the sessions' listeners (listen.go).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/taskbridge/taskbridge/internal/child"
	"github.com/taskbridge/taskbridge/internal/jsonrpc"
	"github.com/taskbridge/taskbridge/internal/upstream"
)

// StdioTransport carries the messages of a legacy Client to a child process.
//
// Concurrency: safe for concurrent use. initMu serialises initialize; mu guards the cached
// initialize (gen, init, initRaw, version) and listeners; handlers counts the RequestHandler
// goroutines of unsolicited requests.
type StdioTransport struct {
	p    *child.Proc
	owns bool

	initMu  sync.Mutex
	mu      sync.Mutex
	gen     uint64 // the child run the cached initialize belongs to (0: none)
	init    InitializeResult
	initRaw json.RawMessage

	listeners []*stdioListener
	handlers  sync.WaitGroup
}

// stdioListener is one session's Listen: what no call claimed is offered to it.
type stdioListener struct {
	s   *UpstreamSession
	o   ListenOptions
	ctx context.Context // the Listen's: ends its handlers with it
}

// StdioOver returns the transport of a legacy Client over a child process it may share
// with a 2026-07-28 client (a dual-era child). Close leaves the process to its owner.
func StdioOver(p *child.Proc) *StdioTransport {
	t := &StdioTransport{p: p}
	p.SetUnsolicited(t.unsolicited)
	return t
}

// StartStdio starts the child process (internal/child) and returns a transport that owns
// it: Close runs the shutdown sequence.
func StartStdio(o child.Options) (*StdioTransport, error) {
	p, err := child.Start(o)
	if err != nil {
		return nil, err
	}
	t := StdioOver(p)
	t.owns = true
	return t, nil
}

// Name names the upstream in errors ("stdio:PROGRAM").
func (t *StdioTransport) Name() string { return t.p.Name() }

// Generation is the child run now serving (see child.Proc.Generation).
func (t *StdioTransport) Generation() uint64 { return t.p.Generation() }

// Proc is the child process under the transport.
func (t *StdioTransport) Proc() *child.Proc { return t.p }

// Close waits for running request handlers and, when the transport started the child,
// shuts it down. Safe to call more than once.
func (t *StdioTransport) Close(ctx context.Context) error {
	var err error
	if t.owns {
		err = t.p.Close(ctx)
	}
	t.handlers.Wait()
	return err
}

// session returns a view of the child's session, initializing the child first when its
// current run has not been (the first caller, or after a restart).
func (t *StdioTransport) session(ctx context.Context, c *Client) (*UpstreamSession, error) {
	if s := t.cached(c); s != nil {
		return s, nil
	}
	t.initMu.Lock()
	defer t.initMu.Unlock()
	if s := t.cached(c); s != nil {
		return s, nil
	}
	params, err := json.Marshal(InitializeParams{ProtocolVersion: ProtocolVersion, Capabilities: c.caps, ClientInfo: c.info})
	if err != nil {
		return nil, err
	}
	res, gen, err := t.p.Call(ctx, "initialize", params, child.CallOptions{})
	if err != nil {
		return nil, fmt.Errorf("legacy upstream initialize: %w", t.wrap(c, "initialize", err))
	}
	var init InitializeResult
	if err := json.Unmarshal(res, &init); err != nil {
		return nil, &upstream.Error{Legacy: true, URL: c.shown, Method: "initialize", Err: fmt.Errorf("bad initialize result: %w", err)}
	}
	if !supportedVersion(init.ProtocolVersion) {
		return nil, &upstream.Error{Legacy: true, URL: c.shown, Method: "initialize", Err: fmt.Errorf("unsupported protocol version %q", init.ProtocolVersion)}
	}
	if err := t.p.Notify(ctx, "notifications/initialized", nil); err != nil {
		return nil, t.wrap(c, "notifications/initialized", err)
	}
	t.mu.Lock()
	t.gen, t.init, t.initRaw = gen, init, res
	t.mu.Unlock()
	return t.cached(c), nil
}

// cached is a new view of the current run's session, nil when the run is not initialized.
func (t *StdioTransport) cached(c *Client) *UpstreamSession {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.gen == 0 || t.gen != t.p.Generation() {
		return nil
	}
	return &UpstreamSession{c: c, version: t.init.ProtocolVersion, init: t.init, initRaw: t.initRaw, gen: t.gen}
}

// call is UpstreamSession.Call over the child: server requests routed to it are answered
// by o.OnRequest on their own goroutines (ping at once, others -32601 without a handler).
func (t *StdioTransport) call(ctx context.Context, s *UpstreamSession, method string, params json.RawMessage, o CallOptions) (json.RawMessage, error) {
	if s.Gone() {
		return nil, s.upErr(method, 404, ErrSessionGone)
	}
	res, gen, err := t.p.Call(ctx, method, params, child.CallOptions{
		QuietCancel: method == "tasks/result", // abandoning it is not a cancellation of the task
		OnMessage: func(m *jsonrpc.Message) {
			switch {
			case m.IsRequest():
				t.answer(ctx, s, m, o.OnRequest)
			case o.OnNotify != nil:
				o.OnNotify(m)
			}
		},
	})
	if gen != s.gen && errors.Is(err, child.ErrExited) {
		return nil, s.upErr(method, 404, ErrSessionGone)
	}
	if err != nil {
		return nil, t.wrap(s.c, method, err)
	}
	return res, nil
}

// notify is UpstreamSession.Notify over the child.
func (t *StdioTransport) notify(ctx context.Context, s *UpstreamSession, method string, params json.RawMessage) error {
	if s.Gone() {
		return s.upErr(method, 404, ErrSessionGone)
	}
	if err := t.p.Notify(ctx, method, params); err != nil {
		return t.wrap(s.c, method, err)
	}
	return nil
}

// answer runs h for a server request and writes the answer to the child.
func (t *StdioTransport) answer(ctx context.Context, s *UpstreamSession, req *jsonrpc.Message, h RequestHandler) {
	s.handler.Add(1)
	go func() {
		defer s.handler.Done()
		if out := handle(ctx, req, h); out != nil {
			_ = t.p.Reply(context.WithoutCancel(ctx), out)
		}
	}()
}

// respond is UpstreamSession.Respond over the child: the answer to a server request by
// its id, written to the child's stdin.
func (t *StdioTransport) respond(ctx context.Context, s *UpstreamSession, msg *jsonrpc.Message) error {
	if s.Gone() {
		return s.upErr("response", 404, ErrSessionGone)
	}
	if err := t.p.Reply(ctx, msg); err != nil {
		return t.wrap(s.c, "response", err)
	}
	return nil
}

// adopt is Client.Adopt over the child: a view of the child's one session as it runs now
// (a task of an earlier run is gone with it).
func (t *StdioTransport) adopt(c *Client, version string) *UpstreamSession {
	if s := t.cached(c); s != nil {
		return s
	}
	return &UpstreamSession{c: c, version: version, gen: t.Generation()}
}

// handle runs h for req and builds the response message (ping and handler-less requests
// are answered here); nil when h answers later (ErrNoReply: UpstreamSession.Respond).
func handle(ctx context.Context, req *jsonrpc.Message, h RequestHandler) *jsonrpc.Message {
	switch {
	case h != nil:
		res, err := h(ctx, req)
		if errors.Is(err, ErrNoReply) {
			return nil
		}
		if err != nil {
			return jsonrpc.NewErrorResponse(req.ID, err)
		}
		if res == nil {
			res = json.RawMessage("{}")
		}
		return &jsonrpc.Message{JSONRPC: jsonrpc.Version, ID: req.ID, Result: res}
	case req.Method == "ping":
		return &jsonrpc.Message{JSONRPC: jsonrpc.Version, ID: req.ID, Result: json.RawMessage("{}")}
	}
	return jsonrpc.NewErrorResponse(req.ID, jsonrpc.ErrMethodNotFound.Wrapf("%s", req.Method))
}

// wrap turns a child failure into the error a Call returns: the child's JSON-RPC error
// unchanged, ctx errors as they are, the rest an *upstream.Error.
func (t *StdioTransport) wrap(c *Client, method string, err error) error {
	var je *jsonrpc.Error
	if errors.As(err, &je) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return &upstream.Error{Legacy: true, URL: c.shown, Method: method, Err: err}
}

// listen registers a session's listener until ctx ends (listen.go).
func (t *StdioTransport) listen(ctx context.Context, s *UpstreamSession, o ListenOptions) func() {
	l := &stdioListener{s: s, o: o, ctx: ctx}
	t.mu.Lock()
	t.listeners = append(t.listeners, l)
	t.mu.Unlock()
	return func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		for i, x := range t.listeners {
			if x == l {
				t.listeners = append(t.listeners[:i:i], t.listeners[i+1:]...)
				return
			}
		}
	}
}

// unsolicited receives what no call claimed (on the child's reader goroutine: it never
// blocks). Notifications go to every listener of the current run; a request to the first
// listener that claims it, else it is answered -32601.
func (t *StdioTransport) unsolicited(m *jsonrpc.Message) {
	t.mu.Lock()
	ls := make([]*stdioListener, 0, len(t.listeners))
	for _, l := range t.listeners {
		if !l.s.Gone() {
			ls = append(ls, l)
		}
	}
	t.mu.Unlock()
	if !m.IsRequest() {
		for _, l := range ls {
			if l.o.OnNotify != nil {
				l.o.OnNotify(m)
			}
		}
		return
	}
	for _, l := range ls {
		if l.o.OnRequest != nil && (l.o.Claims == nil || l.o.Claims(m)) {
			t.answer(l.ctx, l.s, m, l.o.OnRequest)
			return
		}
	}
	t.handlers.Add(1)
	go func() {
		defer t.handlers.Done()
		_ = t.p.Reply(context.Background(), handle(context.Background(), m, nil))
	}()
}
