package legacy

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/internal/defaults"
	"github.com/taskbridge/taskbridge/internal/jsonrpc"
)

func TestPostRejections(t *testing.T) {
	e := newEnv(t, nil)
	sid := e.initSession()
	closed := e.initSession()
	if err := e.st.CloseSession(context.Background(), closed); err != nil {
		t.Fatal(err)
	}
	call := `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`
	for _, tc := range []struct {
		name    string
		session string
		body    string
		hdr     []string
		status  int
		code    int64
		msg     string
	}{
		{"batch", sid, `[` + call + `]`, nil, 400, -32600, "batch"},
		{"bad json", sid, `{"jsonrpc":"2.0","id":2,`, nil, 400, -32700, "Parse error"},
		{"not an object", sid, `"hello"`, nil, 400, -32700, ""},
		{"bad envelope", sid, `{"jsonrpc":"1.0","id":2,"method":"x"}`, nil, 400, -32600, ""},
		{"empty body", sid, ``, []string{"Content-Type", "application/json"}, 400, -32700, ""},
		{"text/plain", sid, call, []string{"Content-Type", "text/plain"}, 415, -32600, "application/json"},
		{"no content type", sid, call, []string{"Content-Type", ""}, 415, -32600, ""},
		{"no session", "", call, nil, 400, -32600, "Mcp-Session-Id header is required"},
		{"no session notification", "", `{"jsonrpc":"2.0","method":"notifications/initialized"}`, nil, 400, -32600, "Mcp-Session-Id"},
		{"unknown session", "nope", call, nil, 404, -32001, "Session not found"},
		{"malformed session id", "a b", call, nil, 404, -32001, "Session not found"},
		{"closed session", closed, call, nil, 404, -32001, "Session not found"},
		// Issue 16 item 10: a request method without an id is no notification; refused, never
		// handed to the route (which would forward it upstream past records and gates).
		{"id-less tools/call", sid, `{"jsonrpc":"2.0","method":"tools/call","params":{"name":"x"}}`, nil, 400, -32600, `"tools/call" needs an id`},
		{"id-less tasks/cancel", sid, `{"jsonrpc":"2.0","method":"tasks/cancel","params":{"taskId":"t"}}`, nil, 400, -32600, `"tasks/cancel" needs an id`},
		{"unsupported version", sid, call, []string{"MCP-Protocol-Version", "2026-07-28"}, 400, -32600, "2025-11-25, 2025-06-18, 2025-03-26, 2024-11-05"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hdr := tc.hdr
			if tc.session == "" {
				hdr = append(hdr, "Mcp-Session-Id", "")
			}
			req := e.request(context.Background(), http.MethodPost, tc.session, tc.body)
			if tc.body == "" {
				req.Header.Set("Content-Type", "application/json")
			}
			for i := 0; i+1 < len(hdr); i += 2 {
				if hdr[i+1] == "" {
					req.Header.Del(hdr[i])
				} else {
					req.Header.Set(hdr[i], hdr[i+1])
				}
			}
			resp := e.do(req)
			body := readBody(t, resp)
			wantRPCError(t, resp, body, tc.status, tc.code)
			if msg := gjson.Get(body, "error.message").Str; !strings.Contains(msg, tc.msg) {
				t.Errorf("message %q does not mention %q", msg, tc.msg)
			}
		})
	}
	if notified, _, _, served := e.h.snapshot(); len(served) != 0 || len(notified) != 0 {
		t.Errorf("handler called for rejected requests: served %v, notified %v", served, notified)
	}
}

func TestProtocolVersionHeader(t *testing.T) {
	e := newEnv(t, nil)
	sid := e.initSession()
	call := `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`
	for _, v := range []string{"", "2025-03-26", "2024-11-05", "2025-06-18", "2025-11-25"} {
		resp, body := e.post(sid, call, "MCP-Protocol-Version", v)
		if resp.StatusCode != http.StatusOK {
			t.Errorf("version %q: %d %s", v, resp.StatusCode, body)
		}
	}
}

func TestStoreFailureIs500(t *testing.T) {
	e := newEnv(t, nil)
	sid := e.initSession()
	e.st.mu.Lock()
	e.st.getErr = errors.New("disk on fire")
	e.st.mu.Unlock()
	resp, body := e.post(sid, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	wantRPCError(t, resp, body, http.StatusInternalServerError, -32603)
	if strings.Contains(body, "disk") {
		t.Errorf("store error leaked: %s", body)
	}
}

func TestNotificationsAndResponsesAre202(t *testing.T) {
	e := newEnv(t, nil)
	sid := e.initSession()
	for _, body := range []string{
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2}}`,
		`{"jsonrpc":"2.0","id":0,"result":{"action":"accept","content":{"confirm":true}}}`,
		`{"jsonrpc":"2.0","id":"br-7","error":{"code":-1,"message":"user declined"}}`,
	} {
		resp, got := e.post(sid, body)
		if resp.StatusCode != http.StatusAccepted || got != "" {
			t.Errorf("%s: %d %q, want 202 and empty body", body, resp.StatusCode, got)
		}
	}
	notified, responded, _, served := e.h.snapshot()
	if strings.Join(notified, ",") != "notifications/initialized,notifications/cancelled" {
		t.Errorf("notified %v", notified)
	}
	if strings.Join(responded, ",") != `0,"br-7"` {
		t.Errorf("responded %v", responded)
	}
	if len(served) != 0 {
		t.Errorf("served %v", served)
	}
}

func TestPingAnsweredLocally(t *testing.T) {
	e := newEnv(t, nil)
	sid := e.initSession()
	resp, body := e.post(sid, `{"jsonrpc":"2.0","id":"p1","method":"ping"}`)
	if resp.StatusCode != http.StatusOK || body != `{"jsonrpc":"2.0","id":"p1","result":{}}` {
		t.Errorf("%d %s", resp.StatusCode, body)
	}
	if _, _, _, served := e.h.snapshot(); len(served) != 0 {
		t.Errorf("ping reached Serve: %v", served)
	}
}

func TestServeJSONReply(t *testing.T) {
	e := newEnv(t, nil)
	sid := e.initSession()
	e.h.ServeFunc = func(_ context.Context, sess *Session, req *jsonrpc.Message, _ Stream) (json.RawMessage, error) {
		if sess.ID != sid || req.Method != "tools/call" {
			t.Errorf("Serve(%s, %s)", sess.ID, req.Method)
		}
		// Bytes pass through: no HTML escaping, no reordering.
		return json.RawMessage(`{"content":[{"type":"text","text":"<b>&</b>"}],"isError":false}`), nil
	}
	resp, body := e.post(sid, `{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"x"}}`)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("%d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	want := `{"jsonrpc":"2.0","id":42,"result":{"content":[{"type":"text","text":"<b>&</b>"}],"isError":false}}`
	if body != want {
		t.Errorf("body\n got %s\nwant %s", body, want)
	}
}

func TestServeErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		res  json.RawMessage
		want string
	}{
		{"coded", jsonrpc.NewError(-32602, "task not found"), nil,
			`{"jsonrpc":"2.0","id":3,"error":{"code":-32602,"message":"task not found"}}`},
		{"wrapped coded", errWrap{jsonrpc.ErrMethodNotFound}, nil,
			`{"jsonrpc":"2.0","id":3,"error":{"code":-32601,"message":"Method not found"}}`},
		{"plain", errors.New("secret internals"), nil,
			`{"jsonrpc":"2.0","id":3,"error":{"code":-32603,"message":"Internal error"}}`},
		{"nil result", nil, nil, `{"jsonrpc":"2.0","id":3,"result":{}}`},
		{"invalid result", nil, json.RawMessage(`{"broken"`),
			`{"jsonrpc":"2.0","id":3,"error":{"code":-32603,"message":"Internal error"}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, nil)
			sid := e.initSession()
			e.h.ServeFunc = func(context.Context, *Session, *jsonrpc.Message, Stream) (json.RawMessage, error) {
				return tc.res, tc.err
			}
			resp, body := e.post(sid, `{"jsonrpc":"2.0","id":3,"method":"tasks/get","params":{"taskId":"t"}}`)
			if resp.StatusCode != http.StatusOK || body != tc.want {
				t.Errorf("%d %s, want 200 %s", resp.StatusCode, body, tc.want)
			}
		})
	}
}

type errWrap struct{ err error }

func (e errWrap) Error() string { return "wrapped: " + e.err.Error() }
func (e errWrap) Unwrap() error { return e.err }

func TestOversizedBody(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.MaxBodyBytes = 256 })
	sid := e.initSession()
	big := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"pad":"` + strings.Repeat("x", 300) + `"}}`
	resp, body := e.post(sid, big)
	wantRPCError(t, resp, body, http.StatusRequestEntityTooLarge, -32600)

	// Without Content-Length (chunked), the limit holds while reading.
	req := e.request(context.Background(), http.MethodPost, sid, "")
	req.Body = readCloser{strings.NewReader(big)}
	req.ContentLength = -1
	req.Header.Set("Content-Type", "application/json")
	resp = e.do(req)
	wantRPCError(t, resp, readBody(t, resp), http.StatusRequestEntityTooLarge, -32600)
	if _, _, _, served := e.h.snapshot(); len(served) != 0 {
		t.Errorf("served %v", served)
	}
	// Just under the limit is fine.
	ok := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"pad":"` + strings.Repeat("x", 180) + `"}}`
	if resp, body := e.post(sid, ok); resp.StatusCode != http.StatusOK {
		t.Errorf("%d bytes: %d %s", len(ok), resp.StatusCode, body)
	}
}

func TestDefaultMaxBody(t *testing.T) {
	e := newEnv(t, nil)
	sid := e.initSession()
	big := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"pad":"` + strings.Repeat("x", int(defaults.Defaults.MaxBodyBytes)) + `"}}`
	resp, body := e.post(sid, big)
	wantRPCError(t, resp, body, http.StatusRequestEntityTooLarge, -32600)
}

func TestMethodNotAllowed(t *testing.T) {
	e := newEnv(t, nil)
	for _, m := range []string{http.MethodPut, http.MethodPatch, http.MethodOptions, http.MethodHead} {
		req := e.request(context.Background(), m, "", "")
		resp := e.do(req)
		body := readBody(t, resp)
		if resp.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("%s: %d", m, resp.StatusCode)
		}
		if got := resp.Header.Get("Allow"); got != "GET, POST, DELETE" {
			t.Errorf("%s: Allow %q", m, got)
		}
		if m != http.MethodHead {
			wantRPCError(t, resp, body, http.StatusMethodNotAllowed, -32600)
		}
	}
}

func TestDelete(t *testing.T) {
	e := newEnv(t, nil)
	sid := e.initSession()
	other := e.initSession()
	resp := e.do(e.request(context.Background(), http.MethodDelete, sid, ""))
	if body := readBody(t, resp); resp.StatusCode != http.StatusOK {
		t.Fatalf("DELETE: %d %s", resp.StatusCode, body)
	}
	if sess, _ := e.st.session(sid); !sess.Closed {
		t.Error("session not closed in the store")
	}
	if _, _, closed, _ := e.h.snapshot(); len(closed) != 1 || closed[0] != sid {
		t.Errorf("Closed calls %v", closed)
	}
	resp2, body := e.post(sid, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	wantRPCError(t, resp2, body, http.StatusNotFound, -32001)
	resp = e.do(e.request(context.Background(), http.MethodDelete, sid, ""))
	wantRPCError(t, resp, readBody(t, resp), http.StatusNotFound, -32001)
	resp = e.do(e.request(context.Background(), http.MethodDelete, "", ""))
	wantRPCError(t, resp, readBody(t, resp), http.StatusBadRequest, -32600)
	// Other sessions are untouched.
	if resp, body := e.post(other, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`); resp.StatusCode != http.StatusOK {
		t.Errorf("other session: %d %s", resp.StatusCode, body)
	}
}
