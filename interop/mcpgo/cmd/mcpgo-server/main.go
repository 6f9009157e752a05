// Command mcpgo-server is a github.com/mark3labs/mcp-go v1.2.1 task server for taskbridge's
// interop tests: a real third-party MCP 2025-11-25 Tasks server, used as an upstream.
//
//	mcpgo-server -addr 127.0.0.1:0 [-mode dual|legacy] [-scale F] [-count-file PATH] [-page-size N]
//	mcpgo-server -stdio [-mode dual|legacy] …
//
// Over HTTP the first stdout line is "listening http://HOST:PORT/mcp" (streamable HTTP, mcp-go's
// StreamableHTTPServer, stateful sessions). With -stdio it serves one client on stdin/stdout.
//
// -mode dual (mcp-go's default) serves both eras on one endpoint: server/discover is answered
// and 2025-11-25 initialize works. -mode legacy restricts the advertised versions to
// 2025-11-25 and older (WithStreamableHTTPProtocolVersions; over stdio, the same list through
// the context, which mcp-go's stdio transport only uses for discover's supportedVersions).
//
// Tools (task support as mcp-go declares it): greet (sync), slow_compute{seconds,label}
// (optional, cancellable), failing_job (required; isError result), protocol_error_job
// (optional; JSON-RPC -32603), ask_client (optional; sampling, roots and elicitation
// requests to the client). -count-file holds {"tool":{"runs","finished","cancelled"}},
// rewritten after every change. SIGINT or SIGTERM stops it.
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

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

func main() {
	if err := run(); err != nil {
		logf("%v", err)
		os.Exit(1)
	}
}

func logf(format string, args ...any) { fmt.Fprintf(os.Stderr, "mcpgo-server: "+format+"\n", args...) }

// options are the command-line flags.
type options struct {
	addr, mode, countFile, name string
	stdio                       bool
	scale                       float64
	pageSize                    int
}

func parseFlags() (*options, error) {
	o := &options{}
	flag.StringVar(&o.addr, "addr", "127.0.0.1:0", "listen address (streamable HTTP at /mcp)")
	flag.BoolVar(&o.stdio, "stdio", false, "serve one client on stdin/stdout instead of HTTP")
	flag.StringVar(&o.mode, "mode", "dual", "dual (both eras, mcp-go's default) or legacy (2025-11-25 and older only)")
	flag.Float64Var(&o.scale, "scale", 1, "multiply every tool's sleep by this factor")
	flag.StringVar(&o.countFile, "count-file", "", "file rewritten with per-tool run counts (JSON)")
	flag.IntVar(&o.pageSize, "page-size", 0, "page size of tasks/list and the other lists (0: no paging)")
	flag.StringVar(&o.name, "name", "mcpgo-task-server", "serverInfo name")
	flag.Parse()
	if o.mode != "dual" && o.mode != "legacy" {
		return nil, fmt.Errorf("-mode %q: want dual or legacy", o.mode)
	}
	if o.scale <= 0 {
		return nil, fmt.Errorf("-scale %v: want > 0", o.scale)
	}
	return o, nil
}

// legacyVersions are mcp-go's protocol versions before 2026-07-28, newest first.
func legacyVersions() []string {
	var out []string
	for _, v := range mcp.ValidProtocolVersions {
		if !mcp.IsModernProtocol(v) {
			out = append(out, v)
		}
	}
	return out
}

func run() error {
	o, err := parseFlags()
	if err != nil {
		return err
	}
	count, err := newCounter(o.countFile)
	if err != nil {
		return fmt.Errorf("-count-file: %w", err)
	}
	det := newDetacher()
	defer det.closeAll()
	opts := []server.ServerOption{
		server.WithToolCapabilities(true),
		server.WithTaskCapabilities(true, true, true),
		server.WithTaskHooks(det.hooks()),
		server.WithMetaPropagator(slotPropagator{}),
		server.WithElicitation(),
	}
	if o.pageSize > 0 {
		opts = append(opts, server.WithPaginationLimit(o.pageSize))
	}
	srv := server.NewMCPServer(o.name, "1.2.1", opts...)
	srv.EnableSampling()
	(&tools{srv: srv, count: count, scale: o.scale}).register()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if o.stdio {
		return serveStdio(ctx, srv, o.mode)
	}
	return serveHTTP(ctx, srv, o)
}

func serveStdio(ctx context.Context, srv *server.MCPServer, mode string) error {
	ss := server.NewStdioServer(srv)
	if mode == "legacy" {
		versions := legacyVersions()
		ss.SetContextFunc(func(ctx context.Context) context.Context {
			return server.WithSupportedProtocolVersions(ctx, versions)
		})
	}
	err := ss.Listen(ctx, os.Stdin, os.Stdout)
	if err == nil || errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

func serveHTTP(ctx context.Context, srv *server.MCPServer, o *options) error {
	var hopts []server.StreamableHTTPOption
	if o.mode == "legacy" {
		hopts = append(hopts, server.WithStreamableHTTPProtocolVersions(legacyVersions()...))
	}
	h := server.NewStreamableHTTPServer(srv, hopts...)
	ln, err := net.Listen("tcp", o.addr)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", h)
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	fmt.Printf("listening http://%s/mcp\n", ln.Addr())
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	h.CloseSessions(sctx) // ends the standalone GET streams, so Shutdown does not wait for them
	if err := hs.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	<-errc
	return nil
}
