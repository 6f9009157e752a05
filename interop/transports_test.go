// Acceptance (issue 7): the real TS SDK v1 client over stdio (StdioClientTransport
// launching "taskbridge stdio") and over WebSocket (WebSocketClientTransport on
// ws://…/mcp) against the Go SEP-2663 fixture, with the fixture reached over HTTP or run
// as the bridge's child process (--upstream-cmd); and a child killed mid-task.
package interop

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
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
	"github.com/taskbridge/taskbridge/store/sqlite"
)

var (
	binOnce sync.Once
	binDir  string
	binErr  error
)

// binaries builds cmd/taskbridge and cmd/tbfixture once per test binary run.
func binaries(t *testing.T) (taskbridge, tbfixture string) {
	t.Helper()
	binOnce.Do(func() {
		binDir, binErr = os.MkdirTemp("", "taskbridge-interop-bin-")
		if binErr != nil {
			return
		}
		root := filepath.Dir(testenv.InteropDir(t))
		cmd := exec.Command("go", "build", "-o", binDir+string(os.PathSeparator), "./cmd/taskbridge", "./cmd/tbfixture")
		cmd.Dir = root
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			binErr = &buildError{err: err, out: out.String()}
		}
	})
	if binErr != nil {
		t.Fatalf("building binaries: %v", binErr)
	}
	return filepath.Join(binDir, "taskbridge"), filepath.Join(binDir, "tbfixture")
}

type buildError struct {
	err error
	out string
}

func (e *buildError) Error() string { return e.err.Error() + "\n" + e.out }

// transportsOut is the one JSON line of transports-client.mjs.
type transportsOut struct {
	raw string
}

func (o transportsOut) get(path string) gjson.Result { return gjson.Get(o.raw, path) }

// runTransports runs transports-client.mjs with args and checks its own verdict.
func runTransports(t *testing.T, args ...string) transportsOut {
	t.Helper()
	node, dir := testenv.Node22(t), testenv.InteropDir(t)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, append([]string{"transports-client.mjs"}, args...)...)
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	line := strings.TrimSpace(stdout.String())
	if i := strings.LastIndexByte(line, '\n'); i >= 0 {
		line = line[i+1:]
	}
	if !gjson.Valid(line) || runErr != nil || gjson.Get(line, "crash").Exists() {
		t.Fatalf("transports-client crashed (exit %v)\nstdout: %s\nstderr: %s", runErr, stdout.String(), stderr.String())
	}
	o := transportsOut{raw: line}
	if !o.get("ok").Bool() {
		t.Errorf("client flows failed: %s\nline: %s\nstderr: %s", o.get("failures").Raw, line, stderr.String())
	}
	return o
}

// checkFlows asserts what a user of the client would notice in the three flows.
func checkFlows(t *testing.T, o transportsOut) {
	t.Helper()
	if s := o.get("flows.basic.finalStatus").Str; s != "completed" {
		t.Errorf("basic: final status %q, want completed", s)
	}
	if !bridgeTaskID.MatchString(o.get("flows.basic.taskId").Str) {
		t.Errorf("basic: task id %q is not a bridge id", o.get("flows.basic.taskId").Str)
	}
	if txt := o.get("flows.elicit.resultText").Str; !strings.HasPrefix(txt, "Deleted") {
		t.Errorf("elicit: result %q, want Deleted…", txt)
	}
	if n := o.get("flows.elicit.elicitations").Int(); n != 1 {
		t.Errorf("elicit: %d elicitations, want 1", n)
	}
	if s := o.get("flows.cancel.afterStatus").Str; s != "cancelled" {
		t.Errorf("cancel: status after cancel %q, want cancelled", s)
	}
}

func TestTSStdioClientThroughTaskbridgeStdio(t *testing.T) {
	tb, _ := binaries(t)
	fx := fixture.New(fixture.Options{Name: "stdio-upstream", Scale: 0.2})
	up := httptest.NewServer(fx)
	t.Cleanup(func() { up.Close(); fx.Close() })
	argv, _ := json.Marshal([]string{tb, "stdio", "--upstream", up.URL + "/mcp", "--poll-floor-ms", "100"})
	o := runTransports(t, "--stdio", string(argv))
	checkFlows(t, o)
	if o.get("transport").Str != "stdio" {
		t.Errorf("transport %q", o.get("transport").Str)
	}
	// Pushed status notifications reach a stdio client (none is guaranteed for a given
	// task, but the cancel flow's cancelled status is always pushed).
	if !strings.Contains(o.get("notifications").Raw, `"cancelled"`) {
		t.Errorf("no notifications/tasks/status cancelled on stdio: %s", o.get("notifications").Raw)
	}
}

func TestTSStdioClientUpstreamChildProcess(t *testing.T) {
	tb, fxBin := binaries(t)
	argv, _ := json.Marshal([]string{tb, "stdio", "--upstream-cmd", fxBin + " -stdio -scale 0.2", "--poll-floor-ms", "100"})
	checkFlows(t, runTransports(t, "--stdio", string(argv)))
}

func TestTSWebSocketClient(t *testing.T) {
	fx := fixture.New(fixture.Options{Name: "ws-upstream", Scale: 0.2})
	up := httptest.NewServer(fx)
	t.Cleanup(func() { up.Close(); fx.Close() })
	url := startBridge(t, sep2663.NewClient(sep2663.ClientOptions{URL: up.URL + "/mcp"}))
	o := runTransports(t, "--ws", "ws"+strings.TrimPrefix(url, "http"))
	checkFlows(t, o)
	if o.get("transport").Str != "websocket" {
		t.Errorf("transport %q", o.get("transport").Str)
	}
}

// startBridge runs an in-process bridge in front of up and returns its /mcp URL.
func startBridge(t *testing.T, up *sep2663.Client) string {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "bridge.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	b, err := bridge.NewForward(forward.Config{Store: st, Upstream: up, Logger: zerolog.Nop(), PollFloorMs: 100})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(ctx); err != nil {
		t.Fatal(err)
	}
	door, err := bridge.NewDoor(bridge.DoorConfig{Logger: zerolog.Nop()}, b)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", door)
	srv := httptest.NewServer(mux)
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		b.Close(cctx)
	})
	return srv.URL + "/mcp"
}

// Killing the upstream child mid-task: the task fails with an explicit unknown outcome
// (never a hang, never "completed"), the child is restarted, and new calls work.
func TestUpstreamChildKilledMidTask(t *testing.T) {
	_, fxBin := binaries(t)
	tr, err := sep2663.StartStdio(sep2663.StdioOptions{Command: []string{fxBin, "-stdio", "-scale", "0.2"},
		RestartMin: 50 * time.Millisecond, CloseWait: time.Second, TermWait: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := tr.Close(ctx); err != nil {
			t.Errorf("transport Close: %v", err)
		}
	})
	url := startBridge(t, sep2663.NewClient(sep2663.ClientOptions{Transport: tr}))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := legacyclient.New(url)
	if _, err := c.Initialize(ctx); err != nil {
		t.Fatal(err)
	}
	res, err := c.Call(ctx, "tools/call", map[string]any{"name": "slow_compute", "arguments": map[string]any{"seconds": 60}, "task": map[string]any{"ttl": 60000}})
	if err != nil {
		t.Fatal(err)
	}
	taskID := gjson.GetBytes(res, "task.taskId").Str
	pid := tr.PID()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var task json.RawMessage
	for {
		task, err = c.Call(ctx, "tasks/get", map[string]any{"taskId": taskID})
		if err != nil {
			t.Fatalf("tasks/get: %v", err)
		}
		if gjson.GetBytes(task, "status").Str != "working" {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("task after the kill: %s", task)
	if s := gjson.GetBytes(task, "status").Str; s != "failed" {
		t.Fatalf("status after the child died = %q, want failed (%s)", s, task)
	}
	if msg := gjson.GetBytes(task, "statusMessage").Str; !strings.Contains(msg, "unknown") {
		t.Errorf("statusMessage %q does not say the outcome is unknown", msg)
	}
	_, err = c.Call(ctx, "tasks/result", map[string]any{"taskId": taskID})
	je, ok := err.(*jsonrpc.Error)
	if !ok || !strings.Contains(string(mustMarshal(je.Data)), `"outcome":"unknown"`) {
		t.Errorf("tasks/result error = %v, want data.outcome unknown", err)
	}
	if tr.Starts() < 2 || tr.PID() == pid {
		t.Errorf("child not restarted: starts %d, pid %d (old %d)", tr.Starts(), tr.PID(), pid)
	}
	res, err = c.Call(ctx, "tools/call", map[string]any{"name": "greet", "arguments": map[string]any{"name": "again"}})
	if err != nil || !strings.Contains(string(res), "again") {
		t.Errorf("call after restart: %s, %v", res, err)
	}
}

func mustMarshal(v any) []byte { b, _ := json.Marshal(v); return b }
