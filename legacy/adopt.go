package legacy

import (
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"

	"github.com/taskbridge/taskbridge/internal/jsonrpc"
)

// Durable upstream sessions (the reverse route, docs/durability.md): a 2025-11-25 task
// lives in the upstream session that created it, so a bridge that restarted (or another
// replica) must reach the task through that same session. Adopt rebuilds a session handle
// from the stored Mcp-Session-Id without a new initialize; Respond answers a server
// request whose stream this process never saw (the request arrived before a restart, or on
// another replica), by its stored JSON-RPC id.

// ErrNoReply, returned by a RequestHandler, means the request is answered some other way
// (later, by Respond, possibly from another process): nothing is POSTed for it now.
var ErrNoReply = errors.New("legacy: the request is answered by Respond")

// Adopt returns a session handle for the established upstream session id, negotiated at
// protocol version version, without initializing: requests carry that Mcp-Session-Id and
// MCP-Protocol-Version. A session the upstream no longer knows answers 404 to the first
// request (ErrSessionGone, and Gone turns true). The handle has no initialize result.
func (c *Client) Adopt(id, version string) *UpstreamSession {
	if c.tr != nil {
		return c.tr.adopt(c, version) // a stdio child has one session (transport.go)
	}
	s := &UpstreamSession{c: c, id: id, version: version}
	// Another process used this session before (a bridge that died, another replica) and
	// its requests may still be in flight upstream: a server that routes a response by its
	// JSON-RPC id within the session (the TS SDK does) would hand one of them the answer
	// to ours if our ids started at 1 again. Starting at a random point of 2^52 keeps them
	// apart (and within the integers a JSON number carries exactly).
	s.nextID.Store(rand.Int64N(1 << 52))
	return s
}

// Respond POSTs the answer to the server request id (its raw JSON-RPC id) in this session:
// result, or rpcErr when it is non-nil. The upstream acknowledges with 202; a session it
// no longer knows is ErrSessionGone.
func (s *UpstreamSession) Respond(ctx context.Context, id json.RawMessage, result json.RawMessage, rpcErr *jsonrpc.Error) error {
	var rid jsonrpc.ID
	if err := json.Unmarshal(id, &rid); err != nil {
		return s.upErr("response", 0, err)
	}
	msg := &jsonrpc.Message{JSONRPC: jsonrpc.Version, ID: rid, Result: result}
	if rpcErr != nil {
		msg = jsonrpc.NewErrorResponse(rid, rpcErr)
	} else if len(msg.Result) == 0 {
		msg.Result = json.RawMessage("{}")
	}
	if s.c.tr != nil {
		return s.c.tr.respond(ctx, s, msg)
	}
	resp, err := s.post(ctx, msg)
	if err != nil {
		return err
	}
	drain(resp.Body)
	return s.checkAccepted(resp, "response")
}

// CloseUnless is Close for a pool whose sessions may hold work that outlives this process
// (the reverse route's tasks): a session for which keep returns true is forgotten but not
// ended, so a later process can Adopt it; the others are ended with DELETE. Safe to call
// twice, and after Close.
func (p *Pool) CloseUnless(ctx context.Context, keep func(*UpstreamSession) bool) {
	p.mu.Lock()
	p.closed = true
	entries := p.m
	p.m = map[string]*poolEntry{}
	p.mu.Unlock()
	for _, e := range entries {
		select {
		case <-e.ready:
			if e.s == nil {
				continue
			}
			if keep(e.s) {
				e.s.handler.Wait()
				continue
			}
			e.s.Close(ctx)
		default:
		}
	}
}

// Release lets go of the handle without ending the session upstream (no DELETE), so a
// later process can Adopt it by its id, and waits for running handlers. For a bridge that
// stops while its clients' sessions live on in the store (the legacy pass-through).
func (s *UpstreamSession) Release() {
	s.handler.Wait()
}
