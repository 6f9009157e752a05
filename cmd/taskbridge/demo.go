package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/rs/zerolog"
	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/bridge"
	"github.com/taskbridge/taskbridge/bridge/forward"
	"github.com/taskbridge/taskbridge/internal/fixture"
	"github.com/taskbridge/taskbridge/internal/legacyclient"
	"github.com/taskbridge/taskbridge/sep2663"
	"github.com/taskbridge/taskbridge/store/sqlite"
)

// cmdDemo starts the Go SEP-2663 fixture upstream and a bridge on loopback, drives a
// 2025-11-25 task flow through them and narrates it.
func cmdDemo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	scale := fs.Float64("scale", 1, "speed factor for the fixture's tools (0.1 = ten times faster)")
	dc := command{name: "demo", synopsis: "demo [--scale X]",
		about: "Runs a SEP-2663 fixture upstream and the bridge in this process, and walks a 2025-11-25 client through a task."}
	if _, err := parseArgs(fs, dc, args, stdout); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 55*time.Second)
	defer cancel()
	p := func(format string, a ...any) { fmt.Fprintf(stdout, format+"\n", a...) }

	fx := fixture.New(fixture.Options{Name: "demo-upstream", Scale: *scale})
	defer fx.Close()
	upURL, stopUp, err := serveLoopback(fx)
	if err != nil {
		return err
	}
	defer stopUp()
	p("① upstream: Go SEP-2663 fixture (MCP 2026-07-28 + io.modelcontextprotocol/tasks) at %s", upURL)

	dir, err := os.MkdirTemp("", "taskbridge-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	st, err := sqlite.Open(ctx, filepath.Join(dir, "demo.db"))
	if err != nil {
		return err
	}
	defer st.Close()
	b, err := bridge.NewForward(forward.Config{
		Store:    st,
		Upstream: sep2663.NewClient(sep2663.ClientOptions{URL: upURL}),
		Logger:   zerolog.Nop(),
	})
	if err != nil {
		return err
	}
	if err := b.Start(ctx); err != nil {
		return err
	}
	defer b.Close(context.Background())
	door, err := bridge.NewDoor(bridge.DoorConfig{Logger: zerolog.Nop()}, b)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", door)
	brURL, stopBr, err := serveLoopback(mux)
	if err != nil {
		return err
	}
	defer stopBr()
	p("② bridge: taskbridge at %s (SQLite store %s)", brURL, filepath.Join(dir, "demo.db"))

	c := legacyclient.New(brURL)
	init, err := c.Initialize(ctx)
	if err != nil {
		return fmt.Errorf("initialize: %w", err)
	}
	p("③ a 2025-11-25 client initializes: protocol %s, server %q, tasks capability %s",
		gjson.GetBytes(init, "protocolVersion").Str, gjson.GetBytes(init, "serverInfo.name").Str,
		gjson.GetBytes(init, "capabilities.tasks").Raw)

	tools, err := c.Call(ctx, "tools/list", nil)
	if err != nil {
		return err
	}
	p("④ tools/list (each tool now says whether a task is possible):")
	for _, t := range gjson.GetBytes(tools, "tools").Array() {
		p("     %-20s taskSupport=%s", t.Get("name").Str, t.Get("execution.taskSupport").Str)
	}

	created, err := c.Call(ctx, "tools/call", json.RawMessage(`{"name":"slow_compute","arguments":{"seconds":2,"label":"demo"},"task":{"ttl":60000}}`))
	if err != nil {
		return err
	}
	id := gjson.GetBytes(created, "task.taskId").Str
	p("⑤ tools/call slow_compute with params.task → CreateTaskResult")
	p("     bridge task id %s (the upstream's id is never shown), status %s, pollInterval %d ms, ttl %d ms",
		id, gjson.GetBytes(created, "task.status").Str, gjson.GetBytes(created, "task.pollInterval").Int(), gjson.GetBytes(created, "task.ttl").Int())

	p("⑥ tasks/get polling:")
	last := ""
	for {
		got, err := c.Call(ctx, "tasks/get", map[string]string{"taskId": id})
		if err != nil {
			return err
		}
		status := gjson.GetBytes(got, "status").Str
		if status != last {
			p("     %s  %-10s %s", time.Now().Format("15:04:05.000"), status, gjson.GetBytes(got, "statusMessage").Str)
			last = status
		}
		if status == "completed" || status == "failed" || status == "cancelled" {
			break
		}
		time.Sleep(time.Duration(gjson.GetBytes(got, "pollInterval").Int()) * time.Millisecond)
	}
	res, err := c.Call(ctx, "tasks/result", map[string]string{"taskId": id})
	if err != nil {
		return err
	}
	p("⑦ tasks/result → %q", gjson.GetBytes(res, "content.0.text").Str)
	p("     _meta[io.modelcontextprotocol/related-task] = %s", gjson.GetBytes(res, `_meta.io\.modelcontextprotocol/related-task`).Raw)

	failed, err := c.Call(ctx, "tools/call", json.RawMessage(`{"name":"failing_job","arguments":{},"task":{}}`))
	if err != nil {
		return err
	}
	fid := gjson.GetBytes(failed, "task.taskId").Str
	fres, err := c.Call(ctx, "tasks/result", map[string]string{"taskId": fid})
	if err != nil {
		return err
	}
	fget, _ := c.Call(ctx, "tasks/get", map[string]string{"taskId": fid})
	p("⑧ a tool error (upstream: completed + isError) → legacy status %s, %q; tasks/result isError=%v",
		gjson.GetBytes(fget, "status").Str, gjson.GetBytes(fget, "statusMessage").Str, gjson.GetBytes(fres, "isError").Bool())

	slow, err := c.Call(ctx, "tools/call", json.RawMessage(`{"name":"slow_compute","arguments":{"seconds":30,"label":"to-cancel"},"task":{}}`))
	if err != nil {
		return err
	}
	sid := gjson.GetBytes(slow, "task.taskId").Str
	cancelled, err := c.Call(ctx, "tasks/cancel", map[string]string{"taskId": sid})
	if err != nil {
		return err
	}
	p("⑨ tasks/cancel on a running task → status %s (%s)", gjson.GetBytes(cancelled, "status").Str, gjson.GetBytes(cancelled, "statusMessage").Str)
	_, err = c.Call(ctx, "tasks/cancel", map[string]string{"taskId": sid})
	var je interface{ Error() string }
	if errors.As(err, &je) {
		p("     cancelling it again → %v", err)
	}

	list, err := c.Call(ctx, "tasks/list", nil)
	if err != nil {
		return err
	}
	p("⑩ tasks/list (synthesized from the bridge's records; newest first):")
	for _, t := range gjson.GetBytes(list, "tasks").Array() {
		p("     %s  %-10s", t.Get("taskId").Str, t.Get("status").Str)
	}

	sync, err := c.Call(ctx, "tools/call", json.RawMessage(`{"name":"slow_compute","arguments":{"seconds":1,"label":"sync"}}`))
	if err != nil {
		return err
	}
	p("⑪ plain tools/call (no task) on a tool the upstream runs as a task → polled to the end by the bridge: %q",
		gjson.GetBytes(sync, "content.0.text").Str)

	_, err = c.Call(ctx, "tasks/get", map[string]string{"taskId": "0123456789abcdef0123456789abcdef"})
	p("⑫ an unknown task id → %v", err)

	stats := fx.Stats()
	p("⑬ upstream counters: executions %v, tasks/get %d, tasks/cancel %d", stats.Executions, sum(stats.TaskGets), stats.Cancels)
	p("done.")
	return nil
}

func sum(m map[string]int) (n int) {
	for _, v := range m {
		n += v
	}
	return n
}

// serveLoopback serves h on a random loopback port; the returned URL ends in /mcp.
func serveLoopback(h http.Handler) (string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	stop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}
	return "http://" + ln.Addr().String() + "/mcp", stop, nil
}
