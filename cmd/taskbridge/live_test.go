package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/internal/fixture"
	"github.com/taskbridge/taskbridge/internal/jsonrpc"
	"github.com/taskbridge/taskbridge/internal/testenv"
)

// logLines returns the JSON log lines of s with the given message.
func logLines(s *served, message string) []string {
	var out []string
	for _, l := range strings.Split(s.log.String(), "\n") {
		if gjson.Get(l, "message").Str == message {
			out = append(out, l)
		}
	}
	return out
}

func postJSON(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Post(url, "application/json", nil)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestReloadOnSIGHUP (acceptance 3): on a running serve, SIGHUP re-reads the file; the
// kill switch turns on (a new task is refused with -32012, the gauge says 1) and, by POST
// /admin/reload, off again (a new task is accepted); the access log and the level change
// at once; the result is logged with what changed and what needs a restart; a file that
// does not validate changes nothing (the kill switch stays on) and the log says why. A
// tasks/result stream held open across the reloads is not dropped.
func TestReloadOnSIGHUP(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildTaskbridge(t, t.TempDir())
	fx := fixture.New(fixture.Options{Name: "reload-upstream", Scale: 1, PollIntervalMs: 200})
	up := httptest.NewServer(fx)
	t.Cleanup(func() { up.Close(); fx.Close() })
	file := filepath.Join(t.TempDir(), "tb.yaml")
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(file, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("access_log: true\nlog_level: info\n")
	s := startServe(t, bin, up.URL+"/mcp", filepath.Join(t.TempDir(), "tb.db"), "--config", file)
	c := legacyClient(t, s.url, "reload-client", "1.0")

	// A stream open across every reload below: a blocking tasks/result of a 4 s task.
	long := createTask(t, c, 4, "across-reloads")
	streamDone := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		res, err := c.Call(ctx, "tasks/result", map[string]string{"taskId": long})
		if err == nil && !strings.Contains(string(res), "across-reloads") {
			err = fmt.Errorf("result %s", res)
		}
		streamDone <- err
	}()

	// A request's line is written just after its answer: count tools/list lines once the
	// one expected is there, and after a pause where none is.
	lists := func() int {
		n := 0
		for _, l := range logLines(s, "request") {
			if gjson.Get(l, "method").Str == "tools/list" {
				n++
			}
		}
		return n
	}
	call(t, c, "tools/list", map[string]any{})
	waitFor(t, "the tools/list request line with access_log: true", func() bool { return lists() == 1 })

	write("access_log: false\nlog_level: warn\nheartbeat: 3s\nkill_switch: true\n")
	s.cmd.Process.Signal(syscall.SIGHUP)
	waitFor(t, "the reload line", func() bool { return len(logLines(s, "configuration reloaded")) == 1 })
	line := logLines(s, "configuration reloaded")[0]
	if got := gjson.Get(line, "changed").Raw; got != `["log_level: info → warn","access_log: true → false","kill_switch: false → true"]` {
		t.Errorf("changed = %s", got)
	}
	if got := gjson.Get(line, "needsRestart").Raw; got != `["heartbeat: 10s → 3s"]` {
		t.Errorf("needsRestart = %s", got)
	}
	killSwitchRefuses := func(want bool) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := c.Call(ctx, "tools/call", json.RawMessage(`{"name":"slow_compute","arguments":{"seconds":1,"label":"ks"},"task":{}}`))
		var je *jsonrpc.Error
		refused := errors.As(err, &je) && je.Code == jsonrpc.CodeTasksRefused && gjson.Get(string(je.Data), "reason").Str == "kill_switch"
		if refused != want || (!want && err != nil) {
			t.Fatalf("a new task with the kill switch %v: err = %v", map[bool]string{true: "on", false: "off"}[want], err)
		}
		fams := scrape(t, s.admin)
		if v, _ := metricValue(fams, "taskbridge_kill_switch"); (v == 1) != want {
			t.Errorf("taskbridge_kill_switch = %v with the kill switch %v", v, want)
		}
	}
	killSwitchRefuses(true)
	if gjson.Get(line, "source").Str != "SIGHUP" || gjson.Get(line, "level").Str != "info" {
		t.Errorf("reload line %s", line)
	}
	for range 3 {
		call(t, c, "tools/list", map[string]any{})
	}
	time.Sleep(300 * time.Millisecond)
	if n := lists(); n != 1 {
		t.Errorf("%d tools/list lines after access_log: false, want 1 (from before)", n)
	}

	write("access_log: true\nkill_switch: false\npoll_floor_ms: soon\n")
	s.cmd.Process.Signal(syscall.SIGHUP)
	waitFor(t, "the refusal line", func() bool { return len(logLines(s, "configuration reload refused")) == 1 })
	refused := logLines(s, "configuration reload refused")[0]
	if gjson.Get(refused, "level").Str != "error" || !strings.Contains(gjson.Get(refused, "reason").Str, file+`:3: poll_floor_ms: want an integer, got "soon"`) {
		t.Errorf("refusal line %s", refused)
	}
	killSwitchRefuses(true) // the invalid file changed nothing
	call(t, c, "tools/list", map[string]any{})
	time.Sleep(300 * time.Millisecond)
	if n := lists(); n != 1 {
		t.Errorf("an invalid reload turned the access log back on (%d tools/list lines, want 1)", n)
	}

	code, body := postJSON(t, s.admin+"/admin/reload")
	if code != http.StatusUnprocessableEntity || gjson.Get(body, "ok").Bool() || !strings.Contains(gjson.Get(body, "error").Str, "poll_floor_ms") {
		t.Errorf("POST /admin/reload of the invalid file: %d %s", code, body)
	}
	write("access_log: true\nlog_level: info\n")
	code, body = postJSON(t, s.admin+"/admin/reload")
	if code != 200 || !gjson.Get(body, "ok").Bool() || gjson.Get(body, "source").Str != "POST /admin/reload" ||
		gjson.Get(body, "changed.#").Int() != 3 || gjson.Get(body, "applied").Raw != `["logging","work gate"]` {
		t.Errorf("POST /admin/reload: %d %s", code, body)
	}
	killSwitchRefuses(false)
	call(t, c, "tools/list", map[string]any{})
	waitFor(t, "a tools/list line after access_log: true again", func() bool { return lists() == 2 })
	if err := <-streamDone; err != nil {
		t.Fatalf("the tasks/result stream open across the reloads: %v", err)
	}
	if code, _ := postJSON(t, strings.TrimSuffix(s.url, "/mcp")+"/admin/reload"); code != http.StatusNotFound && code != http.StatusMethodNotAllowed {
		t.Errorf("POST /admin/reload on the MCP listener: %d, want it absent", code)
	}
}

// TestDrainWithoutExitAndUndrain: POST /admin/drain refuses new tasks and fails /readyz
// while the process keeps running past drain_quiet; POST /admin/undrain puts it back, and
// new tasks are accepted; SIGTERM still drains and exits 0.
func TestDrainWithoutExitAndUndrain(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildTaskbridge(t, t.TempDir())
	fx := fixture.New(fixture.Options{Name: "undrain-upstream", Scale: 0.2, PollIntervalMs: 200})
	up := httptest.NewServer(fx)
	t.Cleanup(func() { up.Close(); fx.Close() })
	s := startServe(t, bin, up.URL+"/mcp", filepath.Join(t.TempDir(), "tb.db"), "--drain-quiet", "200ms")
	c := legacyClient(t, s.url, "undrain-client", "1.0")

	if code, body := postJSON(t, s.admin+"/admin/drain"); code != http.StatusAccepted || !gjson.Get(body, "draining").Bool() || gjson.Get(body, "exiting").Bool() {
		t.Fatalf("POST /admin/drain: %d %s", code, body)
	}
	if code, body := get(t, s.admin+"/readyz"); code != 503 || gjson.Get(body, "failed.0").Str != "accepting" {
		t.Fatalf("/readyz while drained: %d %s", code, body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := c.Call(ctx, "tools/call", json.RawMessage(`{"name":"slow_compute","arguments":{"seconds":1},"task":{}}`))
	var je *jsonrpc.Error
	if !errors.As(err, &je) || je.Code != jsonrpc.CodeOverloaded {
		t.Fatalf("a new task while drained: %v, want the drain error", err)
	}
	select {
	case err := <-s.exit:
		t.Fatalf("serve exited after POST /admin/drain (%v); it must wait for undrain", err)
	case <-time.After(2 * time.Second): // ten times drain_quiet, idle
	}
	if code, body := postJSON(t, s.admin+"/admin/undrain"); code != 200 || gjson.Get(body, "draining").Bool() {
		t.Fatalf("POST /admin/undrain: %d %s", code, body)
	}
	if code, body := get(t, s.admin+"/readyz"); code != 200 {
		t.Fatalf("/readyz after undrain: %d %s", code, body)
	}
	createTask(t, c, 1, "after-undrain")

	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-s.exit:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v, want 0", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("SIGTERM did not drain and exit within 30 s")
	}
}

// TestOutageWarningsRateLimited: an upstream outage with several tasks in flight does not
// print a warning per task per poll: the repeats are suppressed and then counted.
func TestOutageWarningsRateLimited(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildTaskbridge(t, t.TempDir())
	fx := fixture.New(fixture.Options{Name: "outage-upstream", Scale: 1, PollIntervalMs: 100})
	up := httptest.NewServer(fx)
	t.Cleanup(func() { up.Close(); fx.Close() })
	s := startServe(t, bin, up.URL+"/mcp", filepath.Join(t.TempDir(), "tb.db"))
	c := legacyClient(t, s.url, "outage-client", "1.0")
	for i := range 5 {
		createTask(t, c, 600, fmt.Sprintf("long-%d", i))
	}
	up.CloseClientConnections()
	up.Close()
	time.Sleep(12 * time.Second) // more than one 10 s window
	lines := logLines(s, "upstream tasks/get failed")
	repeated := int64(0)
	for _, l := range lines {
		repeated += gjson.Get(l, "repeated").Int()
	}
	t.Logf("12 s of outage, 5 tasks polled every ~100-200 ms: %d warning lines, %d repeats counted in them", len(lines), repeated)
	if len(lines) == 0 || len(lines) > 3 {
		t.Errorf("%d 'upstream tasks/get failed' lines in 12 s of outage, want 1 to 3", len(lines))
	}
	if repeated < 10 {
		t.Errorf("repeats counted = %d, want the suppressed polls counted (at least 10)", repeated)
	}
}

// TestNoAdminListener: without an admin listener the MCP listener serves /healthz and
// /readyz but not /metrics (its labels name clients), unless public_metrics says so;
// /status and the /admin endpoints never exist there.
func TestNoAdminListener(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildTaskbridge(t, t.TempDir())
	fx := fixture.New(fixture.Options{Name: "noadmin-upstream"})
	up := httptest.NewServer(fx)
	t.Cleanup(func() { up.Close(); fx.Close() })
	for _, public := range []bool{false, true} {
		args := []string{"serve", "--listen", "127.0.0.1:0", "--upstream", up.URL + "/mcp", "--log-format", "json",
			"--store", "sqlite:" + filepath.Join(t.TempDir(), "tb.db"), fmt.Sprintf("--public-metrics=%v", public)}
		cmd := exec.Command(bin, args...)
		log := &syncBuffer{}
		stderr, banner := testenv.WatchServeLog(log)
		cmd.Stderr = stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		var base string
		select {
		case b := <-banner:
			base = strings.TrimSuffix(b.MCP, "/mcp")
			if b.Admin != "" {
				t.Errorf("start-up event names an admin listener %q without --admin", b.Admin)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("no start-up event:\n%s", log.String())
		}
		want := map[string]int{"/healthz": 200, "/readyz": 200, "/metrics": 404, "/status": 404}
		if public {
			want["/metrics"] = 200
		}
		for path, code := range want {
			if got, _ := get(t, base+path); got != code {
				t.Errorf("public_metrics=%v: GET %s = %d, want %d", public, path, got, code)
			}
		}
		for _, path := range []string{"/admin/drain", "/admin/undrain", "/admin/reload"} {
			if got, _ := postJSON(t, base+path); got != http.StatusNotFound {
				t.Errorf("POST %s on the MCP listener = %d, want 404", path, got)
			}
		}
		cmd.Process.Kill()
		cmd.Wait()
	}
}

// TestReloadDoorSettings: a reload replaces the API keys (the old key is refused at once,
// the new one admitted) and sets a request rate, on a running serve.
func TestReloadDoorSettings(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildTaskbridge(t, t.TempDir())
	fx := fixture.New(fixture.Options{Name: "reload-door-upstream"})
	up := httptest.NewServer(fx)
	t.Cleanup(func() { up.Close(); fx.Close() })
	file := filepath.Join(t.TempDir(), "tb.yaml")
	keys := func(key, extra string) {
		t.Helper()
		if err := os.WriteFile(file, []byte("auth:\n  api_keys:\n    - key: "+key+"\n      principal: alice\n"+extra), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	keys("first-key-0123456789", "")
	s := startServe(t, bin, up.URL+"/mcp", filepath.Join(t.TempDir(), "tb.db"), "--config", file)
	ping := func(token string) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, s.url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := ping("first-key-0123456789"); code == http.StatusUnauthorized {
		t.Fatalf("the configured key: %d", code)
	}
	keys("second-key-0123456789", "request_rate: 0.001\nrequest_burst: 1\n")
	code, body := postJSON(t, s.admin+"/admin/reload")
	if code != 200 || gjson.Get(body, "applied").Raw != `["authentication","rate limit"]` ||
		gjson.Get(body, "changed.0").Raw != `{"key":"auth","from":"(set)","to":"(changed)"}` {
		t.Fatalf("POST /admin/reload: %d %s", code, body)
	}
	if strings.Contains(body, "second-key") || strings.Contains(s.log.String(), "second-key") {
		t.Error("the reload result or log shows an API key")
	}
	if code := ping("first-key-0123456789"); code != http.StatusUnauthorized {
		t.Errorf("the removed key after the reload: %d, want 401", code)
	}
	if code := ping("second-key-0123456789"); code == http.StatusUnauthorized || code == http.StatusTooManyRequests {
		t.Errorf("the new key's first request: %d, want it admitted", code)
	}
	if code := ping("second-key-0123456789"); code != http.StatusTooManyRequests {
		t.Errorf("the new key's second request at 0.001/s: %d, want 429", code)
	}
}
