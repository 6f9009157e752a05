package forward_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/bridge/forward"
	"github.com/taskbridge/taskbridge/internal/fixture"
	"github.com/taskbridge/taskbridge/internal/metrics"
)

// Modes of faultyGets: how the upstream answers tasks/get.
const (
	getsHonest   = iota
	getsConfused // answers about another task, which it says completed with a result
	getsGarbage  // 200 with a body that is not JSON-RPC
	getsGateway  // 502 from a proxy in front of a restarting upstream (not an invalid reply)
)

// faultyGets is the fixture behind a front that can falsify its tasks/get answers.
type faultyGets struct {
	fx   http.Handler
	mode atomic.Int32
	gets atomic.Int32 // falsified tasks/get answers sent
}

func (f *faultyGets) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	mode := f.mode.Load()
	if r.Method != http.MethodPost || gjson.GetBytes(body, "method").Str != "tasks/get" || mode == getsHonest {
		f.fx.ServeHTTP(w, r)
		return
	}
	f.gets.Add(1)
	switch mode {
	case getsConfused:
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"resultType":"complete","taskId":"someone-elses-task","status":"completed",`+
			`"createdAt":"2026-01-01T00:00:00Z","lastUpdatedAt":"2026-01-01T00:00:00Z","ttlMs":null,`+
			`"result":{"content":[{"type":"text","text":"PWNED: another task's result"}]}}}`, gjson.GetBytes(body, "id").Raw)
	case getsGarbage:
		w.Header().Set("Content-Type", "text/plain")
		w.Write([]byte("hello from a misconfigured proxy"))
	case getsGateway:
		http.Error(w, "<html>502 Bad Gateway</html>", http.StatusBadGateway)
	}
}

// newFaultyEnv is newEnv with the faulty front before the fixture, a failure budget of
// budget, and metrics.
func newFaultyEnv(t *testing.T, budget int) (*env, *faultyGets, *metrics.Metrics) {
	fx := fixture.New(fixture.Options{Scale: 0.1, PollIntervalMs: 100})
	f := &faultyGets{fx: fx}
	up := httptest.NewServer(f)
	t.Cleanup(func() { up.Close(); fx.Close() })
	m := metrics.New("test")
	e := &env{t: t, fx: fx, upURL: up.URL + "/mcp", dbPath: filepath.Join(t.TempDir(), "tb.db")}
	e.start(envConfig{Config: forward.Config{Logger: zerolog.Nop(), PollFloorMs: 100, Heartbeat: 200 * time.Millisecond,
		PollFaultBudget: budget, Metrics: m}})
	return e, f, m
}

// TestConfusedUpstreamTaskIDNeverAdopted (issue 12, acceptance 7): an upstream whose
// tasks/get answers are about another task ("completed", with a result) is never believed:
// the record stays working and never carries that result; each answer is counted; after
// the failure budget the task ends failed with outcome unknown and a status message that
// says why, and tasks/result gives no foreign result.
func TestConfusedUpstreamTaskIDNeverAdopted(t *testing.T) {
	e, f, m := newFaultyEnv(t, 3)
	c := e.client()
	taskID := createTask(t, c, "long_job", map[string]any{"seconds": 600})
	f.mode.Store(getsConfused)
	for f.gets.Load() < 2 {
		time.Sleep(20 * time.Millisecond)
	}
	if got := call(t, c, "tasks/get", id(taskID)); got.Get("status").Str != "working" {
		t.Fatalf("after confused answers: %s, want still working", got.Raw)
	}
	got := waitStatus(t, c, taskID, "failed")
	if msg := got.Get("statusMessage").Str; !strings.Contains(msg, "invalid replies to tasks/get") {
		t.Errorf("statusMessage %q does not say why", msg)
	}
	rec, err := e.st.GetTask(context.Background(), taskID)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Outcome != "unknown" || strings.Contains(string(rec.Result), "PWNED") {
		t.Errorf("record: outcome %s, result %s; want unknown and no foreign result", rec.Outcome, rec.Result)
	}
	res, err := c.Call(context.Background(), "tasks/result", id(taskID))
	if strings.Contains(string(res), "PWNED") || err == nil {
		t.Errorf("tasks/result = %s, %v; want an error without the foreign result", res, err)
	}
	if n := m.Values("answers_refused_total")["upstream_task_mismatch"]; n < 3 {
		t.Errorf("answers_refused_total{upstream_task_mismatch} = %v, want >= 3", n)
	}
}

// TestInvalidRepliesFailTheTaskAfterBudget: N invalid tasks/get replies in a row end the
// task failed (outcome unknown) instead of leaving it working until its ttl; 502s from a
// gateway (the upstream restarting) do not count, and one good reply resets the count.
func TestInvalidRepliesFailTheTaskAfterBudget(t *testing.T) {
	e, f, m := newFaultyEnv(t, 4)
	c := e.client()
	taskID := createTask(t, c, "long_job", map[string]any{"seconds": 600})

	f.mode.Store(getsGateway)
	for start := f.gets.Load(); f.gets.Load() < start+5; {
		time.Sleep(20 * time.Millisecond)
	}
	if s := call(t, c, "tasks/get", id(taskID)).Get("status").Str; s != "working" {
		t.Fatalf("after 5 gateway errors: %s, want working (they are not invalid replies)", s)
	}
	f.mode.Store(getsGarbage)
	for start := f.gets.Load(); f.gets.Load() < start+2; {
		time.Sleep(20 * time.Millisecond)
	}
	f.mode.Store(getsHonest) // one honest answer resets the count
	waitHonestGet(t, e)
	if s := call(t, c, "tasks/get", id(taskID)).Get("status").Str; s != "working" {
		t.Fatalf("after 2 invalid replies and a good one: %s, want working", s)
	}
	f.mode.Store(getsGarbage)
	got := waitStatus(t, c, taskID, "failed")
	if msg := got.Get("statusMessage").Str; !strings.Contains(msg, "4 invalid replies to tasks/get in a row") {
		t.Errorf("statusMessage %q", msg)
	}
	rec, _ := e.st.GetTask(context.Background(), taskID)
	if rec.Outcome != "unknown" {
		t.Errorf("outcome %s, want unknown", rec.Outcome)
	}
	if n := m.Values("answers_refused_total")["upstream_invalid_reply"]; n < 6 {
		t.Errorf("answers_refused_total{upstream_invalid_reply} = %v, want >= 6", n)
	}
}

// waitHonestGet waits until the fixture itself answered one more tasks/get.
func waitHonestGet(t *testing.T, e *env) {
	t.Helper()
	total := func() int {
		n := 0
		for _, v := range e.fx.Stats().TaskGets {
			n += v
		}
		return n
	}
	start := total()
	deadline := time.Now().Add(10 * time.Second)
	for total() == start {
		if time.Now().After(deadline) {
			t.Fatal("no honest tasks/get reached the fixture")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// createSaysCompleted rewrites the fixture's CreateTaskResults to status "completed" (as an
// upstream whose task ended before it wrote the answer does); the result is not in it.
type createSaysCompleted struct{ fx http.Handler }

func (c createSaysCompleted) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	if gjson.GetBytes(body, "method").Str != "tools/call" {
		c.fx.ServeHTTP(w, r)
		return
	}
	rec := httptest.NewRecorder()
	c.fx.ServeHTTP(rec, r)
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	out := strings.Replace(rec.Body.String(), `"status":"working"`, `"status":"completed"`, 1)
	w.Header().Del("Content-Length")
	w.WriteHeader(rec.Code)
	io.WriteString(w, out)
}

// TestCreateAnswerAlreadyCompleted: a CreateTaskResult whose status is already completed
// (it carries no result) is not "completed without a result": the bridge polls and the
// client gets the real result.
func TestCreateAnswerAlreadyCompleted(t *testing.T) {
	fx := fixture.New(fixture.Options{Scale: 0.1, PollIntervalMs: 100})
	up := httptest.NewServer(createSaysCompleted{fx})
	t.Cleanup(func() { up.Close(); fx.Close() })
	e := &env{t: t, fx: fx, upURL: up.URL + "/mcp", dbPath: filepath.Join(t.TempDir(), "tb.db")}
	e.start(envConfig{Config: forward.Config{Logger: zerolog.Nop(), PollFloorMs: 100, Heartbeat: 200 * time.Millisecond}})
	c := e.client()
	taskID := createTask(t, c, "slow_compute", map[string]any{"seconds": 0.5, "label": "early"})
	waitStatus(t, c, taskID, "completed")
	if txt := call(t, c, "tasks/result", id(taskID)).Get("content.0.text").Str; !strings.Contains(txt, "early completed") {
		t.Fatalf("tasks/result text %q, want the upstream's result", txt)
	}
}
