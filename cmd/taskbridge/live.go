package main

import (
	"context"
	"io"
	"net"
	"os"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/taskbridge/taskbridge/internal/config"
	"github.com/taskbridge/taskbridge/internal/logging"
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

// newReloader returns serve's reloader with the appliers of the areas that change live.
//
// Registered here: logging (log_level, access_log). The kill switch, the sunset, the
// limits, the API keys and the hosting policy are registered where the work gate and the
// front door are built, with the same Applier shape: Prepare validates and builds the new
// policy, commit swaps it in atomically.
func newReloader(boot *config.Config, load func() (*config.Config, error), l *logging.Logger) (*reload.Reloader, error) {
	rl := reload.New(boot, load, l.Logger)
	err := rl.Register(reload.Applier{Area: "logging", Keys: []string{"log_level", "access_log"},
		Prepare: func(next *config.Config) (func(), error) {
			return func() {
				l.SetLevel(next.LogLevel)
				l.SetAccessLog(next.AccessLog)
			}, nil
		}})
	return rl, err
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

// reloadFunc adapts the reloader to POST /admin/reload.
func reloadFunc(rl *reload.Reloader) func(context.Context) (any, bool) {
	return func(ctx context.Context) (any, bool) {
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
