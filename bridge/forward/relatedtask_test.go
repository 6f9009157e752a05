package forward_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"sync"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/internal/fixture"
)

// bodyRecorder keeps every JSON-RPC body the fixture upstream receives.
type bodyRecorder struct {
	next   http.Handler
	mu     sync.Mutex
	bodies [][]byte
}

func (h *bodyRecorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	h.mu.Lock()
	h.bodies = append(h.bodies, body)
	h.mu.Unlock()
	h.next.ServeHTTP(w, r)
}

// lastParams returns the params of the last upstream request of method whose arguments
// carry marker (so that one call is found among the bridge's own).
func (h *bodyRecorder) lastParams(method, marker string) (gjson.Result, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i := len(h.bodies) - 1; i >= 0; i-- {
		b := gjson.ParseBytes(h.bodies[i])
		if b.Get("method").Str == method && b.Get("params.arguments.name").Str == marker {
			return b.Get("params"), true
		}
	}
	return gjson.Result{}, false
}

// TestForwardScreensRelatedTask (issue 19): on the forward route a client's tools/call
// params go upstream with their _meta, except a related-task naming a task the caller
// does not own (another principal's, or an id that is no task): it is removed, the other
// _meta keys stay. The owner's own related-task reaches the upstream as sent.
func TestForwardScreensRelatedTask(t *testing.T) {
	rec := &bodyRecorder{}
	e := newEnv(t, withAuth(t), func(c *envConfig, _ *fixture.Options) {
		c.WrapUpstream = func(h http.Handler) http.Handler { rec.next = h; return rec }
	})
	alice, bob := e.keyed(aliceKey), e.keyed(bobKey)
	created := call(t, alice, "tools/call", raw(`{"name":"slow_compute","arguments":{"seconds":1},"task":{}}`))
	tid := created.Get("task.taskId").Str
	if tid == "" {
		t.Fatalf("CreateTaskResult = %s", created.Raw)
	}
	const key = `io\.modelcontextprotocol/related-task`
	for _, c := range []struct {
		name   string
		bobs   bool
		named  string
		marker string
		kept   bool
	}{
		{"bob names alice's task", true, tid, "m-bob", false},
		{"alice names an id that is no task", false, "no-such-task", "m-none", false},
		{"alice names her own task", false, tid, "m-alice", true},
	} {
		cl := alice
		if c.bobs {
			cl = bob
		}
		p := `{"name":"greet","arguments":{"name":"` + c.marker + `"},"_meta":{"progressToken":"` + c.marker + `","io.modelcontextprotocol/related-task":{"taskId":"` + c.named + `"}}}`
		if _, err := cl.Call(context.Background(), "tools/call", raw(p)); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		got, ok := rec.lastParams("tools/call", c.marker)
		if !ok {
			t.Fatalf("%s: the call never reached the upstream", c.name)
		}
		if got.Get("_meta.progressToken").Str != c.marker {
			t.Errorf("%s: the other _meta keys did not stay: %s", c.name, got.Raw)
		}
		rt := got.Get("_meta." + key)
		switch {
		case c.kept && rt.Raw != `{"taskId":"`+c.named+`"}`:
			t.Errorf("%s: upstream related-task = %q, want it as sent", c.name, rt.Raw)
		case !c.kept && rt.Exists():
			t.Errorf("%s: the upstream received the forged related-task: %s", c.name, got.Raw)
		}
	}
}
