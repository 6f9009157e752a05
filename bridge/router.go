package bridge

// The Router: the era router of one upstream at run time (design §1). It probes both faces
// of the upstream (probe.go), lets fallback.ChooseRoutes pick the face each client era is
// served by, builds the routes that needs (the Forward pair for the modern face, the
// Reverse pair for the legacy face; built once, when first needed), and hands the door the
// chosen route per client era. The choice is replaced at run time when a probe finds the
// upstream changed.
//
//	start             → not ready: the door answers "upstream not yet reachable, retry"
//	probe fails       → retried with backoff and jitter (backoff/v5, 250 ms doubling to 5 s)
//	probe succeeds    → routes chosen, the door dispatches; ready
//	ttlMs runs out    → probe again (discover's ttlMs, at least 30 s; 5 min without one)
//	Reprobe(reason)   → probe again now (SIGHUP, POST /admin/reload, or answers that no
//	                    longer match the recorded faces: Observe)
//	a change          → logged (what changed, the route per client era) and counted
//
// Routes built stay up until Close, so tasks and sessions of a route no longer chosen
// finish where they are; new requests of that client era go to the new route.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/rs/zerolog"

	"github.com/taskbridge/taskbridge/bridge/forward"
	"github.com/taskbridge/taskbridge/fallback"
	"github.com/taskbridge/taskbridge/internal/jsonrpc"
	"github.com/taskbridge/taskbridge/internal/metrics"
)

// RouterConfig configures a Router. Forward.Upstream and Reverse.Upstream (the two
// clients of the one upstream), Forward.Store and Reverse.Store are required; both configs
// should share one Gate.
type RouterConfig struct {
	Forward forward.Config
	Reverse ReverseConfig
	Logger  zerolog.Logger
	Metrics *metrics.Metrics
	// Describe names the upstream in logs (a redacted URL or "child CMD").
	Describe string

	// ProbeTimeout bounds one probe (default 10 s). RetryMin and RetryMax bound the
	// backoff between failed probes (defaults 250 ms and 5 s). Recheck is the interval of
	// probes when discover gives no lifetime (default 5 min); a ttlMs shorter than
	// MinRecheck (default 30 s) is raised to it.
	ProbeTimeout        time.Duration
	RetryMin, RetryMax  time.Duration
	Recheck, MinRecheck time.Duration
	MismatchDebounce    time.Duration // least time between two Observe-triggered probes (default 2 s)
	// OnProbed, when set, is called after each successful probe, with its reason ("start",
	// "recheck", "SIGHUP", …), on the router's goroutine (serve --lock compares the
	// upstream with its lock again).
	OnProbed func(reason string)
}

func (c *RouterConfig) setDefaults() {
	def := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&c.ProbeTimeout, 10*time.Second)
	def(&c.RetryMin, 250*time.Millisecond)
	def(&c.RetryMax, 5*time.Second)
	def(&c.Recheck, 5*time.Minute)
	def(&c.MinRecheck, 30*time.Second)
	def(&c.MismatchDebounce, 2*time.Second)
}

// Router is the Engine of serve: see the top of the file.
//
// Concurrency: safe for concurrent use. mu guards fwd, rev, shape, routes, fingerprint and
// closed; ep is atomic (the door reads it per request); ready is closed once, at the first
// choice. The probe loop is owned by the Router (wg) and ends with Close.
type Router struct {
	cfg RouterConfig
	log zerolog.Logger

	ep      atomic.Pointer[endpoints] // nil until the first successful probe
	ready   chan struct{}
	once    sync.Once
	settled chan struct{} // closed when the first probe ended, whatever its outcome

	mu          sync.Mutex
	fwd         *Forward
	rev         *Reverse
	shape       fallback.Shape
	routes      fallback.Routes
	fingerprint string
	closed      bool

	kick         chan string // a reason to probe now (buffer 1)
	lastMismatch atomic.Int64
	probeErr     atomic.Pointer[error] // the last probe's failure; nil after a success

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// NewRouter returns a Router; Start begins probing.
func NewRouter(cfg RouterConfig) (*Router, error) {
	if cfg.Forward.Upstream == nil || cfg.Reverse.Upstream == nil || cfg.Forward.Store == nil || cfg.Reverse.Store == nil {
		return nil, errors.New("bridge: RouterConfig needs both upstream clients and the store")
	}
	cfg.setDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	return &Router{cfg: cfg, log: cfg.Logger, ready: make(chan struct{}), settled: make(chan struct{}),
		kick: make(chan string, 1), ctx: ctx, cancel: cancel}, nil
}

// Start begins probing in the background and returns at once: the Router is not ready
// (the door answers the retry error) until the first probe succeeds.
func (r *Router) Start() {
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		r.loop()
	}()
}

// LastProbeError is why the last probe of the upstream failed (an invalid reply, a refused
// connection, no face), or nil when it succeeded or none ended yet.
func (r *Router) LastProbeError() error {
	if p := r.probeErr.Load(); p != nil {
		return *p
	}
	return nil
}

// Ready is closed once the first probe succeeded and the door has routes.
func (r *Router) Ready() <-chan struct{} { return r.ready }

// Settled is closed once the first probe ended, whatever its outcome: a request that
// comes while it runs waits for it (bounded) rather than get the retry error for nothing.
func (r *Router) Settled() <-chan struct{} { return r.settled }

// endpoints implements Engine: the routes chosen by the last successful probe (none before).
func (r *Router) endpoints() endpoints {
	if ep := r.ep.Load(); ep != nil {
		return *ep
	}
	return endpoints{}
}

// Reprobe asks for a probe now (an operator signal, or answers that no longer match). It
// never blocks; requests that come while one is pending are merged.
func (r *Router) Reprobe(reason string) {
	select {
	case r.kick <- reason:
	default:
	}
}

// Observe is told of an upstream error on face e (the upstream clients' hook). Answers
// that no longer match the face recorded (fallback.AnswerMismatch) ask for a probe, at
// most once per MismatchDebounce.
func (r *Router) Observe(e fallback.Era, method string, err error) {
	if err == nil || !fallback.AnswerMismatch(e, method, err) {
		return
	}
	r.mu.Lock()
	recorded := r.shape.Face(e) != nil
	r.mu.Unlock()
	if !recorded {
		return // the probe's own question of a face the upstream does not serve
	}
	now := time.Now().UnixNano()
	last := r.lastMismatch.Load()
	if now-last < int64(r.cfg.MismatchDebounce) || !r.lastMismatch.CompareAndSwap(last, now) {
		return
	}
	r.Reprobe("the upstream's answers no longer match its recorded " + string(e) + " face")
}

// Shape returns the faces and routes of the last successful probe (ok false before one).
func (r *Router) Shape() (fallback.Shape, fallback.Routes, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.shape, r.routes, r.fingerprint != ""
}

// loop probes until Close: with backoff while it fails, then at each recheck or Reprobe.
func (r *Router) loop() {
	bo := &backoff.ExponentialBackOff{InitialInterval: r.cfg.RetryMin, RandomizationFactor: 0.2,
		Multiplier: 2, MaxInterval: r.cfg.RetryMax}
	bo.Reset()
	reason, failures := "start", 0
	first := true
	for {
		wait, err := r.probeOnce(reason)
		if first {
			close(r.settled)
			first = false
		}
		switch {
		case err == nil:
			bo.Reset()
			failures = 0
		default:
			failures++
			wait = bo.NextBackOff()
			r.logFailure(err, failures, wait)
		}
		t := time.NewTimer(wait)
		select {
		case <-r.ctx.Done():
			t.Stop()
			return
		case reason = <-r.kick:
			t.Stop()
		case <-t.C:
			reason = "recheck"
			if err != nil {
				reason = "retry"
			}
		}
	}
}

// probeOnce probes and applies the result; wait is when to probe again.
func (r *Router) probeOnce(reason string) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(r.ctx, r.cfg.ProbeTimeout)
	defer cancel()
	shape, err := Probe(ctx, ProbeClients{Modern: r.cfg.Forward.Upstream, Legacy: r.cfg.Reverse.Upstream})
	if err != nil {
		r.probeErr.Store(&err)
		outcome := "unreachable"
		if errors.Is(err, fallback.ErrNoFace) {
			outcome = "no_face"
		}
		r.cfg.Metrics.Probe(outcome)
		return 0, err
	}
	r.cfg.Metrics.Probe("ok")
	r.probeErr.Store(nil)
	if err := r.apply(ctx, shape, reason); err != nil {
		return 0, err
	}
	if r.cfg.OnProbed != nil {
		r.cfg.OnProbed(reason)
	}
	return r.recheckAfter(shape), nil
}

// recheckAfter is when the faces are to be checked again: discover's ttlMs (at least
// MinRecheck), else Recheck.
func (r *Router) recheckAfter(s fallback.Shape) time.Duration {
	if s.Modern != nil && s.Modern.DiscoverTTLMs > 0 {
		return max(time.Duration(s.Modern.DiscoverTTLMs)*time.Millisecond, r.cfg.MinRecheck)
	}
	if s.Modern != nil {
		return r.cfg.MinRecheck // no lifetime given: as the forward route re-discovers
	}
	return r.cfg.Recheck
}

func (r *Router) logFailure(err error, failures int, wait time.Duration) {
	ev := r.log.Warn()
	if failures > 1 && failures%10 != 0 {
		ev = r.log.Debug() // one warning, then one every ten failures
	}
	state := "routes unchanged"
	if r.ep.Load() == nil {
		state = "not ready: MCP requests get the retry error"
	}
	ev.Err(err).Str("upstream", r.cfg.Describe).Int("failures", failures).Dur("retryIn", wait).
		Msg("upstream probe failed (" + state + ")")
}

// apply builds the routes shape needs and installs the choice; a change is logged and
// counted.
func (r *Router) apply(ctx context.Context, shape fallback.Shape, reason string) error {
	routes, err := fallback.ChooseRoutes(shape)
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return errors.New("bridge: router closed")
	}
	if err := r.buildLocked(ctx, routes); err != nil {
		return err
	}
	ep := r.endpointsLocked(routes)
	if err := r.install(ep); err != nil {
		return err
	}
	fp := fingerprint(shape)
	old, oldRoutes := r.fingerprint, r.routes
	r.shape, r.routes, r.fingerprint = shape, routes, fp
	r.cfg.Metrics.SetRoutes(string(ep.legacyRoute), string(ep.modernRoute))
	switch {
	case old == "":
		r.log.Info().Str("upstream", r.cfg.Describe).Str("faces", shape.Faces()).Str("shape", fp).
			Str("route2025", string(ep.legacyRoute)).Str("why2025", routes.Legacy.Reason).
			Str("route2026", string(ep.modernRoute)).Str("why2026", routes.Modern.Reason).
			Msg("upstream probed: routes chosen per client era")
	case old != fp || oldRoutes != routes:
		r.cfg.Metrics.ShapeChanged()
		r.log.Warn().Str("upstream", r.cfg.Describe).Str("trigger", reason).Str("was", old).Str("now", fp).
			Str("route2025", string(ep.legacyRoute)).Str("route2026", string(ep.modernRoute)).
			Msg("upstream changed: routes chosen again")
	}
	return nil
}

// buildLocked builds (and starts) the route pairs routes needs. r.mu is held.
func (r *Router) buildLocked(ctx context.Context, routes fallback.Routes) error {
	uses := func(e fallback.Era) bool { return routes.Legacy.Face == e || routes.Modern.Face == e }
	if uses(fallback.EraModern) && r.fwd == nil {
		f, err := NewForward(r.cfg.Forward)
		if err != nil {
			return err
		}
		if err := f.Start(ctx); err != nil {
			_ = f.Close(context.WithoutCancel(ctx))
			return err
		}
		r.fwd = f
	}
	if uses(fallback.EraLegacy) && r.rev == nil {
		rv, err := NewReverse(r.cfg.Reverse)
		if err != nil {
			return err
		}
		if err := rv.Start(ctx); err != nil {
			_ = rv.Close(context.WithoutCancel(ctx))
			return err
		}
		r.rev = rv
	}
	return nil
}

// endpointsLocked maps the choice to the routes' faces. r.mu is held.
func (r *Router) endpointsLocked(routes fallback.Routes) endpoints {
	var ep endpoints
	if routes.Legacy.Face == fallback.EraModern {
		ep.legacyRoute, ep.legacy = RouteForward, r.fwd.Face()
	} else {
		ep.legacyRoute, ep.legacy = RouteLegacyPassThrough, r.rev.pass.Face()
	}
	if routes.Modern.Face == fallback.EraModern {
		ep.modernRoute, ep.modern = RouteModernPassThrough, r.fwd.modern.Handler()
	} else {
		ep.modernRoute, ep.modern = RouteReverse, r.rev.Handler()
	}
	return ep
}

// install replaces the door's dispatch with ep, which must be in the dispatch table (a
// route nobody registered is refused and the old dispatch stays).
func (r *Router) install(ep endpoints) error {
	if err := checkEndpoints(ep); err != nil {
		return err
	}
	r.ep.Store(&ep)
	r.once.Do(func() { close(r.ready) })
	return nil
}

// fingerprint is what a change of the upstream is judged by: per face, the revision, the
// versions, the extensions, the task operations and each tool's task mode.
func fingerprint(s fallback.Shape) string {
	var parts []string
	for _, m := range []*fallback.UpstreamManifest{s.Modern, s.Legacy} {
		if m == nil {
			parts = append(parts, "-")
			continue
		}
		tools := make([]string, 0, len(m.Tools))
		for _, t := range m.Tools {
			tools = append(tools, t.Name+"="+string(t.Mode))
		}
		slices.Sort(tools)
		parts = append(parts, fmt.Sprintf("%s[%s] tasks=%v ops=%s ext=%s tools=%s", m.Era, m.ProtocolVersion, m.Tasks,
			strings.Join(m.TaskOperations, ","), strings.Join(m.Extensions, ","), strings.Join(tools, ",")))
	}
	return "modern:" + parts[0] + " | legacy:" + parts[1]
}

// errNotReachedYet is the door's answer (and readiness's reason) until the first probe
// succeeded.
var errNotReachedYet = jsonrpc.NewError(jsonrpc.CodeUpstream,
	"Upstream not yet reachable: the bridge has not reached its upstream since it started; retry").
	WithData(map[string]any{"reason": "upstream_not_yet_reachable", "retryable": true, "retryAfterMs": 1000})

// ActiveTasks counts the unfinished tasks of every route built.
func (r *Router) ActiveTasks() int {
	f, rv := r.pairs()
	n := 0
	if f != nil {
		n += f.ActiveTasks()
	}
	if rv != nil {
		n += rv.ActiveTasks()
	}
	return n
}

// CheckUpstream is readiness: not ready before the first successful probe; then the
// upstream asked now through the routes in use (each face chosen for a client era).
func (r *Router) CheckUpstream(ctx context.Context) error {
	ep := r.ep.Load()
	if ep == nil {
		// The first probe may be running: readiness waits for it (bounded by ctx) rather
		// than report "not ready" for a bridge that is a moment from ready.
		select {
		case <-r.settled:
		case <-ctx.Done():
		}
		if ep = r.ep.Load(); ep == nil {
			return errNotReachedYet
		}
	}
	f, rv := r.pairs()
	if f != nil && (ep.legacyRoute == RouteForward || ep.modernRoute == RouteModernPassThrough) {
		if err := f.CheckUpstream(ctx); err != nil {
			r.Observe(fallback.EraModern, "server/discover", err)
			return err
		}
	}
	if rv != nil && (ep.legacyRoute == RouteLegacyPassThrough || ep.modernRoute == RouteReverse) {
		if err := rv.CheckUpstream(ctx); err != nil {
			r.Observe(fallback.EraLegacy, "ping", err)
			return err
		}
	}
	return nil
}

// SetHostingPolicy sets the forward route's fallback policy (a reload); when the forward
// route is not built yet, it is built with it.
func (r *Router) SetHostingPolicy(allow, deny []string, noHosting bool, toolTaskSupport map[string]string) error {
	if _, err := forward.HostingPolicy(allow, deny, noHosting, toolTaskSupport); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	c := &r.cfg.Forward
	c.HostAllow, c.HostDeny, c.NoHosting, c.ToolTaskSupport = allow, deny, noHosting, toolTaskSupport
	if r.fwd != nil {
		return r.fwd.SetHostingPolicy(allow, deny, noHosting, toolTaskSupport)
	}
	return nil
}

func (r *Router) pairs() (*Forward, *Reverse) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.fwd, r.rev
}

// Close stops probing and closes every route built. Safe to call twice.
func (r *Router) Close(ctx context.Context) error {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	r.cancel()
	r.wg.Wait()
	f, rv := r.pairs()
	var err error
	if rv != nil {
		err = rv.Close(ctx)
	}
	if f != nil {
		if ferr := f.Close(ctx); err == nil {
			err = ferr
		}
	}
	return err
}
