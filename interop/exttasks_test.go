// Acceptance (issue 5, item 2): the official SEP-2663 requester, @modelcontextprotocol/ext-tasks
// 0.2.2 on @modelcontextprotocol/client 2.4.0 pinned to 2026-07-28, completes the
// task-required simulate-research-query tool of @modelcontextprotocol/server-everything
// 2026.8.31 (a 2025-11-25 server on TS SDK v1), elicitation included, through a real
// "taskbridge serve --upstream URL" process that detected the upstream's era by itself.
package interop

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/internal/testenv"
)

// serveBinary runs "taskbridge serve --upstream upstream" on a fresh SQLite file and
// returns its /mcp URL. The process is stopped (SIGTERM, then SIGKILL) at cleanup, and its
// log is shown when the test failed.
func serveBinary(t *testing.T, upstream string, extra ...string) string {
	t.Helper()
	return serveWith(t, []string{"--upstream", upstream}, extra...)
}

// serveWith is serveBinary with the upstream flags given (--upstream URL or --upstream-cmd CMD).
func serveWith(t *testing.T, upstream []string, extra ...string) string {
	t.Helper()
	bin, _ := binaries(t)
	dir := t.TempDir()
	logPath := filepath.Join(dir, "serve.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	args := append(append([]string{"serve", "--listen", "127.0.0.1:0"}, upstream...),
		"--store", "sqlite:"+filepath.Join(dir, "tasks.db"), "--poll-floor-ms", "100", "--log-level", "debug", "--log-format", "json")
	args = append(args, extra...)
	cmd := exec.Command(bin, args...)
	stderr, banner := testenv.WatchServeLog(logf)
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start taskbridge serve: %v", err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); logf.Close(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("taskbridge serve log:\n%s", tail(string(b), 60))
		}
	})
	select {
	case b := <-banner:
		return b.MCP
	case <-exited:
		b, _ := os.ReadFile(logPath)
		t.Fatalf("taskbridge serve exited at start:\n%s", b)
	case <-time.After(60 * time.Second):
		t.Fatal("taskbridge serve logged no listening event within 60 s")
	}
	return ""
}

func tail(s string, n int) string {
	l := strings.Split(s, "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}

// startEverything runs @modelcontextprotocol/server-everything in streamableHttp mode (it
// takes its port from $PORT and prints no URL) and returns its /mcp URL once it accepts
// connections.
func startEverything(t *testing.T) string {
	t.Helper()
	node, dir := testenv.Node22(t), testenv.InteropDir(t)
	entry := filepath.Join(dir, "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")
	if _, err := os.Stat(entry); err != nil {
		testenv.Missing(t, "@modelcontextprotocol/server-everything is not installed in interop/node_modules")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cmd := exec.Command(node, entry, "streamableHttp")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), fmt.Sprintf("PORT=%d", port))
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("start server-everything: %v", err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second)
		if err == nil {
			c.Close()
			return fmt.Sprintf("http://127.0.0.1:%d/mcp", port)
		}
		select {
		case <-exited:
			t.Fatalf("server-everything exited at start:\n%s", logs.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("server-everything did not listen on %d:\n%s", port, logs.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// nodeLine runs a Node script from interop/ and returns its last stdout line (the scripts
// print exactly one JSON line). Safe to call from any goroutine: it never fails the test.
func nodeLine(ctx context.Context, node, dir string, args ...string) (line, stderr string, err error) {
	cmd := exec.CommandContext(ctx, node, args...)
	cmd.Dir = dir
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	err = cmd.Run()
	line = strings.TrimSpace(so.String())
	if i := strings.LastIndexByte(line, '\n'); i >= 0 {
		line = line[i+1:]
	}
	if err == nil && !gjson.Valid(line) {
		err = fmt.Errorf("no JSON line on stdout: %q", so.String())
	}
	return line, se.String(), err
}

// runExtTasks runs ext-tasks-client.mjs against url and fails the test on a crash.
func runExtTasks(t *testing.T, url string, args ...string) gjson.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	line, stderr, err := nodeLine(ctx, testenv.Node22(t), testenv.InteropDir(t),
		append([]string{"ext-tasks-client.mjs", "--url", url}, args...)...)
	out := gjson.Parse(line)
	if err != nil || out.Get("crash").Exists() {
		t.Fatalf("ext-tasks-client crashed (%v): %s\n%s\nstderr: %s", err, out.Get("crash").Str, line, stderr)
	}
	return out
}

// checkExtTasksResearch asserts what a user of the requester sees for
// simulate-research-query {topic:"python", ambiguous:true} answered with "programming".
func checkExtTasksResearch(t *testing.T, out gjson.Result) {
	t.Helper()
	if !out.Get("ok").Bool() {
		t.Errorf("client checks failed: %s", out.Get("failures").Raw)
	}
	if out.Get("protocolEra").Str != "modern" || !out.Get("tasksExtension").Bool() {
		t.Errorf("era %q, tasks extension %v: want a 2026-07-28 server with the tasks extension",
			out.Get("protocolEra").Str, out.Get("tasksExtension").Bool())
	}
	if out.Get("kind").Str != "task" || out.Get("taskId").Str == "" {
		t.Errorf("execution kind %q id %q, want a task", out.Get("kind").Str, out.Get("taskId").Str)
	}
	// server-everything asks roots/list on its GET stream once a session whose client
	// declared roots is initialized. The requester declares elicitation only, so its
	// upstream session declares just that (issue 16 item 6): no roots/list is asked, and
	// none is ever relayed as the task's input request.
	ins := out.Get("inputRequests").Array()
	if len(ins) != 1 || ins[0].Get("kind").Str != "elicitation" || ins[0].Get("delivery").Str != "task-update" {
		t.Errorf("input requests %s, want one elicitation delivered by tasks/update", out.Get("inputRequests").Raw)
	} else if !strings.Contains(ins[0].Get("message").Str, `"python" could have multiple interpretations`) {
		t.Errorf("elicitation message %q is not the server's question", ins[0].Get("message").Str)
	}
	sawInput := false
	for _, s := range out.Get("statuses").Array() {
		sawInput = sawInput || s.Str == "input_required"
	}
	if !sawInput {
		t.Errorf("statuses %s never showed input_required", out.Get("statuses").Raw)
	}
	if out.Get("outcome.status").Str != "completed" || out.Get("outcome.result.resultType").Str != "complete" {
		t.Errorf("outcome %s, want completed with a resultType:complete result", out.Get("outcome").Raw)
	}
	txt := out.Get("resultText").Str
	if !strings.HasPrefix(txt, "# Research Report: python (programming)") || !strings.Contains(txt, "**Clarification**: programming") {
		t.Errorf("report does not use the clarification: %.200q", txt)
	}
	methods := map[string]int{}
	for _, w := range out.Get("wire").Array() {
		methods[w.Get("method").Str]++
	}
	if methods["tools/call"] != 1 || methods["tasks/update"] != 1 || methods["tasks/get"] < 2 {
		t.Errorf("wire %s: want one tools/call, one tasks/update, tasks/get polls", out.Get("wire").Raw)
	}
}

func TestExtTasksResearchQueryThroughTaskbridge(t *testing.T) {
	up := startEverything(t)
	url := serveBinary(t, up)
	out := runExtTasks(t, url, "--tool", "simulate-research-query",
		"--args", `{"topic":"python","ambiguous":true}`, "--answer", `{"interpretation":"programming"}`)
	checkExtTasksResearch(t, out)

	// The same tool called by a 2026-07-28 client that did not declare the extension is
	// refused with -32021 (HTTP 400) naming the capability, never run as a long request.
	body := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"simulate-research-query","arguments":{"topic":"x"},` +
		`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "tools/call")
	req.Header.Set("Mcp-Name", "simulate-research-query")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 400 || gjson.GetBytes(b, "error.code").Int() != -32021 ||
		!strings.Contains(gjson.GetBytes(b, "error.data.requiredCapabilities").Raw, "io.modelcontextprotocol/tasks") {
		t.Errorf("call without the extension: HTTP %d %s, want 400 with -32021 and requiredCapabilities", resp.StatusCode, b)
	}
}
