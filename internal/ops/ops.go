// Package ops is taskbridge's operator surface: the admin HTTP mux (/metrics, /healthz,
// /readyz, /status, POST /admin/drain), the drain state, the count of in-flight MCP
// requests, the sunset watcher and the migration report shared with the CLI.
//
// The admin mux belongs on a separate, private address (config key "admin"): /status
// names clients and principals, and /admin/drain stops task creation.
package ops

import (
	"context"
	"encoding/json"
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

	// UpstreamReady reports whether the upstream has been discovered (nil: assume yes).
	UpstreamReady func(context.Context) error
	// ActiveTasks counts the non-terminal tasks this replica tracks (nil: unknown).
	ActiveTasks func() int

	Drain    *Drain
	Inflight *Inflight

	Version      string
	Upstream     string // shown on /status (never with credentials)
	KillSwitch   bool
	Sunset       time.Time
	SunsetWarn   time.Duration
	ReportWindow time.Duration
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
	s := &server{o: o}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", o.Metrics.Handler())
	mux.HandleFunc("GET /healthz", s.healthz)
	mux.HandleFunc("GET /readyz", s.readyz)
	mux.HandleFunc("GET /status", s.status)
	mux.HandleFunc("GET /status.json", s.statusJSON)
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/status", http.StatusFound) })
	mux.HandleFunc("POST /admin/drain", s.drain)
	// Profiles for performance work (docs/benchmarks.md); the admin address is private.
	mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	return browserGuard(mux) // guard.go: no POST from a web page
}

type server struct{ o Options }

// Healthz answers 200 while the process runs (liveness).
func Healthz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Write([]byte("ok\n"))
}

func (s *server) healthz(w http.ResponseWriter, r *http.Request) { Healthz(w, r) }

// readyz answers 200 when the store answers a ping, the upstream has been discovered and
// the replica is not draining; 503 otherwise, with one line per check.
func (s *server) readyz(w http.ResponseWriter, r *http.Request) {
	checks := s.checks(r.Context())
	code := http.StatusOK
	for _, c := range checks {
		if !c.OK {
			code = http.StatusServiceUnavailable
		}
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	for _, c := range checks {
		state := "ok"
		if !c.OK {
			state = "FAIL " + c.Detail
		}
		w.Write([]byte(c.Name + ": " + state + "\n"))
	}
}

// Check is one readiness check.
type Check struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail,omitempty"`
}

func (s *server) checks(ctx context.Context) []Check {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	out := []Check{{Name: "store", OK: true}, {Name: "upstream", OK: true}, {Name: "accepting", OK: true}}
	if s.o.Store == nil {
		out[0] = Check{Name: "store", Detail: "no store configured"}
	} else if err := s.o.Store.Ping(ctx); err != nil {
		out[0] = Check{Name: "store", Detail: "unreachable"}
		s.o.Logger.Warn().Err(err).Msg("readyz: store ping failed")
	}
	if s.o.UpstreamReady != nil {
		if err := s.o.UpstreamReady(ctx); err != nil {
			out[1] = Check{Name: "upstream", Detail: "not discovered"}
			s.o.Logger.Warn().Err(err).Msg("readyz: upstream not discovered")
		}
	}
	if s.o.Drain.Draining() {
		out[2] = Check{Name: "accepting", Detail: "draining"}
	}
	return out
}

// drain starts a drain (idempotent) and answers 202 with the state.
func (s *server) drain(w http.ResponseWriter, r *http.Request) {
	if s.o.Drain.Start() {
		s.o.Logger.Warn().Str("remote", r.RemoteAddr).Msg("drain requested on the admin listener: new tasks are refused")
		s.o.Metrics.SetDraining(true)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusAccepted)
	json.NewEncoder(w).Encode(map[string]any{"draining": true, "inflightRequests": s.o.Inflight.Count()})
}

// Drain is the drain state of one process: once started it never stops (the process
// exits at the end of a drain).
type Drain struct {
	on   atomic.Bool
	once sync.Once
	ch   chan struct{}
}

// NewDrain returns a drain state that is not draining.
func NewDrain() *Drain { return &Drain{ch: make(chan struct{})} }

// Start begins draining; it reports whether this call started it.
func (d *Drain) Start() bool {
	started := false
	d.once.Do(func() {
		d.on.Store(true)
		close(d.ch)
		started = true
	})
	return started
}

// Draining reports whether a drain has started. Safe on a nil Drain (false).
func (d *Drain) Draining() bool { return d != nil && d.on.Load() }

// Started is closed when the drain starts.
func (d *Drain) Started() <-chan struct{} { return d.ch }

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
// before the sunset (and an error once a day after it) until ctx ends. It blocks; run it
// on a goroutine the caller waits for.
func WatchSunset(ctx context.Context, log zerolog.Logger, m *metrics.Metrics, sunset time.Time, warn time.Duration, now func() time.Time) {
	if sunset.IsZero() {
		m.SetSunset(sunset, now())
		return
	}
	var lastDay int = 1 << 30
	tick := time.NewTicker(time.Hour)
	defer tick.Stop()
	for {
		t := now()
		m.SetSunset(sunset, t)
		days := metrics.DaysUntil(sunset, t)
		if days != lastDay {
			lastDay = days
			switch {
			case !t.Before(sunset):
				log.Error().Str("sunset", sunset.Format(time.DateOnly)).Int("daysPast", -days).
					Msg("the 2025-11-25 experimental tasks API is retired: new legacy tasks are refused; existing tasks are served until their ttl")
			case sunset.Sub(t) <= warn:
				log.Warn().Str("sunset", sunset.Format(time.DateOnly)).Int("daysLeft", days).
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
