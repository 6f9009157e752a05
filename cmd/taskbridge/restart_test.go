// Acceptance: "SIGKILL after CreateTaskResult". A real taskbridge process is killed with
// SIGKILL right after it answered a task-augmented tools/call; a new process on the same
// SQLite file (on a new port) must serve the same legacy session: tasks/result gives the
// result, tasks/get, tasks/list and tasks/cancel keep working, and the upstream ran each
// tool call exactly once.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/internal/fixture"
	"github.com/taskbridge/taskbridge/internal/legacyclient"
	"github.com/taskbridge/taskbridge/internal/testenv"
)

const relatedTaskPath = `_meta.io\.modelcontextprotocol/related-task.taskId`

// buildTaskbridge compiles this command with the go on PATH into dir.
func buildTaskbridge(t *testing.T, dir string) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		testenv.Missing(t, "go not on PATH: %v", err)
	}
	bin := filepath.Join(dir, "taskbridge")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goBin, "build", "-o", bin, ".")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// child is one "taskbridge serve" process.
type child struct {
	cmd    *exec.Cmd
	url    string // http://ADDR/mcp
	log    string // path of its stderr
	waited bool
}

// startChild runs "taskbridge serve" on the SQLite file db (see serveChild in
// fault_test.go) and waits for its listening line; it is killed at test end.
func startChild(t *testing.T, bin, upstream, db, name string) *child {
	return serveChild(t, bin, upstream, "sqlite:"+db, name)
}

// kill sends SIGKILL and reaps the process; safe to call twice.
func (c *child) kill(t *testing.T) {
	t.Helper()
	if c.waited {
		return
	}
	c.waited = true
	if err := c.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Logf("SIGKILL: %v", err)
	}
	_ = c.cmd.Wait()
}

func call(t *testing.T, c *legacyclient.Client, method string, params any) json.RawMessage {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := c.Call(ctx, method, params)
	if err != nil {
		t.Fatalf("%s %v: %v", method, params, err)
	}
	return res
}

// createTask sends a task-augmented tools/call slow_compute and returns the bridge task id.
func createTask(t *testing.T, c *legacyclient.Client, seconds int, label string) string {
	t.Helper()
	params := fmt.Sprintf(`{"name":"slow_compute","arguments":{"seconds":%d,"label":%q},"task":{"ttl":120000}}`, seconds, label)
	res := call(t, c, "tools/call", json.RawMessage(params))
	id := gjson.GetBytes(res, "task.taskId").Str
	if id == "" || gjson.GetBytes(res, "task.status").Str != "working" {
		t.Fatalf("tools/call %s: want a CreateTaskResult with a working task, got %s", label, res)
	}
	return id
}

func TestRestartAfterSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildTaskbridge(t, t.TempDir())

	for _, tc := range []struct {
		name string
		// seconds of the task whose result is awaited after the restart, and how long to
		// wait between its CreateTaskResult and the SIGKILL.
		seconds   int
		killAfter time.Duration
	}{
		{name: "kill-while-working", seconds: 3, killAfter: 0},
		{name: "kill-after-upstream-completed", seconds: 1, killAfter: 2 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			restartScenario(t, bin, tc.seconds, tc.killAfter)
		})
	}
}

func restartScenario(t *testing.T, bin string, seconds int, killAfter time.Duration) {
	fx := fixture.New(fixture.Options{Name: "restart-upstream", Scale: 1})
	up := httptest.NewServer(fx)
	t.Cleanup(func() { up.Close(); fx.Close() })
	db := filepath.Join(t.TempDir(), "taskbridge.db")

	first := startChild(t, bin, up.URL+"/mcp", db, "first")
	c := legacyclient.New(first.url)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.Initialize(ctx); err != nil {
		t.Fatalf("initialize: %v", err)
	}
	sid := c.SessionID()
	if sid == "" {
		t.Fatal("the bridge issued no Mcp-Session-Id")
	}

	// B runs long and is cancelled after the restart; A is awaited.
	idB := createTask(t, c, 60, "B")
	createdA := time.Now()
	idA := createTask(t, c, seconds, "A")
	if killAfter > 0 {
		time.Sleep(killAfter) // A has completed upstream by now
	}
	first.kill(t)
	if got := fx.Stats().Executions["slow_compute"]; got != 2 {
		t.Errorf("before restart: upstream executions of slow_compute = %d, want 2", got)
	}

	second := startChild(t, bin, up.URL+"/mcp", db, "second")
	if second.url == first.url {
		t.Fatalf("second process listens on the same URL %s", second.url)
	}
	c.URL = second.url
	c.SetSessionID(sid)

	// tasks/result for A, created before the kill: the same result, once.
	res := call(t, c, "tasks/result", map[string]string{"taskId": idA})
	wantText := fmt.Sprintf("Computation A completed after %ds. Result: 42.", seconds)
	if got := gjson.GetBytes(res, "content.0.text").Str; got != wantText {
		t.Errorf("tasks/result %s after restart: text %q, want %q (result %s)", idA, got, wantText, res)
	}
	if gjson.GetBytes(res, "isError").Bool() {
		t.Errorf("tasks/result %s after restart: isError result %s", idA, res)
	}
	if got := gjson.GetBytes(res, relatedTaskPath).Str; got != idA {
		t.Errorf("tasks/result related-task %q, want %q", got, idA)
	}
	// A re-run upstream would take another full run from the restart.
	if el, limit := time.Since(createdA), time.Duration(seconds)*time.Second+killAfter+10*time.Second; el > limit {
		t.Errorf("tasks/result returned %s after creation, want under %s", el, limit)
	}

	if s := gjson.GetBytes(call(t, c, "tasks/get", map[string]string{"taskId": idA}), "status").Str; s != "completed" {
		t.Errorf("tasks/get %s after restart: %q, want completed", idA, s)
	}
	if s := gjson.GetBytes(call(t, c, "tasks/get", map[string]string{"taskId": idB}), "status").Str; s != "working" {
		t.Errorf("tasks/get %s (60 s job) after restart: %q, want working", idB, s)
	}

	list := call(t, c, "tasks/list", nil)
	var listed []string
	for _, v := range gjson.GetBytes(list, "tasks.#.taskId").Array() {
		listed = append(listed, v.Str)
	}
	if !slices.Contains(listed, idA) || !slices.Contains(listed, idB) {
		t.Errorf("tasks/list after restart: %v, want both %s and %s", listed, idA, idB)
	}

	// tasks/cancel on B, created before the kill.
	cancels := fx.Stats().Cancels
	cres := call(t, c, "tasks/cancel", map[string]string{"taskId": idB})
	if s := gjson.GetBytes(cres, "status").Str; s != "cancelled" {
		t.Errorf("tasks/cancel %s after restart: %s, want status cancelled", idB, cres)
	}
	if s := gjson.GetBytes(call(t, c, "tasks/get", map[string]string{"taskId": idB}), "status").Str; s != "cancelled" {
		t.Errorf("tasks/get %s after cancel: %q, want cancelled", idB, s)
	}
	if got := fx.Stats().Cancels; got != cancels+1 {
		t.Errorf("upstream tasks/cancel count went %d → %d, want +1", cancels, got)
	}

	// Exactly one upstream execution per created task: nothing was re-run.
	if got := fx.Stats().Executions["slow_compute"]; got != 2 {
		t.Errorf("upstream executions of slow_compute = %d, want 2 (one per created task)", got)
	}
}
