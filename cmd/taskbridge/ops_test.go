// Acceptance for operating taskbridge (issue 8), with a real "taskbridge serve" process in
// front of the Go fixture upstream: every metric family after a scripted run, the /status
// page in headless Chromium, the report and tasks commands, config check, and the drain on
// SIGTERM.
package main

import (
	"bytes"
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
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/internal/fixture"
	"github.com/taskbridge/taskbridge/internal/jsonrpc"
	"github.com/taskbridge/taskbridge/internal/legacyclient"
	"github.com/taskbridge/taskbridge/internal/testenv"
	"github.com/taskbridge/taskbridge/record"
)

// served is one "taskbridge serve" process with an admin listener.
type served struct {
	cmd   *exec.Cmd
	url   string // http://ADDR/mcp
	admin string // http://ADDR
	log   *syncBuffer
	out   *syncBuffer // stdout: serve prints nothing there
	exit  chan error  // receives Wait's result once
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startServe runs "taskbridge serve" with an admin listener on a free port and waits for
// its start-up event (a JSON log line on stderr; stdout stays empty).
func startServe(t *testing.T, bin, upstream, db string, extra ...string) *served {
	t.Helper()
	args := append([]string{"serve", "--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0", "--upstream", upstream,
		"--store", "sqlite:" + db, "--poll-floor-ms", "100", "--log-format", "json"}, extra...)
	s := &served{cmd: exec.Command(bin, args...), log: &syncBuffer{}, out: &syncBuffer{}, exit: make(chan error, 1)}
	stderr, banner := testenv.WatchServeLog(s.log)
	s.cmd.Stderr, s.cmd.Stdout = stderr, s.out
	s.cmd.Env = append(os.Environ(), "TASKBRIDGE_CONFIG=") // no stray config from the environment
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { s.exit <- s.cmd.Wait() }()
	t.Cleanup(func() {
		_ = s.cmd.Process.Kill()
		if t.Failed() {
			t.Logf("taskbridge stderr:\n%s", s.log.String())
		}
	})
	select {
	case b := <-banner:
		s.url, s.admin = b.MCP, b.Admin
	case err := <-s.exit:
		t.Fatalf("taskbridge exited early (%v):\n%s", err, s.log.String())
	case <-time.After(30 * time.Second):
		t.Fatal("no start-up event after 30 s")
	}
	if !strings.HasPrefix(s.url, "http") || !strings.HasPrefix(s.admin, "http") { // http:// or https://
		t.Fatalf("start-up event: url %q admin %q", s.url, s.admin)
	}
	return s
}

// legacyClient opens a session announcing clientInfo name/version.
func legacyClient(t *testing.T, url, name, version string) *legacyclient.Client {
	t.Helper()
	c := legacyclient.New(url)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	params := fmt.Sprintf(`{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{"form":{}}},"clientInfo":{"name":%q,"version":%q}}`, name, version)
	if _, err := c.Call(ctx, "initialize", json.RawMessage(params)); err != nil {
		t.Fatalf("initialize %s: %v", name, err)
	}
	if err := c.Notify(ctx, "notifications/initialized", nil); err != nil {
		t.Fatal(err)
	}
	return c
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// scrape parses the admin /metrics.
func scrape(t *testing.T, admin string) map[string]*dto.MetricFamily {
	t.Helper()
	code, body := get(t, admin+"/metrics")
	if code != 200 {
		t.Fatalf("/metrics: HTTP %d", code)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return fams
}

// metricValue returns the value (counter, gauge) or sample count (histogram) of the series
// of family with all the given labels.
func metricValue(fams map[string]*dto.MetricFamily, family string, labels ...string) (float64, bool) {
	f := fams[family]
	if f == nil {
		return 0, false
	}
	total, found := 0.0, false
next:
	for _, m := range f.GetMetric() {
		for i := 0; i+1 < len(labels); i += 2 {
			ok := false
			for _, l := range m.GetLabel() {
				if l.GetName() == labels[i] && l.GetValue() == labels[i+1] {
					ok = true
				}
			}
			if !ok {
				continue next
			}
		}
		found = true
		switch {
		case m.Counter != nil:
			total += m.GetCounter().GetValue()
		case m.Gauge != nil:
			total += m.GetGauge().GetValue()
		case m.Histogram != nil:
			total += float64(m.GetHistogram().GetSampleCount())
		}
	}
	return total, found
}

// scriptedRun drives two legacy clients through every route the metrics count, and leaves
// two tasks in flight. It returns the id of one completed task.
func scriptedRun(t *testing.T, url string) string {
	t.Helper()
	ide := legacyClient(t, url, "acme-ide", "2.3.1")
	ide.OnRequest = func(method string, params json.RawMessage) (json.RawMessage, error) {
		if method != "elicitation/create" {
			return nil, jsonrpc.ErrMethodNotFound
		}
		return json.RawMessage(`{"action":"accept","content":{"confirm":true}}`), nil
	}
	// Two translated tasks, polled by tasks/get (coalesced), then their results.
	a := createTask(t, ide, 1, "A")
	b := createTask(t, ide, 1, "B")
	for range 5 {
		call(t, ide, "tasks/get", map[string]string{"taskId": a})
	}
	for _, id := range []string{a, b} {
		res := call(t, ide, "tasks/result", map[string]string{"taskId": id})
		if !strings.Contains(gjson.GetBytes(res, "content.0.text").Str, "Result: 42") {
			t.Fatalf("tasks/result %s: %s", id, res)
		}
	}
	// An input request relayed through tasks/result.
	res := call(t, ide, "tools/call", json.RawMessage(`{"name":"confirm_delete","arguments":{"filename":"a.txt"},"task":{}}`))
	cid := gjson.GetBytes(res, "task.taskId").Str
	res = call(t, ide, "tasks/result", map[string]string{"taskId": cid})
	if !strings.Contains(string(res), "Deleted a.txt") {
		t.Fatalf("confirm_delete result: %s", res)
	}
	// A synchronous call the upstream answers directly, and one collapsed from a task.
	call(t, ide, "tools/call", json.RawMessage(`{"name":"greet","arguments":{"name":"ops"}}`))
	call(t, ide, "tools/call", json.RawMessage(`{"name":"slow_compute","arguments":{"seconds":1,"label":"sync"}}`))
	// A second client leaves two long tasks in flight; a tasks/get for an unknown id errors.
	cli := legacyClient(t, url, "legacy-cli", "0.9.0")
	createTask(t, cli, 600, "long-1")
	createTask(t, cli, 600, "long-2")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cli.Call(ctx, "tasks/get", map[string]string{"taskId": "nope"}); err == nil {
		t.Fatal("tasks/get of an unknown id: want an error")
	}
	return a
}

func TestOperateScriptedRun(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildTaskbridge(t, t.TempDir())
	fx := fixture.New(fixture.Options{Name: "ops-upstream", Scale: 0.2, PollIntervalMs: 200})
	up := httptest.NewServer(fx)
	t.Cleanup(func() { up.Close(); fx.Close() })
	db := filepath.Join(t.TempDir(), "tb.db")
	s := startServe(t, bin, up.URL+"/mcp", db)

	if code, body := get(t, s.admin+"/readyz"); code != 200 {
		t.Fatalf("/readyz before the run: HTTP %d %s", code, body)
	}
	done := scriptedRun(t, s.url)

	t.Run("metrics", func(t *testing.T) {
		fams := scrape(t, s.admin)
		checks := []struct {
			family string
			labels []string
			min    float64
		}{
			{"taskbridge_requests_total", []string{"face", "legacy", "method", "tools/call", "outcome", "ok"}, 7},
			{"taskbridge_requests_total", []string{"face", "legacy", "method", "tasks/get", "outcome", "error_-32602"}, 1},
			{"taskbridge_request_duration_seconds", []string{"method", "tasks/result"}, 3},
			{"taskbridge_upstream_request_duration_seconds", []string{"method", "tools/call", "outcome", "ok"}, 7},
			{"taskbridge_upstream_request_duration_seconds", []string{"method", "tasks/get"}, 1},
			{"taskbridge_tasks_in_flight", []string{"status", "working"}, 2},
			{"taskbridge_tasks_created_total", []string{"mode", "translate"}, 5},
			{"taskbridge_fallback_decisions_total", []string{"decision", "translate"}, 5},
			{"taskbridge_fallback_decisions_total", []string{"decision", "collapse"}, 1},
			{"taskbridge_fallback_decisions_total", []string{"decision", "passthrough"}, 1},
			{"taskbridge_polls_coalesced_total", nil, 1},
			{"taskbridge_upstream_polls_total", nil, 1},
			{"taskbridge_input_requests_relayed_total", []string{"method", "elicitation/create"}, 1},
			{"taskbridge_store_operation_duration_seconds", []string{"op", "create_task", "outcome", "ok"}, 5},
			{"taskbridge_legacy_clients_total", []string{"client_name", "acme-ide", "client_version", "2.3.1", "protocol_version", "2025-11-25"}, 1},
			{"taskbridge_legacy_clients_total", []string{"client_name", "legacy-cli", "client_version", "0.9.0"}, 1},
			{"taskbridge_sunset_remaining_seconds", nil, 1},
			{"taskbridge_sunset_timestamp_seconds", nil, float64(time.Date(2027, 7, 28, 0, 0, 0, 0, time.UTC).Unix())},
			{"taskbridge_build_info", nil, 1},
		}
		for _, c := range checks {
			v, ok := metricValue(fams, c.family, c.labels...)
			if !ok {
				t.Errorf("%s%v: no such series", c.family, c.labels)
				continue
			}
			if v < c.min {
				t.Errorf("%s%v = %v, want >= %v", c.family, c.labels, v, c.min)
			}
		}
		// Sensible, not just present: nothing was refused, nobody is draining, the
		// in-flight gauge is exact, one session per client.
		for _, c := range []struct {
			family string
			labels []string
			want   float64
		}{
			{"taskbridge_tasks_in_flight", []string{"status", "working"}, 2},
			{"taskbridge_tasks_in_flight", []string{"status", "input_required"}, 0},
			{"taskbridge_draining", nil, 0},
			{"taskbridge_kill_switch", nil, 0},
			{"taskbridge_legacy_clients_total", []string{"client_name", "acme-ide"}, 1},
		} {
			if v, _ := metricValue(fams, c.family, c.labels...); v != c.want {
				t.Errorf("%s%v = %v, want %v", c.family, c.labels, v, c.want)
			}
		}
		// Every counter family exists from the start; nothing was refused.
		for _, reason := range []string{"draining", "kill_switch", "sunset"} {
			if v, ok := metricValue(fams, "taskbridge_tasks_refused_total", "reason", reason); !ok || v != 0 {
				t.Errorf("taskbridge_tasks_refused_total{reason=%q} = %v (present %v), want 0", reason, v, ok)
			}
		}
	})

	t.Run("log samples in docs/operations.md match", func(t *testing.T) {
		samples := docLogSamples(t)
		real := map[string]string{}
		for _, l := range strings.Split(s.log.String(), "\n") {
			msg := gjson.Get(l, "message").Str
			if _, done := real[msg]; done {
				continue
			}
			if msg == "taskbridge listening" || (msg == "request" && gjson.Get(l, "method").Str == "tools/call" &&
				gjson.Get(l, "route").Str == "translate" && gjson.Get(l, "task").Exists()) {
				real[msg] = l
			}
		}
		for _, msg := range []string{"taskbridge listening", "request"} {
			doc, line := samples[msg], real[msg]
			if doc == "" || line == "" {
				t.Fatalf("%q: sample in the docs %q, line in the log %q", msg, doc, line)
			}
			if got, want := shape(line), shape(doc); got != want {
				t.Errorf("%q: the code writes\n  %s\nthe docs show\n  %s", msg, got, want)
			}
			for _, l := range []string{doc, line} {
				if ts := gjson.Get(l, "time").Str; !regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`).MatchString(ts) {
					t.Errorf("time %q in %s: want RFC 3339 UTC with milliseconds", ts, l)
				}
			}
		}
		if d := gjson.Get(real["request"], "duration_ms"); d.Type != gjson.Number || d.Float() <= 0 {
			t.Errorf("duration_ms in %s: want a positive number of milliseconds", real["request"])
		}
		if strings.Contains(real["request"], `"latency"`) {
			t.Error("the request line still carries a unitless latency")
		}
	})

	t.Run("promtool check metrics", func(t *testing.T) {
		_, body := get(t, s.admin+"/metrics")
		testenv.PromtoolCheck(t, body)
	})

	t.Run("nothing on stdout, metrics only on the admin listener", func(t *testing.T) {
		if out := s.out.String(); out != "" {
			t.Errorf("serve printed on stdout: %q", out)
		}
		if code, _ := get(t, strings.TrimSuffix(s.url, "/mcp")+"/metrics"); code != http.StatusNotFound {
			t.Errorf("/metrics on the MCP listener with an admin listener: HTTP %d, want 404", code)
		}
	})

	t.Run("status page in headless Chromium", func(t *testing.T) {
		chromium := "/usr/bin/chromium"
		if _, err := os.Stat(chromium); err != nil {
			testenv.Missing(t, "%s (Debian package chromium; scripts/test.sh installs it under CI=true)", chromium)
		}
		dom := runChromium(t, chromium, "--dump-dom", s.admin+"/status")
		for _, want := range []string{
			`<table id="clients">`, `<span class="client">acme-ide</span> <span class="muted">2.3.1</span></td><td class="nw">2025-11-25</td>`,
			`<span class="client">legacy-cli</span> <span class="muted">0.9.0</span></td>`, `<svg id="legacy-chart"`, `id="inflight"`, `<div class="n">2</div><div class="l">working</div>`,
			`<div class="n">0</div><div class="l">input_required</div>`, "days</strong> until the sunset on 2027-07-28",
		} {
			if !strings.Contains(dom, want) {
				t.Errorf("/status DOM in Chromium lacks %q", want)
			}
		}
		if t.Failed() {
			t.Logf("DOM:\n%s", dom)
		}
		art := filepath.Join(testenv.RepoRoot(t), "artifacts")
		if err := os.MkdirAll(art, 0o755); err != nil {
			t.Fatal(err)
		}
		shot := filepath.Join(art, "status-page.png")
		os.Remove(shot)
		runChromium(t, chromium, "--screenshot="+shot, "--window-size=1200,900", s.admin+"/status")
		b, err := os.ReadFile(shot)
		if err != nil || len(b) < 10_000 || !bytes.HasPrefix(b, []byte("\x89PNG")) {
			t.Fatalf("screenshot %s: %d bytes, err %v", shot, len(b), err)
		}
		t.Logf("screenshot saved: %s (%d bytes)", shot, len(b))
	})

	t.Run("report and tasks commands", func(t *testing.T) {
		out := runCmd(t, bin, "report", "--store", "sqlite:"+db)
		for _, want := range []string{"Sunset: 2027-07-28", "Tasks in flight: 2 (working 2, input_required 0)",
			"acme-ide", "legacy-cli", "translate=3"} {
			if !strings.Contains(out, want) {
				t.Errorf("report lacks %q:\n%s", want, out)
			}
		}
		out = runCmd(t, bin, "report", "--store", "sqlite:"+db, "--json")
		if n := gjson.Get(out, "clients.#").Int(); n != 2 || gjson.Get(out, "inFlight.working").Int() != 2 {
			t.Errorf("report --json: %d clients, in flight %s", n, gjson.Get(out, "inFlight").Raw)
		}
		out = runCmd(t, bin, "tasks", "list", "--store", "sqlite:"+db, "--status", "working")
		if strings.Count(out, "\n") != 3 || !strings.Contains(out, "slow_compute") {
			t.Errorf("tasks list --status working: want a header and 2 rows:\n%s", out)
		}
		out = runCmd(t, bin, "tasks", "show", done, "--store", "sqlite:"+db, "--json")
		if gjson.Get(out, "status").Str != "completed" || gjson.Get(out, "outcome").Str != "succeeded" || gjson.Get(out, "resultBytes").Int() == 0 {
			t.Errorf("tasks show --json %s: %s", done, out)
		}
	})
}

// docLogSamples returns the one-line JSON samples of the Logs section of
// docs/operations.md, by message.
func docLogSamples(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testenv.RepoRoot(t), "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	start := strings.Index(doc, "\n## Logs\n")
	end := strings.Index(doc[start+1:], "\n## ")
	if start < 0 || end < 0 {
		t.Fatal("docs/operations.md has no Logs section")
	}
	out := map[string]string{}
	for _, l := range strings.Split(doc[start:start+1+end], "\n") {
		if strings.HasPrefix(l, "{") && gjson.Valid(l) {
			out[gjson.Get(l, "message").Str] = l
		}
	}
	return out
}

// shape is a JSON line's keys in order with their value types: what a log line sample must
// share with the real line.
func shape(line string) string {
	var parts []string
	gjson.Parse(line).ForEach(func(k, v gjson.Result) bool {
		parts = append(parts, k.Str+":"+v.Type.String())
		return true
	})
	return strings.Join(parts, " ")
}

// runChromium runs headless Chromium with the project's flags and a fresh profile, and
// returns its stdout.
func runChromium(t *testing.T, bin string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir=" + t.TempDir()}
	cmd := exec.CommandContext(ctx, bin, append(base, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium %v: %v\n%s", args, err, stderr.String())
	}
	return string(out)
}

func runCmd(t *testing.T, bin string, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("taskbridge %v: %v\n%s", args, err, stderr.String())
	}
	return string(out)
}

// TestDrainOnSIGTERM: the first SIGTERM refuses new task creation with the drain error,
// while a synchronous call already in flight completes, an existing task finishes and its
// result is fetchable; then the process exits 0 by itself.
func TestDrainOnSIGTERM(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildTaskbridge(t, t.TempDir())
	fx := fixture.New(fixture.Options{Name: "drain-upstream", Scale: 1, PollIntervalMs: 200})
	up := httptest.NewServer(fx)
	t.Cleanup(func() { up.Close(); fx.Close() })
	s := startServe(t, bin, up.URL+"/mcp", filepath.Join(t.TempDir(), "tb.db"), "--drain-quiet", "1s")

	c := legacyClient(t, s.url, "drain-client", "1.0")
	existing := createTask(t, c, 3, "existing")
	syncDone := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		res, err := c.Call(ctx, "tools/call", json.RawMessage(`{"name":"slow_compute","arguments":{"seconds":2,"label":"in-flight"}}`))
		if err == nil && !strings.Contains(string(res), "in-flight") {
			err = fmt.Errorf("sync result %s", res)
		}
		syncDone <- err
	}()
	waitFor(t, "the synchronous call to be in flight", func() bool { return fx.Stats().Executions["slow_compute"] >= 2 })

	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "/readyz to report draining", func() bool {
		code, body := get(t, s.admin+"/readyz")
		return code == 503 && gjson.Get(body, "failed.0").Str == "accepting" &&
			gjson.Get(body, `checks.#(name=="accepting").detail`).Str == "draining"
	})

	// New task creation is refused with the drain error.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := c.Call(ctx, "tools/call", json.RawMessage(`{"name":"slow_compute","arguments":{"seconds":1},"task":{}}`))
	var je *jsonrpc.Error
	if !errors.As(err, &je) || je.Code != jsonrpc.CodeOverloaded ||
		je.Message != "taskbridge is draining: new tasks are refused; retry on another replica" {
		t.Fatalf("task creation while draining: err = %v, want the drain error", err)
	}
	// Existing tasks keep being served; the in-flight synchronous call completes.
	if st := gjson.GetBytes(call(t, c, "tasks/get", map[string]string{"taskId": existing}), "status").Str; st != "working" && st != "completed" {
		t.Fatalf("tasks/get of the existing task while draining: status %q", st)
	}
	if err := <-syncDone; err != nil {
		t.Fatalf("in-flight synchronous call during the drain: %v", err)
	}
	res := call(t, c, "tasks/result", map[string]string{"taskId": existing})
	if !strings.Contains(string(res), "existing") {
		t.Fatalf("tasks/result of the existing task: %s", res)
	}
	if st := gjson.GetBytes(call(t, c, "tasks/get", map[string]string{"taskId": existing}), "status").Str; st != "completed" {
		t.Fatalf("existing task after its result: status %q", st)
	}
	// Then, idle, the process exits 0 on its own.
	select {
	case err := <-s.exit:
		if err != nil {
			t.Fatalf("taskbridge exit: %v, want status 0", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("taskbridge did not exit within 30 s of the drain")
	}
	log := s.log.String()
	if !strings.Contains(log, `"message":"drained: nothing in flight; exiting"`) {
		t.Errorf("log lacks the drained line:\n%s", log)
	}
}

// TestSecondSignalExits: a second SIGTERM during a drain exits at once, non-zero.
func TestSecondSignalExits(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildTaskbridge(t, t.TempDir())
	fx := fixture.New(fixture.Options{Name: "drain2-upstream", Scale: 1})
	up := httptest.NewServer(fx)
	t.Cleanup(func() { up.Close(); fx.Close() })
	s := startServe(t, bin, up.URL+"/mcp", filepath.Join(t.TempDir(), "tb.db"))
	c := legacyClient(t, s.url, "c", "1")
	createTask(t, c, 600, "long") // keeps the drain busy
	s.cmd.Process.Signal(syscall.SIGTERM)
	waitFor(t, "draining", func() bool { code, _ := get(t, s.admin+"/readyz"); return code == 503 })
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-s.exit:
		if err == nil {
			t.Fatal("second signal: exit status 0, want non-zero")
		}
	case <-time.After(15 * time.Second):
		t.Fatal("a second SIGTERM did not end the process")
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestConfigCheck(t *testing.T) {
	t.Setenv("TASKBRIDGE_UPSTREAM_AUTHORIZATION", "")
	example := filepath.Join(testenv.RepoRoot(t), "taskbridge.example.yaml")
	var out, errb bytes.Buffer
	if err := run(context.Background(), []string{"config", "check", example}, &out, &errb); err != nil {
		t.Fatalf("config check of the example: %v\n%s", err, errb.String())
	}
	for _, want := range []string{": ok", "upstream: http://mcp-server:9000/mcp # " + example + ":", "key: '********'", "poll_floor_ms: 250"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("config check output lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "change-me-to-a-long-random-key") {
		t.Errorf("config check printed an API key")
	}

	bad := filepath.Join(t.TempDir(), "bad.yaml")
	os.WriteFile(bad, []byte("upstream: http://u:9/mcp\nlisten: 127.0.0.1:8080\npoll_floor_ms: soon\nheartbaet: 5s\n"), 0o600)
	out.Reset()
	errb.Reset()
	err := run(context.Background(), []string{"config", "check", bad}, &out, &errb)
	if err == nil {
		t.Fatal("config check of a bad file: want an error")
	}
	for _, want := range []string{bad + `:3: poll_floor_ms: want an integer, got "soon"`, bad + `:4: unknown key "heartbaet" (did you mean "heartbeat"?)`} {
		if !strings.Contains(errb.String(), want) {
			t.Errorf("config check stderr lacks %q:\n%s", want, errb.String())
		}
	}
	if out.Len() != 0 {
		t.Errorf("config check of a bad file printed a configuration:\n%s", out.String())
	}
}

// TestTasksCommandsInProcess: list by principal and status, show, and reconcile an unknown
// outcome (cancelled releases the idempotency key; a second reconcile is refused).
func TestTasksCommandsInProcess(t *testing.T) {
	db := filepath.Join(t.TempDir(), "tb.db")
	st, err := openStore(context.Background(), "sqlite:"+db)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	ttl := int64(60_000)
	for _, tk := range []*record.Task{
		{ID: "lost", Owner: "principal:/alice", SessionID: "s1", IdempotencyKey: "pay-1", Mode: record.ModeTranslate, Tool: "pay",
			Status: record.StatusFailed, StatusMessage: "The upstream did not answer; whether the tool ran is unknown.",
			CreatedAt: now, LastUpdatedAt: now, TTLMs: &ttl, Outcome: record.OutcomeUnknown},
		{ID: "fine", Owner: "principal:acme/bob", SessionID: "s2", Mode: record.ModeTranslate, Tool: "slow_compute",
			Status: record.StatusWorking, CreatedAt: now.Add(-time.Second), LastUpdatedAt: now, TTLMs: &ttl, Outcome: record.OutcomePending},
	} {
		if err := st.CreateTask(context.Background(), tk); err != nil {
			t.Fatal(err)
		}
	}
	st.Close()
	runOK := func(args ...string) string {
		t.Helper()
		var out, errb bytes.Buffer
		if err := run(context.Background(), append(args, "--store", "sqlite:"+db), &out, &errb); err != nil {
			t.Fatalf("taskbridge %v: %v\n%s", args, err, errb.String())
		}
		return out.String()
	}
	if out := runOK("tasks", "list", "--principal", "alice"); !strings.Contains(out, "lost") || strings.Contains(out, "fine") {
		t.Errorf("tasks list --principal alice:\n%s", out)
	}
	if out := runOK("tasks", "list", "--principal", "acme/bob", "--status", "working"); !strings.Contains(out, "fine") || strings.Contains(out, "lost") {
		t.Errorf("tasks list --principal acme/bob --status working:\n%s", out)
	}
	out := runOK("tasks", "show", "lost")
	for _, want := range []string{"outcome           unknown", "idempotency key   pay-1", "status            failed"} {
		if !strings.Contains(out, want) {
			t.Errorf("tasks show lacks %q:\n%s", want, out)
		}
	}
	out = runOK("tasks", "reconcile", "lost", "--outcome", "cancelled", "--note", "checked the ledger")
	if !strings.Contains(out, "outcome cancelled (status stays failed)") {
		t.Errorf("reconcile output: %s", out)
	}
	out = runOK("tasks", "show", "lost", "--json")
	if gjson.Get(out, "outcome").Str != "cancelled" || gjson.Get(out, "idempotencyKey").Exists() ||
		!strings.Contains(gjson.Get(out, "outcomeDetail").Str, "checked the ledger") || gjson.Get(out, "status").Str != "failed" {
		t.Errorf("after reconcile: %s", out)
	}
	var errb bytes.Buffer
	err = run(context.Background(), []string{"tasks", "reconcile", "lost", "--outcome", "succeeded", "--store", "sqlite:" + db}, io.Discard, &errb)
	if err == nil || !strings.Contains(err.Error(), "not unknown") {
		t.Errorf("second reconcile: err = %v, want a refusal", err)
	}
	err = run(context.Background(), []string{"tasks", "reconcile", "lost", "--outcome", "maybe", "--store", "sqlite:" + db}, io.Discard, &errb)
	if err == nil || !strings.Contains(err.Error(), "want succeeded, failed or cancelled") {
		t.Errorf("bad --outcome: err = %v", err)
	}
}
