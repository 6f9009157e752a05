package bridge

// The era router: which routes serve one upstream. The upstream's era (told at start by
// cmd/taskbridge, design §1) picks the pair; the door then picks between the two by the
// era of each request.
//
//	upstream 2026-07-28 (Forward)   2025-11-25 clients → bridge/forward (translation)
//	                                2026-07-28 clients → bridge/passthrough Modern
//	upstream 2025-11-25 (Reverse)   2026-07-28 clients → bridge/reverse (translation)
//	                                2025-11-25 clients → bridge/passthrough Legacy
//
// Both routes of a pair share the upstream client and the work gate.

import (
	"context"
	"errors"
	"time"

	"github.com/rs/zerolog"

	"github.com/taskbridge/taskbridge/bridge/forward"
	"github.com/taskbridge/taskbridge/bridge/internal/gate"
	"github.com/taskbridge/taskbridge/bridge/passthrough"
	"github.com/taskbridge/taskbridge/bridge/reverse"
	"github.com/taskbridge/taskbridge/internal/metrics"
	"github.com/taskbridge/taskbridge/legacy"
	"github.com/taskbridge/taskbridge/store"
)

// Forward is the routes in front of a 2026-07-28 upstream: the forward route (its methods
// are the embedded *forward.Bridge's: Start, Close, ActiveTasks, UpstreamReady) and the
// modern pass-through to the same upstream.
type Forward struct {
	*forward.Bridge
	modern *passthrough.Modern
}

// NewForward builds the routes in front of cfg.Upstream. Call Start before serving, Close
// when done.
func NewForward(cfg forward.Config) (*Forward, error) {
	b, err := forward.New(cfg)
	if err != nil {
		return nil, err
	}
	m := passthrough.NewModern(passthrough.ModernConfig{Upstream: b.Upstream(), Store: cfg.Store,
		Logger: cfg.Logger, Now: cfg.Now, Gate: b.Gate(), MaxBodyBytes: cfg.MaxBodyBytes, KeepAlive: cfg.Heartbeat})
	return &Forward{Bridge: b, modern: m}, nil
}

func (f *Forward) endpoints() endpoints {
	return endpoints{legacyRoute: RouteForward, legacy: f.Face(), modernRoute: RouteModernPassThrough, modern: f.modern.Handler()}
}

// ReverseConfig configures the routes in front of a 2025-11-25 upstream; NewReverse hands
// each route its share. Zero values take the defaults (internal/defaults).
type ReverseConfig struct {
	// Upstream is the legacy (2025-11-25) server. Required.
	Upstream *legacy.Client
	// Store holds the reverse route's task records and the legacy pass-through's
	// sessions. Required.
	Store  store.Store
	Logger zerolog.Logger
	Now    func() time.Time

	PollFloorMs int64 // lowest pollIntervalMs told to modern clients (reverse)
	PollCeilMs  int64 // highest (reverse)

	CreateTimeout time.Duration // upstream tools/call until it answers or asks for input (reverse)
	StatusTimeout time.Duration // upstream tasks/get (both)
	CancelTimeout time.Duration // upstream tasks/cancel (reverse)
	// InputTimeout bounds how long a held MRTR call waits for the client's retry, a held
	// input request for tasks/update (reverse), and a relayed request for the legacy
	// client's answer (pass-through).
	InputTimeout time.Duration
	// InfoTTL is how long the upstream's initialize result and tool modes are cached
	// (also discover's ttlMs; reverse).
	InfoTTL time.Duration

	// MaxBodyBytes caps a body at the faces (the front door caps it first: DoorConfig).
	MaxBodyBytes int64
	// MaxReplayBytes and MaxSessionInfoBytes bound the pass-through face's SSE replay
	// buffers and stored session info (legacy.Options).
	MaxReplayBytes      int64
	MaxSessionInfoBytes int
	// SessionRetention: pass-through sessions last seen longer ago are deleted every
	// PurgeInterval; a negative interval disables the purge (of sessions and of expired
	// reverse task records alike).
	SessionRetention time.Duration
	PurgeInterval    time.Duration
	// MaxResultBytes caps a reverse task's result or error (0: no cap); AuditRetention is
	// how long a reverse record's audit part outlives its ttl.
	MaxResultBytes int64
	AuditRetention time.Duration

	// Gate is the work gate shared by every route of the process. Nil: one gate with an
	// empty policy for both routes.
	Gate *Gate
	// Metrics counts what both routes record (nil: nothing), such as the standalone GET
	// streams they open to upstream sessions.
	Metrics *metrics.Metrics
}

// Reverse is the routes in front of a 2025-11-25 upstream: the reverse route (its methods
// are the embedded *reverse.Reverse's: ActiveTasks, UpstreamReady) and the legacy
// pass-through to the same upstream.
type Reverse struct {
	*reverse.Reverse
	pass *passthrough.Legacy
}

// NewReverse builds the routes in front of cfg.Upstream. Call Start before serving, Close
// when done.
func NewReverse(cfg ReverseConfig) (*Reverse, error) {
	if cfg.Upstream == nil || cfg.Store == nil {
		return nil, errors.New("bridge: ReverseConfig needs Upstream and Store")
	}
	if cfg.Gate == nil {
		cfg.Gate = gate.New(gate.Config{Now: cfg.Now})
	}
	rv, err := reverse.New(reverse.Config{Upstream: cfg.Upstream, Store: cfg.Store, Logger: cfg.Logger, Now: cfg.Now,
		PollFloorMs: cfg.PollFloorMs, PollCeilMs: cfg.PollCeilMs, CreateTimeout: cfg.CreateTimeout,
		StatusTimeout: cfg.StatusTimeout, CancelTimeout: cfg.CancelTimeout, InputTimeout: cfg.InputTimeout,
		InfoTTL: cfg.InfoTTL, MaxBodyBytes: cfg.MaxBodyBytes, Gate: cfg.Gate, MaxResultBytes: cfg.MaxResultBytes,
		AuditRetention: cfg.AuditRetention, PurgeInterval: cfg.PurgeInterval, Metrics: cfg.Metrics})
	if err != nil {
		return nil, err
	}
	pass, err := passthrough.NewLegacy(passthrough.LegacyConfig{Upstream: cfg.Upstream, Store: cfg.Store,
		Logger: cfg.Logger, Now: cfg.Now, StatusTimeout: cfg.StatusTimeout, InputTimeout: cfg.InputTimeout,
		MaxBodyBytes: cfg.MaxBodyBytes, MaxReplayBytes: cfg.MaxReplayBytes, MaxSessionInfoBytes: cfg.MaxSessionInfoBytes,
		SessionRetention: cfg.SessionRetention, PurgeInterval: cfg.PurgeInterval, Gate: cfg.Gate, Metrics: cfg.Metrics})
	if err != nil {
		return nil, err
	}
	return &Reverse{Reverse: rv, pass: pass}, nil
}

// Start opens the first upstream session and reads the upstream's capabilities and tools
// (a failure is returned: an unreachable upstream at start is an operator error), then
// starts the pass-through's session purge.
func (r *Reverse) Start(ctx context.Context) error {
	if err := r.Reverse.Start(ctx); err != nil {
		return err
	}
	r.pass.Start()
	return nil
}

// Close closes the pass-through (its face and upstream sessions), then the reverse route.
// Safe to call twice.
func (r *Reverse) Close(ctx context.Context) error {
	err := r.pass.Close(ctx)
	if rerr := r.Reverse.Close(ctx); err == nil {
		err = rerr
	}
	return err
}

func (r *Reverse) endpoints() endpoints {
	return endpoints{legacyRoute: RouteLegacyPassThrough, legacy: r.pass.Face(), modernRoute: RouteReverse, modern: r.Handler()}
}
