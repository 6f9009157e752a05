package main

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/internal/fixture"
	"github.com/taskbridge/taskbridge/internal/jsonrpc"
	"github.com/taskbridge/taskbridge/internal/legacyclient"
)

// Issue "mid-task input", acceptance 3, with real processes: the same elicitation is
// answered three times, through two taskbridge processes sharing one SQLite file; the
// upstream sees exactly one tasks/update for the key and the task completes.
func TestDuplicateAnswerAcrossProcesses(t *testing.T) {
	fx := fixture.New(fixture.Options{Scale: 0.2})
	up := httptest.NewServer(fx)
	t.Cleanup(func() { up.Close(); fx.Close() })
	bin := buildTaskbridge(t, t.TempDir())
	db := filepath.Join(t.TempDir(), "shared.db")
	pa := startChild(t, bin, up.URL+"/mcp", db, "bridge-a")
	pb := startChild(t, bin, up.URL+"/mcp", db, "bridge-b")
	// Both processes must have finished starting (their first probe, and the start-up sweep
	// that fails the intents a dead process left) before work begins: on SQLite a process
	// that starts takes every unanswered intent in the store for a dead one's.
	for _, c := range []*child{pa, pb} {
		ready := strings.TrimSuffix(c.url, "/mcp") + "/readyz"
		waitFor(t, "/readyz of "+ready, func() bool { code, _ := get(t, ready); return code == 200 })
	}

	reqs := make(chan *jsonrpc.Message, 8)
	a := legacyclient.New(pa.url)
	a.Requests = reqs // the test answers by hand, through both processes
	if _, err := a.Initialize(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := a.OpenGetStream(ctx); err != nil {
		t.Fatal(err)
	}
	res := call(t, a, "tools/call", json.RawMessage(`{"name":"confirm_delete","arguments":{"filename":"d.txt"},"task":{}}`))
	id := gjson.GetBytes(res, "task.taskId").Str

	var q *jsonrpc.Message
	for deadline := time.Now().Add(20 * time.Second); q == nil; {
		select {
		case q = <-reqs:
		case <-time.After(100 * time.Millisecond):
			if time.Now().After(deadline) {
				t.Fatal("the question never reached the client's GET stream on process A")
			}
			call(t, a, "tasks/get", map[string]string{"taskId": id}) // polling drives the refresh
		}
	}
	b := legacyclient.New(pb.url)
	b.SetSessionID(a.SessionID()) // the same session, on the other process
	answer := json.RawMessage(`{"action":"accept","content":{"confirm":true}}`)
	for _, c := range []*legacyclient.Client{b, a, b} {
		if err := c.Respond(context.Background(), q.ID, answer); err != nil {
			t.Fatalf("answer: %v", err)
		}
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		st := gjson.GetBytes(call(t, b, "tasks/get", map[string]string{"taskId": id}), "status").Str
		if st == "completed" {
			break
		}
		if st == "failed" || st == "cancelled" || time.Now().After(deadline) {
			t.Fatalf("task status %q, want completed", st)
		}
	}
	if got := gjson.GetBytes(call(t, b, "tasks/result", map[string]string{"taskId": id}), "content.0.text").Str; got != "Deleted d.txt" {
		t.Errorf("result %q, want Deleted d.txt", got)
	}
	updates := fx.Stats().Updates
	if len(updates) != 1 {
		t.Fatalf("upstream tasks/update keys %v, want exactly one key", updates)
	}
	for key, n := range updates {
		if n != 1 {
			t.Errorf("key %s reached the upstream %d times, want once", key, n)
		}
	}
}
