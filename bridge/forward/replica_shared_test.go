package forward_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/internal/jsonrpc"
	"github.com/taskbridge/taskbridge/internal/legacyclient"
)

// Issue 14 part 2: what replicas coordinate through the store (store.Shared).

// TestReplicasMRTRAnswerOnOtherReplica: the input request of a pre-task MRTR round goes
// out on the tools/call stream replica A holds; the client's answer reaches replica B.
// The call completes with the answer the client gave (before, it timed out).
func TestReplicasMRTRAnswerOnOtherReplica(t *testing.T) {
	r := newReplicas(t)
	onA := legacyclient.New(r.urls[0])
	onA.Requests = make(chan *jsonrpc.Message, 4)
	if _, err := onA.Initialize(context.Background()); err != nil {
		t.Fatal(err)
	}
	onB := legacyclient.New(r.urls[1])
	onB.SetSessionID(onA.SessionID())
	type res struct {
		raw []byte
		err error
	}
	done := make(chan res, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		out, err := onA.Call(ctx, "tools/call", map[string]any{"name": "test_tool_with_task", "arguments": map[string]any{}, "task": map[string]any{}})
		done <- res{out, err}
	}()
	var ask *jsonrpc.Message
	select {
	case ask = <-onA.Requests:
	case <-time.After(20 * time.Second):
		t.Fatal("no MRTR input request relayed on replica A's stream")
	}
	if err := onB.Respond(context.Background(), ask.ID, raw(`{"action":"accept","content":{"name":"replica"}}`)); err != nil {
		t.Fatal(err)
	}
	var got res
	select {
	case got = <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the call on replica A never got the answer sent to replica B")
	}
	if got.err != nil {
		t.Fatalf("tools/call: %v", got.err)
	}
	taskID := gjson.GetBytes(got.raw, "task.taskId").Str
	waitStatus(t, onB, taskID, "completed")
	if txt := call(t, onB, "tasks/result", id(taskID)).Get("content.0.text").Str; !strings.Contains(txt, "Hello, replica!") {
		t.Fatalf("result %q: want the answer given on replica B", txt)
	}
}

// TestReplicasOnePollerPerTask: 100 pollers spread over both replicas ask for one task;
// the upstream sees about one tasks/get per poll interval (the poll lease), not one per
// replica.
func TestReplicasOnePollerPerTask(t *testing.T) {
	r := newReplicas(t)
	first := legacyclient.New(r.urls[0])
	if _, err := first.Initialize(context.Background()); err != nil {
		t.Fatal(err)
	}
	taskID := createTask(t, first, "long_job", map[string]any{"seconds": 600})
	gets := func() int {
		n := 0
		for _, v := range r.fx.Stats().TaskGets {
			n += v
		}
		return n
	}
	const window, interval = 3 * time.Second, 100 * time.Millisecond
	before := gets()
	ctx, cancel := context.WithTimeout(context.Background(), window)
	defer cancel()
	var wg sync.WaitGroup
	var polls sync.Map
	for i := range 100 {
		c := legacyclient.New(r.urls[i%2])
		c.SetSessionID(first.SessionID())
		wg.Go(func() {
			n := 0
			for ctx.Err() == nil {
				if _, err := c.Call(ctx, "tasks/get", id(taskID)); err == nil {
					n++
				}
				time.Sleep(20 * time.Millisecond)
			}
			polls.Store(i, n)
		})
	}
	wg.Wait()
	got := gets() - before
	clientPolls := 0
	polls.Range(func(_, v any) bool { clientPolls += v.(int); return true })
	t.Logf("%d client tasks/get over %s → %d upstream tasks/get (interval %s)", clientPolls, window, got, interval)
	if clientPolls < 200 {
		t.Fatalf("only %d client polls: the test did not load the replicas", clientPolls)
	}
	// One poller: about window/interval polls (30; 40 with slack); two would make 50-60.
	if limit := 40; got > limit {
		t.Errorf("upstream saw %d tasks/get in %s, want ≤ %d (one per %s, not one per replica)", got, window, limit, interval)
	}
	if got < 5 {
		t.Errorf("upstream saw %d tasks/get in %s: nobody polled", got, window)
	}
}

// TestReplicasResumeOnOtherReplica: a tasks/result stream held by replica A is cut after
// the elicitation; the client answers through replica B and resumes with Last-Event-ID on
// replica B, which replays the rest from the store: the result arrives exactly once and no
// message is repeated.
func TestReplicasResumeOnOtherReplica(t *testing.T) {
	r := newReplicas(t)
	c := legacyclient.New(r.urls[0])
	if _, err := c.Initialize(context.Background()); err != nil {
		t.Fatal(err)
	}
	onB := legacyclient.New(r.urls[1])
	onB.SetSessionID(c.SessionID())
	tid := call(t, c, "tools/call", raw(`{"name":"confirm_delete","arguments":{"filename":"far.txt"},"task":{}}`)).Get("task.taskId").Str
	body := `{"jsonrpc":"2.0","id":"res-far","method":"tasks/result","params":{"taskId":"` + tid + `"}}`
	post := rawRequest(t, r.urls[0], c.SessionID(), body, "")
	var seen []gjson.Result
	deadline := time.AfterFunc(20*time.Second, post.cut)
	var ask gjson.Result
	for ask.Raw == "" {
		m, err := post.next()
		if err != nil {
			t.Fatalf("before the elicitation: %v", err)
		}
		seen = append(seen, m)
		if m.Get("method").Str == "elicitation/create" {
			ask = m
		}
	}
	deadline.Stop()
	post.cut()

	if err := onB.Respond(context.Background(), jsonrpc.StringID(ask.Get("id").Str), json.RawMessage(`{"action":"accept","content":{"confirm":true}}`)); err != nil {
		t.Fatal(err)
	}
	resumed := rawRequest(t, r.urls[1], c.SessionID(), "", post.lastID)
	deadline = time.AfterFunc(20*time.Second, resumed.cut)
	defer deadline.Stop()
	for {
		m, err := resumed.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("stream resumed on replica B: %v", err)
		}
		seen = append(seen, m)
	}
	var responses, asks int
	raws := map[string]bool{}
	for _, m := range seen {
		if raws[m.Raw] {
			t.Errorf("message delivered twice: %s", m.Raw)
		}
		raws[m.Raw] = true
		switch {
		case m.Get("method").Str == "elicitation/create":
			asks++
		case m.Get("id").Str == "res-far":
			responses++
			if text := m.Get("result.content.0.text").Str; text != "Deleted far.txt" {
				t.Errorf("tasks/result = %s", m.Raw)
			}
		}
	}
	if responses != 1 || asks != 1 {
		t.Fatalf("responses = %d, elicitations = %d, want 1 and 1: %v", responses, asks, seen)
	}
	// The stream ended and the client has all of it: a resume anywhere says so.
	if st, _ := getStatus(t, r.urls[1], c.SessionID(), resumed.lastID); st != 204 {
		t.Errorf("resume after the response on replica B: %d, want 204", st)
	}
}

// getStatus sends a resume (GET with Last-Event-ID) and returns its status and body.
func getStatus(t *testing.T, url, sid, lastEventID string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	req.Header.Set("Last-Event-ID", lastEventID)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
