package reverse_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/bridge"
	"github.com/taskbridge/taskbridge/bridge/reverse"
	"github.com/taskbridge/taskbridge/internal/legacyclient"
	"github.com/taskbridge/taskbridge/internal/testenv"
	"github.com/taskbridge/taskbridge/legacy"
	"github.com/taskbridge/taskbridge/sep2663"
	"github.com/taskbridge/taskbridge/store"
	"github.com/taskbridge/taskbridge/store/sqlite"
)

// startLegacyUpstream runs interop/legacy-server.mjs (TS SDK v1, 2025-11-25 tasks) and
// returns its /mcp URL.
func startLegacyUpstream(t *testing.T) string {
	return testenv.StartNodeServer(t, "legacy-server.mjs", "--port", "0")
}

func newReverse(t *testing.T, opts ...func(*bridge.ReverseConfig)) (*bridge.Reverse, string) {
	t.Helper()
	up := startLegacyUpstream(t)
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "b.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return newReverseOn(t, up, st, opts...)
}

// newReverseOn is newReverse in front of the upstream up, over the store st (a restart:
// a second bridge on the first one's store).
func newReverseOn(t *testing.T, up string, st store.Store, opts ...func(*bridge.ReverseConfig)) (*bridge.Reverse, string) {
	t.Helper()
	rc := bridge.ReverseConfig{Upstream: legacy.NewClient(legacy.ClientOptions{URL: up}), Store: st, Logger: zerolog.Nop(), PollFloorMs: 100}
	for _, o := range opts {
		o(&rc)
	}
	r, err := bridge.NewReverse(rc)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	door, err := bridge.NewDoor(bridge.DoorConfig{Logger: zerolog.Nop()}, r)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", door)
	hs := httptest.NewServer(mux)
	t.Cleanup(func() {
		hs.CloseClientConnections()
		hs.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := r.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return r, hs.URL + "/mcp"
}

// pollModern polls tasks/get until pred holds or 20 s pass.
func pollModern(t *testing.T, c *sep2663.Client, id string, pred func(*sep2663.DetailedTask) bool) *sep2663.DetailedTask {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		dt, err := c.GetTask(context.Background(), id, sep2663.RequestMeta{})
		if err != nil {
			t.Fatalf("tasks/get: %v", err)
		}
		if pred(dt) || time.Now().After(deadline) {
			return dt
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestReverseBothErasOneEndpoint: a 2025-11-25 client (pass-through, task + elicitation
// on the tasks/result stream) and a 2026-07-28 client (reverse translation, inputRequests
// + tasks/update) use the same /mcp at the same time, each deleting a file with
// confirmation; both see their own confirmation and result.
func TestReverseBothErasOneEndpoint(t *testing.T) {
	_, url := newReverse(t)
	ctx := context.Background()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { // legacy
		defer wg.Done()
		lc := legacyclient.New(url)
		lc.OnRequest = func(method string, params json.RawMessage) (json.RawMessage, error) {
			if method != "elicitation/create" || gjson.GetBytes(params, "message").Str != "Delete old.txt?" {
				t.Errorf("legacy client got %s %s", method, params)
			}
			return json.RawMessage(`{"action":"accept","content":{"confirm":true}}`), nil
		}
		if _, err := lc.Initialize(ctx); err != nil {
			t.Errorf("legacy initialize: %v", err)
			return
		}
		created, err := lc.Call(ctx, "tools/call", json.RawMessage(`{"name":"confirm_delete","arguments":{"filename":"old.txt"},"task":{}}`))
		if err != nil {
			t.Errorf("legacy tools/call: %v", err)
			return
		}
		id := gjson.GetBytes(created, "task.taskId").Str
		res, err := lc.Call(ctx, "tasks/result", json.RawMessage(`{"taskId":"`+id+`"}`))
		if err != nil {
			t.Errorf("legacy tasks/result: %v", err)
			return
		}
		if got := gjson.GetBytes(res, "content.0.text").Str; got != "Deleted old.txt" {
			t.Errorf("legacy result %q", got)
		}
	}()
	go func() { // modern
		defer wg.Done()
		mc := sep2663.NewClient(sep2663.ClientOptions{URL: url})
		out, err := mc.CallTool(ctx, json.RawMessage(`{"name":"confirm_delete","arguments":{"filename":"new.txt"}}`), sep2663.RequestMeta{ClientCapabilities: json.RawMessage(`{"elicitation":{}}`)}, nil)
		if err != nil || out.Kind != sep2663.KindTask {
			t.Errorf("modern tools/call: %v %+v", err, out)
			return
		}
		dt := pollModern(t, mc, out.Task.TaskID, func(d *sep2663.DetailedTask) bool { return d.Status != sep2663.StatusWorking })
		if dt.Status != sep2663.StatusInputRequired || len(dt.InputRequests) != 1 {
			t.Errorf("modern task: %+v", dt)
			return
		}
		for k, in := range dt.InputRequests {
			if gjson.GetBytes(in.Params, "message").Str != "Delete new.txt?" || gjson.GetBytes(in.Params, "_meta").Exists() {
				t.Errorf("input request %s: %s", k, in.Params)
			}
			if err := mc.UpdateTask(ctx, out.Task.TaskID, sep2663.InputResponses{k: json.RawMessage(`{"action":"accept","content":{"confirm":true}}`)}, sep2663.RequestMeta{}); err != nil {
				t.Errorf("tasks/update: %v", err)
			}
		}
		dt = pollModern(t, mc, out.Task.TaskID, func(d *sep2663.DetailedTask) bool { return d.Status.IsTerminal() })
		if dt.Status != sep2663.StatusCompleted || gjson.GetBytes(dt.Result, "content.0.text").Str != "Deleted new.txt" ||
			gjson.GetBytes(dt.Result, "resultType").Str != "complete" {
			t.Errorf("modern final: %s %s", dt.Status, dt.Result)
		}
	}()
	wg.Wait()
}

// TestReverseLostSession: when the upstream drops the session a task lives in, tasks/get
// reports failed with an explicit unknown outcome (never a silent "working" forever, and
// never a plain failure that invites a blind retry).
func TestReverseLostSession(t *testing.T) {
	r, url := newReverse(t)
	ctx := context.Background()
	mc := sep2663.NewClient(sep2663.ClientOptions{URL: url})
	out, err := mc.CallTool(ctx, json.RawMessage(`{"name":"slow_compute","arguments":{"seconds":30}}`), sep2663.RequestMeta{}, nil)
	if err != nil || out.Kind != sep2663.KindTask {
		t.Fatalf("tools/call: %v %+v", err, out)
	}
	s, err := reverse.PooledSession(ctx, r.Reverse)
	if err != nil {
		t.Fatal(err)
	}
	// End the upstream session behind the bridge's back (as an upstream restart would).
	req, _ := http.NewRequest(http.MethodDelete, reverse.UpstreamURL(r.Reverse), nil)
	req.Header.Set("Mcp-Session-Id", s.ID())
	req.Header.Set("MCP-Protocol-Version", s.ProtocolVersion())
	if resp, err := http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	} else {
		resp.Body.Close()
	}
	dt := pollModern(t, mc, out.Task.TaskID, func(d *sep2663.DetailedTask) bool { return d.Status.IsTerminal() })
	if dt.Status != sep2663.StatusFailed || dt.Error == nil || !strings.Contains(dt.StatusMessage, "unknown") ||
		gjson.GetBytes(dt.Error.Data, "outcome").Str != "unknown" {
		t.Fatalf("lost task: status %s message %q error %+v", dt.Status, dt.StatusMessage, dt.Error)
	}
	// The bridge opened a new session: new calls work.
	if out, err := mc.CallTool(ctx, json.RawMessage(`{"name":"greet","arguments":{"name":"again"}}`), sep2663.RequestMeta{}, nil); err != nil ||
		gjson.GetBytes(out.Result, "content.0.text").Str != "Hello, again!" {
		t.Fatalf("call after session loss: %v %s", err, out.Result)
	}
}

// TestReverseTaskIDsAreBridgeOwned: the modern client never sees the upstream's task id,
// and an unknown id is -32602.
func TestReverseTaskIDsAreBridgeOwned(t *testing.T) {
	r, url := newReverse(t)
	ctx := context.Background()
	mc := sep2663.NewClient(sep2663.ClientOptions{URL: url})
	out, err := mc.CallTool(ctx, json.RawMessage(`{"name":"slow_compute","arguments":{"seconds":0}}`), sep2663.RequestMeta{}, nil)
	if err != nil || out.Kind != sep2663.KindTask {
		t.Fatalf("tools/call: %v", err)
	}
	upID := reverse.UpstreamTaskID(r.Reverse, out.Task.TaskID)
	if upID == "" || upID == out.Task.TaskID {
		t.Fatalf("bridge id %q is not a bridge-minted id distinct from upstream %q", out.Task.TaskID, upID)
	}
	if _, err := mc.GetTask(ctx, upID, sep2663.RequestMeta{}); err == nil || !strings.Contains(err.Error(), "-32602") {
		t.Fatalf("tasks/get with the upstream id: %v, want -32602", err)
	}
}

// TestReverseMaxResultBytes: a task result larger than max_result_bytes is not kept; the
// task fails with the "too large" error, which still names the real outcome (the tool
// succeeded upstream), so the client does not blindly run it again.
func TestReverseMaxResultBytes(t *testing.T) {
	_, url := newReverse(t, func(rc *bridge.ReverseConfig) { rc.MaxResultBytes = 16 })
	ctx := context.Background()
	mc := sep2663.NewClient(sep2663.ClientOptions{URL: url})
	out, err := mc.CallTool(ctx, json.RawMessage(`{"name":"slow_compute","arguments":{"seconds":0}}`), sep2663.RequestMeta{}, nil)
	if err != nil || out.Kind != sep2663.KindTask {
		t.Fatalf("tools/call: %v %+v", err, out)
	}
	dt := pollModern(t, mc, out.Task.TaskID, func(d *sep2663.DetailedTask) bool { return d.Status.IsTerminal() })
	if dt.Status != sep2663.StatusFailed || dt.Error == nil || dt.Result != nil ||
		gjson.GetBytes(dt.Error.Data, "limit").Str != "maxResultBytes" || gjson.GetBytes(dt.Error.Data, "outcome").Str != "succeeded" {
		t.Fatalf("over-large result: status %s error %+v result %s", dt.Status, dt.Error, dt.Result)
	}
}
