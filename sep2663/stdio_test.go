package sep2663

import (
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/internal/fixture"
	"github.com/taskbridge/taskbridge/internal/jsonrpc"
	"github.com/taskbridge/taskbridge/internal/upstream"
)

// The test binary re-executes itself as the stdio child: SEP2663_CHILD=fixture serves the
// Go fixture (with listen) on stdin/stdout; SEP2663_CHILD=stubborn ignores stdin EOF and
// SIGTERM, so only SIGKILL ends it.
func init() {
	switch os.Getenv("SEP2663_CHILD") {
	case "fixture":
		s := fixture.New(fixture.Options{Scale: 0.1, Listen: true, PollIntervalMs: 50})
		_ = s.ServeStdio(context.Background(), os.Stdin, os.Stdout)
		s.Close()
		os.Exit(0)
	case "stubborn":
		signal.Ignore(syscall.SIGTERM)
		time.Sleep(time.Hour)
		os.Exit(0)
	}
}

func startChild(t *testing.T, kind string, o StdioOptions) *StdioTransport {
	t.Helper()
	o.Command = []string{os.Args[0], "-test.run=^$"}
	o.Env = append(o.Env, "SEP2663_CHILD="+kind)
	if o.RestartMin == 0 {
		o.RestartMin = 20 * time.Millisecond
	}
	tr, err := StartStdio(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := tr.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return tr
}

func TestStdioTransportSpeaksToTheFixture(t *testing.T) {
	tr := startChild(t, "fixture", StdioOptions{})
	c := NewClient(ClientOptions{Transport: tr})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	d, err := c.Discover(ctx)
	if err != nil {
		t.Fatalf("Discover: %v", err)
	}
	if !d.Capabilities.HasExtension(ExtensionTasks) {
		t.Errorf("discover over stdio lacks the tasks extension: %+v", d.Capabilities)
	}
	oc, err := c.CallTool(ctx, json.RawMessage(`{"name":"slow_compute","arguments":{"seconds":1}}`), RequestMeta{}, nil)
	if err != nil || oc.Kind != KindTask {
		t.Fatalf("CallTool: %+v, %v", oc, err)
	}
	for {
		dt, err := c.GetTask(ctx, oc.Task.TaskID, RequestMeta{})
		if err != nil {
			t.Fatalf("GetTask: %v", err)
		}
		if dt.Status == "completed" {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	// A JSON-RPC error reply is returned unchanged, not as a transport failure.
	_, err = c.GetTask(ctx, "no-such-task", RequestMeta{})
	var ue *upstream.Error
	if err == nil || errors.As(err, &ue) {
		t.Errorf("unknown task: err %v, want a JSON-RPC error", err)
	}
}

// collect gathers what a listen delivers.
type collect struct {
	mu       sync.Mutex
	acked    []string
	statuses []string
	changed  chan struct{}
}

func newCollect() *collect { return &collect{changed: make(chan struct{}, 100)} }

func (c *collect) handlers() ListenHandlers {
	return ListenHandlers{
		Ack: func(ids []string) { c.mu.Lock(); c.acked = ids; c.mu.Unlock(); c.changed <- struct{}{} },
		Task: func(dt *DetailedTask) {
			c.mu.Lock()
			c.statuses = append(c.statuses, string(dt.Status))
			c.mu.Unlock()
			c.changed <- struct{}{}
		},
	}
}

// waitFor waits until the delivered statuses end with want.
func (c *collect) waitFor(t *testing.T, want string) []string {
	t.Helper()
	deadline := time.After(15 * time.Second)
	for {
		c.mu.Lock()
		st := append([]string(nil), c.statuses...)
		c.mu.Unlock()
		if len(st) > 0 && st[len(st)-1] == want {
			return st
		}
		select {
		case <-c.changed:
		case <-deadline:
			t.Fatalf("no %q notification; got %v", want, st)
		}
	}
}

func testListen(t *testing.T, c *Client, cut func()) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	oc, err := c.CallTool(ctx, json.RawMessage(`{"name":"slow_compute","arguments":{"seconds":2}}`), RequestMeta{}, nil)
	if err != nil || oc.Kind != KindTask {
		t.Fatalf("CallTool: %+v, %v", oc, err)
	}
	col := newCollect()
	lctx, lcancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- c.ListenTasks(lctx, []string{oc.Task.TaskID, "unknown-id"}, RequestMeta{}, col.handlers())
	}()
	st := col.waitFor(t, "completed")
	if st[0] != "working" {
		t.Errorf("first notification %q, want the current state (working)", st[0])
	}
	col.mu.Lock()
	if len(col.acked) != 1 || col.acked[0] != oc.Task.TaskID {
		t.Errorf("ack covers %v, want only the known task", col.acked)
	}
	col.mu.Unlock()
	if cut == nil {
		lcancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("ListenTasks after cancel = %v", err)
		}
		return
	}
	cut()
	select {
	case err := <-done:
		var ue *upstream.Error
		if !errors.As(err, &ue) {
			t.Errorf("ListenTasks after a cut = %v, want an upstream.Error (unexpected disconnect)", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("ListenTasks did not return after the stream was cut")
	}
	lcancel()
}

func TestListenTasksOverStdio(t *testing.T) {
	tr := startChild(t, "fixture", StdioOptions{})
	testListen(t, NewClient(ClientOptions{Transport: tr}), nil)
}

func TestListenTasksOverHTTP(t *testing.T) {
	fx := fixture.New(fixture.Options{Scale: 0.1, Listen: true})
	hs := httptest.NewServer(fx)
	defer func() { hs.Close(); fx.Close() }()
	c := NewClient(ClientOptions{URL: hs.URL + "/mcp"})
	testListen(t, c, func() {
		if n := fx.CutListens(); n != 1 {
			t.Errorf("CutListens cut %d streams, want 1", n)
		}
	})
}

// Killing the child fails the call in flight with ErrChildExited, and the restarted child
// serves the next call.
func TestStdioChildRestart(t *testing.T) {
	tr := startChild(t, "fixture", StdioOptions{})
	c := NewClient(ClientOptions{Transport: tr})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	pid := tr.PID()
	errc := make(chan error, 1)
	go func() {
		// A listen stays open until the child dies.
		errc <- c.ListenTasks(ctx, nil, RequestMeta{}, ListenHandlers{})
	}()
	time.Sleep(100 * time.Millisecond)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	err := <-errc
	if !errors.Is(err, ErrChildExited) {
		t.Errorf("call in flight when the child died: %v, want ErrChildExited", err)
	}
	res, err := c.Call(ctx, MethodToolsCall, json.RawMessage(`{"name":"greet","arguments":{"name":"x"}}`), RequestMeta{}, nil)
	if err != nil || gjson.GetBytes(res, "content.0.text").Str != "Hello, x!" {
		t.Fatalf("call after restart: %s, %v", res, err)
	}
	if tr.Starts() != 2 || tr.PID() == pid {
		t.Errorf("starts %d, pid %d (old %d)", tr.Starts(), tr.PID(), pid)
	}
}

// A child that ignores both stdin EOF and SIGTERM is killed after CloseWait + TermWait.
func TestStdioCloseEscalatesToSIGKILL(t *testing.T) {
	tr := startChild(t, "stubborn", StdioOptions{CloseWait: 100 * time.Millisecond, TermWait: 100 * time.Millisecond})
	pid := tr.PID()
	time.Sleep(200 * time.Millisecond) // let the child install its SIGTERM handler
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := tr.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("child %d still exists after Close (kill 0: %v)", pid, err)
	}
	if _, _, err := tr.RoundTrip(ctx, jsonrpc.IntID(1), []byte(`{}`), nil); !errors.Is(err, ErrTransportClosed) {
		t.Errorf("RoundTrip after Close: %v", err)
	}
}
