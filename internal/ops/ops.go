// Package ops is taskbridge's operator surface: the admin HTTP mux (/metrics, /healthz,
// /readyz, /status, POST /admin/drain, /admin/undrain and /admin/reload), the drain
// state, the readiness checks, the count of in-flight MCP requests, the sunset watcher and
// the migration report shared with the CLI.
//
// The admin mux belongs on a separate, private address (config key "admin"): /status
// names clients and principals, and the /admin endpoints change what the replica does.
package ops

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/pprof"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/taskbridge/taskbridge/internal/metrics"
	"github.com/taskbridge/taskbridge/store"
)

// Options configures the admin mux.
type Options struct {
	Store   store.Store
	Metrics *metrics.Metrics
	Logger  zerolog.Logger
	Now     func() time.Time // default time.Now

	// UpstreamCheck asks the upstream now whether it answers (nil: not checked). /readyz
	// runs it at most once per CheckInterval however often it is scraped.
	UpstreamCheck func(context.Context) error
	// CheckInterval is how old a readiness result may be (default 2 s); each check is
	// bounded by the same time.
	CheckInterval time.Duration
	// ActiveTasks counts the non-terminal tasks this replica tracks (nil: unknown).
	ActiveTasks func() int

	Drain    *Drain
	Inflight *Inflight
	// Reload re-reads and applies the configuration (POST /admin/reload); nil: 404. It
	// returns the result to show and whether the reload was applied.
	Reload func(ctx context.Context) (result any, ok bool)

	Version    string
	Upstream   string // shown on /status (never with credentials)
	KillSwitch bool
	Sunset     time.Time
	// Policy, when set, gives the kill switch and the sunset in force now (the work gate's
	// policy, which a reload changes); KillSwitch and Sunset are then only the start values.
	Policy       func() (killSwitch bool, sunset time.Time)
	SunsetWarn   time.Duration
	ReportWindow time.Duration
	// Lock, when set, gives the last comparison of the upstream with serve --lock's file
	// (nil result: no lock configured).
	Lock func() *LockStatus
}

// Handler returns the admin mux. Its POST endpoints refuse requests a web page could
// send (cross-origin, cross-site, form-encoded): see browserGuard.
func Handler(o Options) http.Handler {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Drain == nil {
		o.Drain = NewDrain()
	}
	if o.ReportWindow <= 0 {
		o.ReportWindow = 30 * 24 * time.Hour
	}
	s := &server{o: o, ready: newReadiness(o)}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", o.Metrics.Handler())
	mux.HandleFunc("GET /healthz", s.healthz)
	mux.HandleFunc("GET /readyz", s.readyz)
	mux.HandleFunc("GET /status", s.status)
	mux.HandleFunc("GET /status.json", s.statusJSON)
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/status", http.StatusFound) })
	mux.HandleFunc("POST /admin/drain", s.drain)
	mux.HandleFunc("POST /admin/undrain", s.undrain)
	mux.HandleFunc("POST /admin/reload", s.reload)
	// Profiles for performance work (docs/benchmarks.md); the admin address is private.
	mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	return browserGuard(mux) // guard.go: no POST from a web page
}

type server struct {
	o     Options
	ready *readiness
}

// Healthz answers 200 while the process runs (liveness).
func Healthz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Write([]byte("ok\n"))
}

func (s *server) healthz(w http.ResponseWriter, r *http.Request) { Healthz(w, r) }

// drain starts a drain (idempotent) and answers 202 with the state. The process keeps
// running, not ready and refusing new tasks, until POST /admin/undrain; with ?exit=true it
// exits at the end of the drain, as on SIGTERM.
func (s *server) drain(w http.ResponseWriter, r *http.Request) {
	exit := r.URL.Query().Get("exit") == "true"
	started := s.o.Drain.Start()
	if exit {
		started = s.o.Drain.Exit() || started
	}
	if started {
		s.o.Logger.Warn().Str("remote", r.RemoteAddr).Bool("exit", exit).Msg("drain requested on the admin listener: new tasks are refused")
		s.o.Metrics.SetDraining(true)
	}
	writeJSON(w, http.StatusAccepted, map[string]any{"draining": true, "exiting": s.o.Drain.IsExiting(),
		"inflightRequests": s.o.Inflight.Count()})
}

// undrain ends a drain that was not started for exit: the replica takes new tasks and
// turns ready again. A drain on its way to exit (SIGTERM, ?exit=true) cannot be undone:
// 409.
func (s *server) undrain(w http.ResponseWriter, r *http.Request) {
	stopped, err := s.o.Drain.Stop()
	if err != nil {
		writeJSON(w, http.StatusConflict, map[string]any{"draining": true, "exiting": true, "error": err.Error()})
		return
	}
	if stopped {
		s.o.Logger.Warn().Str("remote", r.RemoteAddr).Msg("undrain requested on the admin listener: new tasks are accepted again")
		s.o.Metrics.SetDraining(false)
	}
	writeJSON(w, http.StatusOK, map[string]any{"draining": false, "exiting": false})
}

// reload re-reads the configuration: 200 with the result when applied, 422 when the
// configuration did not validate (nothing changed).
func (s *server) reload(w http.ResponseWriter, r *http.Request) {
	if s.o.Reload == nil {
		http.NotFound(w, r)
		return
	}
	res, ok := s.o.Reload(r.Context())
	code := http.StatusOK
	if !ok {
		code = http.StatusUnprocessableEntity
	}
	writeJSON(w, code, res)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
}

// ErrExiting is Drain.Stop's answer while the process drains to exit.
var ErrExiting = errors.New("the process is draining to exit (SIGTERM or drain?exit=true); it cannot be undrained")

// Drain is the drain state of one process. A drain refuses new tasks and makes /readyz
// fail; it ends with Stop (undrain) unless it was made for exit (Exit: SIGTERM), which is
// final. mu guards exiting; on mirrors the state for the per-request Draining.
type Drain struct {
	on      atomic.Bool
	mu      sync.Mutex
	exiting bool
	exitCh  chan struct{} // closed by the first Exit
}

// NewDrain returns a drain state that is not draining.
func NewDrain() *Drain { return &Drain{exitCh: make(chan struct{})} }

// Start begins draining; it reports whether this call started it.
func (d *Drain) Start() bool { return !d.on.Swap(true) }

// Stop ends a drain; it reports whether one was running, and ErrExiting when the drain is
// for exit.
func (d *Drain) Stop() (bool, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.exiting {
		return false, ErrExiting
	}
	return d.on.Swap(false), nil
}

// Exit drains for exit, for good; it reports whether this call made it so.
func (d *Drain) Exit() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.on.Store(true)
	if d.exiting {
		return false
	}
	d.exiting = true
	close(d.exitCh)
	return true
}

// Draining reports whether a drain is on. Safe on a nil Drain (false).
func (d *Drain) Draining() bool { return d != nil && d.on.Load() }

// IsExiting reports whether the drain is for exit.
func (d *Drain) IsExiting() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.exiting
}

// Exiting is closed when a drain for exit starts.
func (d *Drain) Exiting() <-chan struct{} { return d.exitCh }

// Inflight counts MCP requests being served that a drain must wait for: every POST (a
// synchronous call, a blocking tasks/result, a task creation). GET streams are excluded:
// they are long-lived listeners that never "finish" and carry nothing a drain must save.
type Inflight struct{ n atomic.Int64 }

// Wrap counts the requests h serves.
func (f *Inflight) Wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			f.n.Add(1)
			defer f.n.Add(-1)
		}
		h.ServeHTTP(w, r)
	})
}

// Count returns the requests in flight. Safe on a nil Inflight (0).
func (f *Inflight) Count() int64 {
	if f == nil {
		return 0
	}
	return f.n.Load()
}

// WaitIdle returns nil once busy() has stayed false for quiet, checking every tick, or
// ctx's error when ctx ends first.
func WaitIdle(ctx context.Context, quiet, tick time.Duration, busy func() bool) error {
	var idleSince time.Time
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		if busy() {
			idleSince = time.Time{}
		} else if idleSince.IsZero() {
			idleSince = time.Now()
		}
		if !idleSince.IsZero() && time.Since(idleSince) >= quiet {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// WatchSunset keeps the sunset gauges current and logs a warning once a day from warn
// before the sunset (and an error once a day after it) until ctx ends. sunset is read on
// every round (hourly), so a reload that moves or sets it is followed; zero: none. It
// blocks; run it on a goroutine the caller waits for.
func WatchSunset(ctx context.Context, log zerolog.Logger, m *metrics.Metrics, sunset func() time.Time, warn time.Duration, now func() time.Time) {
	var (
		lastDay    = 1 << 30
		lastSunset time.Time
	)
	tick := time.NewTicker(time.Hour)
	defer tick.Stop()
	for {
		t, sun := now(), sunset()
		m.SetSunset(sun)
		if !sun.Equal(lastSunset) {
			lastSunset, lastDay = sun, 1<<30
		}
		if days := metrics.DaysUntil(sun, t); !sun.IsZero() && days != lastDay {
			lastDay = days
			switch {
			case !t.Before(sun):
				log.Error().Str("sunset", sun.Format(time.DateOnly)).Int("daysPast", -days).
					Msg("the 2025-11-25 experimental tasks API is retired: new legacy tasks are refused; existing tasks are served until their ttl")
			case sun.Sub(t) <= warn:
				log.Warn().Str("sunset", sun.Format(time.DateOnly)).Int("daysLeft", days).
					Msg("sunset approaching: new legacy task creation will be refused from this date; see taskbridge report for the clients still using it")
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
