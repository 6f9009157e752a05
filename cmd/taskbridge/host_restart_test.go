// Acceptance 4 of issue 4: a real taskbridge process is SIGKILLed while a bridge-hosted
// task's synchronous upstream call is in flight (upstream: the fixture without the tasks
// extension). A new process on the same SQLite file must report the task failed with an
// unknown outcome, say so, and never re-run it: the upstream saw the call once.
package main

import (
	"context"
	"errors"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/internal/fixture"
	"github.com/taskbridge/taskbridge/internal/jsonrpc"
	"github.com/taskbridge/taskbridge/internal/legacyclient"
)

func TestHostedTaskSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildTaskbridge(t, t.TempDir())
	fx := fixture.New(fixture.Options{NoTasksExtension: true, Scale: 1})
	up := httptest.NewServer(fx)
	t.Cleanup(func() { up.Close(); fx.Close() })
	db := filepath.Join(t.TempDir(), "tb.db")

	first := startChild(t, bin, up.URL+"/mcp", db, "first")
	c := legacyclient.New(first.url)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.Initialize(ctx); err != nil {
		t.Fatal(err)
	}
	created := call(t, c, "tools/call", map[string]any{"name": "slow_compute", "arguments": map[string]any{"seconds": 30}, "task": map[string]any{}})
	tid := gjson.GetBytes(created, "task.taskId").Str
	if tid == "" {
		t.Fatalf("want a CreateTaskResult, got %s", created)
	}
	for deadline := time.Now().Add(10 * time.Second); fx.Stats().Methods["tools/call"] < 1; {
		if time.Now().After(deadline) {
			t.Fatal("the hosted call never reached the upstream")
		}
		time.Sleep(20 * time.Millisecond)
	}
	first.kill(t)

	second := startChild(t, bin, up.URL+"/mcp", db, "second")
	c2 := legacyclient.New(second.url)
	c2.SetSessionID(c.SessionID())
	got := call(t, c2, "tasks/get", map[string]string{"taskId": tid})
	if s := gjson.GetBytes(got, "status").Str; s != "failed" {
		t.Errorf("status after restart %q, want failed (%s)", s, got)
	}
	if msg := gjson.GetBytes(got, "statusMessage").Str; !strings.Contains(msg, "unknown") {
		t.Errorf("statusMessage %q does not say the outcome is unknown", msg)
	}
	_, err := c2.Call(ctx, "tasks/result", map[string]string{"taskId": tid})
	var je *jsonrpc.Error
	if !errors.As(err, &je) || !strings.Contains(string(je.Data), `"outcome":"unknown"`) {
		t.Errorf("tasks/result after restart: %v, want an error with outcome unknown", err)
	}
	time.Sleep(500 * time.Millisecond) // a re-run would have reached the upstream by now
	if n := fx.Stats().Methods["tools/call"]; n != 1 {
		t.Errorf("the upstream saw %d tools/call, want 1", n)
	}
}
