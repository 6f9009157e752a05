package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/rs/zerolog"

	"github.com/taskbridge/taskbridge/bridge"
	"github.com/taskbridge/taskbridge/internal/config"
	"github.com/taskbridge/taskbridge/internal/redact"
)

// upstreamFlags choose the upstream: a URL (Streamable HTTP) or a command run as a child
// process over stdio (the upstream* settings). Shared by serve and stdio.
type upstreamFlags struct {
	url, cmd            string
	closeWait, termWait time.Duration
	// onCall, when set, is told of every request to a child upstream (child.Options.OnCall).
	onCall func(method string, d time.Duration, err error)
}

// describe names the upstream for the startup line, logs and /status: the URL in its
// redacted form (no userinfo, no query).
func (u *upstreamFlags) describe() string {
	if u.cmd != "" {
		return "child " + u.cmd
	}
	return redact.URL(u.url)
}

// stdioServerOnly are the settings of a network server, which "taskbridge stdio" (one
// client on stdin/stdout, no listener) has no use for: they have no flag here, and a file or
// TASKBRIDGE_* variable that sets one gets a warning naming it (a file shared with serve
// stays usable). Everything else is read exactly as serve reads it.
var stdioServerOnly = []string{"listen", "admin", "public_metrics", "access_log", "allowed_origins",
	"drain_timeout", "drain_quiet", "auth", "body_read_timeout", "tls_cert", "tls_key", "tls_client_ca",
	"admin_tls_client_ca", "oauth_resource", "oauth_authorization_servers", "oauth_scopes",
	"read_header_timeout", "idle_timeout", "max_header_bytes"}

// stdioKeys are the configuration keys "taskbridge stdio" takes: every key but the
// server-only ones.
var stdioKeys = func() []string {
	var ks []string
	for _, k := range config.Keys() {
		if !slices.Contains(stdioServerOnly, k) {
			ks = append(ks, k)
		}
	}
	return ks
}()

// stdio's own defaults where serve's do not fit one client launched by another program:
// quieter logs, and a throwaway store unless one is configured.
const stdioLogLevel = "warn"

// cmdStdio serves one legacy client on stdin/stdout: an MCP client launches
// "taskbridge stdio --upstream URL" as its server. stdout carries only MCP messages; logs
// go to stderr. The session ends when stdin closes. The configuration is serve's (flags,
// TASKBRIDGE_*, --config FILE; internal/config): the upstream credential and TLS, the
// store, timeouts, limits, the sunset and the kill switch apply as they do in serve. The
// client passes the front door like every other (bridge.Door.ServeStdio): the line cap
// (max_body), the process's principal (stdio_principal), the rate limit, then the route,
// whose work gate applies the kill switch, the sunset and the limits.
func cmdStdio(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("stdio", flag.ContinueOnError)
	fs.SetOutput(stderr)
	loader := config.RegisterKeys(fs, stdioKeys...)
	c := command{name: "stdio", synopsis: "stdio [--config FILE] --upstream URL|--upstream-cmd CMD [flags]",
		about: "Serves one 2025-11-25 client on stdin/stdout (an MCP client launches this as its server); logs go to\n" +
			"stderr, and stdout carries only MCP messages. Settings are serve's (file, TASKBRIDGE_*, flags), less the\n" +
			"listener ones; without a store setting the tasks live in a temporary SQLite file removed at exit.",
		keys: stdioKeys}
	if _, err := parseArgs(fs, c, args, stdout); err != nil {
		return err
	}
	cfg, err := loader.Load(os.Getenv)
	if err != nil {
		return fmt.Errorf("stdio: configuration:\n%w", err)
	}
	if _, set := cfg.Sources["log_level"]; !set {
		cfg.LogLevel = stdioLogLevel
	}
	if _, set := cfg.Sources["store"]; !set {
		dir, err := os.MkdirTemp("", "taskbridge-stdio-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		cfg.Store = "sqlite:" + filepath.Join(dir, "tasks.db")
	}
	if err := cfg.Validate(true); err != nil {
		return fmt.Errorf("stdio: configuration:\n%w", err)
	}
	log := newLogger(stderr, cfg.LogLevel)
	for _, k := range stdioServerOnly {
		if src, set := cfg.Sources[k]; set {
			log.Warn().Str("key", k).Str("from", src).Msg("setting has no effect on taskbridge stdio (no listener: one client on stdin/stdout)")
		}
	}
	for _, w := range config.UnknownEnv(os.Environ()) {
		log.Warn().Msg(w)
	}
	return runStdio(ctx, cfg, log, stdin, stdout, stderr)
}

// runStdio opens the store and the upstream as serve does and serves the one session.
func runStdio(ctx context.Context, cfg *config.Config, log zerolog.Logger, stdin io.Reader, stdout, stderr io.Writer) error {
	stopTrace, err := startTracing(ctx, cfg, log) // tracing.go; off unless configured
	if err != nil {
		return fmt.Errorf("stdio: %w", err)
	}
	defer stopTrace()
	tl, err := loadTLS(cfg)
	if err != nil {
		return fmt.Errorf("stdio: %w", err)
	}
	up := upstreamFlags{url: cfg.Upstream, cmd: cfg.UpstreamCmd, closeWait: cfg.UpstreamCloseWait, termWait: cfg.UpstreamTermWait}
	st, err := openStore(ctx, cfg.Store)
	if err != nil {
		return err
	}
	defer st.Close()
	hooks := &upstreamHooks{}
	hc, uh := upstreamHTTP(cfg, nil, tl)
	ups, err := openUpstreams(up, hc, uh, hooks, log, stderr)
	if err != nil {
		return fmt.Errorf("stdio: %w", err)
	}
	defer shutdownUpstream(ups.stop, up.closeWait+up.termWait+time.Second)
	gate := bridge.NewGate(bridge.GateConfig{Policy: gatePolicy(cfg)})
	fc := forwardConfig(cfg, st, nil, log, nil, gate, nil) // the same route settings as serve
	if fc.ToolTaskSupport, err = parseToolTaskSupport(cfg.ToolTaskSupport); err != nil {
		return fmt.Errorf("stdio: %w", err)
	}
	// The era router probes the upstream's faces (bridge.Router): the session is served
	// once the first probe succeeded, by the route chosen for 2025-11-25 clients (forward
	// translation, or pass-through to a 2025-11-25 face with tasks).
	engine, err := newRouter(bridge.RouterConfig{
		Forward: fc,
		Reverse: bridge.ReverseConfig{
			Store: st, Logger: log, PollFloorMs: cfg.PollFloorMs, PollCeilMs: cfg.PollCeilMs,
			CreateTimeout: cfg.CreateTimeout, StatusTimeout: cfg.StatusTimeout, CancelTimeout: cfg.CancelTimeout,
			InputTimeout: cfg.InputTimeout, MaxBodyBytes: cfg.MaxBody, Gate: gate,
			MaxReplayBytes: cfg.MaxReplayBytes, MaxSessionInfoBytes: cfg.MaxSessionInfoBytes,
			SessionRetention: cfg.ReportWindow, PurgeInterval: cfg.PurgeInterval,
			MaxResultBytes: cfg.MaxResultBytes, AuditRetention: cfg.AuditRetention,
		},
		Logger: log, Describe: up.describe(), ProbeTimeout: cfg.StatusTimeout,
	}, ups, hooks)
	if err != nil {
		return err
	}
	log.Info().Str("upstream", up.describe()).Msg("taskbridge serving stdio")
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
