// Package gate is taskbridge's one work gate. Every route that can start work asks it,
// with the same code and the same error values, before anything is written or sent
// upstream: forward task creation and bridge-hosted tasks (legacy clients in front of a
// SEP-2663 upstream), reverse task creation (SEP-2663 clients in front of a 2025-11-25
// upstream), task-augmented calls on the legacy pass-through, and tools/call on the modern
// pass-through.
//
// Two questions, asked in this order:
//
//	Admit    may a new task start?  kill switch → lock drift (serve --lock with lock_drift:
//	         refuse) → sunset (tasks on the 2025-11-25 API) → drain → the owner's unfinished
//	         tasks (max_concurrent_tasks)
//	Acquire  may one more upstream call start?  in-flight calls to the upstream
//	         (max_upstream_inflight); beyond the cap: "overloaded, retry after" at once
//
// StartTask is both. A refusal happens before the caller writes an intent record, so a
// refused call never leaves an "outcome unknown" record behind and never reaches the
// upstream.
//
// The policy (kill switch, sunset, limits) is one value held in an atomic pointer and
// replaced as a whole by SetPolicy: every route reads the current one on every call, so a
// reload changes them all at once. Drain is not policy but process state (a function).
package gate

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/taskbridge/taskbridge/internal/jsonrpc"
	"github.com/taskbridge/taskbridge/internal/metrics"
)

// SunsetReplacement names what legacy clients should move to, in the sunset error.
const SunsetReplacement = "the io.modelcontextprotocol/tasks extension of MCP 2026-07-28"

// DefaultRetryAfter is the retryAfterMs hint of an "overloaded" refusal.
const DefaultRetryAfter = time.Second

// Era says which tasks API a new task is created through: the sunset retires only the
// 2025-11-25 one.
type Era int

const (
	// Legacy is the 2025-11-25 experimental tasks API (params.task).
	Legacy Era = iota + 1
	// Modern is the SEP-2663 tasks extension of MCP 2026-07-28.
	Modern
	// LegacyUpstream is a task a 2026-07-28 client creates through the SEP-2663 extension
	// that the bridge creates upstream through the 2025-11-25 API (the reverse route): the
	// sunset retires it too, since the API it runs on is the retired one; the refusal
	// names the server, not the client, as what must upgrade.
	LegacyUpstream
)

// Policy is the operator's policy for new work. It is replaced as a whole (SetPolicy).
type Policy struct {
	// KillSwitch refuses every new task; existing tasks and plain calls are still served.
	KillSwitch bool
	// Sunset is when the 2025-11-25 experimental tasks API is retired: from then on new
	// legacy tasks are refused. Zero: never.
	Sunset time.Time
	// MaxConcurrentTasks caps an owner's unfinished tasks; 0: no cap.
	MaxConcurrentTasks int
	// MaxInflight caps the upstream calls in flight at once on behalf of clients; 0: no cap.
	MaxInflight int
}

// Config configures a Gate.
type Config struct {
	Policy Policy
	// Draining, when it returns true, refuses new tasks (a drain before shutdown). Nil: never.
	Draining func() bool
	// Now is the sunset's clock (default time.Now).
	Now func() time.Time
	// Metrics counts refusals by reason (tasks_refused_total); nil: none.
	Metrics *metrics.Metrics
	// RetryAfter is the hint in an "overloaded" refusal (default DefaultRetryAfter).
	RetryAfter time.Duration
}

// Gate is the work gate of one upstream.
//
// Concurrency: safe for concurrent use. policy is an atomic pointer replaced whole;
// inflight is an atomic counter; the other fields are read-only after New.
type Gate struct {
	policy     atomic.Pointer[Policy]
	draining   func() bool
	now        func() time.Time
	metrics    *metrics.Metrics
	retryAfter time.Duration
	inflight   atomic.Int64
	drift      atomic.Pointer[jsonrpc.Error] // the lock-drift refusal in force; nil: none
}

// New returns a Gate holding c.Policy.
func New(c Config) *Gate {
	g := &Gate{draining: c.Draining, now: c.Now, metrics: c.Metrics, retryAfter: c.RetryAfter}
	if g.now == nil {
		g.now = time.Now
	}
	if g.retryAfter <= 0 {
		g.retryAfter = DefaultRetryAfter
	}
	g.SetPolicy(c.Policy)
	return g
}

// SetPolicy replaces the policy; calls already admitted are not affected, the next one
// sees p. This is the one runtime setter (a configuration reload calls it).
func (g *Gate) SetPolicy(p Policy) { g.policy.Store(&p) }

// SetDrift sets the refusal of new tasks while the live upstream differs from its pinned
// lock (serve --lock with lock_drift: refuse; LockDriftError builds it); nil lifts it.
// Drift is process state, not policy: a reload that leaves the lock alone keeps it.
func (g *Gate) SetDrift(err *jsonrpc.Error) { g.drift.Store(err) }

// Drift returns the lock-drift refusal in force, or nil.
func (g *Gate) Drift() *jsonrpc.Error { return g.drift.Load() }

// Policy returns the current policy.
func (g *Gate) Policy() Policy { return *g.policy.Load() }

// Inflight returns the number of upstream calls holding a slot now.
func (g *Gate) Inflight() int { return int(g.inflight.Load()) }

// Task describes one new task about to start.
type Task struct {
	Era Era
	// Owner is the identity the task will belong to (the caller's principal, or its session
	// without authentication); it only names the limit in errors and logs.
	Owner string
	// Active counts Owner's unfinished tasks on the calling route (the store, the route's
	// own records or a Ledger). Nil: the route cannot count, and the cap is not applied.
	Active func(context.Context) (int, error)
}

// Admit decides whether a new task may start: nil, or the coded refusal to send back.
// Order: the kill switch and the sunset are permanent refusals here (-32012, not
// retryable); a drain is temporary for the fleet (-32011, retryable on another replica);
// the concurrency cap is the caller's own (-32011, retryable once a task ends).
func (g *Gate) Admit(ctx context.Context, t Task) error {
	p := g.policy.Load()
	switch {
	case p.KillSwitch:
		return g.refuse("kill_switch", ErrKillSwitch)
	case g.drift.Load() != nil:
		return g.refuse("lock_drift", g.drift.Load())
	case t.Era != Modern && !p.Sunset.IsZero() && !g.now().Before(p.Sunset):
		return g.refuse("sunset", sunsetError(p.Sunset, t.Era))
	case g.draining != nil && g.draining():
		return g.refuse("draining", ErrDraining)
	}
	if p.MaxConcurrentTasks <= 0 || t.Active == nil {
		return nil
	}
	n, err := t.Active(ctx)
	if err != nil {
		return err
	}
	if n >= p.MaxConcurrentTasks {
		return g.refuse("max_concurrent_tasks", tooManyTasks(p.MaxConcurrentTasks))
	}
	return nil
}

// Acquire takes one in-flight upstream slot. The caller holds it while its upstream call
// runs and calls release (safe to call more than once) when the call has answered. Beyond
// the cap it refuses at once: nothing queues.
func (g *Gate) Acquire() (release func(), err error) {
	limit := int64(g.policy.Load().MaxInflight)
	if n := g.inflight.Add(1); limit > 0 && n > limit {
		g.inflight.Add(-1)
		return nil, g.refuse("overloaded", g.overloaded(limit))
	}
	var once sync.Once
	return func() { once.Do(func() { g.inflight.Add(-1) }) }, nil
}

// StartTask is Admit, then Acquire: the one call a route makes before it writes anything
// for a new task. The slot covers the upstream call that creates the task.
func (g *Gate) StartTask(ctx context.Context, t Task) (release func(), err error) {
	if err := g.Admit(ctx, t); err != nil {
		return nil, err
	}
	return g.Acquire()
}

func (g *Gate) refuse(reason string, err *jsonrpc.Error) error {
	g.metrics.TaskRefused(reason)
	return err
}

// Refusals. Each carries data.reason and data.retryable; a client tells them apart by
// code and reason, never by message.
var (
	// ErrKillSwitch: the operator stopped all new task creation.
	ErrKillSwitch = jsonrpc.NewError(jsonrpc.CodeTasksRefused,
		"taskbridge is not accepting new tasks (kill switch is on); existing tasks are still served; call the tool without a task").
		WithData(map[string]any{"reason": "kill_switch", "retryable": false})
	// ErrDraining: this replica is shutting down.
	ErrDraining = jsonrpc.NewError(jsonrpc.CodeOverloaded,
		"taskbridge is draining: new tasks are refused; retry on another replica").
		WithData(map[string]any{"reason": "draining", "retryable": true})
)

// sunsetError is the one sunset refusal: the same code and data on every route; the
// message names what must upgrade (the client, or the upstream server on the reverse route).
func sunsetError(sunset time.Time, era Era) *jsonrpc.Error {
	day := sunset.UTC().Format(time.DateOnly)
	who := "the client"
	if era == LegacyUpstream {
		who = "the upstream server (it offers tasks only through the retired API)"
	}
	return jsonrpc.NewError(jsonrpc.CodeTasksRefused,
		"the experimental tasks API of MCP 2025-11-25 was retired on "+day+
			": new tasks are refused; upgrade "+who+" to "+SunsetReplacement+
			" (existing tasks are served until their ttl)").
		WithData(map[string]any{"reason": "sunset", "retiredOn": day, "retryable": false,
			"replacement": map[string]string{"extension": "io.modelcontextprotocol/tasks", "protocolVersion": "2026-07-28"}})
}

// LockDriftError is the lock-drift refusal: changes are the drifted facts, one line each
// ("tool slow_compute taskSupport: optional → required"), lock the lock file's name. The
// message names every change, so the operator sees at once which tool changed.
func LockDriftError(lock string, changes []string) *jsonrpc.Error {
	return jsonrpc.NewError(jsonrpc.CodeTasksRefused,
		"the upstream differs from the verified lock "+lock+" ("+strings.Join(changes, "; ")+
			"): new tasks are refused until taskbridge verify --lock is run again; existing tasks are still served; call the tool without a task").
		WithData(map[string]any{"reason": "lock_drift", "retryable": false, "changed": changes})
}

func tooManyTasks(limit int) *jsonrpc.Error {
	return jsonrpc.NewError(jsonrpc.CodeOverloaded,
		fmt.Sprintf("too many unfinished tasks (limit %d per principal); wait for one to end or cancel one", limit)).
		WithData(map[string]any{"reason": "max_concurrent_tasks", "retryable": true, "limit": "maxConcurrentTasks", "max": limit})
}

func (g *Gate) overloaded(limit int64) *jsonrpc.Error {
	ms := g.retryAfter.Milliseconds()
	return jsonrpc.NewError(jsonrpc.CodeOverloaded,
		fmt.Sprintf("overloaded: %d upstream calls are in flight (the limit); retry after %d ms", limit, ms)).
		WithData(map[string]any{"reason": "overloaded", "retryable": true, "retryAfterMs": ms,
			"limit": "maxUpstreamInflight", "max": limit})
}
