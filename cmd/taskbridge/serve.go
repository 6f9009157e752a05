package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/taskbridge/taskbridge/bridge"
	"github.com/taskbridge/taskbridge/sep2663"
	"github.com/taskbridge/taskbridge/store"
	"github.com/taskbridge/taskbridge/store/postgres"
	"github.com/taskbridge/taskbridge/store/sqlite"
)

// serveFlags are the flags of "serve".
type serveFlags struct {
	listen, upstream, store, logLevel string
	maxBody                            int64
	pollFloor                          int64
	heartbeat                          time.Duration
	origins                            string
}

func cmdServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var f serveFlags
	fs.StringVar(&f.listen, "listen", "127.0.0.1:8080", "address to listen on; the MCP endpoint is http://ADDR/mcp")
	fs.StringVar(&f.upstream, "upstream", "", "URL of the SEP-2663 (2026-07-28) upstream MCP endpoint (required)")
	fs.StringVar(&f.store, "store", "sqlite:taskbridge.db", "task store: sqlite:PATH or postgres://…")
	fs.StringVar(&f.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	fs.Int64Var(&f.maxBody, "max-body", 4<<20, "largest accepted request body, bytes")
	fs.Int64Var(&f.pollFloor, "poll-floor-ms", 250, "lowest poll interval told to clients and used upstream, ms")
	fs.DurationVar(&f.heartbeat, "heartbeat", 10*time.Second, "keep-alive interval on long requests")
	fs.StringVar(&f.origins, "allowed-origins", "", "comma-separated browser origins allowed besides loopback ones")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if f.upstream == "" {
		return errors.New("serve: --upstream URL is required")
	}
	log := newLogger(stderr, f.logLevel)
	st, err := openStore(ctx, f.store)
	if err != nil {
		return err
	}
	defer st.Close()
	ln, err := net.Listen("tcp", f.listen)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	b, err := bridge.New(bridge.Config{
		Store:          st,
		Upstream:       sep2663.NewClient(sep2663.ClientOptions{URL: f.upstream, ClientInfo: sep2663.Implementation{Name: "taskbridge", Version: version}}),
		Logger:         log,
		PollFloorMs:    f.pollFloor,
		Heartbeat:      f.heartbeat,
		MaxBodyBytes:   f.maxBody,
		AllowedOrigins: splitList(f.origins),
	})
	if err != nil {
		return err
	}
	if err := b.Start(ctx); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "taskbridge listening on http://%s/mcp (upstream %s)\n", ln.Addr(), f.upstream)
	return serveHTTP(ctx, ln, b)
}

// serveHTTP serves until ctx ends, then drains: stop accepting, let handlers finish.
func serveHTTP(ctx context.Context, ln net.Listener, b *bridge.Bridge) error {
	mux := http.NewServeMux()
	mux.Handle("/mcp", b.Handler())
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") })
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = b.Close(sctx)
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}

// openStore opens "sqlite:PATH" (the default) or a postgres:// DSN.
func openStore(ctx context.Context, spec string) (store.Store, error) {
	switch {
	case strings.HasPrefix(spec, "sqlite:"):
		return sqlite.Open(ctx, strings.TrimPrefix(spec, "sqlite:"))
	case strings.HasPrefix(spec, "postgres://"), strings.HasPrefix(spec, "postgresql://"):
		return postgres.Open(ctx, spec)
	}
	return nil, fmt.Errorf("--store %q: want sqlite:PATH or postgres://…", spec)
}

func newLogger(w io.Writer, level string) zerolog.Logger {
	lvl, err := zerolog.ParseLevel(level)
	if err != nil {
		lvl = zerolog.InfoLevel
	}
	if f, ok := w.(*os.File); ok && isTerminal(f) {
		w = zerolog.ConsoleWriter{Out: w, TimeFormat: time.TimeOnly}
	}
	return zerolog.New(w).Level(lvl).With().Timestamp().Logger()
}

func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
