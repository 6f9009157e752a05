package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/internal/fixture"
	"github.com/taskbridge/taskbridge/store/sqlite"
)

// stdioProc is a "taskbridge stdio" child and its pipes.
type stdioProc struct {
	t    *testing.T
	cmd  *exec.Cmd
	in   io.WriteCloser
	out  *bufio.Scanner
	next int
}

func startStdio(t *testing.T, bin string, args ...string) *stdioProc {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"stdio"}, args...)...)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &stdioProc{t: t, cmd: cmd, in: in, out: bufio.NewScanner(out)}
	p.out.Buffer(make([]byte, 64<<10), 8<<20)
	t.Cleanup(func() {
		p.in.Close()
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("taskbridge stdio stderr:\n%s", stderr.String())
		}
	})
	return p
}

// call sends one request and returns the response line (notifications are skipped).
func (p *stdioProc) call(method, params string) gjson.Result {
	p.t.Helper()
	p.next++
	fmt.Fprintf(p.in, `{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`+"\n", p.next, method, params)
	for p.out.Scan() {
		r := gjson.ParseBytes(p.out.Bytes())
		if r.Get("id").Int() == int64(p.next) && !r.Get("method").Exists() {
			return r
		}
	}
	p.t.Fatalf("%s: stdout ended: %v", method, p.out.Err())
	return gjson.Result{}
}

func (p *stdioProc) initialize() {
	p.t.Helper()
	if r := p.call("initialize", `{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"stdio-door","version":"1"}}`); r.Get("error").Exists() {
		p.t.Fatalf("initialize: %s", r.Raw)
	}
	fmt.Fprintln(p.in, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
}

// TestStdioThroughTheDoor: "taskbridge stdio" passes the same chain as HTTP. Its session
// runs as stdio_principal (the task record is owned by that principal), the kill switch
// refuses a new task with -32012, and the rate limit refuses with -32011 request_rate and
// retryAfterMs, all from configuration keys given as flags.
func TestStdioThroughTheDoor(t *testing.T) {
	fx := fixture.New(fixture.Options{Scale: 0.1})
	up := httptest.NewServer(fx)
	t.Cleanup(func() { up.Close(); fx.Close() })
	bin := buildTaskbridge(t, t.TempDir())
	db := filepath.Join(t.TempDir(), "stdio.db")

	p := startStdio(t, bin, "--upstream", up.URL+"/mcp", "--store", "sqlite:"+db, "--stdio-principal", "alice")
	p.initialize()
	r := p.call("tools/call", `{"name":"slow_compute","arguments":{"seconds":0},"task":{}}`)
	taskID := r.Get("result.task.taskId").Str
	if taskID == "" {
		t.Fatalf("task-augmented call over stdio: %s", r.Raw)
	}
	p.in.Close()
	p.cmd.Wait()
	st, err := sqlite.Open(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := st.GetTask(context.Background(), taskID)
	st.Close()
	if err != nil || rec.Owner != "principal:/alice" {
		t.Fatalf("the stdio task's owner: %+v %v, want principal:/alice", rec, err)
	}

	q := startStdio(t, bin, "--upstream", up.URL+"/mcp", "--kill-switch", "--request-rate", "0.001", "--request-burst", "4")
	q.initialize() // initialize and initialized take two tokens
	r = q.call("tools/call", `{"name":"slow_compute","arguments":{"seconds":0},"task":{}}`)
	if r.Get("error.code").Int() != -32012 || r.Get("error.data.reason").Str != "kill_switch" {
		t.Fatalf("task with the kill switch on: %s", r.Raw)
	}
	for range 5 {
		if r = q.call("ping", `{}`); r.Get("error").Exists() {
			break
		}
	}
	if r.Get("error.code").Int() != -32011 || r.Get("error.data.reason").Str != "request_rate" || r.Get("error.data.retryAfterMs").Int() <= 0 {
		t.Fatalf("past the burst: %s", r.Raw)
	}
}
