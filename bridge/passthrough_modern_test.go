package bridge_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/rs/zerolog"
	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/bridge"
	"github.com/taskbridge/taskbridge/bridge/forward"
	"github.com/taskbridge/taskbridge/internal/fixture"
)

var modernSeq atomic.Int64

// modernPost sends one 2026-07-28 request (the tasks extension declared) under an API key
// and returns the HTTP status and the JSON-RPC message with its id removed (so two answers
// can be compared byte for byte).
func modernPost(t *testing.T, url, key, method, params string) (int, string) {
	t.Helper()
	return modernPostH(t, url, key, method, params, nil)
}

// modernPostH is modernPost with extra request headers.
func modernPostH(t *testing.T, url, key, method, params string, extra http.Header) (int, string) {
	t.Helper()
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}`
	p := strings.TrimSuffix(params, "}") + "," + meta + "}"
	n := modernSeq.Add(1)
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`, n, method, p)
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader([]byte(body)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", method)
	for _, f := range []string{"name", "taskId"} {
		if v := gjson.Get(p, f); v.Type == gjson.String {
			req.Header.Set("Mcp-Name", v.Str)
			break
		}
	}
	req.Header.Set("Authorization", "Bearer "+key)
	for k, vs := range extra {
		req.Header[k] = vs
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	msg := string(b)
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		for _, line := range strings.Split(msg, "\n") {
			if d, ok := strings.CutPrefix(line, "data:"); ok && gjson.Get(d, "id").Exists() {
				msg = strings.TrimSpace(d)
			}
		}
	}
	return resp.StatusCode, strings.Replace(msg, fmt.Sprintf(`"id":%d`, n), `"id":0`, 1)
}

// TestModernPassThroughTenancy: on the modern pass-through (2026-07-28 client, 2026-07-28
// upstream) a task is bound, in the store, to the principal whose tools/call created it.
// Another principal's tasks/get, tasks/update and tasks/cancel of it answer with exactly
// the bytes of an unknown id and never reach the upstream; the owner's work, after a
// restart too; max_concurrent_tasks counts the owner's unfinished tasks from the store.
func TestModernPassThroughTenancy(t *testing.T) {
	e := newEnv(t, withAuth(t), func(c *envConfig, _ *fixture.Options) { c.Policy = bridge.Policy{MaxConcurrentTasks: 1} })
	_, created := modernPost(t, e.url, aliceKey, "tools/call", `{"name":"slow_compute","arguments":{"seconds":60}}`)
	id := gjson.Get(created, "result.taskId").Str
	if gjson.Get(created, "result.resultType").Str != "task" || id == "" {
		t.Fatalf("alice's tools/call: %s", created)
	}
	if _, again := modernPost(t, e.url, aliceKey, "tools/call", `{"name":"long_job","arguments":{"seconds":60}}`); !gjson.Get(again, "error").Exists() {
		t.Errorf("alice's second task at max_concurrent_tasks 1: %s, want a refusal", again)
	}
	if _, bobs := modernPost(t, e.url, bobKey, "tools/call", `{"name":"slow_compute","arguments":{"seconds":60}}`); gjson.Get(bobs, "result.resultType").Str != "task" {
		t.Errorf("bob's first task: %s", bobs)
	}
	before := e.fx.Stats()
	for _, c := range []struct{ method, params string }{
		{"tasks/get", `{"taskId":"%s"}`},
		{"tasks/update", `{"taskId":"%s","inputResponses":{"k":{"action":"accept"}}}`},
		{"tasks/cancel", `{"taskId":"%s"}`},
	} {
		fs, foreign := modernPost(t, e.url, bobKey, c.method, strings.Replace(c.params, "%s", id, 1))
		us, unknown := modernPost(t, e.url, bobKey, c.method, strings.Replace(c.params, "%s", "no-such-task", 1))
		if fs != us || foreign != unknown || !gjson.Get(foreign, "error").Exists() {
			t.Errorf("%s: foreign id HTTP %d %s; unknown id HTTP %d %s (want the same bytes)", c.method, fs, foreign, us, unknown)
		}
	}
	if after := e.fx.Stats(); fmt.Sprint(after.Methods) != fmt.Sprint(before.Methods) {
		t.Errorf("refused requests reached the upstream: %v then %v", before.Methods, after.Methods)
	}
	e.b.Close(t.Context())
	e.st.Close()
	e.start(envConfig{Config: forward.Config{Logger: zerolog.Nop()}, Door: bridge.DoorConfig{Auth: authOf(t)}, Policy: bridge.Policy{MaxConcurrentTasks: 1}})
	if _, got := modernPost(t, e.url, aliceKey, "tasks/get", `{"taskId":"`+id+`"}`); gjson.Get(got, "result.status").Str != "working" {
		t.Errorf("alice's tasks/get after a restart: %s", got)
	}
	if _, got := modernPost(t, e.url, aliceKey, "tasks/cancel", `{"taskId":"`+id+`"}`); gjson.Get(got, "error").Exists() {
		t.Errorf("alice's tasks/cancel: %s", got)
	}
	// Cancelled: it no longer counts, so alice may start another.
	if _, next := modernPost(t, e.url, aliceKey, "tools/call", `{"name":"slow_compute","arguments":{"seconds":1}}`); gjson.Get(next, "result.resultType").Str != "task" {
		t.Errorf("alice's task after the cancel: %s", next)
	}
}
