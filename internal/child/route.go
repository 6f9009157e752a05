package child

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/internal/jsonrpc"
)

// Routing of what the child writes. A response goes to the call with its wire id. A
// notification or server request goes, in this order of evidence, to:
//
//  1. the call whose wire id is its _meta["io.modelcontextprotocol/subscriptionId"] (a
//     2026-07-28 subscriptions/listen) or, for notifications/cancelled, its requestId;
//  2. the call about its related task (_meta["io.modelcontextprotocol/related-task"].taskId
//     equal to the call's params.taskId; a tasks/result first, since a 2025-11-25 server
//     delivers a task's requests on it);
//  3. the call whose params._meta.progressToken it names (notifications/progress);
//  4. for a server request, the one call in flight that can ask (anything but tasks/*,
//     ping and subscriptions/listen) when there is exactly one;
//
// and otherwise to the unsolicited handler (SetUnsolicited), as a Streamable HTTP server
// would send it on the standalone GET stream.

// noteBuffer bounds the messages waiting for one call's consumer.
const noteBuffer = 256

// CallOptions are the optional parts of one Call.
type CallOptions struct {
	// OnMessage receives the notifications and server requests routed to this call, in
	// order, on the calling goroutine. A request must be answered with Reply (from another
	// goroutine if the answer takes time). Nil: requests are answered -32601.
	OnMessage func(*jsonrpc.Message)
	// QuietCancel: when ctx ends first, do not send notifications/cancelled (abandoning a
	// 2025-11-25 tasks/result is not a cancellation of anything).
	QuietCancel bool
}

// call is one request waiting for its response.
type call struct {
	run      *run
	method   string
	taskID   string                // params.taskId, for related-task routing
	progress string                // params._meta.progressToken (raw JSON), for progress routing
	reply    chan *jsonrpc.Message // buffered 1
	notes    chan *jsonrpc.Message // routed notifications and requests, drained by Call
	gone     chan struct{}         // closed when the child died before the reply
}

// Call sends method with params (kept byte for byte) under a fresh wire id and waits for
// the reply. It returns the result, the generation of the child that answered, and an
// error: the child's JSON-RPC error as *jsonrpc.Error, ErrExited when the child died first,
// ErrClosed, or ctx.Err() (the child is then told with notifications/cancelled, unless
// QuietCancel).
func (p *Proc) Call(ctx context.Context, method string, params json.RawMessage, o CallOptions) (res json.RawMessage, gen uint64, err error) {
	if p.o.OnCall != nil {
		start := time.Now()
		defer func() { p.o.OnCall(method, time.Since(start), err) }()
	}
	return p.call(ctx, method, params, o)
}

func (p *Proc) call(ctx context.Context, method string, params json.RawMessage, o CallOptions) (json.RawMessage, uint64, error) {
	r, err := p.running(ctx)
	if err != nil {
		return nil, 0, err
	}
	id := strconv.FormatInt(p.nextID.Add(1), 10)
	c := &call{run: r, method: method, taskID: gjson.GetBytes(params, "taskId").Str,
		progress: gjson.GetBytes(params, "_meta.progressToken").Raw,
		reply:    make(chan *jsonrpc.Message, 1), notes: make(chan *jsonrpc.Message, noteBuffer), gone: make(chan struct{})}
	p.mu.Lock()
	if p.cur != r {
		p.mu.Unlock()
		return nil, r.gen, ErrExited
	}
	p.pending[id] = c
	p.mu.Unlock()
	if err := r.write(Frame(id, method, params)); err != nil {
		p.forget(id, c)
		return nil, r.gen, fmt.Errorf("%w: %v", ErrExited, err)
	}
	for {
		select {
		case m := <-c.reply:
			p.drain(c, o)
			if m.Error != nil {
				return nil, r.gen, m.Error
			}
			return m.Result, r.gen, nil
		case n := <-c.notes:
			p.deliver(n, o)
		case <-c.gone:
			return nil, r.gen, ErrExited
		case <-ctx.Done():
			p.forget(id, c)
			if !o.QuietCancel {
				_ = r.write(Frame("", "notifications/cancelled", []byte(`{"requestId":`+id+`,"reason":"request abandoned by taskbridge"}`)))
			}
			return nil, r.gen, ctx.Err()
		}
	}
}

func (p *Proc) forget(id string, c *call) {
	p.mu.Lock()
	if p.pending[id] == c {
		delete(p.pending, id)
	}
	p.mu.Unlock()
}

// deliver hands one routed message to the call's consumer.
func (p *Proc) deliver(m *jsonrpc.Message, o CallOptions) {
	switch {
	case o.OnMessage != nil:
		o.OnMessage(m)
	case m.IsRequest():
		p.refuse(m)
	}
}

// drain delivers messages that arrived before the response.
func (p *Proc) drain(c *call, o CallOptions) {
	for {
		select {
		case n := <-c.notes:
			p.deliver(n, o)
		default:
			return
		}
	}
}

// refuse answers a server request nobody takes.
func (p *Proc) refuse(m *jsonrpc.Message) {
	_ = p.Reply(context.Background(), jsonrpc.NewErrorResponse(m.ID, jsonrpc.ErrMethodNotFound.Wrapf("%s", m.Method)))
}

// dispatch routes one message from the child.
func (p *Proc) dispatch(r *run, line []byte) {
	m, err := jsonrpc.Decode(line)
	if err != nil {
		p.log.Warn().Int("bytes", len(line)).Msg("upstream child wrote a line that is not JSON-RPC; skipped")
		return
	}
	if m.IsResponse() {
		p.mu.Lock()
		c := p.pending[m.ID.Raw()]
		if c != nil {
			delete(p.pending, m.ID.Raw())
		}
		p.mu.Unlock()
		if c != nil {
			c.reply <- m
		}
		return
	}
	if c := p.owner(m); c != nil {
		select {
		case c.notes <- m:
		default:
			p.log.Warn().Str("method", m.Method).Msg("upstream child message dropped: its consumer is too slow")
			if m.IsRequest() {
				_ = r.write(mustEncode(jsonrpc.NewErrorResponse(m.ID, jsonrpc.NewError(jsonrpc.CodeInternalError, "client busy"))))
			}
		}
		return
	}
	if h := p.unsolicited.Load(); h != nil && *h != nil {
		(*h)(m)
		return
	}
	if m.IsRequest() {
		_ = r.write(mustEncode(jsonrpc.NewErrorResponse(m.ID, jsonrpc.ErrMethodNotFound.Wrapf("%s", m.Method))))
	}
}

// owner finds the call a notification or server request belongs to (see the top of the
// file); nil: unsolicited.
func (p *Proc) owner(m *jsonrpc.Message) *call {
	meta := gjson.GetBytes(m.Params, "_meta")
	p.mu.Lock()
	defer p.mu.Unlock()
	if sub := meta.Get(`io\.modelcontextprotocol/subscriptionId`); sub.Exists() {
		if c := p.pending[sub.Raw]; c != nil {
			return c
		}
		return p.pending[sub.Str] // a numeric id echoed as a string
	}
	if m.Method == "notifications/cancelled" {
		return p.pending[gjson.GetBytes(m.Params, "requestId").Raw]
	}
	if task := meta.Get(`io\.modelcontextprotocol/related-task.taskId`).Str; task != "" {
		var found *call
		for _, c := range p.pending {
			if c.taskID == task && (found == nil || c.method == "tasks/result") {
				found = c
			}
		}
		return found
	}
	if tok := gjson.GetBytes(m.Params, "progressToken"); m.Method == "notifications/progress" && tok.Exists() {
		for _, c := range p.pending {
			if c.progress == tok.Raw {
				return c
			}
		}
		return nil
	}
	if !m.IsRequest() {
		return nil
	}
	var only *call
	for _, c := range p.pending {
		if canAsk(c.method) {
			if only != nil {
				return nil // two calls could have asked: the child did not say which
			}
			only = c
		}
	}
	return only
}

// canAsk reports whether a server may send requests while handling method.
func canAsk(method string) bool {
	switch method {
	case "tasks/get", "tasks/list", "tasks/cancel", "tasks/result", "tasks/update", "ping",
		"subscriptions/listen", "initialize", "server/discover":
		return false
	}
	return true
}

func mustEncode(m *jsonrpc.Message) []byte {
	b, err := jsonrpc.Encode(m)
	if err != nil {
		return []byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"Internal error"}}`)
	}
	return b
}
