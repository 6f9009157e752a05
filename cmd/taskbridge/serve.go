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
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/taskbridge/taskbridge/bridge"
	"github.com/taskbridge/taskbridge/bridge/forward"
	"github.com/taskbridge/taskbridge/internal/auth"
	"github.com/taskbridge/taskbridge/internal/config"
	"github.com/taskbridge/taskbridge/internal/hop"
	"github.com/taskbridge/taskbridge/internal/metrics"
	"github.com/taskbridge/taskbridge/internal/ops"
	"github.com/taskbridge/taskbridge/internal/reload"
	"github.com/taskbridge/taskbridge/sep2663"
	"github.com/taskbridge/taskbridge/store"
)

// cmdServe runs the bridge. Every setting comes from internal/config: flags, TASKBRIDGE_*
// variables, the --config file, defaults (in that order of precedence).
func cmdServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	loader := config.Register(fs)
	if _, err := parseArgs(fs, serveCommand, args, stdout); err != nil {
		return err
	}
	// Signals are counted here: the first SIGTERM/SIGINT drains, the second exits at once.
	// SIGHUP re-reads the certificates (onSIGHUP) and the configuration (live.go); caught
	// from here on, so it never kills.
	sigc := make(chan os.Signal, 2)
	signal.Notify(sigc, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigc)
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	load := func() (*config.Config, error) {
		c, err := loader.Load(os.Getenv)
		if err == nil {
			err = c.Validate(true)
		}
		return c, err
	}
	cfg, err := load()
	if err != nil {
		return fmt.Errorf("serve: configuration:\n%w", err)
	}
	plog, stopLog := startLogger(stderr, cfg)
	defer stopLog()
	log := plog.Logger
	stopTrace, err := startTracing(ctx, cfg, log) // tracing.go; off unless configured
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	defer stopTrace()
	m := metrics.New(version)
	tl, err := loadTLS(cfg)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	up := upstreamFlags{url: cfg.Upstream, cmd: cfg.UpstreamCmd, closeWait: cfg.UpstreamCloseWait, termWait: cfg.UpstreamTermWait}
	hooks := &upstreamHooks{}
	hc, uh := upstreamHTTP(cfg, m, tl)
	ups, err := openUpstreams(up, hc, uh, hooks, log, stderr)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	defer shutdownUpstream(ups.stop, up.closeWait+up.termWait+time.Second)
	rawStore, err := openStore(ctx, cfg.Store)
	if err != nil {
		return err
	}
	defer rawStore.Close()
	checkStoreWritable(ctx, rawStore, log)
	st := m.InstrumentStore(rawStore)
	authn, err := newAuthenticator(cfg, log) // live.go
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	// Until the door holds it (a reload may replace it there), serve closes authn itself.
	authOwned := true
	defer func() {
		if authOwned {
			auth.Close(authn)
		}
	}()
	prm, err := protectedResource(cfg, log)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	drain := ops.NewDrain()
	// One work gate for every route (bridge/internal/gate): its policy is one value,
	// replaced as a whole by gate.SetPolicy.
	gate := bridge.NewGate(bridge.GateConfig{Draining: drain.Draining, Metrics: m, Policy: gatePolicy(cfg)})
	// The era router (bridge.Router, era.go) probes both faces of the upstream in the
	// background, with backoff until it answers, and again when discover's ttlMs runs out,
	// on SIGHUP or POST /admin/reload, and when answers stop matching; it picks the route
	// per client era (fallback.ChooseRoutes). Until the first probe succeeded /readyz is
	// not ready and MCP requests get the retry error; /healthz answers at once.
	rcfg, err := routerConfig(cfg, st, log, m, gate, plog.AccessLog, up.describe())
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	var lockHook atomic.Pointer[lockWatch] // serve --lock compares again after every re-probe
	rcfg.OnProbed = func(reason string) { lockHook.Load().reprobed(reason) }
	rt, err := newRouter(rcfg, ups, hooks)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	var b mcpBridge = rt
	lock, err := startLockWatch(ctx, cfg, ups, m, gate, log) // serve --lock (lock.go)
	if err != nil {
		_ = b.Close(context.Background())
		return fmt.Errorf("serve: %w", err)
	}
	lockHook.Store(lock)
	dc := doorConfig(cfg, authn, log)
	dc.Tokens, _ = rawStore.(bridge.TokenStore) // PostgreSQL: the rate is shared by the replicas
	if prm != nil {
		dc.AuthChallenge = prm.Challenge // the OAuth protected-resource challenge on every 401
	}
	door, err := bridge.NewDoor(dc, b)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	authOwned = false
	defer func() { auth.Close(door.SetAuth(nil)) }() // the authenticator in use at exit
	m.SetTasksSource(ops.TasksInFlight(st))
	m.SetKillSwitch(cfg.KillSwitch)
	if cfg.KillSwitch {
		log.Warn().Msg("kill switch is on: all new task creation is refused")
	}
	inflight := &ops.Inflight{}
	var admin net.Listener
	if cfg.AdminEnabled() {
		if admin, err = net.Listen("tcp", cfg.Admin); err != nil {
			return fmt.Errorf("serve: admin listener: %w", err)
		}
	}
	rl, err := newReloader(cfg, load, plog, liveParts{gate: gate, door: door, forward: rt, metrics: m, lock: lock})
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	s := &server{log: log, cfg: cfg, b: b, door: door, drain: drain, inflight: inflight, sigc: sigc, hup: hup, tls: tl, prm: prm, reload: rl,
		sunset: func() time.Time { return gate.Policy().Sunset }, reprobe: rt.Reprobe,
		admin: ops.Handler(ops.Options{Store: st, Metrics: m, Logger: log, UpstreamCheck: b.CheckUpstream,
			ActiveTasks: b.ActiveTasks, Drain: drain, Inflight: inflight, Version: version,
			Upstream: up.describe(), KillSwitch: cfg.KillSwitch, Sunset: cfg.Sunset, Policy: livePolicy(gate),
			SunsetWarn: cfg.SunsetWarn, ReportWindow: cfg.ReportWindow, Reload: reloadFunc(rl, rt.Reprobe), Lock: lock.status})}
	web, ws := schemes(tl.mcp)
	adminWeb := ""
	if admin != nil {
		adminWeb, _ = schemes(tl.admin)
	}
	logBanner(log, web, ws, ln, adminWeb, admin, up.describe())
	warnPlainHTTP(log, "mcp", ln, tl.mcp)
	if admin != nil {
		warnPlainHTTP(log, "admin", admin, tl.admin)
	}
	return s.serve(ctx, ln, admin, m)
}

// forwardConfig is the forward route's share of the configuration (serve and verify build
// the same bridge from it).
func forwardConfig(cfg *config.Config, st store.Store, upstream *sep2663.Client, log zerolog.Logger, m *metrics.Metrics, gate *bridge.Gate, accessLog func() bool) forward.Config {
	return forward.Config{
		Store:         st,
		Upstream:      upstream,
		Logger:        log,
		MaxTTLMs:      cfg.MaxTTL.Milliseconds(),
		PollFloorMs:   cfg.PollFloorMs,
		PollCeilMs:    cfg.PollCeilMs,
		Heartbeat:     cfg.Heartbeat,
		ListPageSize:  cfg.ListPageSize,
		CreateTimeout: cfg.CreateTimeout,
		StatusTimeout: cfg.StatusTimeout,
		CancelTimeout: cfg.CancelTimeout,
		InputTimeout:  cfg.InputTimeout,
		MaxBodyBytes:  cfg.MaxBody,
		Metrics:       m,
		Gate:          gate,

		MaxResultBytes:  cfg.MaxResultBytes,
		PollFaultBudget: cfg.PollFaultBudget,
		AuditRetention:  cfg.AuditRetention,
		PurgeInterval:   cfg.PurgeInterval,
		HostAllow:       cfg.HostAllow,
		HostDeny:        cfg.HostDeny,
		NoHosting:       cfg.NoHosting,
		HostWorkers:     cfg.HostWorkers,

		MaxReplayBytes:      cfg.MaxReplayBytes,
		MaxSessionInfoBytes: cfg.MaxSessionInfoBytes,
		SessionRetention:    cfg.ReportWindow,
		AccessLog:           accessLog,
	}
}

// reverseConfig is the reverse route's share of the configuration (the upstream client is
// added by newRouter).
func reverseConfig(cfg *config.Config, st store.Store, log zerolog.Logger, gate *bridge.Gate) bridge.ReverseConfig {
	return bridge.ReverseConfig{
		Store: st, Logger: log, PollFloorMs: cfg.PollFloorMs, PollCeilMs: cfg.PollCeilMs,
		CreateTimeout: cfg.CreateTimeout, StatusTimeout: cfg.StatusTimeout, CancelTimeout: cfg.CancelTimeout,
		InputTimeout: cfg.InputTimeout, MaxBodyBytes: cfg.MaxBody, Gate: gate,
		MaxReplayBytes: cfg.MaxReplayBytes, MaxSessionInfoBytes: cfg.MaxSessionInfoBytes,
		SessionRetention: cfg.ReportWindow, PurgeInterval: cfg.PurgeInterval,
		MaxResultBytes: cfg.MaxResultBytes, AuditRetention: cfg.AuditRetention,
	}
}

// doorConfig is the front door's share of the configuration: authentication, origins,
// body bounds, the request rate and the stdio principal.
func doorConfig(cfg *config.Config, authn auth.Authenticator, log zerolog.Logger) bridge.DoorConfig {
	return bridge.DoorConfig{Auth: authn, AllowedOrigins: cfg.AllowedOrigins, MaxBodyBytes: cfg.MaxBody,
		BodyReadTimeout: cfg.BodyReadTimeout, RequestRate: cfg.RequestRate, RequestBurst: cfg.RequestBurst,
		StdioPrincipal: cfg.StdioPrincipal, Logger: log}
}

// upstreamHTTP is the HTTP client (instrumented transport, the upstream_ca/upstream_cert
// TLS) and the configured Authorization header for an HTTP upstream of either era.
func upstreamHTTP(cfg *config.Config, m *metrics.Metrics, tl *tlsSet) (*http.Client, http.Header) {
	// internal/hop: fasthttp's HTTP/1.1 on the caller's goroutine; 256 idle per host (design §10).
	t := hop.NewTransport(hop.Options{TLSClientConfig: tl.upstreamConfig()})
	var h http.Header
	if cfg.UpstreamAuthorization != "" {
		h = http.Header{"Authorization": {cfg.UpstreamAuthorization}}
	}
	return &http.Client{Transport: m.Transport(t)}, h
}

// server is one running "serve": the MCP listener, the admin listener, and the drain.
type server struct {
	log      zerolog.Logger
	cfg      *config.Config
	b        mcpBridge
	door     http.Handler // the front door: the only handler at /mcp
	drain    *ops.Drain
	inflight *ops.Inflight
	sigc     chan os.Signal
	hup      chan os.Signal // SIGHUP: certificates (onSIGHUP) and configuration (reload)
	tls      *tlsSet
	prm      *auth.ProtectedResource // nil: no OAuth protected-resource metadata
	reload   *reload.Reloader
	sunset   func() time.Time    // the sunset in force (the work gate's, which a reload changes)
	reprobe  func(reason string) // probe the upstream's faces again (SIGHUP, POST /admin/reload)
	admin    http.Handler
}

// serve serves until a drain for exit ends (first signal, ctx cancelled, or POST
// /admin/drain?exit=true) and returns nil, or until a second signal, which returns an
// error at once. SIGHUP reloads the configuration at any time. A plain POST /admin/drain
// does not end serve: it refuses new tasks until POST /admin/undrain.
//
// A drain refuses new task-augmented calls (the work gate's Draining), keeps serving
// everything else, and waits until no MCP POST is in flight and no task tracked here is
// unfinished for drain_quiet (at most drain_timeout); tasks left then are resumed from the
// store by any replica, or by this one after a restart.
func (s *server) serve(ctx context.Context, ln, adminLn net.Listener, m *metrics.Metrics) error {
	mux := http.NewServeMux()
	mux.Handle("/mcp", s.inflight.Wrap(s.door))
	mux.HandleFunc("/healthz", ops.Healthz)
	if s.prm != nil {
		for _, p := range s.prm.Paths() {
			mux.Handle(p, s.prm)
		}
	}
	if adminLn == nil {
		// No admin listener: readiness on this one (a load balancer needs it), /metrics
		// only when public_metrics says so (its labels name clients); /status and the
		// /admin endpoints are never exposed on the MCP listener.
		mux.Handle("GET /readyz", s.admin)
		if s.cfg.PublicMetrics {
			mux.Handle("GET /metrics", s.admin)
		}
	}
	srv := s.httpServer(mux)
	errc := make(chan error, 2)
	go func() { errc <- serveHTTP(srv, ln, s.tls.mcp, s.log) }()
	var adminSrv *http.Server
	if adminLn != nil {
		adminSrv = s.httpServer(s.admin)
		go func() { errc <- serveHTTP(adminSrv, adminLn, s.tls.admin, s.log) }()
	}
	wctx, stopWatch := context.WithCancel(context.Background())
	watchDone, hupDone := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(watchDone)
		ops.WatchSunset(wctx, s.log, m, s.sunset, s.cfg.SunsetWarn, time.Now)
	}()
	go func() {
		defer close(hupDone)
		watchSIGHUP(wctx, s.hup, func() {
			s.onSIGHUP()
			s.reload.Reload(context.Background(), "SIGHUP")
			s.reprobe("SIGHUP")
		})
	}()
	defer func() { stopWatch(); <-watchDone; <-hupDone }()

	signals := 0
	for waiting := true; waiting; {
		select {
		case err := <-errc:
			return err
		case <-ctx.Done():
			waiting = false
		case <-s.sigc:
			signals++
			waiting = false
		case <-s.drain.Exiting():
			waiting = false
		}
	}
	if s.drain.Exit() {
		m.SetDraining(true)
		s.log.Warn().Int64("inflightRequests", s.inflight.Count()).Int("trackedTasks", s.b.ActiveTasks()).
			Msg("draining: new tasks are refused; finishing in-flight calls and tracked tasks (a second signal exits at once)")
	}
	dctx, cancel := context.WithTimeout(context.Background(), s.cfg.DrainTimeout)
	defer cancel()
	idle := make(chan error, 1)
	go func() {
		idle <- ops.WaitIdle(dctx, s.cfg.DrainQuiet, 50*time.Millisecond, func() bool {
			return s.inflight.Count() > 0 || s.b.ActiveTasks() > 0
		})
	}()
	for done := false; !done; {
		select {
		case <-s.sigc:
			signals++
			if signals >= 2 {
				s.shutdown(srv, adminSrv, time.Second)
				return errors.New("second signal: exiting without finishing the drain")
			}
		case err := <-idle:
			if err != nil {
				s.log.Warn().Int64("inflightRequests", s.inflight.Count()).Int("trackedTasks", s.b.ActiveTasks()).
					Msg("drain timeout: exiting with work left; unfinished tasks resume from the store")
			} else {
				s.log.Info().Msg("drained: nothing in flight; exiting")
			}
			done = true
		}
	}
	s.shutdown(srv, adminSrv, 10*time.Second)
	return nil
}

// httpServer is an http.Server for either listener with the configured connection bounds:
// headers must arrive within read_header_timeout and fit in max_header_bytes (else 431),
// and a keep-alive connection idle for idle_timeout is closed. ReadTimeout and
// WriteTimeout stay unset on purpose: they bound a whole request, which would cut off long
// SSE streams and WebSocket sessions (a body's read deadline belongs to each request).
func (s *server) httpServer(h http.Handler) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: s.cfg.ReadHeaderTimeout,
		IdleTimeout: s.cfg.IdleTimeout, MaxHeaderBytes: s.cfg.MaxHeaderBytes}
}

// shutdown closes the bridge (its streams and pollers) and both listeners.
func (s *server) shutdown(srv, adminSrv *http.Server, grace time.Duration) {
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	_ = s.b.Close(sctx)
	_ = srv.Shutdown(sctx)
	if adminSrv != nil {
		_ = adminSrv.Shutdown(sctx)
	}
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
