// Command tbfixture serves taskbridge's SEP-2663 fixture server (internal/fixture) over HTTP
// for tests in other processes.
//
//	go run ./cmd/tbfixture -addr 127.0.0.1:0 [-no-tasks] [-scale 0.1] [-conformance]
//	go run ./cmd/tbfixture -stdio [-no-tasks] [-scale 0.1]
//
// The first stdout line is "listening http://HOST:PORT/mcp". The MCP endpoint is /mcp and
// the counters are at GET /fixture/stats. SIGINT or SIGTERM stops it.
//
// With -stdio it serves one client over stdin/stdout instead (newline-delimited JSON-RPC,
// nothing else on stdout) and exits when stdin closes or on SIGINT/SIGTERM.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/taskbridge/taskbridge/internal/fixture"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "tbfixture:", err)
		os.Exit(1)
	}
}

func run() error {
	addr := flag.String("addr", "127.0.0.1:0", "listen address")
	noTasks := flag.Bool("no-tasks", false, "advertise no tasks extension and never create tasks")
	scale := flag.Float64("scale", 1, "multiply every tool's sleep by this factor")
	name := flag.String("name", "", "serverInfo name (default taskbridge-fixture)")
	ttl := flag.Int64("ttl-ms", 0, "task ttlMs (default 300000)")
	poll := flag.Int64("poll-ms", 0, "task pollIntervalMs (default 200)")
	stdio := flag.Bool("stdio", false, "serve one client over stdin/stdout instead of HTTP")
	listen := flag.Bool("listen", false, "serve subscriptions/listen with notifications.taskIds (notifications/tasks)")
	logging := flag.Bool("logging", false, "advertise logging and add log_note (a notifications/message on its reply when the request's logLevel allows info)")
	listChanged := flag.Bool("list-changed", false, "add add_tool, bump_resource and fixture://counter, advertise listChanged/subscribe and serve them on subscriptions/listen (implies -listen)")
	conf := flag.Bool("conformance", false, "add the tools, prompts and resources the conformance suite's 2026-07-28 server scenarios call")
	flag.Parse()

	srv := fixture.New(fixture.Options{Name: *name, NoTasksExtension: *noTasks, Scale: *scale,
		TaskTTLMs: *ttl, PollIntervalMs: *poll, Listen: *listen, ListChanged: *listChanged, Logging: *logging,
		Conformance: *conf})
	defer srv.Close()
	if *stdio {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		return srv.ServeStdio(ctx, os.Stdin, os.Stdout)
	}

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	hs := &http.Server{Handler: srv.Mux(), ReadHeaderTimeout: 10 * time.Second}
	fmt.Printf("listening http://%s/mcp\n", ln.Addr())

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	srv.Close() // ends running tasks and synchronous tool sleeps, so Shutdown is quick
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}
