package interop

import (
	"bytes"
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
)

// TestLegacyPassThroughSurvivesRestart: a 2025-11-25 client's session through the legacy
// pass-through in front of the TS SDK v1 legacy server (legacy-server.mjs, which binds
// each task to its upstream session) keeps its tasks across a bridge restart on the same
// store: the restarted bridge adopts the stored upstream session instead of opening a new
// one, so tasks/get and tasks/result of a task created before the restart answer (not
// -32602). When the upstream no longer knows the session (here: a new upstream process),
// the client gets -32001 "Session not found", then HTTP 404 for its next request, and a
// fresh initialize works.
func TestLegacyPassThroughSurvivesRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds taskbridge and restarts it")
	}
	upstream := testenv.StartNodeServer(t, "legacy-server.mjs", "--port", "0")
	bin, _ := binaries(t)
	dsn := "sqlite:" + filepath.Join(t.TempDir(), "tb.db")
	url0, cmd0 := serveReplicaCmd(t, bin, upstream, dsn, "pass-0")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	c := legacyclient.New(url0)
	if _, err := c.Initialize(ctx); err != nil {
		t.Fatalf("initialize: %v", err)
	}
	create := func(tool string, seconds float64) string {
		t.Helper()
		res, err := c.Call(ctx, "tools/call", json.RawMessage(`{"name":"`+tool+`","arguments":{"seconds":`+
			jsonNum(seconds)+`},"task":{"ttl":60000}}`))
		if err != nil {
			t.Fatalf("tools/call %s: %v", tool, err)
		}
		id := gjson.GetBytes(res, "task.taskId").Str
		if id == "" {
			t.Fatalf("tools/call %s: %s, want a CreateTaskResult", tool, res)
		}
		return id
	}
	running := create("long_job", 3)  // still working at the restart
	finished := create("long_job", 0) // completed before the restart
	waitStatus(t, ctx, c, finished, "completed")

	// Restart: SIGKILL, then a new process on the same store; the client keeps its session.
	_ = cmd0.Process.Signal(syscall.SIGKILL)
	_ = cmd0.Wait()
	url1, cmd1 := serveReplicaCmd(t, bin, upstream, dsn, "pass-1")
	c.URL = url1

	res, err := c.Call(ctx, "tasks/get", map[string]string{"taskId": running})
	if err != nil {
		t.Fatalf("tasks/get of a task created before the restart: %v", err)
	}
	if st := gjson.GetBytes(res, "status").Str; st != "working" && st != "completed" {
		t.Errorf("tasks/get after the restart: status %q", st)
	}
	for _, id := range []string{finished, running} {
		res, err := c.Call(ctx, "tasks/result", map[string]string{"taskId": id})
		if err != nil || !strings.Contains(gjson.GetBytes(res, "content.0.text").Str, "long_job done") {
			t.Errorf("tasks/result %s after the restart: %s, %v", id, res, err)
		}
	}
	if id := create("slow_compute", 0); id == "" { // the adopted session creates tasks too
		t.Error("no task after the restart")
	}

	// The upstream forgets the session (a new upstream process; same store, so the bridge
	// adopts the id it stored): the client's session ends, as an unknown session would.
	_ = cmd1.Process.Signal(syscall.SIGKILL)
	_ = cmd1.Wait()
	upstream2 := testenv.StartNodeServer(t, "legacy-server.mjs", "--port", "0")
	url2, _ := serveReplicaCmd(t, bin, upstream2, dsn, "pass-2")
	c.URL = url2
	_, err = c.Call(ctx, "tasks/get", map[string]string{"taskId": running})
	var je *jsonrpc.Error
	if !errors.As(err, &je) || je.Code != jsonrpc.CodeSessionNotFound {
		t.Fatalf("tasks/get once the upstream lost the session: %v, want -32001", err)
	}
	if code := rawPost(t, ctx, url2, c.SessionID()); code != http.StatusNotFound {
		t.Errorf("the next request of the ended session: HTTP %d, want 404", code)
	}
	fresh := legacyclient.New(url2)
	if _, err := fresh.Initialize(ctx); err != nil {
		t.Fatalf("a new session after the old one ended: %v", err)
	}
	c = fresh
	if id := create("slow_compute", 0); id == "" {
		t.Error("no task in the new session")
	}
}

// waitStatus polls tasks/get until the task has status want.
func waitStatus(t *testing.T, ctx context.Context, c *legacyclient.Client, id, want string) {
	t.Helper()
	for {
		res, err := c.Call(ctx, "tasks/get", map[string]string{"taskId": id})
		if err != nil {
			t.Fatalf("tasks/get %s: %v", id, err)
		}
		if gjson.GetBytes(res, "status").Str == want {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("task %s: %s, want %s", id, res, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// rawPost POSTs a ping in session sid and returns the HTTP status.
func rawPost(t *testing.T, ctx context.Context, url, sid string) int {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader([]byte(`{"jsonrpc":"2.0","id":99,"method":"tools/list"}`)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func jsonNum(f float64) string { b, _ := json.Marshal(f); return string(b) }
