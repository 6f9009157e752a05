package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/rs/zerolog"

	"github.com/taskbridge/taskbridge/bridge"
	"github.com/taskbridge/taskbridge/internal/redact"
	"github.com/taskbridge/taskbridge/legacy"
	"github.com/taskbridge/taskbridge/sep2663"
)

// upstreamFlags choose the upstream: a URL (Streamable HTTP) or a command run as a child
// process over stdio. Shared by serve and stdio.
type upstreamFlags struct {
	url, cmd            string
	closeWait, termWait time.Duration
}

func (u *upstreamFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&u.url, "upstream", "", "URL of the SEP-2663 (2026-07-28) upstream MCP endpoint")
	fs.StringVar(&u.cmd, "upstream-cmd", "", `run the upstream as a child process over stdio: "CMD ARGS" (quotes group words; not a shell)`)
	fs.DurationVar(&u.closeWait, "upstream-close-wait", 5*time.Second, "on shutdown, wait this long for the upstream child to exit after closing its stdin")
	fs.DurationVar(&u.termWait, "upstream-term-wait", 5*time.Second, "then wait this long after SIGTERM before SIGKILL")
}

// describe names the upstream for the startup line, logs and /status: the URL in its
// redacted form (no userinfo, no query).
func (u *upstreamFlags) describe() string {
	if u.cmd != "" {
		return "child " + u.cmd
	}
	return redact.URL(u.url)
}

// open builds the upstream client. stop shuts a child down (a no-op for a URL).
func (u *upstreamFlags) open(log zerolog.Logger, childStderr io.Writer) (up *sep2663.Client, stop func(context.Context) error, err error) {
	info := sep2663.Implementation{Name: "taskbridge", Version: version}
	switch {
	case u.url != "" && u.cmd != "":
		return nil, nil, errors.New("give one of --upstream and --upstream-cmd, not both")
	case u.url != "":
		return sep2663.NewClient(sep2663.ClientOptions{URL: u.url, ClientInfo: info}), func(context.Context) error { return nil }, nil
	case u.cmd != "":
		argv, err := sep2663.SplitCommand(u.cmd)
		if err != nil {
			return nil, nil, fmt.Errorf("--upstream-cmd: %w", err)
		}
		tr, err := sep2663.StartStdio(sep2663.StdioOptions{Command: argv, Stderr: childStderr, Logger: &log,
			CloseWait: u.closeWait, TermWait: u.termWait})
		if err != nil {
			return nil, nil, err
		}
		return sep2663.NewClient(sep2663.ClientOptions{Transport: tr, ClientInfo: info}), tr.Close, nil
	}
	return nil, nil, errors.New("--upstream URL or --upstream-cmd CMD is required")
}

// cmdStdio serves one legacy client on stdin/stdout: an MCP client launches
// "taskbridge stdio --upstream URL" as its server. stdout carries only MCP messages; logs
// go to stderr. The session ends when stdin closes.
func cmdStdio(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("stdio", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var up upstreamFlags
	up.register(fs)
	storeSpec := fs.String("store", "", "task store: sqlite:PATH or postgres://… (default: a temporary SQLite file removed at exit)")
	logLevel := fs.String("log-level", "warn", "log level on stderr: debug, info, warn, error")
	pollFloor := fs.Int64("poll-floor-ms", 250, "lowest poll interval told to clients and used upstream, ms")
	heartbeat := fs.Duration("heartbeat", 10*time.Second, "progress heartbeat interval on long requests")
	if err := fs.Parse(args); err != nil {
		return err
	}
	log := newLogger(stderr, *logLevel)
	spec := *storeSpec
	if spec == "" {
		dir, err := os.MkdirTemp("", "taskbridge-stdio-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		spec = "sqlite:" + filepath.Join(dir, "tasks.db")
	}
	st, err := openStore(ctx, spec)
	if err != nil {
		return err
	}
	defer st.Close()
	client, stopUpstream, err := up.open(log, stderr)
	if err != nil {
		return fmt.Errorf("stdio: %w", err)
	}
	defer shutdownUpstream(stopUpstream, up.closeWait+up.termWait+time.Second)
	// A 2025-11-25 upstream (server/discover refused, era.go) gets the pass-through face.
	if up.cmd == "" && detectEra(ctx, client, 10*time.Second, log) == eraLegacy {
		rb, err := newReverseFromConfig(ctx, bridge.ReverseConfig{Store: st, Logger: log, PollFloorMs: *pollFloor}, up.url, nil, nil)
		if err != nil {
			return fmt.Errorf("stdio: legacy upstream %s: %w", up.describe(), err)
		}
		log.Info().Str("upstream", up.describe()).Msg("taskbridge serving stdio (2025-11-25 upstream: pass-through)")
		serveErr := rb.Legacy().ServeStdio(ctx, stdin, stdout, legacy.StdioOptions{})
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = rb.Close(cctx)
		return serveErr
	}
	b, err := bridge.New(bridge.Config{Store: st, Upstream: client, Logger: log, PollFloorMs: *pollFloor, Heartbeat: *heartbeat})
	if err != nil {
		return err
	}
	if err := b.Start(ctx); err != nil {
		return err
	}
	log.Info().Str("upstream", up.describe()).Msg("taskbridge serving stdio")
	serveErr := b.Legacy().ServeStdio(ctx, stdin, stdout, legacy.StdioOptions{})
	cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = b.Close(cctx)
	return serveErr
}

// shutdownUpstream stops an upstream child within limit.
func shutdownUpstream(stop func(context.Context) error, limit time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	_ = stop(ctx)
}
