package legacy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/internal/jsonrpc"
)

// fakeUpstream is a hand-written 2025-11-25 server: initialize issues session "s<N>";
// "ask" answers on SSE with a notification, an elicitation/create request, and (once the
// client POSTed the answer) a result echoing it; "echo" answers JSON. dropped sessions
// get 404.
type fakeUpstream struct {
	sessions atomic.Int64
	mu       sync.Mutex
	dropped  map[string]bool
	answers  map[string]chan json.RawMessage // server request id → answer
	seen     []http.Header
}

func (f *fakeUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	m, err := jsonrpc.Decode(b)
	if err != nil {
		http.Error(w, "bad", 400)
		return
	}
	sid := r.Header.Get("Mcp-Session-Id")
	f.mu.Lock()
	f.seen = append(f.seen, r.Header.Clone())
	gone := f.dropped[sid]
	f.mu.Unlock()
	if gone {
		http.Error(w, `{"jsonrpc":"2.0","id":null,"error":{"code":-32001,"message":"Session not found"}}`, 404)
		return
	}
	switch {
	case m.Method == "initialize":
		id := fmt.Sprintf("s%d", f.sessions.Add(1))
		w.Header().Set("Mcp-Session-Id", id)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"fake","version":"1"}}}`, m.ID.Raw())
	case m.IsNotification():
		w.WriteHeader(202)
	case m.IsResponse():
		f.mu.Lock()
		ch := f.answers[m.ID.String()]
		f.mu.Unlock()
		if ch != nil {
			ch <- m.Result
		}
		w.WriteHeader(202)
	case m.Method == "ask":
		ch := make(chan json.RawMessage, 1)
		f.mu.Lock()
		f.answers["srv-1"] = ch
		f.mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, ": keep-alive\n\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progress\":1}}\n\n")
		fmt.Fprint(w, "id: e2\ndata: {\"jsonrpc\":\"2.0\",\"id\":\"srv-1\",\"method\":\"elicitation/create\",\n")
		fmt.Fprint(w, "data: \"params\":{\"message\":\"name?\"}}\n\n")
		w.(http.Flusher).Flush()
		ans := <-ch
		fmt.Fprintf(w, "data: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"got\":%s}}\n\n", m.ID.Raw(), ans)
	default:
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"session":%q}}`, m.ID.Raw(), sid)
	}
}

func newFake(t *testing.T) (*fakeUpstream, *Client) {
	f := &fakeUpstream{dropped: map[string]bool{}, answers: map[string]chan json.RawMessage{}}
	hs := httptest.NewServer(f)
	t.Cleanup(hs.Close)
	return f, NewClient(ClientOptions{URL: hs.URL})
}

func TestClientSessionAndSSE(t *testing.T) {
	f, c := newFake(t)
	ctx := context.Background()
	s, err := c.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if s.ID() != "s1" || s.ProtocolVersion() != "2025-11-25" {
		t.Fatalf("session %q version %q", s.ID(), s.ProtocolVersion())
	}
	var notes atomic.Int32
	res, err := s.Call(ctx, "ask", json.RawMessage(`{}`), CallOptions{
		OnRequest: func(_ context.Context, req *jsonrpc.Message) (json.RawMessage, error) {
			if req.Method != "elicitation/create" || gjson.GetBytes(req.Params, "message").Str != "name?" {
				t.Errorf("server request %s %s", req.Method, req.Params)
			}
			return json.RawMessage(`{"action":"accept","content":{"name":"Ada"}}`), nil
		},
		OnNotify: func(*jsonrpc.Message) { notes.Add(1) },
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := gjson.GetBytes(res, "got.content.name").Str; got != "Ada" {
		t.Errorf("the server did not receive the answer: %s", res)
	}
	if notes.Load() != 1 {
		t.Errorf("notifications seen: %d, want 1", notes.Load())
	}
	f.mu.Lock()
	last := f.seen[len(f.seen)-1]
	f.mu.Unlock()
	if last.Get("Mcp-Session-Id") != "s1" || last.Get("MCP-Protocol-Version") != "2025-11-25" {
		t.Errorf("session headers missing on later requests: %v", last)
	}
}

func TestPoolReinitializesDroppedSession(t *testing.T) {
	f, c := newFake(t)
	p := NewPool(c)
	defer p.Close(context.Background())
	ctx := context.Background()
	res, s1, err := p.Call(ctx, "", "echo", nil, CallOptions{})
	if err != nil || gjson.GetBytes(res, "session").Str != "s1" {
		t.Fatalf("first call: %s %v", res, err)
	}
	f.mu.Lock()
	f.dropped["s1"] = true
	f.mu.Unlock()
	res, s2, err := p.Call(ctx, "", "echo", nil, CallOptions{})
	if err != nil {
		t.Fatalf("call after drop: %v", err)
	}
	if gjson.GetBytes(res, "session").Str != "s2" || s2 == s1 || !s1.Gone() {
		t.Errorf("want a fresh session s2, got %s (old gone=%v)", res, s1.Gone())
	}
	// A task bound to the old session sees ErrSessionGone, not a silent retry elsewhere.
	if _, err := s1.Call(ctx, "tasks/get", json.RawMessage(`{"taskId":"t"}`), CallOptions{}); !errors.Is(err, ErrSessionGone) {
		t.Errorf("call on a dropped session: %v, want ErrSessionGone", err)
	}
}

func TestClientRejectsUnsupportedVersion(t *testing.T) {
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"1999-01-01","capabilities":{},"serverInfo":{"name":"x","version":"1"}}}`)
	}))
	defer hs.Close()
	if _, err := NewClient(ClientOptions{URL: hs.URL}).Connect(context.Background()); err == nil {
		t.Fatal("Connect accepted an unsupported protocol version")
	}
}
