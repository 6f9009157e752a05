package passthrough_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/bridge/internal/sessions"
	"github.com/taskbridge/taskbridge/internal/jsonrpc"
	"github.com/taskbridge/taskbridge/internal/legacyclient"
	"github.com/taskbridge/taskbridge/legacy"
	"github.com/taskbridge/taskbridge/store/sqlite"
)

// noListUpstream is a 2025-11-25 server that runs tools/call as tasks but offers no
// tasks/list (capabilities.tasks has requests and cancel only). A task completes on the
// second tasks/get after its creation. Tasks are per upstream session.
type noListUpstream struct {
	mu    sync.Mutex
	n     int
	tasks map[string]map[string]*legacy.Task // upstream session → id → task
	gets  map[string]int
	lists int // tasks/list calls that reached it
}

func (u *noListUpstream) Initialize(ctx context.Context, sess *legacy.Session, params json.RawMessage) (json.RawMessage, error) {
	return json.RawMessage(`{"protocolVersion":"2025-11-25","serverInfo":{"name":"no-list","version":"1"},` +
		`"capabilities":{"tools":{},"tasks":{"cancel":{},"requests":{"tools":{"call":{}}}}}}`), nil
}

func (u *noListUpstream) Serve(ctx context.Context, sess *legacy.Session, req *jsonrpc.Message, out legacy.Stream) (json.RawMessage, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.tasks[sess.ID] == nil {
		u.tasks[sess.ID] = map[string]*legacy.Task{}
	}
	mine := u.tasks[sess.ID]
	id := gjson.GetBytes(req.Params, "taskId").Str
	switch req.Method {
	case "tools/list":
		return json.RawMessage(`{"tools":[{"name":"job","inputSchema":{"type":"object"},"execution":{"taskSupport":"optional"}}]}`), nil
	case "tools/call":
		if !gjson.GetBytes(req.Params, "task").Exists() {
			return json.RawMessage(`{"content":[{"type":"text","text":"sync"}]}`), nil
		}
		u.n++
		ttl, poll := int64(60000), int64(100)
		now := time.Now().UTC().Format(time.RFC3339Nano)
		t := &legacy.Task{TaskID: fmt.Sprintf("up-%d", u.n), Status: legacy.StatusWorking, CreatedAt: now, LastUpdatedAt: now, TTL: &ttl, PollInterval: &poll}
		mine[t.TaskID] = t
		return json.Marshal(map[string]any{"task": t})
	case "tasks/get":
		t := mine[id]
		if t == nil {
			return nil, jsonrpc.ErrInvalidParams.Wrapf("Task not found")
		}
		if u.gets[id]++; u.gets[id] >= 2 && t.Status == legacy.StatusWorking {
			t.Status = legacy.StatusCompleted
		}
		return json.Marshal(t)
	case "tasks/cancel":
		t := mine[id]
		if t == nil || t.Status.Terminal() {
			return nil, jsonrpc.ErrInvalidParams.Wrapf("Task not found or terminal")
		}
		t.Status = legacy.StatusCancelled
		return json.Marshal(t)
	case "tasks/list":
		u.lists++
		return nil, jsonrpc.ErrMethodNotFound.Wrapf("tasks/list")
	}
	return nil, jsonrpc.ErrMethodNotFound.Wrapf("%s", req.Method)
}

func (u *noListUpstream) Notify(context.Context, *legacy.Session, *jsonrpc.Message)  {}
func (u *noListUpstream) Respond(context.Context, *legacy.Session, *jsonrpc.Message) {}
func (u *noListUpstream) Closed(context.Context, *legacy.Session)                    {}

// TestPassThroughSynthesizesTasksList: a legacy client in front of a legacy upstream
// without tasks/list sees tasks.list advertised and gets its own session's tasks (ids and
// refreshed statuses) from the bridge's records; another session's tasks never show, and
// the upstream is never asked for tasks/list.
func TestPassThroughSynthesizesTasksList(t *testing.T) {
	ctx := context.Background()
	upSt, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "up.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { upSt.Close() })
	u := &noListUpstream{tasks: map[string]map[string]*legacy.Task{}, gets: map[string]int{}}
	upFace := legacy.NewServer(legacy.Options{Store: sessions.New(upSt), Handler: u})
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "b.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	url := serveInFront(t, ctx, upFace, st)

	a, b := legacyclient.New(url), legacyclient.New(url)
	init, err := a.Initialize(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !gjson.GetBytes(init, "capabilities.tasks.list").Exists() || !gjson.GetBytes(init, "capabilities.tasks.requests.tools.call").Exists() {
		t.Errorf("initialize capabilities %s: want tasks.list added and tasks.requests kept", gjson.GetBytes(init, "capabilities").Raw)
	}
	if _, err := b.Initialize(ctx); err != nil {
		t.Fatal(err)
	}
	create := func(c *legacyclient.Client) string {
		t.Helper()
		res, err := c.Call(ctx, "tools/call", map[string]any{"name": "job", "arguments": map[string]any{}, "task": map[string]any{}})
		if err != nil {
			t.Fatalf("tools/call: %v", err)
		}
		return gjson.GetBytes(res, "task.taskId").Str
	}
	a1, a2, b1 := create(a), create(a), create(b)
	if _, err := a.Call(ctx, "tools/call", map[string]any{"name": "job", "arguments": map[string]any{}}); err != nil {
		t.Fatalf("sync tools/call: %v", err) // not a task: not recorded
	}
	if _, err := a.Call(ctx, "tasks/cancel", map[string]any{"taskId": a2}); err != nil {
		t.Fatalf("tasks/cancel: %v", err)
	}

	list := func(c *legacyclient.Client) map[string]string {
		t.Helper()
		res, err := c.Call(ctx, "tasks/list", map[string]any{})
		if err != nil {
			t.Fatalf("tasks/list: %v", err)
		}
		got := map[string]string{}
		for _, tk := range gjson.GetBytes(res, "tasks").Array() {
			got[tk.Get("taskId").Str] = tk.Get("status").Str
			if !tk.Get("createdAt").Exists() || !tk.Get("ttl").Exists() {
				t.Errorf("listed task %s lacks createdAt or ttl", tk.Raw)
			}
		}
		return got
	}
	// First list: a1 is refreshed by one upstream tasks/get (still working), a2 cancelled.
	if got := list(a); len(got) != 2 || got[a1] != "working" || got[a2] != "cancelled" {
		t.Errorf("session A list %v, want %s working and %s cancelled", got, a1, a2)
	}
	// Second list: the refresh sees a1 completed.
	if got := list(a); got[a1] != "completed" {
		t.Errorf("session A list %v, want %s completed", got, a1)
	}
	if got := list(b); len(got) != 1 || got[b1] == "" {
		t.Errorf("session B list %v, want only %s", got, b1)
	}
	u.mu.Lock()
	lists := u.lists
	u.mu.Unlock()
	if lists != 0 {
		t.Errorf("the upstream got %d tasks/list calls, want 0", lists)
	}
	// A bad cursor is the client's error.
	if _, err := a.Call(ctx, "tasks/list", map[string]any{"cursor": "nope"}); jsonrpc.AsError(err).Code != jsonrpc.CodeInvalidParams {
		t.Errorf("bad cursor: %v, want -32602", err)
	}
}
