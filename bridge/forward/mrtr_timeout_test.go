package forward_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/taskbridge/taskbridge/internal/fixture"
	"github.com/taskbridge/taskbridge/internal/jsonrpc"
	"github.com/taskbridge/taskbridge/internal/legacyclient"
)

// TestUnansweredMRTRDidNotRun (failure budgets): the input request of a pre-task MRTR round
// that the client never answers ends the call with a known "did not run" — a clear error
// with outcome "failed", the record failed with outcome failed (never "unknown", although
// the input wait outlasts create_timeout), the idempotency key released — so a retry with
// the same key starts the call afresh instead of being refused as "may have run".
func TestUnansweredMRTRDidNotRun(t *testing.T) {
	e := newEnv(t, func(c *envConfig, _ *fixture.Options) {
		c.InputTimeout = 400 * time.Millisecond
		c.CreateTimeout = 200 * time.Millisecond // shorter than the wait: only InputTimeout may end it
	})
	reqs := make(chan *jsonrpc.Message, 8)
	c := legacyclient.New(e.url)
	c.Requests = reqs
	if _, err := c.Initialize(context.Background()); err != nil {
		t.Fatal(err)
	}
	params := raw(`{"name":"test_tool_with_task","arguments":{},"task":{},"_meta":{"taskbridge/idempotency-key":"greet-1"}}`)
	err := callErr(t, c, "tools/call", params)
	je := asRPC(t, err)
	var data struct {
		Outcome   string `json:"outcome"`
		Retryable bool   `json:"retryable"`
	}
	_ = json.Unmarshal(je.Data, &data)
	if je.Code != jsonrpc.CodeInputTimeout || data.Outcome != "failed" || !data.Retryable {
		t.Fatalf("unanswered MRTR round: %v data %s, want the input timeout with outcome failed, retryable", err, je.Data)
	}
	<-reqs // the question that went unanswered
	recs, err := e.st.ListTasks(context.Background(), "session:"+c.SessionID(), nil, 10)
	if err != nil || len(recs) != 1 {
		t.Fatalf("records: %v %v", recs, err)
	}
	if r := recs[0]; r.Status != "failed" || r.Outcome != "failed" || r.IdempotencyKey != "" {
		t.Fatalf("record: status %s outcome %s key %q; want failed, failed, released", r.Status, r.Outcome, r.IdempotencyKey)
	}
	// The retry with the same key is asked again (a new call), and this time answered.
	done := make(chan error, 1)
	var res json.RawMessage
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		var err error
		res, err = c.Call(ctx, "tools/call", params)
		done <- err
	}()
	select {
	case q := <-reqs:
		if err := c.Respond(context.Background(), q.ID, raw(`{"action":"accept","content":{"name":"again"}}`)); err != nil {
			t.Fatal(err)
		}
	case err := <-done:
		t.Fatalf("the retry was not asked again: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the retry was not asked again")
	}
	if err := <-done; err != nil {
		t.Fatalf("retry: %v", err)
	}
	tid := jsonField(res, "task", "taskId")
	if tid == "" || tid == recs[0].ID {
		t.Fatalf("retry answered %s, want a new task", res)
	}
	waitStatus(t, c, tid, "completed")
}

func jsonField(b json.RawMessage, path ...string) string {
	var v any
	if json.Unmarshal(b, &v) != nil {
		return ""
	}
	for _, p := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return ""
		}
		v = m[p]
	}
	s, _ := v.(string)
	return s
}
