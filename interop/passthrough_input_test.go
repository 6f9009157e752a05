package interop

import (
	"context"
	"encoding/json"
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

// TestLegacyPassThroughKeepsCutQuestion: the TS SDK v1 legacy server (legacy-server.mjs)
// sends confirm_delete's elicitation/create once, on the client's tasks/result stream
// through the legacy pass-through. The stream is cut (its TCP connection closed) while the
// question is pending: the task stays input_required, and the next tasks/result on a new
// connection gets the same question under the same request id. Another session of the same
// bridge never gets it. The answer, sent twice, reaches the upstream once (its "responses"
// count) and the task completes. Then the same across bridge restarts on the same SQLite
// store: the question comes again with the same id after a restart, is answered, the
// bridge restarts again, the answer is repeated, and the upstream still saw one answer.
func TestLegacyPassThroughKeepsCutQuestion(t *testing.T) {
	if testing.Short() {
		t.Skip("builds taskbridge and restarts it")
	}
	upstream := testenv.StartNodeServer(t, "legacy-server.mjs", "--port", "0")
	bin, _ := binaries(t)
	dsn := "sqlite:" + filepath.Join(t.TempDir(), "tb.db")
	url0, cmd0 := serveReplicaCmd(t, bin, upstream, dsn, "pass-0")
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()

	c := legacyclient.New(url0)
	c.Requests = make(chan *jsonrpc.Message, 8)
	if _, err := c.Initialize(ctx); err != nil {
		t.Fatalf("initialize: %v", err)
	}
	answer := json.RawMessage(`{"action":"accept","content":{"confirm":true}}`)

	// Cut, then a new tasks/result on a new connection.
	task := createConfirm(t, ctx, c, "a.txt")
	q1 := cutQuestion(t, ctx, c, task)
	waitStatus(t, ctx, c, task, "input_required")
	other := legacyclient.New(c.URL)
	other.Requests = make(chan *jsonrpc.Message, 1)
	if _, err := other.Initialize(ctx); err != nil {
		t.Fatalf("initialize a second session: %v", err)
	}
	if _, err := other.Call(ctx, "tasks/result", map[string]string{"taskId": task}); err == nil {
		t.Error("another session's tasks/result of the task answered, want an error")
	}
	if len(other.Requests) != 0 {
		t.Errorf("another session got %s", (<-other.Requests).Method)
	}
	resetStats(t, ctx, upstream)
	res := resultWithQuestion(t, ctx, c, task, q1, func(q *jsonrpc.Message) {
		for range 2 {
			if err := c.Respond(ctx, q.ID, answer); err != nil {
				t.Errorf("answer: %v", err)
			}
		}
	})
	if txt := gjson.GetBytes(res, "content.0.text").Str; txt != "Deleted a.txt" {
		t.Errorf("tasks/result: %s, want Deleted a.txt", res)
	}
	if n := upstreamResponses(t, ctx, upstream); n != 1 {
		t.Errorf("the upstream saw %d answers, want 1", n)
	}

	// Restart while the question is pending, then again after the answer.
	task = createConfirm(t, ctx, c, "b.txt")
	q1 = cutQuestion(t, ctx, c, task)
	_ = cmd0.Process.Signal(syscall.SIGKILL)
	_ = cmd0.Wait()
	url1, cmd1 := serveReplicaCmd(t, bin, upstream, dsn, "pass-1")
	c.URL = url1
	resetStats(t, ctx, upstream)
	got := resultWithQuestion(t, ctx, c, task, q1, func(q *jsonrpc.Message) {
		if err := c.Respond(ctx, q.ID, answer); err != nil {
			t.Errorf("answer after the restart: %v", err)
		}
	})
	if txt := gjson.GetBytes(got, "content.0.text").Str; txt != "Deleted b.txt" {
		t.Errorf("tasks/result after the restart: %s, want Deleted b.txt", got)
	}
	_ = cmd1.Process.Signal(syscall.SIGKILL)
	_ = cmd1.Wait()
	url2, _ := serveReplicaCmd(t, bin, upstream, dsn, "pass-2")
	c.URL = url2
	if err := c.Respond(ctx, q1.ID, answer); err != nil {
		t.Errorf("the repeated answer after the second restart: %v", err)
	}
	waitStatus(t, ctx, c, task, "completed")
	if n := upstreamResponses(t, ctx, upstream); n != 1 {
		t.Errorf("across the restarts the upstream saw %d answers, want 1", n)
	}
}

// createConfirm starts confirm_delete for filename as a task and returns its id.
func createConfirm(t *testing.T, ctx context.Context, c *legacyclient.Client, filename string) string {
	t.Helper()
	res, err := c.Call(ctx, "tools/call", json.RawMessage(`{"name":"confirm_delete","arguments":{"filename":"`+filename+`"},"task":{"ttl":60000}}`))
	if err != nil {
		t.Fatalf("tools/call confirm_delete: %v", err)
	}
	id := gjson.GetBytes(res, "task.taskId").Str
	if id == "" {
		t.Fatalf("tools/call confirm_delete: %s, want a CreateTaskResult", res)
	}
	return id
}

// cutQuestion opens tasks/result of task, waits for its question and cuts the stream (the
// request's context ends, which closes its TCP connection), leaving the question unanswered.
func cutQuestion(t *testing.T, ctx context.Context, c *legacyclient.Client, task string) *jsonrpc.Message {
	t.Helper()
	cctx, cut := context.WithCancel(ctx)
	ended := make(chan error, 1)
	go func() {
		_, err := c.Call(cctx, "tasks/result", map[string]string{"taskId": task})
		ended <- err
	}()
	q := nextQuestion(t, ctx, c, task)
	cut()
	if err := <-ended; err == nil {
		t.Fatal("the cut tasks/result answered")
	}
	return q
}

// resultWithQuestion calls tasks/result of task on a new connection, expects the question
// want again (same id, same method), hands it to answer and returns the result.
func resultWithQuestion(t *testing.T, ctx context.Context, c *legacyclient.Client, task string, want *jsonrpc.Message, answer func(*jsonrpc.Message)) json.RawMessage {
	t.Helper()
	c.HTTP = &http.Client{Transport: &http.Transport{}} // a new connection
	type out struct {
		res json.RawMessage
		err error
	}
	ended := make(chan out, 1)
	go func() {
		res, err := c.Call(ctx, "tasks/result", map[string]string{"taskId": task})
		ended <- out{res, err}
	}()
	q := nextQuestion(t, ctx, c, task)
	if q.ID.Raw() != want.ID.Raw() || q.Method != want.Method {
		t.Errorf("the question again: %s %s, want %s %s (the same request id)", q.Method, q.ID.Raw(), want.Method, want.ID.Raw())
	}
	answer(q)
	o := <-ended
	if o.err != nil {
		t.Fatalf("tasks/result after the answer: %v", o.err)
	}
	return o.res
}

// nextQuestion waits for the next server request and checks it is task's elicitation.
func nextQuestion(t *testing.T, ctx context.Context, c *legacyclient.Client, task string) *jsonrpc.Message {
	t.Helper()
	select {
	case q := <-c.Requests:
		if q.Method != "elicitation/create" || gjson.GetBytes(q.Params, `_meta.io\.modelcontextprotocol/related-task.taskId`).Str != task {
			t.Fatalf("server request %s %s, want task %s's elicitation/create", q.Method, q.Params, task)
		}
		return q
	case <-time.After(15 * time.Second):
		t.Fatal("no question on tasks/result within 15 s")
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}
	return nil
}

func statsURL(upstream string) string { return strings.TrimSuffix(upstream, "/mcp") + "/stats" }

func resetStats(t *testing.T, ctx context.Context, upstream string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodDelete, statsURL(upstream), nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
}

// upstreamResponses is the upstream's count of JSON-RPC responses clients POSTed.
func upstreamResponses(t *testing.T, ctx context.Context, upstream string) int64 {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, statsURL(upstream), nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var stats map[string]int64
	if err := json.NewDecoder(resp.Body).Decode(&stats); err != nil {
		t.Fatal(err)
	}
	return stats["responses"]
}
