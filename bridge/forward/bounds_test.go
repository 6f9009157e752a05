package forward_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/bridge/forward"
	"github.com/taskbridge/taskbridge/internal/fixture"
	"github.com/taskbridge/taskbridge/internal/jsonrpc"
	"github.com/taskbridge/taskbridge/sep2663"
	"github.com/taskbridge/taskbridge/store"
)

// heapAfterGC is the live Go heap after two full collections.
func heapAfterGC() (alloc, inuse uint64) {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc, m.HeapInuse
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }

// bigResultUpstream is a 2026-07-28 upstream (the project's own sep2663 server face) whose
// tool "big" creates a task that is completed at its first tasks/get with a CallToolResult
// of about size bytes. The answer is assembled per request from one shared text, so the
// upstream itself keeps nothing per task.
func bigResultUpstream(t *testing.T, size int) string {
	text := strings.Repeat("x", size)
	var n atomic.Int64
	h := sep2663.HandlerFunc(func(_ context.Context, req *sep2663.Request) (json.RawMessage, error) {
		now := time.Now().UTC().Format(time.RFC3339Nano)
		task := func(id, status string) string {
			return fmt.Sprintf(`"taskId":%q,"status":%q,"createdAt":%q,"lastUpdatedAt":%q,"ttlMs":3600000,"pollIntervalMs":100`, id, status, now, now)
		}
		switch req.Method {
		case sep2663.MethodDiscover:
			return json.RawMessage(`{"supportedVersions":["2026-07-28"],"capabilities":{"tools":{},"extensions":{"` +
				sep2663.ExtensionTasks + `":{}}},"ttlMs":0,"cacheScope":"private"}`), nil
		case "tools/call":
			return json.RawMessage(`{"resultType":"task",` + task(fmt.Sprintf("up-%d", n.Add(1)), "working") + `}`), nil
		case sep2663.MethodTasksGet:
			id := gjson.GetBytes(req.Params, "taskId").Str
			return json.RawMessage(`{"resultType":"complete",` + task(id, "completed") +
				`,"result":{"content":[{"type":"text","text":"` + text + `"}]}}`), nil
		}
		return nil, jsonrpc.ErrMethodNotFound
	})
	srv := httptest.NewServer(sep2663.NewServer(sep2663.ServerOptions{Handler: h}))
	t.Cleanup(srv.Close)
	return srv.URL + "/mcp"
}

// TestFinishedResultsNotHeldInMemory: 12 finished tasks with 2 MiB results (24 MiB),
// never fetched, leave the Go heap of the bridge a few MiB above where it started: the
// finished records it caches carry no payload; tasks/result still answers the whole
// result, read from the store. (The acceptance figures of issue 12, 60 × 6 MiB, are
// measured on a real taskbridge process: cmd/taskbridge TestMemoryBounds.)
func TestFinishedResultsNotHeldInMemory(t *testing.T) {
	const tasks, size = 12, 2 << 20
	e := &env{t: t, upURL: bigResultUpstream(t, size), dbPath: filepath.Join(t.TempDir(), "tb.db")}
	e.start(envConfig{Config: forward.Config{Logger: zerolog.Nop(), PollFloorMs: 100, StatusTimeout: time.Minute}})
	c := e.client()
	owner := "session:" + c.SessionID()
	startAlloc, _ := heapAfterGC()
	var ids []string
	for i := range tasks { // one at a time: big polls at once would only measure the machine
		res := call(t, c, "tools/call", map[string]any{"name": "big", "arguments": map[string]any{"i": i}, "task": map[string]any{}})
		ids = append(ids, res.Get("task.taskId").Str)
		waitFinished(t, e, owner)
	}
	for _, id := range ids { // served from the cache, without the payload
		if st := call(t, c, "tasks/get", map[string]string{"taskId": id}).Get("status").Str; st != "completed" {
			t.Fatalf("task %s: %s", id, st)
		}
	}
	alloc, _ := heapAfterGC()
	grew := int64(alloc) - int64(startAlloc)
	t.Logf("%d finished tasks of %d MiB: heap grew %.1f MiB", tasks, size>>20, mib(grew))
	if grew >= 8<<20 {
		t.Errorf("heap grew %.1f MiB after %d MiB of results, want under 8 MiB", mib(grew), tasks*size>>20)
	}
	res := call(t, c, "tasks/result", map[string]string{"taskId": ids[0]})
	if got := len(res.Get("content.0.text").Str); got != size {
		t.Fatalf("tasks/result after the cache: text of %d bytes, want %d", got, size)
	}
}

// waitFinished waits until owner has no unfinished task and the bridge tracks none.
func waitFinished(t *testing.T, e *env, owner string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		n, err := e.st.CountActive(context.Background(), owner)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 && e.b.ActiveTasks() == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d tasks still unfinished, %d tracked", n, e.b.ActiveTasks())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestSessionPurge: the purge loop deletes sessions not seen for SessionRetention, closed
// or not, and keeps the others; a purged session is unknown to its client (404), which
// re-initializes.
func TestSessionPurge(t *testing.T) {
	var skew atomic.Int64
	now := func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
	e := newEnv(t, func(c *envConfig, _ *fixture.Options) {
		c.PurgeInterval = 50 * time.Millisecond
		c.SessionRetention = time.Hour
		c.Now = now
	})
	idle, closed := e.client(), e.client()
	req, _ := http.NewRequest(http.MethodDelete, e.url, nil)
	req.Header.Set("Mcp-Session-Id", closed.SessionID())
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("DELETE: %v %v", resp, err)
	}
	skew.Store(int64(2 * time.Hour))
	fresh := e.client() // seen now (two hours on)
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, err1 := e.st.GetSession(context.Background(), idle.SessionID())
		_, err2 := e.st.GetSession(context.Background(), closed.SessionID())
		if errors.Is(err1, store.ErrNotFound) && errors.Is(err2, store.ErrNotFound) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sessions not purged: idle %v, closed %v", err1, err2)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := e.st.GetSession(context.Background(), fresh.SessionID()); err != nil {
		t.Fatalf("a session seen within the retention was purged: %v", err)
	}
	time.Sleep(2500 * time.Millisecond) // past the face's session cache
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := idle.Call(ctx, "tools/list", nil); err == nil || !strings.Contains(err.Error(), "Session not found") {
		t.Errorf("a purged session's request: %v, want Session not found", err)
	}
}
