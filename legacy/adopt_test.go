package legacy

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/internal/jsonrpc"
)

// TestAdoptedSessionRespondsToAnotherStreamsRequest: a server request that arrived on one
// handle's stream and was left unanswered (ErrNoReply) is answered through a second handle
// that only knows the stored session id and the request id, as a restarted bridge does;
// the adopted handle carries the session headers, and a session the upstream dropped is
// ErrSessionGone on it.
func TestAdoptedSessionRespondsToAnotherStreamsRequest(t *testing.T) {
	f, c := newFake(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := c.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	asked := make(chan json.RawMessage, 1)
	done := make(chan json.RawMessage, 1)
	go func() {
		res, err := s.Call(ctx, "ask", json.RawMessage(`{}`), CallOptions{
			OnRequest: func(_ context.Context, req *jsonrpc.Message) (json.RawMessage, error) {
				asked <- json.RawMessage(req.ID.Raw())
				return nil, ErrNoReply
			},
		})
		if err != nil {
			t.Errorf("ask: %v", err)
		}
		done <- res
	}()
	var id json.RawMessage
	select {
	case id = <-asked:
	case <-ctx.Done():
		t.Fatal("the server request never arrived")
	}
	select {
	case res := <-done:
		t.Fatalf("the call ended before anyone answered: %s (ErrNoReply posted something)", res)
	case <-time.After(100 * time.Millisecond):
	}
	adopted := c.Adopt(s.ID(), s.ProtocolVersion())
	if err := adopted.Respond(ctx, id, json.RawMessage(`{"action":"accept","content":{"name":"Grace"}}`), nil); err != nil {
		t.Fatalf("Respond: %v", err)
	}
	if got := gjson.GetBytes(<-done, "got.content.name").Str; got != "Grace" {
		t.Errorf("the server got %q, want the adopted handle's answer", got)
	}
	f.mu.Lock()
	last := f.seen[len(f.seen)-1]
	f.dropped[s.ID()] = true
	f.mu.Unlock()
	if last.Get("Mcp-Session-Id") != s.ID() || last.Get("MCP-Protocol-Version") != "2025-11-25" {
		t.Errorf("adopted handle's headers: %v", last)
	}
	if _, err := adopted.Call(ctx, "echo", nil, CallOptions{}); !errors.Is(err, ErrSessionGone) || !adopted.Gone() {
		t.Errorf("call on an adopted, dropped session: %v (gone %v), want ErrSessionGone", err, adopted.Gone())
	}
}

// TestAdoptedSessionIDsDoNotRepeatTheDeadProcesss: a session's first handle numbers its
// requests 1, 2, …; a handle adopted later (a restarted bridge, another replica) must not
// reuse those ids, since the first process's requests may still be in flight upstream and a
// server that routes a response by its id within the session (the TS SDK does) would give
// one of them the answer meant for the new request.
func TestAdoptedSessionIDsDoNotRepeatTheDeadProcesss(t *testing.T) {
	_, c := newFake(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := c.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := s.Call(ctx, "echo", json.RawMessage(`{}`), CallOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	a, b := c.Adopt(s.ID(), s.ProtocolVersion()), c.Adopt(s.ID(), s.ProtocolVersion())
	for _, h := range []*UpstreamSession{a, b} {
		if _, err := h.Call(ctx, "echo", json.RawMessage(`{}`), CallOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if n := s.nextID.Load(); n != 4 {
		t.Fatalf("the first handle's last request id %d, want 4 (initialize + 3 calls)", n)
	}
	if a.nextID.Load() == b.nextID.Load() {
		t.Errorf("two adopted handles numbered alike (%d)", a.nextID.Load())
	}
	for _, h := range []*UpstreamSession{a, b} {
		if n := h.nextID.Load(); n <= 4 {
			t.Errorf("adopted handle's request id %d: it repeats the first handle's 1…4", n)
		}
	}
}
