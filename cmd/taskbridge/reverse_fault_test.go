package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/internal/testenv"
)

// holdingFront is a load balancer in front of one bridge process at a time: while no
// bridge is up (between a SIGKILL and the next start), requests wait for one instead of
// failing, as a balancer with retries would make a client see it.
type holdingFront struct {
	url    string
	mu     sync.Mutex
	target *httputil.ReverseProxy
	ready  chan struct{} // closed when target is set
}

func newHoldingFront(t *testing.T) *holdingFront {
	f := &holdingFront{ready: make(chan struct{})}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		ready := f.ready
		f.mu.Unlock()
		select {
		case <-ready:
		case <-time.After(60 * time.Second):
			http.Error(w, "no bridge", http.StatusBadGateway)
			return
		}
		f.mu.Lock()
		p := f.target
		f.mu.Unlock()
		p.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { srv.CloseClientConnections(); srv.Close() })
	f.url = srv.URL + "/mcp"
	return f
}

// hold makes new requests wait until the next to.
func (f *holdingFront) hold() {
	f.mu.Lock()
	defer f.mu.Unlock()
	select {
	case <-f.ready:
		f.ready = make(chan struct{})
	default:
	}
}

// to sends every request (the waiting ones first) to the bridge at u.
func (f *holdingFront) to(u string) {
	target, _ := url.Parse(u)
	p := &httputil.ReverseProxy{FlushInterval: -1,
		Rewrite: func(pr *httputil.ProxyRequest) { pr.SetURL(target); pr.Out.URL.Path = target.Path },
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			w.WriteHeader(http.StatusBadGateway)
		}}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.target = p
	select {
	case <-f.ready:
	default:
		close(f.ready)
	}
}

// modernEnvelope is the _meta of every raw 2026-07-28 request of these tests.
const modernEnvelope = `{"io.modelcontextprotocol/protocolVersion":"2026-07-28",` +
	`"io.modelcontextprotocol/clientCapabilities":{"elicitation":{"form":{}},"extensions":{"io.modelcontextprotocol/tasks":{}}},` +
	`"io.modelcontextprotocol/clientInfo":{"name":"raw-client","version":"1.0.0"}}`

var rawID atomic.Int64

// rawModern POSTs one raw 2026-07-28 request (params without _meta: the envelope is
// added) to u and returns the JSON-RPC response (from a JSON or an SSE reply).
func rawModern(t *testing.T, u, method, params string, header ...string) gjson.Result {
	t.Helper()
	resp, body := rawModernHTTP(t, u, method, params, header...)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: HTTP %d %s", method, resp.StatusCode, body)
	}
	return gjson.Parse(body)
}

// rawModernHTTP is rawModern returning the HTTP response and the JSON-RPC message bytes.
func rawModernHTTP(t *testing.T, u, method, params string, header ...string) (*http.Response, string) {
	t.Helper()
	p := strings.TrimSuffix(strings.TrimSpace(params), "}")
	if p != "{" {
		p += ","
	}
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s"_meta":%s}}`, rawID.Add(1), method, p, modernEnvelope)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader([]byte(body)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", method)
	if v := gjson.Get(body, "params.name"); v.Type == gjson.String {
		req.Header.Set("Mcp-Name", v.Str)
	} else if v := gjson.Get(body, "params.taskId"); v.Type == gjson.String {
		req.Header.Set("Mcp-Name", v.Str)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	msg := string(raw)
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		for _, line := range strings.Split(msg, "\n") {
			if d, ok := strings.CutPrefix(line, "data:"); ok && gjson.Get(d, "id").Exists() {
				msg = strings.TrimSpace(d)
			}
		}
	}
	return resp, msg
}

// legacyStats reads the legacy server's executions per tool (GET /stats).
func legacyStats(t *testing.T, mcpURL string) map[string]int {
	t.Helper()
	resp, err := http.Get(strings.TrimSuffix(mcpURL, "/mcp") + "/stats")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	m := map[string]int{}
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		t.Fatal(err)
	}
	return m
}

// reverseUntil polls tasks/get through u until pred holds (30 s at most).
func reverseUntil(t *testing.T, u, id string, pred func(gjson.Result) bool) gjson.Result {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		r := rawModern(t, u, "tasks/get", `{"taskId":"`+id+`"}`)
		if r.Get("error").Exists() {
			t.Fatalf("tasks/get %s: %s", id, r.Raw)
		}
		if pred(r.Get("result")) {
			return r.Get("result")
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s: still %s after 30 s", id, r.Get("result").Raw)
		}
		time.Sleep(150 * time.Millisecond)
	}
}

func isTerminal(r gjson.Result) bool { return terminal(r.Get("status").Str) }

// TestReverseFaultSIGKILL is issue 14's acceptance 1: 2026-07-28 clients (ext-tasks 0.2.2
// and raw requests) create tasks through "taskbridge serve" in front of the TS SDK v1
// legacy server; the bridge is SIGKILLed while tasks are working and while one is
// input_required; a new bridge on the same store answers tasks/get, tasks/update and
// tasks/cancel for the same ids, in the upstream sessions the tasks live in, and every
// task completes; the legacy server ran each tools/call once.
func TestReverseFaultSIGKILL(t *testing.T) {
	bin := buildTaskbridge(t, t.TempDir())
	up := testenv.StartNodeServer(t, "legacy-server.mjs", "--port", "0")
	db := "sqlite:" + filepath.Join(t.TempDir(), "b.db")
	front := newHoldingFront(t)
	b1 := serveChild(t, bin, up, db, "bridge1")
	front.to(b1.url)

	// The ext-tasks requester runs one task end to end across the kill.
	type extOut struct {
		line gjson.Result
		err  error
	}
	extc := make(chan extOut, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, testenv.Node22(t), "ext-tasks-client.mjs", "--url", front.url,
			"--tool", "slow_compute", "--args", `{"seconds":6}`, "--timeout", "90000")
		cmd.Dir = testenv.InteropDir(t)
		var so, se bytes.Buffer
		cmd.Stdout, cmd.Stderr = &so, &se
		err := cmd.Run()
		if err != nil {
			err = fmt.Errorf("%v: %s", err, se.String())
		}
		extc <- extOut{gjson.Parse(strings.TrimSpace(so.String())), err}
	}()

	create := func(tool, args string) string {
		r := rawModern(t, front.url, "tools/call", `{"name":"`+tool+`","arguments":`+args+`}`)
		if r.Get("result.resultType").Str != "task" {
			t.Fatalf("tools/call %s: %s", tool, r.Raw)
		}
		return r.Get("result.taskId").Str
	}
	working := create("slow_compute", `{"seconds":5}`)
	toCancel := create("slow_compute", `{"seconds":60}`)
	asking := create("confirm_delete", `{"filename":"kept.txt"}`)
	before := reverseUntil(t, front.url, asking, func(r gjson.Result) bool { return r.Get("status").Str == "input_required" })
	var key string
	for k := range before.Get("inputRequests").Map() {
		key = k
	}
	if key == "" || before.Get("inputRequests."+gjson.Escape(key)+".params.message").Str != "Delete kept.txt?" {
		t.Fatalf("input request before the kill: %s", before.Raw)
	}
	// Let the ext-tasks client create its task, then kill while everything is unfinished.
	deadline := time.Now().Add(20 * time.Second)
	for legacyStats(t, up)["slow_compute"] < 3 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if got := reverseUntil(t, front.url, working, func(gjson.Result) bool { return true }).Get("status").Str; got != "working" {
		t.Fatalf("task %s before the kill: %s", working, got)
	}
	front.hold()
	b1.kill(t)
	b2 := serveChild(t, bin, up, db, "bridge2")
	front.to(b2.url)

	// The same ids, answered by the new process in the sessions the tasks live in.
	after := reverseUntil(t, front.url, asking, func(gjson.Result) bool { return true })
	if after.Get("status").Str != "input_required" || !after.Get("inputRequests."+gjson.Escape(key)).Exists() {
		t.Fatalf("input_required task after the restart: %s (before: key %s)", after.Raw, key)
	}
	if r := rawModern(t, front.url, "tasks/update", `{"taskId":"`+asking+`","inputResponses":{"`+key+`":{"action":"accept","content":{"confirm":true}}}}`); r.Get("error").Exists() {
		t.Fatalf("tasks/update after the restart: %s", r.Raw)
	}
	if r := rawModern(t, front.url, "tasks/cancel", `{"taskId":"`+toCancel+`"}`); r.Get("error").Exists() {
		t.Fatalf("tasks/cancel after the restart: %s", r.Raw)
	}
	done := reverseUntil(t, front.url, asking, isTerminal)
	if done.Get("status").Str != "completed" || done.Get("result.content.0.text").Str != "Deleted kept.txt" {
		t.Errorf("answered task: %s", done.Raw)
	}
	done = reverseUntil(t, front.url, working, isTerminal)
	if done.Get("status").Str != "completed" || !strings.Contains(done.Get("result.content.0.text").Str, "42") {
		t.Errorf("working task: %s", done.Raw)
	}
	if done = reverseUntil(t, front.url, toCancel, isTerminal); done.Get("status").Str != "cancelled" {
		t.Errorf("cancelled task: %s", done.Raw)
	}
	out := <-extc
	if out.err != nil || !out.line.Get("ok").Bool() || out.line.Get("outcome.status").Str != "completed" || !strings.Contains(out.line.Get("resultText").Str, "42") {
		t.Errorf("ext-tasks client across the kill: err %v, %s", out.err, out.line.Raw)
	}
	stats := legacyStats(t, up)
	if stats["slow_compute"] != 3 || stats["confirm_delete"] != 1 {
		t.Errorf("the legacy server ran %v, want slow_compute 3 and confirm_delete 1 (no call repeated)", stats)
	}
}
