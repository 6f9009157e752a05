package main

// Start order (issue 15 acceptance 5): the bridge starts first, its 2025-11-25 upstream
// later (containers start in any order). /healthz answers at once; until the upstream has
// been probed, /readyz is not ready and MCP requests of both eras get the retry error
// (HTTP 503, Retry-After, -32010 reason upstream_not_yet_reachable); once the upstream is
// up, the probe's retries find it and both client eras are served by the right routes
// without a restart.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/internal/testenv"
	"github.com/taskbridge/taskbridge/sep2663"
)

// upstreamDelay is how long after the bridge the upstream starts: 20 s, the scenario of
// issue 15 (several failed probes, the backoff at its 5 s ceiling for a while, then
// recovery without a restart).
const upstreamDelay = 20 * time.Second

func TestUpstreamStartsAfterBridge(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	upURL := fmt.Sprintf("http://127.0.0.1:%d/mcp", port)
	bin := buildTaskbridge(t, t.TempDir())

	started := time.Now()
	s := startServe(t, bin, upURL, filepath.Join(t.TempDir(), "tb.db"))
	if code, body := get(t, s.admin+"/healthz"); code != 200 {
		t.Fatalf("/healthz with the upstream down: HTTP %d %s", code, body)
	}
	t.Logf("/healthz answered %s after the process started", time.Since(started).Round(time.Millisecond))
	if code, body := get(t, s.admin+"/readyz"); code != 503 || !strings.Contains(body, "-32010") {
		t.Errorf("/readyz with the upstream down: HTTP %d %s, want 503 with the upstream check failing -32010", code, body)
	}
	legacyInit := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`
	for name, h := range map[string]map[string]string{
		"2025-11-25 initialize": {},
		"2026-07-28 discover":   {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "server/discover"},
	} {
		body := legacyInit
		if name != "2025-11-25 initialize" {
			body = `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`
		}
		code, hdr, res := post(t, s.url, h, body)
		if code != 503 || hdr.Get("Retry-After") == "" || gjson.Get(res, "error.code").Int() != -32010 ||
			gjson.Get(res, "error.data.reason").Str != "upstream_not_yet_reachable" {
			t.Errorf("%s with the upstream down: HTTP %d Retry-After %q %s; want 503, Retry-After, -32010 upstream_not_yet_reachable",
				name, code, hdr.Get("Retry-After"), res)
		}
	}

	time.Sleep(time.Until(started.Add(upstreamDelay)))
	testenv.StartNodeServer(t, "legacy-server.mjs", "--port", strconv.Itoa(port))
	upAt := time.Now()
	waitFor(t, "/readyz once the upstream is up", func() bool { code, _ := get(t, s.admin+"/readyz"); return code == 200 })
	t.Logf("ready %s after the upstream started", time.Since(upAt).Round(time.Millisecond))
	if l := s.log.String(); !strings.Contains(l, `"route2025":"legacy-passthrough"`) || !strings.Contains(l, `"route2026":"reverse"`) {
		t.Errorf("no route line naming legacy-passthrough and reverse in the log")
	}

	c := legacyClient(t, s.url, "late-client", "1.0")
	created := call(t, c, "tools/call", map[string]any{"name": "slow_compute", "arguments": map[string]any{"seconds": 0}, "task": map[string]any{}})
	id := gjson.GetBytes(created, "task.taskId").Str
	if id == "" {
		t.Fatalf("pass-through task creation: %s", created)
	}
	if res := call(t, c, "tasks/result", map[string]string{"taskId": id}); !strings.Contains(string(res), "slow_compute done") {
		t.Errorf("pass-through tasks/result: %s", res)
	}
	mc := sep2663.NewClient(sep2663.ClientOptions{URL: s.url})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	d, err := mc.Discover(ctx)
	if err != nil || !d.Capabilities.HasExtension(sep2663.ExtensionTasks) {
		t.Fatalf("modern discover once the upstream is up: %v %+v", err, d)
	}
	meta := sep2663.RequestMeta{ClientCapabilities: json.RawMessage(`{"extensions":{"io.modelcontextprotocol/tasks":{}}}`)}
	res, err := mc.Call(ctx, "tools/call", json.RawMessage(`{"name":"slow_compute","arguments":{"seconds":0}}`), meta, nil)
	if err != nil || !gjson.GetBytes(res, "taskId").Exists() && !gjson.GetBytes(res, "content").Exists() {
		t.Errorf("modern tools/call once the upstream is up: %v %s", err, res)
	}
}

// post sends one JSON-RPC body to url with the headers h and returns status, headers and body.
func post(t *testing.T, url string, h map[string]string, body string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range h {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	b.ReadFrom(resp.Body)
	return resp.StatusCode, resp.Header, b.String()
}
