package forward_test

import (
	"bytes"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/internal/fixture"
)

type lockedBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}
func (l *lockedBuf) String() string { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }

// TestRequestLogLine: one JSON line per request with method, route, task id, duration_ms
// and outcome — and never the arguments or the result.
func TestRequestLogLine(t *testing.T) {
	var buf lockedBuf
	e := newEnv(t, func(c *envConfig, _ *fixture.Options) { c.Logger = zerolog.New(&buf) })
	c := e.client()
	tid := call(t, c, "tools/call", raw(`{"name":"slow_compute","arguments":{"seconds":1,"label":"s3cr3t-label"},"task":{}}`)).Get("task.taskId").Str
	call(t, c, "tasks/result", id(tid))
	callErr(t, c, "tasks/get", id("unknown-task"))

	var lines []gjson.Result
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if r := gjson.Parse(l); r.Get("message").Str == "request" {
			lines = append(lines, r)
		}
	}
	if len(lines) != 3 {
		t.Fatalf("request log lines = %d, want 3:\n%s", len(lines), buf.String())
	}
	create, result, bad := lines[0], lines[1], lines[2]
	if create.Get("method").Str != "tools/call" || create.Get("route").Str != "translate" || create.Get("task").Str != tid ||
		create.Get("outcome").Str != "ok" || create.Get("duration_ms").Type != gjson.Number || create.Get("duration_ms").Float() <= 0 || create.Get("tool").Str != "slow_compute" {
		t.Errorf("create line: %s", create.Raw)
	}
	if result.Get("method").Str != "tasks/result" || result.Get("task").Str != tid || result.Get("outcome").Str != "ok" {
		t.Errorf("result line: %s", result.Raw)
	}
	if bad.Get("outcome").Str != "error_-32602" || bad.Get("task").Str != "unknown-task" {
		t.Errorf("error line: %s", bad.Raw)
	}
	if strings.Contains(buf.String(), "s3cr3t-label") || strings.Contains(buf.String(), "Result: 42") {
		t.Errorf("the log carries arguments or results:\n%s", buf.String())
	}
}

// TestAccessLogSwitch: with the access log off no request line is written, until it is
// turned on again; the switch is read per request.
func TestAccessLogSwitch(t *testing.T) {
	var buf lockedBuf
	var on atomic.Bool
	e := newEnv(t, func(c *envConfig, _ *fixture.Options) {
		c.Logger = zerolog.New(&buf)
		c.AccessLog = on.Load
	})
	c := e.client()
	call(t, c, "tools/list", raw(`{}`))
	if n := strings.Count(buf.String(), `"message":"request"`); n != 0 {
		t.Fatalf("%d request lines with the access log off:\n%s", n, buf.String())
	}
	on.Store(true)
	call(t, c, "tools/list", raw(`{}`))
	// The line is written just after the answer: give it a moment.
	for deadline := time.Now().Add(5 * time.Second); strings.Count(buf.String(), `"message":"request"`) == 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if n := strings.Count(buf.String(), `"message":"request"`); n != 1 {
		t.Fatalf("%d request lines after turning the access log on, want 1:\n%s", n, buf.String())
	}
}
