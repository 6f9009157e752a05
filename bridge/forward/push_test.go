package forward_test

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/internal/fixture"
	"github.com/taskbridge/taskbridge/internal/legacyclient"
)

// statusesOf returns the notifications/tasks/status statuses the client saw for a task.
func statusesOf(c *legacyclient.Client, taskID string) []string {
	var out []string
	for _, n := range c.Notifications() {
		if n.Method == "notifications/tasks/status" && gjson.GetBytes(n.Params, "taskId").Str == taskID {
			out = append(out, gjson.GetBytes(n.Params, "status").Str)
		}
	}
	return out
}

// openGet opens the session's GET stream, where status notifications arrive.
func openGet(t *testing.T, c *legacyclient.Client) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := c.OpenGetStream(ctx); err != nil {
		t.Fatalf("GET stream: %v", err)
	}
}

// waitPushed waits for a status notification; it fails after limit.
func waitPushed(t *testing.T, c *legacyclient.Client, taskID, want string, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !slices.Contains(statusesOf(c, taskID), want) {
		if time.Now().After(deadline) {
			t.Fatalf("no notifications/tasks/status %q for %s within %s; saw %v", want, taskID, limit, statusesOf(c, taskID))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// The upstream asks to be polled once a minute; its notifications/tasks still bring the
// completion to the legacy client within seconds.
func TestUpstreamPushBeatsThePollInterval(t *testing.T) {
	e := newEnv(t, func(c *envConfig, f *fixture.Options) {
		f.Listen = true
		f.PollIntervalMs = 60_000
		c.PollCeilMs = 60_000
	})
	c := e.client()
	openGet(t, c)
	res := call(t, c, "tools/call", map[string]any{"name": "slow_compute", "arguments": map[string]any{"seconds": 5}, "task": map[string]any{"ttl": 60000}})
	taskID := res.Get("task.taskId").Str
	// slow_compute runs 0.5 s at scale 0.1; the next poll is a minute away.
	waitPushed(t, c, taskID, "completed", 20*time.Second)
	if got := call(t, c, "tasks/get", id(taskID)).Get("status").Str; got != "completed" {
		t.Errorf("tasks/get after the pushed completion = %q", got)
	}
	if n := e.fx.Stats().Methods["subscriptions/listen"]; n == 0 {
		t.Error("the bridge never opened subscriptions/listen")
	}
}

// The listen stream is cut again and again while an elicitation task runs: polling takes
// over and the client sees every transition (input_required, then completed) and the
// result.
func TestUpstreamPushCutFallsBackToPolling(t *testing.T) {
	e := newEnv(t, func(c *envConfig, f *fixture.Options) {
		f.Listen = true
		f.PollIntervalMs = 300
	})
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	cuts := 0 // written by the cutter, read after wg.Wait
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
				cuts += e.fx.CutListens()
			}
		}
	}()
	var once sync.Once
	stopCutting := func() { once.Do(func() { close(stop); wg.Wait() }) }
	defer stopCutting()
	c := e.client()
	c.OnRequest = func(method string, _ json.RawMessage) (json.RawMessage, error) {
		return json.RawMessage(`{"action":"accept","content":{"confirm":true}}`), nil
	}
	openGet(t, c)
	res := call(t, c, "tools/call", map[string]any{"name": "confirm_delete", "arguments": map[string]any{"filename": "x.txt"}, "task": map[string]any{"ttl": 60000}})
	taskID := res.Get("task.taskId").Str
	waitPushed(t, c, taskID, "input_required", 20*time.Second)
	// The elicitation goes out on the GET stream (no tasks/result is open); the legacy
	// client answers it on its own (accept, confirm true).
	waitPushed(t, c, taskID, "completed", 20*time.Second)
	out := call(t, c, "tasks/result", id(taskID))
	if txt := out.Get("content.0.text").Str; txt != "Deleted x.txt" {
		t.Errorf("result %q, want Deleted x.txt (%s)", txt, out.Raw)
	}
	stopCutting()
	if cuts == 0 {
		t.Error("no listen stream was ever cut; the test proved nothing")
	}
	st := statusesOf(c, taskID)
	if i, j := slices.Index(st, "input_required"), slices.Index(st, "completed"); i < 0 || j < i {
		t.Errorf("status notifications %v: want input_required before completed", st)
	}
}
