package reverse_test

import (
	"context"
	"encoding/json"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/internal/legacyclient"
	"github.com/taskbridge/taskbridge/sep2663"
)

// logCall is what one raw 2026-07-28 tools/call of log_levels got: the levels of the
// notifications/message on its reply, in order, and the tool's text ("sent: …", the levels
// the upstream session's logging/setLevel let through).
type logCall struct {
	levels []string
	text   string
}

// callLogLevels calls the fixture's log_levels tool with _meta logLevel level ("" for none).
// sessionWide has the upstream also send a log message related to no request, on its GET
// stream, before the call's own.
func callLogLevels(ctx context.Context, t *testing.T, url, id, level string, delayMs int, sessionWide bool) logCall {
	t.Helper()
	meta := `"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}`
	if level != "" {
		meta += `,"io.modelcontextprotocol/logLevel":"` + level + `"`
	}
	args, _ := json.Marshal(map[string]any{"delayMs": delayMs, "sessionWide": sessionWide})
	resp := modernPost(ctx, t, url, "tools/call", "log_levels",
		`{"jsonrpc":"2.0","id":`+id+`,"method":"tools/call","params":{"_meta":{`+meta+`},"name":"log_levels","arguments":`+string(args)+`}}`)
	defer resp.Body.Close()
	var out logCall
	handle := func(data []byte) bool {
		m := gjson.ParseBytes(data)
		switch {
		case m.Get("method").Str == "notifications/message":
			out.levels = append(out.levels, m.Get("params.level").Str)
			if m.Get("params.data").Str == "a session-wide message" {
				t.Errorf("request %s got the upstream's GET-stream log message, which belongs to no request", id)
			} else if m.Get("params.logger").Str != "fixture" || m.Get("params.data").Str != "a "+m.Get("params.level").Str+" message" {
				t.Errorf("log message changed on the way: %s", data)
			}
		case m.Get("id").Exists():
			out.text = m.Get("result.content.0.text").Str
			if out.text == "" {
				t.Errorf("call %s: %s", id, data)
			}
			return false
		}
		return true
	}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		_ = legacyclient.ReadEvents(resp.Body, handle)
	} else {
		b, _ := io.ReadAll(resp.Body)
		handle(b)
	}
	return out
}

// TestReverseLogLevelPerRequest (issue 16 item 8, reverse route): discover advertises
// logging; a request's _meta logLevel sets the upstream session's logging/setLevel (the
// TS SDK v1 server then sends only that level and above) and the request's own SSE reply
// carries those notifications/message, bytes unchanged; a request without logLevel gets none.
func TestReverseLogLevelPerRequest(t *testing.T) {
	_, url := newReverse(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	d, err := sep2663.NewClient(sep2663.ClientOptions{URL: url}).Discover(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d.Capabilities.Logging == nil {
		t.Errorf("discover does not advertise logging, which the route delivers")
	}
	for _, c := range []struct {
		level, levels, sent string
	}{
		{"warning", "warning,error", "sent: warning,error"},
		{"", "", ""}, // the session stays at warning; the bridge sends the request nothing
		{"debug", "debug,info,warning,error", "sent: debug,info,warning,error"},
		{"error", "error", "sent: error"},
	} {
		got := callLogLevels(ctx, t, url, `"l-`+c.level+`"`, c.level, 0, false)
		if strings.Join(got.levels, ",") != c.levels {
			t.Errorf("logLevel %q: got messages %v, want %q", c.level, got.levels, c.levels)
		}
		if c.sent != "" && got.text != c.sent {
			t.Errorf("logLevel %q: upstream %q, want %q (the session's logging/setLevel)", c.level, got.text, c.sent)
		}
	}
	// An unknown level is refused.
	resp := modernPost(ctx, t, url, "tools/call", "log_levels",
		`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/logLevel":"loud"},"name":"log_levels","arguments":{}}}`)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if gjson.GetBytes(b, "error.code").Int() != -32602 {
		t.Errorf("logLevel loud: %s, want -32602", b)
	}
}

// TestReverseLogLevelsConcurrent: three requests in flight at once on one pooled upstream
// session, at debug, at error and without logLevel: the session is set to the most verbose
// (debug: the server sends all four levels to each) and each reply gets only its own level
// and above; the one without logLevel gets none. The session-wide message each call makes
// the upstream send on its GET stream reaches none of them.
func TestReverseLogLevelsConcurrent(t *testing.T) {
	_, url := newReverse(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	levels := []string{"debug", "error", ""}
	want := []string{"debug,info,warning,error", "error", ""}
	got := make([]logCall, len(levels))
	var wg sync.WaitGroup
	for i, lvl := range levels {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i] = callLogLevels(ctx, t, url, `"c-`+lvl+`"`, lvl, 1500, true)
		}()
	}
	wg.Wait()
	for i, lvl := range levels {
		if strings.Join(got[i].levels, ",") != want[i] {
			t.Errorf("logLevel %q: got %v, want %q", lvl, got[i].levels, want[i])
		}
		if got[i].text != "sent: debug,info,warning,error" {
			t.Errorf("logLevel %q: upstream %q, want every level (the session at the most verbose request's level)", lvl, got[i].text)
		}
	}
}
