package forward_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/internal/fixture"
	"github.com/taskbridge/taskbridge/internal/jsonrpc"
)

func TestInitializeTranslatesDiscover(t *testing.T) {
	e := newEnv(t)
	c := legacyClient(e)
	init, err := c.Initialize(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	r := gjson.ParseBytes(init)
	if r.Get("protocolVersion").Str != "2025-11-25" {
		t.Errorf("protocolVersion = %s", r.Get("protocolVersion").Raw)
	}
	if r.Get("serverInfo.name").Str != "taskbridge-fixture" {
		t.Errorf("serverInfo = %s, want the upstream's", r.Get("serverInfo").Raw)
	}
	if got := r.Get("capabilities.tasks").Raw; got != `{"list":{},"cancel":{},"requests":{"tools":{"call":{}}}}` {
		t.Errorf("capabilities.tasks = %s", got)
	}
	if r.Get("capabilities.extensions").Exists() {
		t.Errorf("2026-only extensions leaked to a legacy client: %s", r.Get("capabilities").Raw)
	}
}

func legacyClient(e *env) *clientT { return newClientT(e.url) }

func TestOlderClientGetsNoTasksCapability(t *testing.T) {
	e := newEnv(t)
	c := newClientT(e.url)
	c.Version = "2025-06-18"
	init, err := c.Initialize(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if gjson.GetBytes(init, "capabilities.tasks").Exists() {
		t.Errorf("a 2025-06-18 client was offered tasks: %s", init)
	}
	// A task-only upstream tool still works for it, by sync collapse.
	res := call(t, c.Client, "tools/call", raw(`{"name":"long_job","arguments":{"seconds":1}}`))
	if res.Get("content.0.text").Str == "" {
		t.Errorf("long_job result = %s", res.Raw)
	}
}

func TestToolsListAdvertisesTaskSupport(t *testing.T) {
	e := newEnv(t)
	c := e.client()
	res := call(t, c, "tools/list", nil)
	tools := res.Get("tools").Array()
	if len(tools) == 0 {
		t.Fatal("no tools")
	}
	for _, tl := range tools {
		if got := tl.Get("execution.taskSupport").Str; got != "optional" {
			t.Errorf("%s: taskSupport = %q, want optional", tl.Get("name").Str, got)
		}
	}
	for _, k := range []string{"resultType", "ttlMs", "cacheScope"} {
		if res.Get(k).Exists() {
			t.Errorf("2026-only field %s leaked into tools/list", k)
		}
	}
}

func TestTaskLifecycle(t *testing.T) {
	e := newEnv(t)
	c := e.client()
	created := call(t, c, "tools/call", raw(`{"name":"slow_compute","arguments":{"seconds":2,"label":"x"},"task":{"ttl":60000}}`))
	task := created.Get("task")
	tid := task.Get("taskId").Str
	if len(tid) != 32 || task.Get("status").Str != "working" {
		t.Fatalf("CreateTaskResult = %s", created.Raw)
	}
	for _, k := range []string{"createdAt", "lastUpdatedAt", "ttl", "pollInterval"} {
		if !task.Get(k).Exists() {
			t.Errorf("task lacks %s: %s", k, task.Raw)
		}
	}
	if task.Get("ttl").Int() != 60000 {
		t.Errorf("ttl = %d, want the requested 60000 (below the upstream's)", task.Get("ttl").Int())
	}
	if _, seen := e.fx.Stats().TaskGets[tid]; seen {
		t.Error("the bridge handed out the upstream's task id")
	}
	got := call(t, c, "tasks/get", id(tid))
	if got.Get("taskId").Str != tid || got.Get("status").Str != "working" {
		t.Errorf("tasks/get = %s", got.Raw)
	}
	res := call(t, c, "tasks/result", id(tid))
	if want := "Computation x completed after 2s. Result: 42."; res.Get("content.0.text").Str != want {
		t.Errorf("result = %s", res.Raw)
	}
	if rt := res.Get(`_meta.io\.modelcontextprotocol/related-task.taskId`).Str; rt != tid {
		t.Errorf("related-task = %q, want %q", rt, tid)
	}
	if res.Get("resultType").Exists() {
		t.Error("resultType leaked into a legacy result")
	}
	if got := call(t, c, "tasks/get", id(tid)); got.Get("status").Str != "completed" {
		t.Errorf("after result: %s", got.Raw)
	}
	if n := e.fx.Stats().Executions["slow_compute"]; n != 1 {
		t.Errorf("executions = %d, want 1", n)
	}
}

func TestSyncAnswerBecomesCompletedTask(t *testing.T) {
	e := newEnv(t)
	c := e.client()
	created := call(t, c, "tools/call", raw(`{"name":"greet","arguments":{"name":"Ada"},"task":{}}`))
	tid := created.Get("task.taskId").Str
	// 2025-11-25: tasks MUST begin working, even one the upstream answered synchronously;
	// the first tasks/get says completed (issue 16 item 11).
	if created.Get("task.status").Str != "working" {
		t.Errorf("status = %s, want working (tasks begin working)", created.Raw)
	}
	if got := call(t, c, "tasks/get", id(tid)); got.Get("status").Str != "completed" {
		t.Errorf("first tasks/get = %s, want completed (the upstream answered synchronously)", got.Raw)
	}
	res := call(t, c, "tasks/result", id(tid))
	if res.Get("content.0.text").Str == "" || res.Get(`_meta.io\.modelcontextprotocol/related-task.taskId`).Str != tid {
		t.Errorf("result = %s", res.Raw)
	}
}

func TestToolErrorIsFailedWithIsErrorResult(t *testing.T) {
	e := newEnv(t)
	c := e.client()
	tid := call(t, c, "tools/call", raw(`{"name":"failing_job","arguments":{},"task":{}}`)).Get("task.taskId").Str
	res := call(t, c, "tasks/result", id(tid))
	if !res.Get("isError").Bool() {
		t.Errorf("tasks/result = %s, want the isError CallToolResult as a success", res.Raw)
	}
	got := call(t, c, "tasks/get", id(tid))
	if got.Get("status").Str != "failed" || got.Get("statusMessage").Str == "" {
		t.Errorf("tasks/get = %s, want failed with a message", got.Raw)
	}
}

func TestProtocolErrorIsTheSameError(t *testing.T) {
	e := newEnv(t)
	c := e.client()
	tid := call(t, c, "tools/call", raw(`{"name":"protocol_error_job","arguments":{},"task":{}}`)).Get("task.taskId").Str
	err := callErr(t, c, "tasks/result", id(tid))
	var je *jsonrpc.Error
	if !errors.As(err, &je) {
		t.Fatalf("err = %v", err)
	}
	// The fixture's protocol_error_job fails with this JSON-RPC error (see internal/fixture).
	upstream := fixtureProtocolError(t, e)
	if je.Code != upstream.Code || je.Message != upstream.Message {
		t.Errorf("tasks/result error = %d %q, want the upstream's %d %q", je.Code, je.Message, upstream.Code, upstream.Message)
	}
	if got := call(t, c, "tasks/get", id(tid)); got.Get("status").Str != "failed" {
		t.Errorf("status = %s", got.Raw)
	}
}

func TestCancel(t *testing.T) {
	e := newEnv(t)
	c := e.client()
	tid := call(t, c, "tools/call", raw(`{"name":"slow_compute","arguments":{"seconds":30},"task":{}}`)).Get("task.taskId").Str
	got := call(t, c, "tasks/cancel", id(tid))
	if got.Get("status").Str != "cancelled" {
		t.Fatalf("tasks/cancel = %s, want cancelled in the reply", got.Raw)
	}
	if e.fx.Stats().Cancels != 1 {
		t.Errorf("upstream tasks/cancel = %d, want 1", e.fx.Stats().Cancels)
	}
	err := callErr(t, c, "tasks/cancel", id(tid))
	if je := asRPC(t, err); je.Code != -32602 {
		t.Errorf("second cancel: %v", err)
	}
	if got := call(t, c, "tasks/get", id(tid)); got.Get("status").Str != "cancelled" {
		t.Errorf("after cancel: %s", got.Raw)
	}
	if err := callErr(t, c, "tasks/result", id(tid)); asRPC(t, err) == nil {
		t.Error("tasks/result on a cancelled task should be an error")
	}
}

func TestUnknownAndForeignIDsLookTheSame(t *testing.T) {
	e := newEnv(t)
	alice, bob := e.client(), e.client()
	tid := call(t, alice, "tools/call", raw(`{"name":"greet","arguments":{"name":"A"},"task":{}}`)).Get("task.taskId").Str
	for _, m := range []string{"tasks/get", "tasks/result", "tasks/cancel"} {
		foreign := asRPC(t, callErr(t, bob, m, id(tid)))
		unknown := asRPC(t, callErr(t, bob, m, id("0123456789abcdef0123456789abcdef")))
		fb, _ := json.Marshal(foreign)
		ub, _ := json.Marshal(unknown)
		if string(fb) != string(ub) || foreign.Code != -32602 {
			t.Errorf("%s: foreign %s vs unknown %s", m, fb, ub)
		}
	}
	if list := call(t, bob, "tasks/list", nil); len(list.Get("tasks").Array()) != 0 {
		t.Errorf("bob sees alice's tasks: %s", list.Raw)
	}
}

func TestListPagination(t *testing.T) {
	e := newEnv(t, func(c *envConfig, _ *fixture.Options) { c.ListPageSize = 3 })
	c := e.client()
	var ids []string
	for range 7 {
		ids = append(ids, call(t, c, "tools/call", raw(`{"name":"greet","arguments":{"name":"x"},"task":{}}`)).Get("task.taskId").Str)
	}
	var seen []string
	var cursor *string
	for pages := 0; ; pages++ {
		if pages > 5 {
			t.Fatal("pagination does not end")
		}
		params := map[string]any{}
		if cursor != nil {
			params["cursor"] = *cursor
		}
		res := call(t, c, "tasks/list", params)
		for _, tk := range res.Get("tasks").Array() {
			seen = append(seen, tk.Get("taskId").Str)
		}
		if !res.Get("nextCursor").Exists() {
			break
		}
		s := res.Get("nextCursor").Str
		cursor = &s
	}
	if len(seen) != 7 {
		t.Fatalf("listed %d tasks, want 7: %v", len(seen), seen)
	}
	for i := range seen { // newest first
		if seen[i] != ids[len(ids)-1-i] {
			t.Errorf("order: got %v, want reverse of %v", seen, ids)
			break
		}
	}
	if je := asRPC(t, callErr(t, c, "tasks/list", map[string]any{"cursor": "not-a-cursor"})); je.Code != -32602 {
		t.Errorf("bad cursor: %v", je)
	}
}

// TestPollCoalescing: 200 clients polling one task cause at most one upstream tasks/get
// per poll interval.
func TestPollCoalescing(t *testing.T) {
	e := newEnv(t, func(c *envConfig, fo *fixture.Options) { fo.PollIntervalMs = 200; c.PollFloorMs = 200 })
	c := e.client()
	tid := call(t, c, "tools/call", raw(`{"name":"slow_compute","arguments":{"seconds":60},"task":{}}`)).Get("task.taskId").Str
	before := sumGets(e)
	start := time.Now()
	const pollers, window = 200, 2 * time.Second
	var wg sync.WaitGroup
	for range pollers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Since(start) < window {
				if _, err := c.Call(context.Background(), "tasks/get", id(tid)); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	gets := sumGets(e) - before
	limit := int(elapsed/(200*time.Millisecond)) + 1
	t.Logf("%d pollers for %v: %d upstream tasks/get (limit %d)", pollers, elapsed, gets, limit)
	if gets > limit {
		t.Errorf("upstream saw %d tasks/get in %v, want ≤ %d (one per 200 ms)", gets, elapsed, limit)
	}
	if gets == 0 {
		t.Error("no upstream polls at all: the record is not refreshed")
	}
}

func sumGets(e *env) (n int) {
	for _, v := range e.fx.Stats().TaskGets {
		n += v
	}
	return n
}

func TestSyncCollapseSendsProgress(t *testing.T) {
	e := newEnv(t, func(c *envConfig, _ *fixture.Options) { c.Heartbeat = 100 * time.Millisecond })
	c := e.client()
	res := call(t, c, "tools/call", raw(`{"name":"long_job","arguments":{"seconds":5},"_meta":{"progressToken":"p1"}}`))
	if res.Get("content.0.text").Str == "" {
		t.Errorf("result = %s", res.Raw)
	}
	progress := 0
	for _, n := range c.Notifications() {
		if n.Method == "notifications/progress" && gjson.GetBytes(n.Params, "progressToken").Str == "p1" {
			progress++
		}
	}
	if progress == 0 {
		t.Error("no progress heartbeats on a long synchronous call with a progressToken")
	}
}

func TestRestartResumes(t *testing.T) {
	e := newEnv(t)
	c := e.client()
	tid := call(t, c, "tools/call", raw(`{"name":"slow_compute","arguments":{"seconds":3},"task":{}}`)).Get("task.taskId").Str
	done := call(t, c, "tools/call", raw(`{"name":"greet","arguments":{"name":"x"},"task":{}}`)).Get("task.taskId").Str
	e.b.Close(context.Background())
	e.start(envConfig{})
	c2 := newClientT(e.url)
	c2.SetSessionID(c.SessionID())
	res := call(t, c2.Client, "tasks/result", id(tid))
	if res.Get("content.0.text").Str == "" {
		t.Errorf("result after restart = %s", res.Raw)
	}
	if got := call(t, c2.Client, "tasks/get", id(done)); got.Get("status").Str != "completed" {
		t.Errorf("tasks/get after restart = %s", got.Raw)
	}
	if n := len(call(t, c2.Client, "tasks/list", nil).Get("tasks").Array()); n != 2 {
		t.Errorf("tasks/list after restart: %d tasks, want 2", n)
	}
	if n := e.fx.Stats().Executions["slow_compute"]; n != 1 {
		t.Errorf("slow_compute ran %d times, want 1", n)
	}
}

func TestUpstreamDownIsAClearError(t *testing.T) {
	e := newEnv(t)
	c := e.client()
	e.fx.Close()
	// Point a fresh bridge at a closed port.
	e2 := newEnvAt(t, "http://127.0.0.1:1/mcp")
	c2 := newClientT(e2.url)
	_, err := c2.Initialize(context.Background())
	je := asRPC(t, err)
	if je == nil || je.Code != jsonrpc.CodeUpstream {
		t.Fatalf("initialize with upstream down: %v", err)
	}
	// The class of the failure, never the upstream's address or the dial error.
	if je.Message != "upstream unavailable" || contains(string(je.Data), "127.0.0.1") {
		t.Errorf("upstream down: %q %s, want exactly \"upstream unavailable\"", je.Message, je.Data)
	}
	_ = c
}

func asRPC(t *testing.T, err error) *jsonrpc.Error {
	t.Helper()
	var je *jsonrpc.Error
	if !errors.As(err, &je) {
		t.Fatalf("want a JSON-RPC error, got %v", err)
	}
	return je
}

func TestSlowUpstreamIsAClearError(t *testing.T) {
	e := newEnv(t, func(c *envConfig, fo *fixture.Options) {
		c.CallTimeout = 300 * time.Millisecond
		fo.NoTasksExtension = true
		fo.Scale = 1
	})
	c := e.client()
	err := callErr(t, c, "tools/call", raw(`{"name":"slow_compute","arguments":{"seconds":5}}`))
	je := asRPC(t, err)
	if je.Code != jsonrpc.CodeUpstream || je.Message != "upstream timed out" || contains(je.Message, "127.0.0.1") {
		t.Errorf("slow upstream: %v, want -32010 \"upstream timed out\" without the upstream's address", err)
	}
}
