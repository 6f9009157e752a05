package passthrough_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/bridge/internal/sessions"
	"github.com/taskbridge/taskbridge/internal/jsonrpc"
	"github.com/taskbridge/taskbridge/internal/legacyclient"
	"github.com/taskbridge/taskbridge/legacy"
	"github.com/taskbridge/taskbridge/record"
	"github.com/taskbridge/taskbridge/store/sqlite"
)

// getAskUpstream is a 2025-11-25 server whose one task asks its question (with the
// related-task _meta) on the upstream session's GET stream, once, and completes with the
// answer; tasks/result blocks until then. It counts the answers it receives.
type getAskUpstream struct {
	face      *legacy.Server
	mu        sync.Mutex
	answers   []json.RawMessage
	done      chan struct{}
	cancelled bool
}

func (u *getAskUpstream) Initialize(context.Context, *legacy.Session, json.RawMessage) (json.RawMessage, error) {
	return json.RawMessage(`{"protocolVersion":"2025-11-25","serverInfo":{"name":"get-ask","version":"1"},` +
		`"capabilities":{"tools":{},"tasks":{"list":{},"cancel":{},"requests":{"tools":{"call":{}}}}}}`), nil
}

func (u *getAskUpstream) Serve(ctx context.Context, sess *legacy.Session, req *jsonrpc.Message, out legacy.Stream) (json.RawMessage, error) {
	now := time.Now().UTC().Format(time.RFC3339Nano)
	switch req.Method {
	case "tools/list":
		return json.RawMessage(`{"tools":[{"name":"ask","inputSchema":{"type":"object"},"execution":{"taskSupport":"optional"}}]}`), nil
	case "tools/call":
		go func() { // ask on the GET stream once the bridge holds it
			q := json.RawMessage(`{"mode":"form","message":"Proceed?","requestedSchema":{"type":"object","properties":{"ok":{"type":"boolean"}}},` +
				`"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"up-1"}}}`)
			for !u.face.Push(sess.ID, &jsonrpc.Message{JSONRPC: jsonrpc.Version, ID: jsonrpc.IntID(7), Method: "elicitation/create", Params: q}) {
				time.Sleep(20 * time.Millisecond)
			}
		}()
		return json.RawMessage(`{"task":{"taskId":"up-1","status":"input_required","createdAt":"` + now + `","lastUpdatedAt":"` + now + `","ttl":60000,"pollInterval":100}}`), nil
	case "tasks/cancel":
		u.mu.Lock()
		u.cancelled = true
		u.mu.Unlock()
		return json.RawMessage(`{"taskId":"up-1","status":"cancelled","createdAt":"` + now + `","lastUpdatedAt":"` + now + `","ttl":60000,"pollInterval":100}`), nil
	case "tasks/get":
		st := "input_required"
		select {
		case <-u.done:
			st = "completed"
		default:
		}
		u.mu.Lock()
		if u.cancelled {
			st = "cancelled"
		}
		u.mu.Unlock()
		return json.RawMessage(`{"taskId":"up-1","status":"` + st + `","createdAt":"` + now + `","lastUpdatedAt":"` + now + `","ttl":60000,"pollInterval":100}`), nil
	case "tasks/result":
		select {
		case <-u.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		u.mu.Lock()
		defer u.mu.Unlock()
		return json.RawMessage(`{"content":[{"type":"text","text":"answered ` + gjson.GetBytes(u.answers[0], "content.ok").Raw + `"}]}`), nil
	}
	return nil, jsonrpc.ErrMethodNotFound.Wrapf("%s", req.Method)
}

func (u *getAskUpstream) Respond(_ context.Context, _ *legacy.Session, msg *jsonrpc.Message) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if msg.ID.Raw() != "7" {
		return
	}
	u.answers = append(u.answers, msg.Result)
	if len(u.answers) == 1 {
		close(u.done)
	}
}

func (u *getAskUpstream) Notify(context.Context, *legacy.Session, *jsonrpc.Message) {}
func (u *getAskUpstream) Closed(context.Context, *legacy.Session)                   {}

// TestPassThroughKeepsGetStreamQuestion: a question about a task that the upstream sends
// once on its GET stream reaches the client on its GET stream; when the client loses that
// stream and opens a new one, the question comes again under the same request id, and so
// it does on the task's tasks/result. Answered twice (once on each path), the upstream gets
// one answer, and the task completes with it. Another session never gets the question.
func TestPassThroughKeepsGetStreamQuestion(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	u, st, url := startGetAsk(t, ctx)
	c, other := legacyclient.New(url), legacyclient.New(url)
	c.Requests, other.Requests = make(chan *jsonrpc.Message, 4), make(chan *jsonrpc.Message, 4)
	for _, cl := range []*legacyclient.Client{c, other} {
		if _, err := cl.Initialize(ctx); err != nil {
			t.Fatal(err)
		}
	}
	otherGet, stopOther := context.WithCancel(ctx)
	defer stopOther()
	go other.OpenGetStream(otherGet)
	next := func(what string) *jsonrpc.Message {
		t.Helper()
		select {
		case q := <-c.Requests:
			if q.Method != "elicitation/create" || gjson.GetBytes(q.Params, `_meta.io\.modelcontextprotocol/related-task.taskId`).Str != "up-1" {
				t.Fatalf("%s: %s %s, want up-1's elicitation/create", what, q.Method, q.Params)
			}
			return q
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: no question within 10 s", what)
		}
		return nil
	}

	get1, cut := context.WithCancel(ctx)
	go c.OpenGetStream(get1)
	if _, err := c.Call(ctx, "tools/call", map[string]any{"name": "ask", "arguments": map[string]any{}, "task": map[string]any{}}); err != nil {
		t.Fatalf("tools/call: %v", err)
	}
	q1 := next("on the GET stream")
	cut()
	get2, stop := context.WithCancel(ctx)
	defer stop()
	go c.OpenGetStream(get2)
	if q := next("on the re-opened GET stream"); q.ID.Raw() != q1.ID.Raw() {
		t.Errorf("re-opened GET stream: request id %s, want %s", q.ID.Raw(), q1.ID.Raw())
	}

	type out struct {
		res json.RawMessage
		err error
	}
	ended := make(chan out, 1)
	go func() {
		res, err := c.Call(ctx, "tasks/result", map[string]string{"taskId": "up-1"})
		ended <- out{res, err}
	}()
	if q := next("on tasks/result"); q.ID.Raw() != q1.ID.Raw() {
		t.Errorf("tasks/result: request id %s, want %s", q.ID.Raw(), q1.ID.Raw())
	}
	for range 2 {
		if err := c.Respond(ctx, q1.ID, json.RawMessage(`{"action":"accept","content":{"ok":true}}`)); err != nil {
			t.Fatalf("answer: %v", err)
		}
	}
	o := <-ended
	if o.err != nil || gjson.GetBytes(o.res, "content.0.text").Str != "answered true" {
		t.Fatalf("tasks/result: %s, %v", o.res, o.err)
	}
	time.Sleep(300 * time.Millisecond) // a second answer would be on its way by now
	u.mu.Lock()
	n := len(u.answers)
	u.mu.Unlock()
	if n != 1 {
		t.Errorf("the upstream got %d answers, want 1", n)
	}
	if len(other.Requests) != 0 {
		t.Errorf("another session got %s", (<-other.Requests).Method)
	}
	holderEnded(t, ctx, st, c)
}

// TestPassThroughEndsQuestionHolderWithTask: a task cancelled while its question waits
// ends its question holder (it no longer counts as its owner's unfinished task).
func TestPassThroughEndsQuestionHolderWithTask(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, st, url := startGetAsk(t, ctx)
	c := legacyclient.New(url)
	c.Requests = make(chan *jsonrpc.Message, 4)
	if _, err := c.Initialize(ctx); err != nil {
		t.Fatal(err)
	}
	get, stop := context.WithCancel(ctx)
	defer stop()
	go c.OpenGetStream(get)
	if _, err := c.Call(ctx, "tools/call", map[string]any{"name": "ask", "arguments": map[string]any{}, "task": map[string]any{}}); err != nil {
		t.Fatalf("tools/call: %v", err)
	}
	select {
	case <-c.Requests:
	case <-time.After(10 * time.Second):
		t.Fatal("no question within 10 s")
	}
	if n, err := st.CountActive(ctx, "session:"+c.SessionID()); err != nil || n != 1 {
		t.Errorf("unfinished tasks of the owner while the question waits: %d, %v; want 1", n, err)
	}
	if _, err := c.Call(ctx, "tasks/cancel", map[string]string{"taskId": "up-1"}); err != nil {
		t.Fatalf("tasks/cancel: %v", err)
	}
	holderEnded(t, ctx, st, c)
}

// holderEnded checks that the question holder of c's task up-1 is ended and that c's owner
// has no unfinished task left in the store.
func holderEnded(t *testing.T, ctx context.Context, st *sqlite.Store, c *legacyclient.Client) {
	t.Helper()
	rec, err := st.GetTask(ctx, record.LegacyPassThroughID(c.SessionID(), "up-1"))
	if err != nil || rec.Mode != record.ModeLegacyPassThrough || !rec.Status.Terminal() {
		t.Fatalf("question holder: %+v, %v; want an ended legacy-passthrough record", rec, err)
	}
	if n, err := st.CountActive(ctx, "session:"+c.SessionID()); err != nil || n != 0 {
		t.Errorf("unfinished tasks of the owner: %d, %v; want 0", n, err)
	}
}

// startGetAsk serves a getAskUpstream behind a bridge (the legacy pass-through for legacy
// clients) and returns the upstream, the bridge's store and its MCP URL.
func startGetAsk(t *testing.T, ctx context.Context) (*getAskUpstream, *sqlite.Store, string) {
	t.Helper()
	upSt, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "up.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { upSt.Close() })
	u := &getAskUpstream{done: make(chan struct{})}
	u.face = legacy.NewServer(legacy.Options{Store: sessions.New(upSt), Handler: u})
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "b.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	url := serveInFront(t, ctx, u.face, st)

	return u, st, url
}
