// "taskbridge serve --upstream URL" in front of a 2025-11-25 server (interop/legacy-server.mjs,
// TS SDK v1): the era is detected at start (server/discover refused → initialize), both
// client eras are served on /mcp, and the operations surface keeps working: /readyz,
// /metrics, and a SIGTERM drain that refuses new tasks on both faces and exits 0.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/internal/jsonrpc"
	"github.com/taskbridge/taskbridge/internal/legacyclient"
	"github.com/taskbridge/taskbridge/internal/testenv"
	"github.com/taskbridge/taskbridge/sep2663"
)

// startLegacyServer runs interop/legacy-server.mjs and returns its /mcp URL.
func startLegacyServer(t *testing.T) string {
	return testenv.StartNodeServer(t, "legacy-server.mjs", "--port", "0")
}

func TestServeLegacyUpstream(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	up := startLegacyServer(t)
	bin := buildTaskbridge(t, t.TempDir())
	s := startServe(t, bin, up, filepath.Join(t.TempDir(), "tb.db"), "--drain-quiet", "500ms")

	waitFor(t, "the route line in the log", func() bool {
		l := s.log.String()
		return strings.Contains(l, `"route2025":"legacy-passthrough"`) && strings.Contains(l, `"route2026":"reverse"`)
	})
	if code, body := get(t, s.admin+"/readyz"); code != 200 {
		t.Errorf("/readyz: HTTP %d %s", code, body)
	}
	if code, body := get(t, s.admin+"/metrics"); code != 200 || !strings.Contains(body, "taskbridge_") {
		t.Errorf("/metrics: HTTP %d", code)
	}

	// A 2025-11-25 client passes through: it sees the upstream's own server and tasks.
	c := legacyClient(t, s.url, "era-client", "1.0")
	created := call(t, c, "tools/call", map[string]any{"name": "slow_compute", "arguments": map[string]any{"seconds": 1}, "task": map[string]any{}})
	id := gjson.GetBytes(created, "task.taskId").Str
	if id == "" {
		t.Fatalf("task creation: %s", created)
	}
	// A 2026-07-28 client is reverse-translated: discover carries the tasks extension.
	mc := sep2663.NewClient(sep2663.ClientOptions{URL: s.url})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	d, err := mc.Discover(ctx)
	if err != nil {
		t.Fatalf("server/discover through the bridge: %v", err)
	}
	if !d.Capabilities.HasExtension(sep2663.ExtensionTasks) {
		t.Errorf("discover capabilities lack the tasks extension: %+v", d.Capabilities)
	}

	// Drain: new tasks are refused on both faces; the existing task is still served.
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "/readyz to report draining", func() bool { code, _ := get(t, s.admin+"/readyz"); return code == 503 })
	_, err = c.Call(ctx, "tools/call", json.RawMessage(`{"name":"slow_compute","arguments":{"seconds":1},"task":{}}`))
	var je *jsonrpc.Error
	if !errors.As(err, &je) || je.Code != jsonrpc.CodeOverloaded {
		t.Errorf("pass-through task creation while draining: %v, want the drain error", err)
	}
	meta := sep2663.RequestMeta{ClientCapabilities: json.RawMessage(`{"extensions":{"io.modelcontextprotocol/tasks":{}}}`)}
	_, err = mc.Call(ctx, "tools/call", json.RawMessage(`{"name":"slow_compute","arguments":{"seconds":1}}`), meta, nil)
	if !errors.As(err, &je) || je.Code != jsonrpc.CodeOverloaded {
		t.Errorf("modern task creation while draining: %v, want the drain error", err)
	}
	res := call(t, c, "tasks/result", map[string]string{"taskId": id})
	if !strings.Contains(string(res), "slow_compute done") {
		t.Errorf("tasks/result of the existing task while draining: %s", res)
	}
	select {
	case err := <-s.exit:
		if err != nil {
			t.Fatalf("taskbridge exit: %v, want status 0", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("taskbridge did not exit within 30 s of the drain")
	}
}

// TestServeLegacyUpstreamWithAuth: authentication in front of a 2025-11-25 upstream is
// allowed now that the front door covers the reverse route and the legacy pass-through:
// without a key both eras get 401 and the upstream is never asked; with one both work.
func TestServeLegacyUpstreamWithAuth(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	up := startLegacyServer(t)
	bin := buildTaskbridge(t, t.TempDir())
	const key = "legacy-up-key-0123456789"
	s := startServe(t, bin, up, filepath.Join(t.TempDir(), "tb.db"), "--auth", `{"api_keys":[{"key":"`+key+`","principal":"p"}]}`)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	anon := legacyclient.New(s.url)
	_, err := anon.Initialize(ctx)
	var je *jsonrpc.Error
	if !errors.As(err, &je) || je.Message != "Unauthorized" {
		t.Errorf("legacy initialize without a key: %v, want 401 Unauthorized", err)
	}
	if _, err := sep2663.NewClient(sep2663.ClientOptions{URL: s.url}).Discover(ctx); !errors.As(err, &je) || je.Message != "Unauthorized" {
		t.Errorf("modern discover without a key: %v, want 401 Unauthorized", err)
	}

	lc := legacyclient.New(s.url)
	lc.Header = http.Header{"Authorization": {"Bearer " + key}}
	if _, err := lc.Initialize(ctx); err != nil {
		t.Fatalf("legacy initialize with the key: %v", err)
	}
	created := call(t, lc, "tools/call", map[string]any{"name": "slow_compute", "arguments": map[string]any{"seconds": 0}, "task": map[string]any{}})
	if gjson.GetBytes(created, "task.taskId").Str == "" {
		t.Fatalf("pass-through task with the key: %s", created)
	}
	mc := sep2663.NewClient(sep2663.ClientOptions{URL: s.url, Header: http.Header{"Authorization": {"Bearer " + key}}})
	if _, err := mc.Discover(ctx); err != nil {
		t.Fatalf("modern discover with the key: %v", err)
	}
}
