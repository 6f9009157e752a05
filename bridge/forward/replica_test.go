package forward_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/bridge"
	"github.com/taskbridge/taskbridge/bridge/forward"
	"github.com/taskbridge/taskbridge/internal/fixture"
	"github.com/taskbridge/taskbridge/internal/jsonrpc"
	"github.com/taskbridge/taskbridge/internal/legacyclient"
	"github.com/taskbridge/taskbridge/internal/testenv"
	"github.com/taskbridge/taskbridge/sep2663"
	"github.com/taskbridge/taskbridge/store/postgres"
)

// pgDSN returns a DSN for a fresh schema in TASKBRIDGE_TEST_PG, dropped when t ends.
func pgDSN(t *testing.T) string { return testenv.PostgresSchema(t, "tbreplica") }

// replicas is one fixture upstream and two bridges sharing one PostgreSQL schema, each
// with its own store handle (as two processes would have).
type replicas struct {
	fx   *fixture.Server
	urls [2]string
	b    [2]*bridge.Forward
}

func newReplicas(t *testing.T) *replicas {
	t.Helper()
	dsn := pgDSN(t)
	fx := fixture.New(fixture.Options{Scale: 0.1, PollIntervalMs: 100})
	up := httptest.NewServer(fx)
	t.Cleanup(func() { up.Close(); fx.Close() })
	r := &replicas{fx: fx}
	for i := range 2 {
		st, err := postgres.Open(context.Background(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		b, err := bridge.NewForward(forward.Config{Store: st, Logger: zerolog.Nop(), PollFloorMs: 100,
			Heartbeat: 200 * time.Millisecond, Upstream: sep2663.NewClient(sep2663.ClientOptions{URL: up.URL + "/mcp"})})
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(mustDoor(t, bridge.DoorConfig{}, b))
		t.Cleanup(func() { srv.Close(); b.Close(context.Background()); st.Close() })
		r.urls[i], r.b[i] = srv.URL+"/mcp", b
	}
	return r
}

// roundRobin is a reverse proxy sending each HTTP request to the next replica in turn
// (a load balancer without sticky sessions).
func roundRobin(t *testing.T, urls ...string) string {
	var n atomic.Int64
	proxies := make([]*httputil.ReverseProxy, len(urls))
	for i, u := range urls {
		target, _ := url.Parse(u)
		proxies[i] = &httputil.ReverseProxy{FlushInterval: -1, Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.URL.Path = target.Path
		}}
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		proxies[int(n.Add(1))%len(proxies)].ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/mcp"
}

// TestReplicasStatusReachesOtherReplicasGetStream: the GET stream is held by replica A, and
// every other request goes to replica B, so A never polls the task: the status change
// reaches A's stream only through LISTEN/NOTIFY.
func TestReplicasStatusReachesOtherReplicasGetStream(t *testing.T) {
	r := newReplicas(t)
	onA := legacyclient.New(r.urls[0])
	if _, err := onA.Initialize(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := onA.OpenGetStream(ctx); err != nil {
		t.Fatal(err)
	}
	onB := legacyclient.New(r.urls[1])
	onB.SetSessionID(onA.SessionID())
	taskID := call(t, onB, "tools/call", map[string]any{"name": "long_job", "arguments": map[string]any{"seconds": 600}, "task": map[string]any{}}).Get("task.taskId").Str
	call(t, onB, "tasks/cancel", id(taskID))
	deadline := time.Now().Add(15 * time.Second)
	for {
		for _, m := range onA.Notifications() {
			if m.Method == "notifications/tasks/status" && gjson.GetBytes(m.Params, "taskId").Str == taskID &&
				gjson.GetBytes(m.Params, "status").Str == "cancelled" {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("replica A's GET stream never got the cancelled status; notifications: %d", len(onA.Notifications()))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestReplicasAlternating drives one Go legacy client through a round-robin balancer:
// create, poll, elicitation relayed on one replica and answered through the other, list,
// cancel, result. Each upstream tool runs once.
func TestReplicasAlternating(t *testing.T) {
	r := newReplicas(t)
	c := legacyclient.New(roundRobin(t, r.urls[0], r.urls[1]))
	c.Requests = make(chan *jsonrpc.Message, 4)
	if _, err := c.Initialize(context.Background()); err != nil {
		t.Fatal(err)
	}
	confirm := createTask(t, c, "confirm_delete", map[string]any{"filename": "a.txt"})
	long := createTask(t, c, "long_job", map[string]any{"seconds": 600})
	for range 4 {
		call(t, c, "tasks/get", id(confirm))
	}
	done := make(chan gjson.Result, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		res, err := c.Call(ctx, "tasks/result", id(confirm))
		if err != nil {
			t.Errorf("tasks/result: %v", err)
		}
		done <- gjson.ParseBytes(res)
	}()
	select {
	case m := <-c.Requests:
		if err := c.Respond(context.Background(), m.ID, raw(`{"action":"accept","content":{"confirm":true}}`)); err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("elicitation not relayed")
	}
	res := <-done
	if !strings.Contains(res.Get("content.0.text").Str, "Deleted a.txt") {
		t.Fatalf("result %s", res.Raw)
	}
	list := call(t, c, "tasks/list", map[string]any{})
	if n := len(list.Get("tasks").Array()); n != 2 {
		t.Fatalf("tasks/list: %d tasks, want 2: %s", n, list.Raw)
	}
	if s := call(t, c, "tasks/cancel", id(long)).Get("status").Str; s != "cancelled" {
		t.Fatalf("cancel: %s", s)
	}
	if s := call(t, c, "tasks/get", id(long)).Get("status").Str; s != "cancelled" {
		t.Fatalf("after cancel, the other replica says %s", s)
	}
	st := r.fx.Stats()
	if st.Executions["confirm_delete"] != 1 || st.Executions["long_job"] != 1 {
		t.Fatalf("executions %v, want each tool once", st.Executions)
	}
	for k, n := range st.Updates {
		if n != 1 {
			t.Errorf("upstream got %d answers for %s, want 1", n, k)
		}
	}
}
