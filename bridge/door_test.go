package bridge_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/bridge"
	"github.com/taskbridge/taskbridge/internal/auth"
	"github.com/taskbridge/taskbridge/internal/fixture"
	"github.com/taskbridge/taskbridge/legacy"
)

const initBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`

// TestDoorOrigin: one Origin rule for every face and transport (DNS-rebinding defence):
// no Origin, loopback origins and the configured ones pass; any other is 403 on POST
// (both eras), GET, DELETE and the WebSocket upgrade.
func TestDoorOrigin(t *testing.T) {
	for _, tc := range []struct {
		origin  string
		allowed []string
		ok      bool
	}{
		{"", nil, true},
		{"http://localhost", nil, true},
		{"http://localhost:6274", nil, true},
		{"https://127.0.0.1:8443", nil, true},
		{"http://[::1]:3000", nil, true},
		{"http://evil.example", nil, false},
		{"http://localhost.evil.example", nil, false},
		{"http://localhost@evil.example", nil, false},
		{"null", nil, false},
		{"file://localhost", nil, false},
		{"https://app.example", []string{"https://app.example"}, true},
		{"https://app.example:444", []string{"https://app.example"}, false},
		{"https://anything.example", []string{"*"}, true},
	} {
		t.Run("origin="+tc.origin, func(t *testing.T) {
			e := newEnv(t, func(c *envConfig, _ *fixture.Options) { c.Door.AllowedOrigins = tc.allowed })
			st, body := doorRequest(t, http.MethodPost, e.url, map[string]string{"Origin": tc.origin}, initBody)
			if tc.ok {
				if st != http.StatusOK {
					t.Errorf("allowed origin: %d %s", st, body)
				}
				return
			}
			modern := map[string]string{"Origin": tc.origin, "MCP-Protocol-Version": "2026-07-28"}
			for _, a := range []struct {
				method string
				hdr    map[string]string
			}{{http.MethodPost, map[string]string{"Origin": tc.origin}}, {http.MethodPost, modern},
				{http.MethodGet, map[string]string{"Origin": tc.origin, "Mcp-Session-Id": "x"}},
				{http.MethodDelete, map[string]string{"Origin": tc.origin, "Mcp-Session-Id": "x"}}} {
				st, body := doorRequest(t, a.method, e.url, a.hdr, initBody)
				if st != http.StatusForbidden || gjson.Get(body, "error.code").Int() != -32600 {
					t.Errorf("%s %v: %d %s, want 403 -32600", a.method, a.hdr, st, body)
				}
			}
			d := websocket.Dialer{Subprotocols: []string{legacy.Subprotocol}}
			_, resp, err := d.Dial("ws"+strings.TrimPrefix(e.url, "http"), http.Header{"Origin": {tc.origin}})
			if err == nil || resp == nil || resp.StatusCode != http.StatusForbidden {
				t.Errorf("WebSocket from %s: err %v resp %v, want 403", tc.origin, err, resp)
			}
		})
	}
}

// doorRequest sends one request and returns the status and the body.
func doorRequest(t *testing.T, method, url string, hdr map[string]string, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// trickle opens a raw connection, sends a POST's headers, and then the body one byte per
// interval (if any). It returns the connection and a reader for the answer.
func trickle(t *testing.T, url string, hdr map[string]string, length int, every time.Duration) (net.Conn, *bufio.Reader, *atomic.Int64) {
	t.Helper()
	host := strings.TrimSuffix(strings.TrimPrefix(url, "http://"), "/mcp")
	conn, err := net.Dial("tcp", host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	var b strings.Builder
	fmt.Fprintf(&b, "POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: %d\r\n", host, length)
	for k, v := range hdr {
		fmt.Fprintf(&b, "%s: %s\r\n", k, v)
	}
	b.WriteString("\r\n")
	if _, err := io.WriteString(conn, b.String()); err != nil {
		t.Fatal(err)
	}
	sent := &atomic.Int64{}
	if every > 0 {
		go func() {
			for range length {
				if _, err := conn.Write([]byte(" ")); err != nil {
					return
				}
				sent.Add(1)
				time.Sleep(every)
			}
		}()
	}
	return conn, bufio.NewReader(conn), sent
}

// TestDoorTrickledBodyIsCutOff: a body that arrives one byte every 50 ms is cut off once
// body_read_timeout (300 ms) has passed: 408, the connection closed, long before the
// 2000-byte body could have arrived (100 s).
func TestDoorTrickledBodyIsCutOff(t *testing.T) {
	e := newEnv(t, func(c *envConfig, _ *fixture.Options) { c.Door.BodyReadTimeout = 300 * time.Millisecond })
	conn, br, sent := trickle(t, e.url, nil, 2000, 50*time.Millisecond)
	conn.SetReadDeadline(time.Now().Add(30 * time.Second)) // a guard against a hang, not a measurement
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no answer to a trickled body: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusRequestTimeout || gjson.GetBytes(b, "error.code").Int() != -32600 {
		t.Fatalf("trickled body: %d %s, want 408", resp.StatusCode, b)
	}
	if n := sent.Load(); n >= 2000 {
		t.Fatalf("the whole body was read (%d bytes) before the cut", n)
	}
	if _, err := br.ReadByte(); err != io.EOF {
		t.Errorf("after the cut the connection should be closed (EOF), got %v", err)
	}
}

// TestDoorAuthenticatesBeforeTheBody: with authentication on, a POST announcing a 10 KiB
// body but sending none is answered 401 at once: the door decided from the headers alone.
// A modern POST (the era decided from headers) is refused the same way, and the connection
// is closed rather than left waiting for the body.
func TestDoorAuthenticatesBeforeTheBody(t *testing.T) {
	e := newEnv(t, withAuth(t))
	for _, hdr := range []map[string]string{nil, {"MCP-Protocol-Version": "2026-07-28"}, {"Authorization": "Bearer wrong-key-0000000000"}} {
		conn, br, _ := trickle(t, e.url, hdr, 10<<10, 0)
		conn.SetReadDeadline(time.Now().Add(20 * time.Second))
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("%v: no answer while the body is withheld: %v", hdr, err)
		}
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") == "" ||
			gjson.GetBytes(b, "error.message").Str != "Unauthorized" {
			t.Errorf("%v: %d %s, want 401 with a challenge", hdr, resp.StatusCode, b)
		}
		// The withheld body does not hold the connection either: it is closed after the 401.
		if _, err := br.ReadByte(); err != io.EOF {
			t.Errorf("%v: after the 401 the connection should be closed (EOF), got %v", hdr, err)
		}
	}
}

// bodyPeeker is an authenticator that tries to read the body and records what it got.
type bodyPeeker struct {
	auth.Authenticator
	got atomic.Int64
}

func (p *bodyPeeker) Authenticate(r *http.Request) (auth.Principal, error) {
	b, _ := io.ReadAll(r.Body)
	p.got.Add(int64(len(b)))
	return p.Authenticator.Authenticate(r)
}

// TestDoorAuthenticatorSeesNoBody: an authenticator that reads the body gets nothing, and
// the request still reaches the face with its whole body.
func TestDoorAuthenticatorSeesNoBody(t *testing.T) {
	peek := &bodyPeeker{Authenticator: authOf(t)}
	e := newEnv(t, func(c *envConfig, _ *fixture.Options) { c.Door.Auth = peek })
	alice := e.keyed(aliceKey)
	if r := call(t, alice, "tools/call", map[string]any{"name": "greet", "arguments": map[string]any{"name": "x"}}); r.Get("content.0.text").Str == "" {
		t.Fatalf("tools/call through the door: %s", r.Raw)
	}
	if n := peek.got.Load(); n != 0 {
		t.Fatalf("the authenticator read %d bytes of bodies", n)
	}
}

// TestDoorLongAnswerOutlivesBodyDeadline: the body deadline is cleared once the body is
// read, so a tasks/result answered over SSE long after it (here 1.5 s against 200 ms)
// arrives.
func TestDoorLongAnswerOutlivesBodyDeadline(t *testing.T) {
	e := newEnv(t, func(c *envConfig, _ *fixture.Options) { c.Door.BodyReadTimeout = 200 * time.Millisecond })
	c := e.client()
	taskID := createTask(t, c, "slow_compute", map[string]any{"seconds": 15, "label": "late"})
	if r := call(t, c, "tasks/result", id(taskID)); !strings.Contains(r.Get("content.0.text").Str, "late") {
		t.Fatalf("tasks/result after the body deadline: %s", r.Raw)
	}
}

// TestDoorRateLimitAnswer: over HTTP a rate-limited request is 429 with Retry-After and
// the JSON-RPC error (id null: its body was never read), data.retryAfterMs included.
func TestDoorRateLimitAnswer(t *testing.T) {
	e := newEnv(t, func(c *envConfig, _ *fixture.Options) { c.Door.RequestRate, c.Door.RequestBurst = 0.01, 1 })
	doorRequest(t, http.MethodPost, e.url, nil, `{"jsonrpc":"2.0","id":1,"method":"ping"}`)
	req, _ := http.NewRequest(http.MethodPost, e.url, strings.NewReader(`{"jsonrpc":"2.0","id":2,"method":"ping"}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	r := gjson.ParseBytes(b)
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" || r.Get("error.code").Int() != -32011 ||
		r.Get("error.data.retryAfterMs").Int() <= 0 || r.Get("error.data.reason").Str != "request_rate" || r.Get("id").Type != gjson.Null {
		t.Fatalf("rate-limited: %d Retry-After %q %s", resp.StatusCode, resp.Header.Get("Retry-After"), b)
	}
}

// TestDoorBodyTooLarge: a Content-Length above max_body is 413 before anything else, and a
// body that turns out larger than announced (chunked) is 413 too.
func TestDoorBodyTooLarge(t *testing.T) {
	e := newEnv(t, func(c *envConfig, _ *fixture.Options) { c.Door.MaxBodyBytes = 1000 })
	big := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"pad":"` + strings.Repeat("x", 2000) + `"}}`
	if st, body := doorRequest(t, http.MethodPost, e.url, nil, big); st != http.StatusRequestEntityTooLarge {
		t.Errorf("large body: %d %s, want 413", st, body)
	}
	req, _ := http.NewRequest(http.MethodPost, e.url, io.MultiReader(strings.NewReader(big)))
	req.ContentLength = -1 // chunked: the size is learnt while reading
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("large chunked body: %d, want 413", resp.StatusCode)
	}
}

// TestDoorRoutesListEveryTransport: the routes the door dispatches to, per transport.
func TestDoorRoutesListEveryTransport(t *testing.T) {
	want := map[bridge.Route][]bridge.Transport{
		bridge.RouteForward:           {bridge.TransportHTTP, bridge.TransportWebSocket, bridge.TransportStdio},
		bridge.RouteModernPassThrough: {bridge.TransportHTTP},
		bridge.RouteReverse:           {bridge.TransportHTTP},
		bridge.RouteLegacyPassThrough: {bridge.TransportHTTP, bridge.TransportWebSocket, bridge.TransportStdio},
	}
	got := map[bridge.Route][]bridge.Transport{}
	for _, d := range bridge.Routes() {
		got[d.Route] = append(got[d.Route], d.Transport)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Routes() = %v, want %v", got, want)
	}
}
