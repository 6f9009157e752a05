package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/taskbridge/taskbridge/bridge"
	"github.com/taskbridge/taskbridge/bridge/forward"
	"github.com/taskbridge/taskbridge/internal/auth"
	"github.com/taskbridge/taskbridge/internal/config"
	"github.com/taskbridge/taskbridge/internal/logging"
	"github.com/taskbridge/taskbridge/internal/metrics"
	"github.com/taskbridge/taskbridge/internal/reload"
	"github.com/taskbridge/taskbridge/store"
)

// serveCommand is serve's command line: every configuration key is a flag.
var serveCommand = command{
	name:     "serve",
	synopsis: "serve [--config FILE] [flags]",
	about: "Runs the bridge: 2025-11-25 and 2026-07-28 clients on http://LISTEN/mcp (and ws://), in front of the\n" +
		"upstream at --upstream (or --upstream-cmd). Logs go to stderr; nothing is printed on stdout.\n" +
		"SIGHUP (or POST /admin/reload) re-reads the configuration; SIGTERM drains, then exits.",
	keys:    config.Keys(),
	maxArgs: 0,
}

// startLogger builds serve's logger from cfg, warns about misspelled TASKBRIDGE_*
// variables, and runs the repeat summaries; stop waits for that goroutine and writes
// what is pending.
func startLogger(stderr io.Writer, cfg *config.Config) (*logging.Logger, func()) {
	l := logging.New(stderr, logging.Options{Level: cfg.LogLevel, Format: cfg.LogFormat,
		NoColor: logging.NoColorFromEnv(os.Getenv), AccessLog: cfg.AccessLog})
	prev := zerolog.GlobalLevel()
	l.Live(cfg.LogLevel)
	for _, w := range config.UnknownEnv(os.Environ()) {
		l.Warn().Msg(w)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { l.Run(ctx) })
	return l, func() {
		cancel()
		wg.Wait()
		zerolog.SetGlobalLevel(prev) // a serve run in process (tests) leaves the level as it found it
	}
}

// newLogger is the logger of the one-session commands (stdio): JSON or, on a terminal,
// the console format; no live controls.
func newLogger(w io.Writer, level string) zerolog.Logger {
	return logging.New(w, logging.Options{Level: level, Format: "auto", NoColor: logging.NoColorFromEnv(os.Getenv)}).Logger
}

// liveParts are the parts of a running serve that take settings live.
type liveParts struct {
	gate    *bridge.Gate  // kill switch, sunset, concurrency cap, upstream backpressure
	door    *bridge.Door  // request rate, authentication
	forward hostingPolicy // the forward route's hosting policy (the era router passes it on)
	metrics *metrics.Metrics
	lock    *lockWatch // serve --lock: re-read on every reload (lock.go)
}

// newReloader returns serve's reloader with one applier per area that changes live:
// logging (log level, access log), the work gate (kill switch, sunset, concurrency cap,
// upstream in-flight cap), the front door's rate limit and authentication, and the
// forward route's hosting policy. Each Prepare builds and checks the new state; each
// commit swaps it in atomically, so requests see the old or the new, never a mix.
func newReloader(boot *config.Config, load func() (*config.Config, error), l *logging.Logger, p liveParts) (*reload.Reloader, error) {
	log := l.Logger
	rl := reload.New(boot, load, log)
	appliers := []reload.Applier{
		{Area: "logging", Keys: []string{"log_level", "access_log"},
			Prepare: func(next *config.Config) (func(), error) {
				return func() {
					l.SetLevel(next.LogLevel)
					l.SetAccessLog(next.AccessLog)
				}, nil
			}},
		{Area: "work gate", Keys: []string{"kill_switch", "sunset", "max_concurrent_tasks", "max_upstream_inflight"},
			Prepare: func(next *config.Config) (func(), error) {
				pol := gatePolicy(next)
				return func() {
					p.gate.SetPolicy(pol)
					p.metrics.SetKillSwitch(pol.KillSwitch)
					p.metrics.SetSunset(pol.Sunset)
					if pol.KillSwitch {
						log.Warn().Msg("kill switch is on: all new task creation is refused")
					}
				}, nil
			}},
		{Area: "rate limit", Keys: []string{"request_rate", "request_burst"},
			Prepare: func(next *config.Config) (func(), error) {
				return func() { p.door.SetRate(next.RequestRate, next.RequestBurst) }, nil
			}},
		{Area: "authentication", Keys: []string{"auth"},
			Prepare: func(next *config.Config) (func(), error) {
				a, err := newAuthenticator(next, log)
				if err != nil {
					return nil, err
				}
				return func() { auth.Close(p.door.SetAuth(a)) }, nil
			}},
	}
	if p.forward != nil {
		appliers = append(appliers, reload.Applier{Area: "hosting policy", Keys: []string{"host_allow", "host_deny", "no_hosting", "tool_task_support"},
			Prepare: func(next *config.Config) (func(), error) {
				ts, err := parseToolTaskSupport(next.ToolTaskSupport)
				if err == nil {
					_, err = forward.HostingPolicy(next.HostAllow, next.HostDeny, next.NoHosting, ts)
				}
				if err != nil {
					return nil, err
				}
				return func() { _ = p.forward.SetHostingPolicy(next.HostAllow, next.HostDeny, next.NoHosting, ts) }, nil
			}})
	}
	if p.lock != nil {
		appliers = append(appliers, p.lock.applier())
	}
	for _, a := range appliers {
		if err := rl.Register(a); err != nil {
			return nil, err
		}
	}
	return rl, nil
}

// hostingPolicy is the live part of the forward route's fallback policy.
type hostingPolicy interface {
	SetHostingPolicy(allow, deny []string, noHosting bool, toolTaskSupport map[string]string) error
}

// gatePolicy is the work gate's share of the configuration.
func gatePolicy(cfg *config.Config) bridge.Policy {
	return bridge.Policy{KillSwitch: cfg.KillSwitch, Sunset: cfg.Sunset,
		MaxConcurrentTasks: cfg.MaxConcurrentTasks, MaxInflight: cfg.MaxUpstreamInflight}
}

// livePolicy reads the kill switch and sunset in force from the gate (for /status).
func livePolicy(g *bridge.Gate) func() (bool, time.Time) {
	return func() (bool, time.Time) {
		p := g.Policy()
		return p.KillSwitch, p.Sunset
	}
}

// newAuthenticator builds the client authenticator of cfg (nil without an auth section),
// with JWKS refresh failures logged.
func newAuthenticator(cfg *config.Config, log zerolog.Logger) (auth.Authenticator, error) {
	if !cfg.Auth.Enabled() {
		return nil, nil
	}
	if cfg.Auth.JWT != nil {
		cfg.Auth.JWT.OnRefreshError = func(err error) {
			log.Warn().Str("error", err.Error()).Msg("JWKS refresh failed; the cached keys stay in use")
		}
	}
	a, err := auth.New(cfg.Auth)
	if err != nil {
		return nil, fmt.Errorf("auth: %w", err)
	}
	return a, nil
}

// checkStoreWritable writes the store's heartbeat once at start: a store that refuses
// writes is said at once (readiness keeps failing until it accepts them), and the report
// can tell this store is the one a running bridge uses even when it holds no session.
func checkStoreWritable(ctx context.Context, st store.Store, log zerolog.Logger) {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := st.CheckWritable(cctx); err != nil {
		log.Error().Err(err).Msg("the store refuses writes: not ready until it accepts them")
	}
}

// reloadFunc adapts the reloader to POST /admin/reload, which also has the upstream's
// faces probed again (as SIGHUP does).
func reloadFunc(rl *reload.Reloader, reprobe func(string)) func(context.Context) (any, bool) {
	return func(ctx context.Context) (any, bool) {
		reprobe("POST /admin/reload")
		res := rl.Reload(ctx, "POST /admin/reload")
		return res, res.OK
	}
}

// BannerMessage is the message of serve's start-up log event, which names the endpoints
// (mcp, ws, admin). Tests and scripts find the addresses in it.
const BannerMessage = "taskbridge listening"

// logBanner writes the start-up event whatever the log level (it is what an operator and
// a supervisor look for), labelled info. web and ws are the MCP listener's schemes (https
// and wss under TLS), adminWeb the admin listener's.
func logBanner(log zerolog.Logger, web, ws string, ln net.Listener, adminWeb string, admin net.Listener, upstream string) {
	ev := log.Log().Str("level", "info").Str("mcp", web+"://"+ln.Addr().String()+"/mcp").
		Str("ws", ws+"://"+ln.Addr().String()+"/mcp").Str("upstream", upstream)
	if admin != nil {
		ev = ev.Str("admin", adminWeb+"://"+admin.Addr().String())
	}
	ev.Str("version", version).Msg(BannerMessage)
}
