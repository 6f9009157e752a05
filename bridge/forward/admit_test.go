package forward_test

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/internal/fixture"
	"github.com/taskbridge/taskbridge/internal/jsonrpc"
	"github.com/taskbridge/taskbridge/internal/metrics"
)

const taskCall = `{"name":"slow_compute","arguments":{"seconds":1,"label":"x"},"task":{}}`

// TestSunsetRefusesNewTasksServesExisting: with a fake clock moved past the sunset, a new
// legacy task gets the retirement error naming the date and the replacement, while a task
// created before the sunset is still served (get, result, list) and plain calls still work.
func TestSunsetRefusesNewTasksServesExisting(t *testing.T) {
	sunset := time.Date(2027, 7, 28, 0, 0, 0, 0, time.UTC)
	var clock atomic.Int64
	clock.Store(sunset.Add(-10 * time.Minute).UnixNano())
	m := metrics.New("test")
	e := newEnv(t, func(c *envConfig, fo *fixture.Options) {
		fo.TaskTTLMs = 3_600_000 // the existing task lives an hour (fake clock)
		c.Now = func() time.Time { return time.Unix(0, clock.Load()) }
		c.Policy.Sunset = sunset
		c.Metrics = m
	})
	c := e.client()
	existing := call(t, c, "tools/call", raw(taskCall)).Get("task.taskId").Str
	if existing == "" {
		t.Fatal("before the sunset: no task created")
	}

	clock.Store(sunset.Add(10 * time.Minute).UnixNano()) // the day of the sunset, after midnight UTC
	err := callErr(t, c, "tools/call", raw(taskCall))
	var je *jsonrpc.Error
	if !errors.As(err, &je) || je.Code != jsonrpc.CodeTasksRefused {
		t.Fatalf("new task after the sunset: err = %v, want code %d", err, jsonrpc.CodeTasksRefused)
	}
	for _, want := range []string{"retired on 2027-07-28", "io.modelcontextprotocol/tasks", "2026-07-28", "existing tasks are served until their ttl"} {
		if !strings.Contains(je.Message, want) {
			t.Errorf("retirement error %q lacks %q", je.Message, want)
		}
	}
	if d := gjson.ParseBytes(je.Data); d.Get("reason").Str != "sunset" || d.Get("retiredOn").Str != "2027-07-28" ||
		d.Get("replacement.extension").Str != "io.modelcontextprotocol/tasks" || d.Get("retryable").Type != gjson.False {
		t.Errorf("retirement error data = %#v", je.Data)
	}

	// The existing task is still served.
	if st := call(t, c, "tasks/get", id(existing)).Get("status").Str; st != "working" && st != "completed" {
		t.Fatalf("tasks/get of the existing task after the sunset: status %q", st)
	}
	if txt := call(t, c, "tasks/result", id(existing)).Get("content.0.text").Str; txt == "" {
		t.Fatal("tasks/result of the existing task after the sunset: no content")
	}
	if n := call(t, c, "tasks/list", map[string]any{}).Get("tasks.#").Int(); n != 1 {
		t.Errorf("tasks/list after the sunset: %d tasks, want 1", n)
	}
	// A plain call is not task creation.
	if txt := call(t, c, "tools/call", raw(`{"name":"greet","arguments":{"name":"x"}}`)).Get("content.0.text").Str; txt == "" {
		t.Error("plain tools/call after the sunset failed")
	}
	// Past the existing task's ttl it is gone, like any expired task.
	clock.Store(sunset.Add(2 * time.Hour).UnixNano())
	callErr(t, c, "tasks/get", id(existing))
	// Before the sunset nothing is refused (the clock going back is a test device).
	clock.Store(sunset.Add(-time.Minute).UnixNano())
	call(t, c, "tools/call", raw(taskCall))
	if got := m.Values("tasks_refused_total"); got["sunset"] != 1 {
		t.Errorf("tasks_refused_total = %v, want sunset=1", got)
	}
}

// TestKillSwitchAndDrainRefuseOnlyNewTasks: the kill switch and a drain each refuse task
// creation with their own error; a repeated request id still returns its task.
func TestKillSwitchAndDrainRefuseOnlyNewTasks(t *testing.T) {
	var draining atomic.Bool
	e := newEnv(t, func(c *envConfig, _ *fixture.Options) { c.Draining = draining.Load })
	c := e.client()
	existing := call(t, c, "tools/call", raw(taskCall)).Get("task.taskId").Str

	draining.Store(true)
	err := callErr(t, c, "tools/call", raw(taskCall))
	var je *jsonrpc.Error
	if !errors.As(err, &je) || je.Code != jsonrpc.CodeOverloaded ||
		je.Message != "taskbridge is draining: new tasks are refused; retry on another replica" {
		t.Fatalf("while draining: err = %v", err)
	}
	if d := gjson.ParseBytes(je.Data); d.Get("retryable").Type != gjson.True || d.Get("reason").Str != "draining" {
		t.Errorf("drain error data = %#v, want retryable", je.Data)
	}
	if txt := call(t, c, "tasks/result", id(existing)).Get("content.0.text").Str; txt == "" {
		t.Fatal("tasks/result while draining: no content")
	}

	k := newEnv(t, func(c *envConfig, _ *fixture.Options) { c.Policy.KillSwitch = true })
	kc := k.client()
	err = callErr(t, kc, "tools/call", raw(taskCall))
	if !errors.As(err, &je) || je.Code != jsonrpc.CodeTasksRefused || !strings.Contains(je.Message, "kill switch") {
		t.Fatalf("kill switch: err = %v", err)
	}
	if txt := call(t, kc, "tools/call", raw(`{"name":"greet","arguments":{"name":"x"}}`)).Get("content.0.text").Str; txt == "" {
		t.Error("plain tools/call with the kill switch on failed")
	}
}
