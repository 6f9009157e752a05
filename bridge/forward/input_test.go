package forward_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/internal/fixture"
	"github.com/taskbridge/taskbridge/internal/jsonrpc"
	"github.com/taskbridge/taskbridge/internal/legacyclient"
)

// answering returns a client whose elicitation handler accepts with content, recording
// what it was asked.
func answering(t *testing.T, url string, content string) (*legacyclient.Client, *asked) {
	a := &asked{}
	c := legacyclient.New(url)
	c.OnRequest = func(method string, params json.RawMessage) (json.RawMessage, error) {
		a.add(method, params)
		return json.RawMessage(`{"action":"accept","content":` + content + `}`), nil
	}
	if _, err := c.Initialize(context.Background()); err != nil {
		t.Fatal(err)
	}
	return c, a
}

type asked struct {
	mu   sync.Mutex
	reqs []gjson.Result
}

func (a *asked) add(method string, params json.RawMessage) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.reqs = append(a.reqs, gjson.Parse(`{"method":`+mustQuote(method)+`,"params":`+string(params)+`}`))
}

func (a *asked) all() []gjson.Result {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]gjson.Result(nil), a.reqs...)
}

func mustQuote(s string) string { b, _ := json.Marshal(s); return string(b) }

func TestElicitationRidesTasksResult(t *testing.T) {
	e := newEnv(t)
	c, a := answering(t, e.url, `{"confirm":true}`)
	tid := call(t, c, "tools/call", raw(`{"name":"confirm_delete","arguments":{"filename":"a.txt"},"task":{}}`)).Get("task.taskId").Str
	res := call(t, c, "tasks/result", id(tid))
	if res.Get("content.0.text").Str != "Deleted a.txt" {
		t.Fatalf("result = %s", res.Raw)
	}
	reqs := a.all()
	if len(reqs) != 1 || reqs[0].Get("method").Str != "elicitation/create" {
		t.Fatalf("asked = %v", reqs)
	}
	if rt := reqs[0].Get(`params._meta.io\.modelcontextprotocol/related-task.taskId`).Str; rt != tid {
		t.Errorf("related-task on the elicitation = %q, want %q", rt, tid)
	}
	if reqs[0].Get("params.message").Str != "Delete a.txt?" {
		t.Errorf("elicitation = %s", reqs[0].Raw)
	}
	assertOneUpdatePerKey(t, e, 1)
}

func TestMultiInputCompletesAfterBothAnswers(t *testing.T) {
	e := newEnv(t)
	c, a := answering(t, e.url, `{"name":"Ada","confirm":true}`)
	tid := call(t, c, "tools/call", raw(`{"name":"multi_input","arguments":{},"task":{}}`)).Get("task.taskId").Str
	res := call(t, c, "tasks/result", id(tid))
	if got := res.Get("content.0.text").Str; got != `multi_input: name="Ada" (accept), confirm=true (accept)` {
		t.Errorf("result = %s", res.Raw)
	}
	if n := len(a.all()); n != 2 {
		t.Errorf("client was asked %d times, want 2", n)
	}
	assertOneUpdatePerKey(t, e, 2)
}

func TestMRTRRoundBeforeTask(t *testing.T) {
	e := newEnv(t)
	c, a := answering(t, e.url, `{"name":"Ada"}`)
	created := call(t, c, "tools/call", raw(`{"name":"test_tool_with_task","arguments":{},"task":{}}`))
	tid := created.Get("task.taskId").Str
	res := call(t, c, "tasks/result", id(tid))
	if got := res.Get("content.0.text").Str; got != "Hello, Ada! Your task is complete." {
		t.Errorf("result = %s", res.Raw)
	}
	if n := len(a.all()); n != 1 {
		t.Errorf("asked %d times, want 1", n)
	}
	// The same tool without a task: MRTR round, then sync collapse.
	sync := call(t, c, "tools/call", raw(`{"name":"test_tool_with_task","arguments":{}}`))
	if got := sync.Get("content.0.text").Str; got != "Hello, Ada! Your task is complete." {
		t.Errorf("sync result = %s", sync.Raw)
	}
}

func TestSyncCollapseRelaysTaskInput(t *testing.T) {
	e := newEnv(t)
	c, _ := answering(t, e.url, `{"confirm":true}`)
	res := call(t, c, "tools/call", raw(`{"name":"confirm_delete","arguments":{"filename":"s.txt"}}`))
	if res.Get("content.0.text").Str != "Deleted s.txt" {
		t.Errorf("result = %s", res.Raw)
	}
}

// A client that only polls tasks/get, with its GET stream open, still gets the question.
func TestInputViaGetStream(t *testing.T) {
	e := newEnv(t)
	c, a := answering(t, e.url, `{"confirm":true}`)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := c.OpenGetStream(ctx); err != nil {
		t.Fatal(err)
	}
	tid := call(t, c, "tools/call", raw(`{"name":"confirm_delete","arguments":{"filename":"g.txt"},"task":{}}`)).Get("task.taskId").Str
	status := waitTerminal(t, c, tid)
	if status != "completed" {
		t.Fatalf("status = %s", status)
	}
	if len(a.all()) != 1 {
		t.Errorf("asked %d times on the GET stream, want 1", len(a.all()))
	}
	res := call(t, c, "tasks/result", id(tid))
	if res.Get("content.0.text").Str != "Deleted g.txt" {
		t.Errorf("result = %s", res.Raw)
	}
	statusPush := 0
	for _, n := range c.Notifications() {
		if n.Method == "notifications/tasks/status" && gjson.GetBytes(n.Params, "taskId").Str == tid {
			statusPush++
		}
	}
	if statusPush == 0 {
		t.Error("no notifications/tasks/status on the GET stream")
	}
}

// The same answer sent twice, through two bridge processes sharing one store, reaches the
// upstream once.
func TestDuplicateAnswerAcrossBridges(t *testing.T) {
	e := newEnv(t)
	urlA := e.url
	e.start(envConfig{})
	urlB := e.url
	reqs := make(chan *jsonrpc.Message, 4)
	a := legacyclient.New(urlA)
	a.Requests = reqs
	if _, err := a.Initialize(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := a.OpenGetStream(ctx); err != nil {
		t.Fatal(err)
	}
	tid := call(t, a, "tools/call", raw(`{"name":"confirm_delete","arguments":{"filename":"d.txt"},"task":{}}`)).Get("task.taskId").Str
	var q *jsonrpc.Message
	deadline := time.After(10 * time.Second)
	for q == nil {
		select {
		case q = <-reqs:
		case <-deadline:
			t.Fatal("the question never arrived on the GET stream")
		case <-time.After(100 * time.Millisecond):
			call(t, a, "tasks/get", id(tid)) // polling drives the bridge's refresh
		}
	}
	b := legacyclient.New(urlB)
	b.SetSessionID(a.SessionID())
	answer := json.RawMessage(`{"action":"accept","content":{"confirm":true}}`)
	if err := b.Respond(context.Background(), q.ID, answer); err != nil {
		t.Fatal(err)
	}
	if err := a.Respond(context.Background(), q.ID, answer); err != nil {
		t.Fatal(err)
	}
	if st := waitTerminal(t, a, tid); st != "completed" {
		t.Fatalf("status = %s", st)
	}
	assertOneUpdatePerKey(t, e, 1)
}

// A client that hangs up mid-question gets the same question again on a new tasks/result.
func TestReconnectRedeliversQuestion(t *testing.T) {
	e := newEnv(t)
	reqs := make(chan *jsonrpc.Message, 4)
	c := legacyclient.New(e.url)
	c.Requests = reqs
	if _, err := c.Initialize(context.Background()); err != nil {
		t.Fatal(err)
	}
	tid := call(t, c, "tools/call", raw(`{"name":"confirm_delete","arguments":{"filename":"r.txt"},"task":{}}`)).Get("task.taskId").Str
	ctx1, hangUp := context.WithCancel(context.Background())
	go c.Call(ctx1, "tasks/result", id(tid))
	var first *jsonrpc.Message
	select {
	case first = <-reqs:
	case <-time.After(10 * time.Second):
		t.Fatal("no question on the first tasks/result")
	}
	hangUp()
	time.Sleep(100 * time.Millisecond)
	var res json.RawMessage
	done := make(chan error, 1)
	go func() {
		var err error
		res, err = c.Call(context.Background(), "tasks/result", id(tid))
		done <- err
	}()
	var again *jsonrpc.Message
	select {
	case again = <-reqs:
	case <-time.After(10 * time.Second):
		t.Fatal("the question was not delivered again after the reconnect")
	}
	if gjson.GetBytes(again.Params, "message").Str != gjson.GetBytes(first.Params, "message").Str {
		t.Errorf("redelivered %s, first was %s", again.Params, first.Params)
	}
	if err := c.Respond(context.Background(), again.ID, json.RawMessage(`{"action":"accept","content":{"confirm":true}}`)); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if gjson.GetBytes(res, "content.0.text").Str != "Deleted r.txt" {
		t.Errorf("result = %s", res)
	}
}

func TestDeclineIsPassedThrough(t *testing.T) {
	e := newEnv(t)
	c := legacyclient.New(e.url)
	c.OnRequest = func(string, json.RawMessage) (json.RawMessage, error) {
		return json.RawMessage(`{"action":"decline"}`), nil
	}
	if _, err := c.Initialize(context.Background()); err != nil {
		t.Fatal(err)
	}
	tid := call(t, c, "tools/call", raw(`{"name":"confirm_delete","arguments":{"filename":"k.txt"},"task":{}}`)).Get("task.taskId").Str
	res := call(t, c, "tasks/result", id(tid))
	if got := res.Get("content.0.text").Str; got != `Kept k.txt (action "decline")` {
		t.Errorf("result = %s", res.Raw)
	}
}

func TestUndeclaredInputKindFailsTheTask(t *testing.T) {
	e := newEnv(t)
	c := legacyclient.New(e.url)
	c.Caps = `{}` // no elicitation
	if _, err := c.Initialize(context.Background()); err != nil {
		t.Fatal(err)
	}
	tid := call(t, c, "tools/call", raw(`{"name":"confirm_delete","arguments":{"filename":"u.txt"},"task":{}}`)).Get("task.taskId").Str
	if st := waitTerminal(t, c, tid); st != "failed" {
		t.Fatalf("status = %s, want failed (the client cannot answer an elicitation)", st)
	}
	got := call(t, c, "tasks/get", id(tid))
	if !contains(got.Get("statusMessage").Str, "elicitation/create") {
		t.Errorf("statusMessage = %q, want it to name the missing capability", got.Get("statusMessage").Str)
	}
}

func waitTerminal(t *testing.T, c *legacyclient.Client, tid string) string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		st := call(t, c, "tasks/get", id(tid)).Get("status").Str
		if st == "completed" || st == "failed" || st == "cancelled" {
			return st
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("task did not end")
	return ""
}

// assertOneUpdatePerKey checks the upstream saw exactly one tasks/update per input key.
func assertOneUpdatePerKey(t *testing.T, e *env, keys int) {
	t.Helper()
	up := e.fx.Stats().Updates
	if len(up) != keys {
		t.Errorf("upstream tasks/update keys = %v, want %d keys", up, keys)
	}
	for k, n := range up {
		if n != 1 {
			t.Errorf("key %s answered upstream %d times, want 1", k, n)
		}
	}
}

// An unanswered question does not hold tasks/result forever; the task keeps waiting and a
// later tasks/result finishes it.
func TestInputTimeoutReleasesStream(t *testing.T) {
	e := newEnv(t, func(c *envConfig, _ *fixture.Options) { c.InputTimeout = 300 * time.Millisecond })
	reqs := make(chan *jsonrpc.Message, 8)
	c := legacyclient.New(e.url)
	c.Requests = reqs
	if _, err := c.Initialize(context.Background()); err != nil {
		t.Fatal(err)
	}
	tid := call(t, c, "tools/call", raw(`{"name":"confirm_delete","arguments":{"filename":"t.txt"},"task":{}}`)).Get("task.taskId").Str
	err := callErr(t, c, "tasks/result", id(tid))
	if je := asRPC(t, err); je.Code != jsonrpc.CodeInputTimeout {
		t.Fatalf("tasks/result = %v, want the input timeout error", err)
	}
	if st := call(t, c, "tasks/get", id(tid)).Get("status").Str; st != "input_required" {
		t.Errorf("status after the timeout = %s, want input_required", st)
	}
	q := <-reqs
	if err := c.Respond(context.Background(), q.ID, json.RawMessage(`{"action":"accept","content":{"confirm":true}}`)); err != nil {
		t.Fatal(err)
	}
	res := call(t, c, "tasks/result", id(tid))
	if res.Get("content.0.text").Str != "Deleted t.txt" {
		t.Errorf("result = %s", res.Raw)
	}
}
