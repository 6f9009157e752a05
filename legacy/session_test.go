package legacy

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/internal/jsonrpc"
)

func TestNewSessionIDIsRandomVisibleASCII(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		id := newSessionID()
		if len(id) < 26 { // 26 base32 characters = 130 bits
			t.Fatalf("id %q shorter than 128 bits of base32", id)
		}
		if !validSessionID(id) {
			t.Fatalf("id %q is not visible ASCII", id)
		}
		if seen[id] {
			t.Fatalf("duplicate id %q", id)
		}
		seen[id] = true
	}
}

func TestValidSessionID(t *testing.T) {
	for _, tc := range []struct {
		id   string
		want bool
	}{
		{"ABC123", true},
		{"!~", true},
		{"", false},
		{"has space", false},
		{"tab\t", false},
		{"é", false},
		{strings.Repeat("a", maxSessionIDLen), true},
		{strings.Repeat("a", maxSessionIDLen+1), false},
	} {
		if got := validSessionID(tc.id); got != tc.want {
			t.Errorf("validSessionID(%q) = %v, want %v", tc.id, got, tc.want)
		}
	}
}

func TestInitializeStoresSessionBeforeReplying(t *testing.T) {
	e := newEnv(t, nil)
	var minted string
	e.h.InitializeFunc = func(_ context.Context, sess *Session, params json.RawMessage) (json.RawMessage, error) {
		if _, ok := e.st.session(sess.ID); ok {
			t.Errorf("session stored before Initialize returned")
		}
		if gjson.GetBytes(params, "clientInfo.name").Str != "curl" {
			t.Errorf("params not passed raw: %s", params)
		}
		minted = sess.ID
		return json.RawMessage(`{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"b","version":"1"}}`), nil
	}
	resp, body := e.post("", initBody, "MCP-Protocol-Version", "")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q", ct)
	}
	id := resp.Header.Get("Mcp-Session-Id")
	if id == "" || id != minted {
		t.Fatalf("Mcp-Session-Id = %q, minted %q", id, minted)
	}
	want := `{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"b","version":"1"}}}`
	if body != want {
		t.Errorf("body\n got %s\nwant %s", body, want)
	}
	sess, ok := e.st.session(id)
	if !ok {
		t.Fatal("session not stored")
	}
	if sess.ProtocolVersion != "2025-11-25" || string(sess.ClientInfo) != `{"name":"curl","version":"8"}` ||
		string(sess.ClientCapabilities) != `{"elicitation":{"form":{}}}` {
		t.Errorf("stored session = %+v", sess)
	}
	if !sess.CreatedAt.Equal(e.clock.Now()) || !sess.LastSeenAt.Equal(e.clock.Now()) {
		t.Errorf("times = %v, %v", sess.CreatedAt, sess.LastSeenAt)
	}
}

// TestInitializeNegotiatesVersion pins the negotiation: a supported revision is echoed,
// anything else gets the newest. 2025-03-26 and 2024-11-05 are not negotiated (issue 16
// item 9): both require receiving JSON-RPC batches, which this face refuses, so a client
// asking for them is offered 2025-11-25 (docs/translation.md).
func TestInitializeNegotiatesVersion(t *testing.T) {
	for _, tc := range []struct{ version, want string }{
		{`"2025-11-25"`, "2025-11-25"},
		{`"2025-06-18"`, "2025-06-18"},
		{`"2025-03-26"`, "2025-11-25"},
		{`"2024-11-05"`, "2025-11-25"},
		{`"2026-07-28"`, "2025-11-25"},
		{`"1999-01-01"`, "2025-11-25"},
	} {
		t.Run(tc.version, func(t *testing.T) {
			e := newEnv(t, nil)
			resp, body := e.post("", `{"jsonrpc":"2.0","id":"a","method":"initialize","params":{"protocolVersion":`+tc.version+`,"capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d: %s", resp.StatusCode, body)
			}
			sess, _ := e.st.session(resp.Header.Get("Mcp-Session-Id"))
			if sess.ProtocolVersion != tc.want {
				t.Errorf("negotiated %q, want %q", sess.ProtocolVersion, tc.want)
			}
			if got := gjson.Get(body, "id").Raw; got != `"a"` {
				t.Errorf("id = %s", got)
			}
		})
	}
}

// TestInitializeRequiresParams pins issue 16 item 15: an initialize without the params
// InitializeRequestParams requires is -32602 and opens no session.
func TestInitializeRequiresParams(t *testing.T) {
	for _, params := range []string{
		``,
		`,"params":{}`,
		`,"params":{"protocolVersion":1,"capabilities":{},"clientInfo":{"name":"c","version":"1"}}`,
		`,"params":{"protocolVersion":"2025-11-25","clientInfo":{"name":"c","version":"1"}}`,
		`,"params":{"protocolVersion":"2025-11-25","capabilities":{}}`,
		`,"params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c"}}`,
	} {
		t.Run(params, func(t *testing.T) {
			e := newEnv(t, nil)
			resp, body := e.post("", `{"jsonrpc":"2.0","id":3,"method":"initialize"`+params+`}`)
			if got := gjson.Get(body, "error.code").Int(); got != -32602 {
				t.Errorf("error.code = %d, want -32602 (%d %s)", got, resp.StatusCode, body)
			}
			if h := resp.Header.Get("Mcp-Session-Id"); h != "" {
				t.Errorf("session %q opened", h)
			}
		})
	}
}

func TestInitializeHandlerErrorStoresNothing(t *testing.T) {
	e := newEnv(t, nil)
	e.h.InitializeFunc = func(context.Context, *Session, json.RawMessage) (json.RawMessage, error) {
		return nil, jsonrpc.NewError(jsonrpc.CodeUpstream, "upstream unreachable")
	}
	resp, body := e.post("", initBody)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if h := resp.Header.Get("Mcp-Session-Id"); h != "" {
		t.Errorf("Mcp-Session-Id %q on a failed initialize", h)
	}
	if want := `{"jsonrpc":"2.0","id":1,"error":{"code":-32010,"message":"upstream unreachable"}}`; body != want {
		t.Errorf("body %s, want %s", body, want)
	}
	e.st.mu.Lock()
	n := len(e.st.sessions)
	e.st.mu.Unlock()
	if n != 0 {
		t.Errorf("%d sessions stored", n)
	}
}

func TestInitializeRejections(t *testing.T) {
	e := newEnv(t, nil)
	sid := e.initSession()
	resp, body := e.post(sid, initBody)
	wantRPCError(t, resp, body, http.StatusBadRequest, -32600)
	resp, body = e.post("", `{"jsonrpc":"2.0","method":"initialize","params":{}}`)
	wantRPCError(t, resp, body, http.StatusBadRequest, -32600)
}

func TestTouchAtMostOncePerMinute(t *testing.T) {
	e := newEnv(t, nil)
	sid := e.initSession()
	ping := `{"jsonrpc":"2.0","id":2,"method":"ping"}`
	for range 3 {
		e.post(sid, ping)
	}
	if n := e.st.touchCount(); n != 0 {
		t.Fatalf("%d touches right after initialize, want 0", n)
	}
	e.clock.Advance(61 * time.Second)
	for range 5 {
		e.post(sid, ping)
	}
	if n := e.st.touchCount(); n != 1 {
		t.Fatalf("%d touches in the second minute, want 1", n)
	}
	sess, _ := e.st.session(sid)
	if !sess.LastSeenAt.Equal(e.clock.Now()) {
		t.Errorf("LastSeenAt = %v, want %v", sess.LastSeenAt, e.clock.Now())
	}
	e.clock.Advance(30 * time.Second)
	e.post(sid, ping)
	e.clock.Advance(31 * time.Second)
	e.post(sid, ping)
	e.post(sid, ping)
	if n := e.st.touchCount(); n != 2 {
		t.Fatalf("%d touches after two minutes, want 2", n)
	}
}

// A concurrent burst at the minute boundary still touches once: the stored LastSeenAt
// alone would let every request of the burst through.
func TestTouchBurstTouchesOnce(t *testing.T) {
	e := newEnv(t, nil)
	sid := e.initSession()
	e.clock.Advance(2 * time.Minute)
	e.st.mu.Lock()
	e.st.touchDelay = 100 * time.Millisecond
	e.st.mu.Unlock()
	done := make(chan struct{})
	for range 20 {
		go func() {
			defer func() { done <- struct{}{} }()
			e.post(sid, `{"jsonrpc":"2.0","id":2,"method":"ping"}`)
		}()
	}
	for range 20 {
		<-done
	}
	if n := e.st.touchCount(); n != 1 {
		t.Fatalf("%d touches, want 1", n)
	}
}
