package forward_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/internal/fixture"
	"github.com/taskbridge/taskbridge/internal/jsonrpc"
	"github.com/taskbridge/taskbridge/internal/legacyclient"
	"github.com/taskbridge/taskbridge/internal/metrics"
)

// TestForeignMRTRAnswerIgnored (issue 12, acceptance 7): the input request of a pre-task
// MRTR round (asked before any task exists) is answered only by the session and principal
// it was sent to. bob (another principal) and a second session of alice herself answer it
// with the request id they learnt: both are acknowledged like an answer to an unknown
// request, counted, and change nothing; alice's own answer is the one the upstream gets.
func TestForeignMRTRAnswerIgnored(t *testing.T) {
	m := metrics.New("test")
	e := newEnv(t, withAuth(t), func(c *envConfig, _ *fixture.Options) { c.Metrics = m })
	alice := e.keyed(aliceKey)
	alice.Requests = make(chan *jsonrpc.Message, 4)
	aliceAgain := e.keyed(aliceKey) // same principal, another session
	bob := e.keyed(bobKey)

	type res struct {
		raw []byte
		err error
	}
	done := make(chan res, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		r, err := alice.Call(ctx, "tools/call", map[string]any{"name": "test_tool_with_task", "arguments": map[string]any{}, "task": map[string]any{}})
		done <- res{r, err}
	}()
	var ask *jsonrpc.Message
	select {
	case ask = <-alice.Requests:
	case <-time.After(20 * time.Second):
		t.Fatal("no MRTR input request relayed to alice")
	}
	answer := func(rid, name string) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"action":"accept","content":{"name":%q}}}`, rid, name)
	}
	for who, c := range map[string]struct {
		sess *legacyclient.Client
		key  string
	}{"bob": {bob, bobKey}, "alice's other session": {aliceAgain, aliceKey}} {
		st1, b1 := post(t, e.url, c.sess.SessionID(), c.key, answer(ask.ID.Raw(), "mallory"))
		st2, b2 := post(t, e.url, c.sess.SessionID(), c.key, answer(`"tb-`+randomID()+`"`, "mallory"))
		if st1 != st2 || b1 != b2 {
			t.Errorf("%s answering alice's request: %d %q; an unknown request: %d %q", who, st1, b1, st2, b2)
		}
	}
	select {
	case r := <-done:
		t.Fatalf("the call ended on a foreign answer: %s %v", r.raw, r.err)
	case <-time.After(300 * time.Millisecond):
	}
	if n := m.Values("answers_refused_total")["foreign_input_answer"]; n != 2 {
		t.Errorf("answers_refused_total{foreign_input_answer} = %v, want 2", n)
	}
	if err := alice.Respond(context.Background(), ask.ID, raw(`{"action":"accept","content":{"name":"alice"}}`)); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil {
		t.Fatalf("alice's call: %v", r.err)
	}
	taskID := gjson.GetBytes(r.raw, "task.taskId").Str
	waitStatus(t, alice, taskID, "completed")
	out := call(t, alice, "tasks/result", id(taskID))
	if txt := out.Get("content.0.text").Str; !strings.Contains(txt, "Hello, alice!") {
		t.Fatalf("result %q: want alice's answer, not mallory's", txt)
	}
}
