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
	"github.com/taskbridge/taskbridge/bridge/forward"
	"github.com/taskbridge/taskbridge/internal/config"
	"github.com/taskbridge/taskbridge/internal/redact"
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

// stdioKeys are the configuration keys "taskbridge stdio" takes as flags (besides its own
// flags above); they also come from --config and TASKBRIDGE_* like serve's.
var stdioKeys = []string{"stdio_principal", "request_rate", "request_burst", "max_body", "kill_switch", "sunset",
	"max_concurrent_tasks", "max_upstream_inflight"}

// cmdStdio serves one legacy client on stdin/stdout: an MCP client launches
// "taskbridge stdio --upstream URL" as its server. stdout carries only MCP messages; logs
// go to stderr. The session ends when stdin closes. The client passes the front door like
// every other (bridge.Door.ServeStdio): the line cap (max_body), the process's principal
// (stdio_principal), the rate limit, then the route, whose work gate applies the kill
// switch, the sunset and the limits.
func cmdStdio(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("stdio", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var up upstreamFlags
	up.register(fs)
	storeSpec := fs.String("store", "", "task store: sqlite:PATH or postgres://… (default: a temporary SQLite file removed at exit)")
	logLevel := fs.String("log-level", "warn", "log level on stderr: debug, info, warn, error")
	pollFloor := fs.Int64("poll-floor-ms", 250, "lowest poll interval told to clients and used upstream, ms")
	heartbeat := fs.Duration("heartbeat", 10*time.Second, "progress heartbeat interval on long requests")
	loader := config.RegisterKeys(fs, stdioKeys...)
	c := command{name: "stdio", synopsis: "stdio --upstream URL|--upstream-cmd CMD [flags]",
		about: "Serves one 2025-11-25 client on stdin/stdout (an MCP client launches this as its server); logs go to\n" +
			"stderr, and stdout carries only MCP messages.",
		keys: stdioKeys}
	if _, err := parseArgs(fs, c, args, stdout); err != nil {
		return err
	}
	cfg, err := loader.Load(os.Getenv)
	if err != nil {
		return fmt.Errorf("stdio: configuration:\n%w", err)
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
	gate := bridge.NewGate(bridge.GateConfig{Policy: bridge.Policy{KillSwitch: cfg.KillSwitch, Sunset: cfg.Sunset,
		MaxConcurrentTasks: cfg.MaxConcurrentTasks, MaxInflight: cfg.MaxUpstreamInflight}})
	var engine mcpBridge
	// A 2025-11-25 upstream (server/discover refused, era.go) gets the pass-through face.
	if up.cmd == "" && detectEra(ctx, client, 10*time.Second, log) == eraLegacy {
		rb, err := newReverseFromConfig(ctx, bridge.ReverseConfig{Store: st, Logger: log, PollFloorMs: *pollFloor,
			MaxBodyBytes: cfg.MaxBody, Gate: gate}, up.url, nil, nil)
		if err != nil {
			return fmt.Errorf("stdio: legacy upstream %s: %w", up.describe(), err)
		}
		log.Info().Str("upstream", up.describe()).Msg("taskbridge serving stdio (2025-11-25 upstream: pass-through)")
		engine = rb
	} else {
		b, err := bridge.NewForward(forward.Config{Store: st, Upstream: client, Logger: log, PollFloorMs: *pollFloor,
			Heartbeat: *heartbeat, MaxBodyBytes: cfg.MaxBody, Gate: gate})
		if err != nil {
			return err
		}
		if err := b.Start(ctx); err != nil {
			return err
		}
		log.Info().Str("upstream", up.describe()).Msg("taskbridge serving stdio")
		engine = b
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = engine.Close(cctx)
	}()
	door, err := bridge.NewDoor(doorConfig(cfg, nil, log), engine)
	if err != nil {
		return fmt.Errorf("stdio: %w", err)
	}
	return door.ServeStdio(ctx, stdin, stdout)
}

// shutdownUpstream stops an upstream child within limit.
func shutdownUpstream(stop func(context.Context) error, limit time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	_ = stop(ctx)
}
