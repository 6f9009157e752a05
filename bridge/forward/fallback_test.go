package forward_test

// The fallback policy end to end (issue 4): a 2025-11-25 client in front of a 2026-07-28
// upstream without the tasks extension gets bridge-hosted tasks for eligible tools, a clear
// refusal for the others, and tools/list says which is which.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/taskbridge/taskbridge/bridge/forward"
	"github.com/taskbridge/taskbridge/fallback"
	"github.com/taskbridge/taskbridge/internal/fixture"
	"github.com/taskbridge/taskbridge/internal/jsonrpc"
	"github.com/taskbridge/taskbridge/record"
)

// decisions counts OnDecision calls by "kind/reason".
type decisions struct {
	mu sync.Mutex
	n  map[string]int
}

func (d *decisions) hook(kind, reason string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.n[kind+"/"+reason]++
}

func (d *decisions) count(key string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.n[key]
}

// noTasks runs the fixture without the extension and records decisions.
func noTasks(d *decisions, more ...func(*forward.Config)) envOpt {
	return func(c *envConfig, fo *fixture.Options) {
		fo.NoTasksExtension = true
		if d != nil {
			c.OnDecision = d.hook
		}
		for _, m := range more {
			m(&c.Config)
		}
	}
}

func rpcErr(t *testing.T, err error) *jsonrpc.Error {
	t.Helper()
	var je *jsonrpc.Error
	if !errors.As(err, &je) {
		t.Fatalf("want a JSON-RPC error, got %v", err)
	}
	return je
}

func TestHostedTaskCompletes(t *testing.T) {
	d := &decisions{n: map[string]int{}}
	e := newEnv(t, noTasks(d))
	c := e.client()

	created := call(t, c, "tools/call", raw(`{"name":"slow_compute","arguments":{"seconds":1,"label":"h"},"task":{"ttl":60000}}`))
	tid := created.Get("task.taskId").Str
	if tid == "" || created.Get("task.status").Str != "working" {
		t.Fatalf("want a CreateTaskResult with a working task, got %s", created.Raw)
	}
	res := call(t, c, "tasks/result", id(tid))
	if !strings.Contains(res.Get("content.0.text").Str, "Result: 42") {
		t.Errorf("tasks/result = %s", res.Raw)
	}
	if got := res.Get(`_meta.io\.modelcontextprotocol/related-task.taskId`).Str; got != tid {
		t.Errorf("related-task = %q, want %q", got, tid)
	}
	if got := call(t, c, "tasks/get", id(tid)); got.Get("status").Str != "completed" {
		t.Errorf("tasks/get = %s", got.Raw)
	}
	if n := len(call(t, c, "tasks/list", nil).Get("tasks").Array()); n != 1 {
		t.Errorf("tasks/list: %d tasks, want 1", n)
	}
	rec, err := e.st.GetTask(context.Background(), tid)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Mode != record.ModeHost || rec.Outcome != record.OutcomeSucceeded {
		t.Errorf("record mode %s outcome %s, want host/succeeded", rec.Mode, rec.Outcome)
	}
	if n := e.fx.Stats().Executions["slow_compute"]; n != 1 {
		t.Errorf("slow_compute ran %d times upstream, want 1", n)
	}
	if n := d.count("host/" + fallback.ReasonHostReadOnly); n != 1 {
		t.Errorf("host decisions counted: %d, want 1 (%v)", n, d.n)
	}
}

func TestHostedToolsListTellsTheTruth(t *testing.T) {
	e := newEnv(t, noTasks(nil))
	c := e.client()
	want := map[string]string{"greet": "optional", "slow_compute": "optional", "confirm_delete": "forbidden", "long_job": "forbidden"}
	for _, tl := range call(t, c, "tools/list", nil).Get("tools").Array() {
		name := tl.Get("name").Str
		if w, ok := want[name]; ok {
			if got := tl.Get("execution.taskSupport").Str; got != w {
				t.Errorf("%s: taskSupport %q, want %q", name, got, w)
			}
			delete(want, name)
		}
	}
	if len(want) != 0 {
		t.Errorf("tools missing from tools/list: %v", want)
	}
}

func TestHostRefusalIsClearAndQuick(t *testing.T) {
	d := &decisions{n: map[string]int{}}
	e := newEnv(t, noTasks(d))
	c := e.client()
	err := callErr(t, c, "tools/call", raw(`{"name":"confirm_delete","arguments":{"filename":"a.txt"},"task":{}}`))
	je := rpcErr(t, err)
	if je.Code != jsonrpc.CodeTaskUnavailable {
		t.Errorf("code %d, want %d", je.Code, jsonrpc.CodeTaskUnavailable)
	}
	for _, s := range []string{"io.modelcontextprotocol/tasks", "without params.task"} {
		if !strings.Contains(je.Message, s) {
			t.Errorf("message %q does not mention %q", je.Message, s)
		}
	}
	if n := len(call(t, c, "tasks/list", nil).Get("tasks").Array()); n != 0 {
		t.Errorf("a refused call left %d task records", n)
	}
	if n := e.fx.Stats().Methods["tools/call"]; n != 0 {
		t.Errorf("a refused call reached the upstream (%d tools/call)", n)
	}
	if n := d.count("refuse/" + fallback.ReasonNotHostable); n != 1 {
		t.Errorf("refuse decisions counted: %v", d.n)
	}
	// The same tool without params.task runs synchronously (greet needs no input).
	if res := call(t, c, "tools/call", raw(`{"name":"greet","arguments":{"name":"x"}}`)); res.Get("content.0.text").Str != "Hello, x!" {
		t.Errorf("plain call = %s", res.Raw)
	}
}

func TestHostPolicy(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  func(*forward.Config)
		tool string
		args string
		code int64 // 0: hosted
	}{
		{"deny-list", func(c *forward.Config) { c.HostDeny = []string{"slow_compute"} }, "slow_compute", `{"seconds":0}`, jsonrpc.CodeTaskUnavailable},
		{"no hosting", func(c *forward.Config) { c.NoHosting = true }, "greet", `{}`, jsonrpc.CodeTaskUnavailable},
		{"allow-list", func(c *forward.Config) { c.HostAllow = []string{"failing_job"} }, "failing_job", `{"seconds":0}`, 0},
		{"override forbidden", func(c *forward.Config) { c.ToolTaskSupport = map[string]string{"greet": "forbidden"} }, "greet", `{}`, jsonrpc.CodeMethodNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, noTasks(nil, tc.cfg))
			c := e.client()
			params := raw(fmt.Sprintf(`{"name":%q,"arguments":%s,"task":{}}`, tc.tool, tc.args))
			if tc.code != 0 {
				if je := rpcErr(t, callErr(t, c, "tools/call", params)); je.Code != tc.code {
					t.Errorf("code %d (%s), want %d", je.Code, je.Message, tc.code)
				}
				return
			}
			tid := call(t, c, "tools/call", params).Get("task.taskId").Str
			if tid == "" {
				t.Fatal("no task")
			}
			// failing_job ends with a tool error: failed, and tasks/result hands out the
			// isError result as a success.
			if res := call(t, c, "tasks/result", id(tid)); !res.Get("isError").Bool() {
				t.Errorf("tasks/result = %s", res.Raw)
			}
			if got := call(t, c, "tasks/get", id(tid)).Get("status").Str; got != "failed" {
				t.Errorf("status %s, want failed", got)
			}
		})
	}
}

func TestOlderClientTaskParamIgnored(t *testing.T) {
	e := newEnv(t, noTasks(nil))
	c := newClientT(e.url)
	c.Version = "2025-06-18"
	if _, err := c.Initialize(context.Background()); err != nil {
		t.Fatal(err)
	}
	// A receiver that declared no task support handles params.task normally (ignores it).
	res := call(t, c.Client, "tools/call", raw(`{"name":"confirm_delete","arguments":{"filename":"a"},"task":{}}`))
	if res.Get("task").Exists() {
		t.Errorf("a 2025-06-18 client got a task: %s", res.Raw)
	}
}

func TestHostedCancelAbortsTheCall(t *testing.T) {
	e := newEnv(t, noTasks(nil))
	c := e.client()
	tid := call(t, c, "tools/call", raw(`{"name":"slow_compute","arguments":{"seconds":300},"task":{}}`)).Get("task.taskId").Str
	waitFor(t, "the upstream call", func() bool { return e.fx.Stats().Methods["tools/call"] == 1 })
	if got := call(t, c, "tasks/cancel", id(tid)); got.Get("status").Str != "cancelled" {
		t.Fatalf("tasks/cancel = %s", got.Raw)
	}
	waitFor(t, "the outcome", func() bool {
		rec, err := e.st.GetTask(context.Background(), tid)
		return err == nil && rec.Outcome != record.OutcomePending
	})
	rec, _ := e.st.GetTask(context.Background(), tid)
	if rec.Status != record.StatusCancelled || rec.Outcome != record.OutcomeUnknown {
		t.Errorf("after cancel: status %s outcome %s (%s), want cancelled/unknown", rec.Status, rec.Outcome, rec.OutcomeDetail)
	}
}

// TestHostedCrashLeavesUnknown: the process dies while a hosted call is in flight (its
// store is gone before it can write anything, as after SIGKILL); the next bridge on the same
// SQLite file fails the task with an unknown outcome and never re-runs it.
func TestHostedCrashLeavesUnknown(t *testing.T) {
	e := newEnv(t, noTasks(nil))
	c := e.client()
	tid := call(t, c, "tools/call", raw(`{"name":"slow_compute","arguments":{"seconds":300},"task":{}}`)).Get("task.taskId").Str
	waitFor(t, "the upstream call", func() bool { return e.fx.Stats().Methods["tools/call"] == 1 })
	e.st.Close() // the "killed" process can no longer write
	e.b.Close(context.Background())

	e.start(envConfig{})
	c2 := newClientT(e.url)
	c2.SetSessionID(c.SessionID())
	got := call(t, c2.Client, "tasks/get", id(tid))
	if got.Get("status").Str != "failed" || !strings.Contains(got.Get("statusMessage").Str, "unknown") {
		t.Errorf("tasks/get after the crash = %s, want failed with an unknown outcome", got.Raw)
	}
	je := rpcErr(t, callErr(t, c2.Client, "tasks/result", id(tid)))
	if !strings.Contains(string(je.Data), `"outcome":"unknown"`) {
		t.Errorf("tasks/result error %s / %s does not say the outcome is unknown", je.Message, je.Data)
	}
	time.Sleep(300 * time.Millisecond) // a re-run would have reached the upstream by now
	if n := e.fx.Stats().Methods["tools/call"]; n != 1 {
		t.Errorf("the upstream saw %d tools/call, want 1", n)
	}
}

// TestHostedShutdownLeavesUnknown: a graceful Close aborts in-flight hosted calls and says
// so in the record.
func TestHostedShutdownLeavesUnknown(t *testing.T) {
	e := newEnv(t, noTasks(nil))
	c := e.client()
	tid := call(t, c, "tools/call", raw(`{"name":"slow_compute","arguments":{"seconds":300},"task":{}}`)).Get("task.taskId").Str
	waitFor(t, "the upstream call", func() bool { return e.fx.Stats().Methods["tools/call"] == 1 })
	e.b.Close(context.Background())
	rec, err := e.st.GetTask(context.Background(), tid)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Status != record.StatusFailed || rec.Outcome != record.OutcomeUnknown || !strings.Contains(rec.StatusMessage, "unknown") {
		t.Errorf("after shutdown: %s/%s %q, want failed/unknown", rec.Status, rec.Outcome, rec.StatusMessage)
	}
}

func TestHostOverloadIsAClearError(t *testing.T) {
	e := newEnv(t, noTasks(nil, func(c *forward.Config) { c.HostWorkers = 1 }))
	c := e.client()
	for i := range 16 { // 1 worker × 16: queued or running
		call(t, c, "tools/call", raw(fmt.Sprintf(`{"name":"slow_compute","arguments":{"seconds":300,"label":"%d"},"task":{}}`, i)))
	}
	je := rpcErr(t, callErr(t, c, "tools/call", raw(`{"name":"slow_compute","arguments":{"seconds":1},"task":{}}`)))
	if je.Code != jsonrpc.CodeOverloaded || !strings.Contains(string(je.Data), `"retryable":true`) {
		t.Errorf("17th hosted call: %d %s %s, want -32011 retryable", je.Code, je.Message, je.Data)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
