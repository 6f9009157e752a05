package legacy

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/internal/jsonrpc"
)

func wsURL(e *env) string { return "ws" + strings.TrimPrefix(e.ts.URL, "http") + "/mcp" }

func dialWS(t *testing.T, e *env, h http.Header) *websocket.Conn {
	t.Helper()
	d := websocket.Dialer{Subprotocols: []string{Subprotocol}, HandshakeTimeout: 5 * time.Second}
	c, resp, err := d.Dial(wsURL(e), h)
	if err != nil {
		t.Fatalf("dial: %v (resp %v)", err, resp)
	}
	if c.Subprotocol() != Subprotocol {
		t.Errorf("negotiated subprotocol %q, want mcp", c.Subprotocol())
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func wsSend(t *testing.T, c *websocket.Conn, s string) {
	t.Helper()
	if err := c.WriteMessage(websocket.TextMessage, []byte(s)); err != nil {
		t.Fatalf("ws write: %v", err)
	}
}

// wsRecv reads one frame, which must be a text frame holding one JSON-RPC message.
func wsRecv(t *testing.T, c *websocket.Conn) string {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	typ, b, err := c.ReadMessage()
	if err != nil {
		t.Fatalf("ws read: %v", err)
	}
	if typ != websocket.TextMessage {
		t.Fatalf("frame type %d, want text", typ)
	}
	if _, err := jsonrpc.Decode(b); err != nil {
		t.Fatalf("frame is not one JSON-RPC message: %s", b)
	}
	return string(b)
}

func TestWebSocketSessionRequestsAndPush(t *testing.T) {
	e := newEnv(t, nil)
	c := dialWS(t, e, nil)
	wsSend(t, c, initBody)
	if r := wsRecv(t, c); gjson.Get(r, "result.protocolVersion").Str != "2025-11-25" {
		t.Fatalf("initialize: %s", r)
	}
	sessCh := make(chan string, 1)
	e.h.ServeFunc = func(_ context.Context, sess *Session, req *jsonrpc.Message, out Stream) (json.RawMessage, error) {
		sessCh <- sess.ID
		m, _ := jsonrpc.NewRequest(jsonrpc.StringID("ask-1"), "elicitation/create", map[string]any{"message": "ok?"})
		if err := out.Send(m); err != nil {
			return nil, err
		}
		return json.RawMessage(`{"content":[]}`), nil
	}
	wsSend(t, c, `{"jsonrpc":"2.0","id":2,"method":"tasks/result","params":{"taskId":"t"}}`)
	if r := wsRecv(t, c); gjson.Get(r, "method").Str != "elicitation/create" {
		t.Fatalf("want elicitation first: %s", r)
	}
	if r := wsRecv(t, c); gjson.Get(r, "id").Int() != 2 {
		t.Fatalf("want the response: %s", r)
	}
	sessID := <-sessCh
	note, _ := jsonrpc.NewNotification("notifications/tasks/status", map[string]any{"taskId": "t", "status": "working"})
	if !e.srv.Push(sessID, note) {
		t.Fatal("Push to a WebSocket session = false")
	}
	if r := wsRecv(t, c); gjson.Get(r, "method").Str != "notifications/tasks/status" {
		t.Fatalf("pushed: %s", r)
	}
	if s, ok := e.st.session(sessID); !ok || s.Closed {
		t.Fatalf("session not stored open: %+v", s)
	}
	c.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
	deadline := time.Now().Add(5 * time.Second)
	for {
		if s, _ := e.st.session(sessID); s.Closed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("session still open 5s after the WebSocket closed")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestWebSocketHandshakeChecks(t *testing.T) {
	e := newEnv(t, nil)
	// No "mcp" subprotocol: 400.
	_, resp, err := websocket.DefaultDialer.Dial(wsURL(e), nil)
	if err == nil || resp == nil || resp.StatusCode != http.StatusBadRequest {
		t.Errorf("dial without subprotocol: err %v, resp %v; want 400", err, resp)
	}
	// The Origin check is the front door's (bridge/door_test.go), not the face's.
	c := dialWS(t, e, http.Header{"Origin": {"http://localhost:3000"}})
	wsSend(t, c, `{"jsonrpc":"2.0","id":1,"method":"ping"}`)
	if r := wsRecv(t, c); gjson.Get(r, "result").Raw != "{}" {
		t.Fatalf("ping: %s", r)
	}
}

// The server pings at the keep-alive interval; the gorilla client answers with pongs
// automatically, so the connection stays up across several intervals.
func TestWebSocketPingKeepAlive(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.KeepAlive = 50 * time.Millisecond })
	c := dialWS(t, e, nil)
	var pings atomic.Int32
	c.SetPingHandler(func(data string) error {
		pings.Add(1)
		return c.WriteControl(websocket.PongMessage, []byte(data), time.Now().Add(time.Second))
	})
	wsSend(t, c, initBody)
	wsRecv(t, c)
	// Reading drives the ping handler; wait for at least three pings.
	go func() {
		for pings.Load() < 3 {
			time.Sleep(20 * time.Millisecond)
		}
		wsSend(t, c, `{"jsonrpc":"2.0","id":9,"method":"ping"}`)
	}()
	if r := wsRecv(t, c); gjson.Get(r, "id").Int() != 9 {
		t.Fatalf("ping after keep-alives: %s", r)
	}
	if pings.Load() < 3 {
		t.Errorf("pings = %d, want >= 3", pings.Load())
	}
}

// A peer that never answers pings is dropped after two intervals and its session closed.
func TestWebSocketDropsSilentPeer(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.KeepAlive = 50 * time.Millisecond })
	c := dialWS(t, e, nil)
	wsSend(t, c, initBody)
	wsRecv(t, c)
	c.SetPingHandler(func(string) error { return nil }) // swallow pings: no pong
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		if _, _, err := c.ReadMessage(); err != nil {
			break // the server closed the connection
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, _, closed, _ := e.h.snapshot()
		if len(closed) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("silent peer's session was not closed")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
