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
	"github.com/taskbridge/taskbridge/store/sqlite"
)

// recordingUpstream records the params of every request and notification the upstream
// receives, as received.
type recordingUpstream struct {
	legacy.Handler
	mu  sync.Mutex
	got []string // method + " " + params
}

func (u *recordingUpstream) note(method string, params json.RawMessage) {
	u.mu.Lock()
	u.got = append(u.got, method+" "+string(params))
	u.mu.Unlock()
}

func (u *recordingUpstream) Serve(ctx context.Context, sess *legacy.Session, req *jsonrpc.Message, out legacy.Stream) (json.RawMessage, error) {
	u.note(req.Method, req.Params)
	return u.Handler.Serve(ctx, sess, req, out)
}

func (u *recordingUpstream) Notify(ctx context.Context, sess *legacy.Session, msg *jsonrpc.Message) {
	u.note(msg.Method, msg.Params)
}

// received reports whether the upstream got method with exactly params.
func (u *recordingUpstream) received(method, params string) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, g := range u.got {
		if g == method+" "+params {
			return true
		}
	}
	return false
}

func (u *recordingUpstream) all() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.got...)
}

// startPassThrough serves h as a 2025-11-25 upstream and a bridge's pass-through in
// front of it; it returns the bridge's MCP URL.
func startPassThrough(t *testing.T, h legacy.Handler) string {
	t.Helper()
	ctx := context.Background()
	open := func(name string) *sqlite.Store {
		st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), name))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}
	upFace := legacy.NewServer(legacy.Options{Store: sessions.New(open("up.db")), Handler: h})
	return serveInFront(t, ctx, upFace, open("b.db"))
}

// TestPassThroughScreensRelatedTask (issue 19): the legacy pass-through forwards a
// client's params untouched, except a related-task _meta the receiver must ignore
// (2025-11-25 §4): one that contradicts params.taskId of tasks/get, tasks/result or
// tasks/cancel, or, on any other request or notification, one that names a task the
// caller's session does not own. What the upstream received is compared byte for byte.
func TestPassThroughScreensRelatedTask(t *testing.T) {
	ctx := context.Background()
	u := &recordingUpstream{Handler: &noListUpstream{tasks: map[string]map[string]*legacy.Task{}, gets: map[string]int{}}}
	url := startPassThrough(t, u)
	a, b := legacyclient.New(url), legacyclient.New(url)
	for _, c := range []*legacyclient.Client{a, b} {
		if _, err := c.Initialize(ctx); err != nil {
			t.Fatal(err)
		}
	}
	res, err := a.Call(ctx, "tools/call", json.RawMessage(`{"name":"job","arguments":{},"task":{}}`))
	if err != nil {
		t.Fatal(err)
	}
	mine := gjson.GetBytes(res, "task.taskId").Str // a's task ("up-1" in a's upstream session)
	rt := func(id string) string { return `"io.modelcontextprotocol/related-task":{"taskId":"` + id + `"}` }

	type step struct {
		c              *legacyclient.Client
		method, params string
		want           string // what the upstream must receive ("" = params unchanged)
	}
	steps := []step{
		// b names a's task: b's session does not own it (the upstream, asked over b's
		// session, does not show it either), so the key goes and the rest stays.
		{b, "tools/call", `{"name":"job","arguments":{"n":1},"_meta":{"progressToken":"p1",` + rt(mine) + `}}`,
			`{"name":"job","arguments":{"n":1},"_meta":{"progressToken":"p1"}}`},
		{b, "tasks/get", `{"taskId":"nope","_meta":{` + rt(mine) + `}}`, `{"taskId":"nope"}`},
		{b, "tasks/cancel", `{"taskId":"nope","_meta":{` + rt(mine) + `}}`, `{"taskId":"nope"}`},
		// a's own: untouched.
		{a, "tools/call", `{"name":"job","arguments":{},"_meta":{` + rt(mine) + `}}`, ""},
		{a, "tasks/get", `{"taskId":"` + mine + `","_meta":{` + rt(mine) + `}}`, ""},
		// a contradicting related-task is ignored even when the caller owns both.
		{a, "tasks/get", `{"taskId":"` + mine + `","_meta":{` + rt("up-other") + `}}`, `{"taskId":"` + mine + `"}`},
	}
	for _, s := range steps {
		_, _ = s.c.Call(ctx, s.method, json.RawMessage(s.params)) // errors (unknown ids) are the upstream's
		want := s.want
		if want == "" {
			want = s.params
		}
		if !u.received(s.method, want) {
			t.Errorf("%s %s: the upstream did not receive %s; it got:\n%q", s.method, s.params, want, u.all())
		}
	}
	if err := b.Notify(ctx, "notifications/progress", json.RawMessage(`{"progressToken":"p","progress":1,"_meta":{`+rt(mine)+`}}`)); err != nil {
		t.Fatal(err)
	}
	if err := a.Notify(ctx, "notifications/progress", json.RawMessage(`{"progressToken":"q","progress":1,"_meta":{`+rt(mine)+`}}`)); err != nil {
		t.Fatal(err)
	}
	waitFor := func(method, params string) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); !u.received(method, params); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("the upstream never received %s %s; it got:\n%q", method, params, u.all())
			}
		}
	}
	waitFor("notifications/progress", `{"progressToken":"p","progress":1}`)
	waitFor("notifications/progress", `{"progressToken":"q","progress":1,"_meta":{`+rt(mine)+`}}`)
}
