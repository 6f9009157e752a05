package bridge

// The reverse route (design §4): 2026-07-28 + SEP-2663 clients in front of a 2025-11-25
// upstream, and legacy clients passed through to the same upstream, on one /mcp.
//
// Protocol flow (modern client → bridge → legacy upstream):
//
//	server/discover          → built from the upstream's initialize (pooled session)
//	tools/call (extension declared, tool optional|required)
//	                         → tools/call + task:{} upstream; the CreateTaskResult becomes a
//	                           flat resultType:"task" with a bridge-minted id, and the
//	                           bridge holds tasks/result open upstream at once
//	  server requests on the tools/call stream (before the task exists)
//	                         → input_required + inputRequests + requestState (MRTR); the
//	                           retry with inputResponses answers them and resumes the call
//	tasks/get                → upstream tasks/get; terminal: result/error from the held
//	                           tasks/result; requests that arrived on it: input_required
//	tasks/update             → answers the held requests (POSTed upstream as responses)
//	tasks/cancel             → upstream tasks/cancel, empty ack

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/internal/defaults"
	"github.com/taskbridge/taskbridge/internal/jsonrpc"
	"github.com/taskbridge/taskbridge/legacy"
	"github.com/taskbridge/taskbridge/mapping"
	"github.com/taskbridge/taskbridge/sep2663"
	"github.com/taskbridge/taskbridge/store"
)

// ReverseConfig configures a Reverse bridge. Zero values take the defaults (internal/defaults).
type ReverseConfig struct {
	// Upstream is the legacy (2025-11-25) server. Required.
	Upstream *legacy.Client
	// Store holds the sessions of the pass-through legacy face. Required.
	Store  store.Store
	Logger zerolog.Logger
	Now    func() time.Time

	PollFloorMs int64 // lowest pollIntervalMs told to modern clients; default 250
	PollCeilMs  int64 // highest; default 30 000

	CreateTimeout time.Duration // upstream tools/call until it answers or asks for input; default 60 s
	StatusTimeout time.Duration // upstream tasks/get; default 10 s
	CancelTimeout time.Duration // upstream tasks/cancel; default 10 s
	// InputTimeout bounds how long a held MRTR call waits for the client's retry, and how
	// long a task's held input request waits for tasks/update. Default 5 min.
	InputTimeout time.Duration
	// InfoTTL is how long the upstream's initialize result and tool modes are cached
	// (also discover's ttlMs). Default 60 s.
	InfoTTL time.Duration

	// MaxBodyBytes caps a body at the faces (the front door caps it first: DoorConfig).
	MaxBodyBytes int64

	// MaxReplayBytes and MaxSessionInfoBytes bound the pass-through face's SSE replay
	// buffers and stored session info (legacy.Options; zero: the legacy defaults).
	MaxReplayBytes      int64
	MaxSessionInfoBytes int
	// SessionRetention: pass-through sessions last seen longer ago are deleted every
	// PurgeInterval (reverse_purge.go). Defaults 30 days and 1 min; a negative interval
	// disables the purge.
	SessionRetention time.Duration
	PurgeInterval    time.Duration

	// Gate is the work gate shared by every route of the process (kill switch, sunset,
	// drain, per-principal concurrency cap, upstream backpressure). Nil: a gate with an
	// empty policy. The caller of a modern request (the owner of its tasks and the key of
	// its pooled upstream session) is the principal the front door authenticated
	// (sep2663.Request.Principal; "" when anonymous).
	Gate *Gate
}

func (c *ReverseConfig) setDefaults() {
	if c.Now == nil {
		c.Now = time.Now
	}
	d := defaults.Defaults
	defaults.Fill(&c.CreateTimeout, d.CreateTimeout)
	defaults.Fill(&c.StatusTimeout, d.StatusTimeout)
	defaults.Fill(&c.CancelTimeout, d.CancelTimeout)
	defaults.Fill(&c.InputTimeout, d.InputTimeout)
	defaults.Fill(&c.InfoTTL, d.InfoTTL)
	defaults.Fill(&c.PollFloorMs, d.PollFloorMs)
	defaults.Fill(&c.PollCeilMs, d.PollCeilMs)
	defaults.Fill(&c.MaxBodyBytes, d.MaxBodyBytes)
	defaults.Fill(&c.SessionRetention, d.SessionRetention)
	if c.PurgeInterval == 0 {
		c.PurgeInterval = d.PurgeInterval
	}
}

// Reverse serves modern clients (reverse translation) and legacy clients (pass-through)
// in front of one legacy upstream.
//
// Concurrency: exported methods are safe for concurrent use. mu guards tasks, held and
// closed; info is swapped atomically; each rtask and heldCall has its own lock. Every
// goroutine (held tasks/result, held tools/call) is tracked by wg and ends with ctx.
type Reverse struct {
	cfg    ReverseConfig
	up     *legacy.Client
	pool   *legacy.Pool // modern callers: one upstream session per principal
	log    zerolog.Logger
	modern *sep2663.Server
	pass   *passThrough
	gate   *Gate

	info atomic.Pointer[upstreamInfo]

	mu     sync.Mutex
	tasks  map[string]*rtask    // bridge task id → task
	held   map[string]*heldCall // requestState → held MRTR call
	closed bool

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// upstreamInfo is what the bridge knows about the legacy upstream.
type upstreamInfo struct {
	init      legacy.InitializeResult
	tasksCall bool              // tasks.requests.tools.call declared
	tools     map[string]string // tool name → execution.taskSupport ("" = forbidden)
	fetchedAt time.Time
}

// NewReverse builds a Reverse bridge. Call Start before serving and Close when done.
func NewReverse(cfg ReverseConfig) (*Reverse, error) {
	if cfg.Upstream == nil || cfg.Store == nil {
		return nil, errors.New("bridge: ReverseConfig needs Upstream and Store")
	}
	cfg.setDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	r := &Reverse{
		cfg: cfg, up: cfg.Upstream, pool: legacy.NewPool(cfg.Upstream), log: cfg.Logger,
		tasks: map[string]*rtask{}, held: map[string]*heldCall{}, gate: cfg.Gate,
		ctx: ctx, cancel: cancel,
	}
	if r.gate == nil {
		r.gate = NewGate(GateConfig{Now: cfg.Now})
	}
	r.modern = sep2663.NewServer(sep2663.ServerOptions{Handler: r, MaxBodyBytes: cfg.MaxBodyBytes})
	r.pass = newPassThrough(r)
	return r, nil
}

// Start opens the first upstream session and reads the upstream's capabilities and tools.
// A failure is returned: an unreachable upstream at start is an operator error.
func (r *Reverse) Start(ctx context.Context) error {
	if _, err := r.upstream(ctx); err != nil {
		return err
	}
	r.startPurge()
	return nil
}

// endpoints implements Engine: 2026-07-28 clients get the reverse translation, 2025-11-25
// clients the legacy pass-through (HTTP, WebSocket, stdio). Serve them through a Door.
func (r *Reverse) endpoints() endpoints {
	return endpoints{legacyRoute: RouteLegacyPassThrough, legacy: r.pass.face, modernRoute: RouteReverse, modern: r.modern}
}

// Close stops held calls and pollers, closes the pass-through face and every upstream
// session. Safe to call twice.
func (r *Reverse) Close(ctx context.Context) error {
	r.mu.Lock()
	already := r.closed
	r.closed = true
	r.mu.Unlock()
	if already {
		return nil
	}
	err := r.pass.close(ctx)
	r.cancel()
	done := make(chan struct{})
	go func() { r.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		return ctx.Err()
	}
	r.pool.Close(ctx)
	return err
}

// owner is the principal of a modern request ("" when anonymous).
func (r *Reverse) owner(req *sep2663.Request) string { return req.Principal }

// upstream returns the cached upstream info, refreshing it after InfoTTL.
func (r *Reverse) upstream(ctx context.Context) (*upstreamInfo, error) {
	if in := r.info.Load(); in != nil && r.cfg.Now().Sub(in.fetchedAt) < r.cfg.InfoTTL {
		return in, nil
	}
	in, err := r.fetchInfo(ctx)
	if err != nil {
		if old := r.info.Load(); old != nil {
			return old, nil // stale beats nothing; the next call retries
		}
		return nil, err
	}
	r.info.Store(in)
	return in, nil
}

func (r *Reverse) fetchInfo(ctx context.Context) (*upstreamInfo, error) {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.StatusTimeout)
	defer cancel()
	s, err := r.pool.Get(ctx, "")
	if err != nil {
		return nil, err
	}
	init, raw := s.InitializeResult()
	in := &upstreamInfo{init: init, tools: map[string]string{}, fetchedAt: r.cfg.Now()}
	in.tasksCall = gjson.GetBytes(raw, "capabilities.tasks.requests.tools.call").IsObject()
	if !gjson.GetBytes(raw, "capabilities.tools").Exists() {
		return in, nil
	}
	cursor := ""
	for page := 0; page < 100; page++ {
		params := json.RawMessage(`{}`)
		if cursor != "" {
			params, _ = json.Marshal(map[string]string{"cursor": cursor})
		}
		res, err := s.Call(ctx, "tools/list", params, legacy.CallOptions{})
		if err != nil {
			return nil, err
		}
		for _, t := range gjson.GetBytes(res, "tools").Array() {
			in.tools[t.Get("name").Str] = t.Get("execution.taskSupport").Str
		}
		if cursor = gjson.GetBytes(res, "nextCursor").Str; cursor == "" {
			break
		}
	}
	return in, nil
}

// toolMode returns the upstream's taskSupport for a tool, refreshing the cache once when
// the tool is unknown (a tool added since the last tools/list).
func (r *Reverse) toolMode(ctx context.Context, name string) (string, *upstreamInfo, error) {
	in, err := r.upstream(ctx)
	if err != nil {
		return "", nil, err
	}
	mode, ok := in.tools[name]
	if !ok {
		if fresh, err := r.fetchInfo(ctx); err == nil {
			r.info.Store(fresh)
			in, mode = fresh, fresh.tools[name]
		}
	}
	return mode, in, nil
}

// Serve implements sep2663.Handler: one dispatch table for the modern face.
func (r *Reverse) Serve(ctx context.Context, req *sep2663.Request) (json.RawMessage, error) {
	switch req.Method {
	case sep2663.MethodDiscover:
		return r.discover(ctx)
	case sep2663.MethodToolsCall:
		return r.toolsCall(ctx, req)
	case sep2663.MethodTasksGet:
		return r.tasksGet(ctx, req)
	case sep2663.MethodTasksUpdate:
		return r.tasksUpdate(ctx, req)
	case sep2663.MethodTasksCancel:
		return r.tasksCancel(ctx, req)
	case sep2663.MethodSubscriptionsListen, "initialize", "ping", "logging/setLevel",
		"resources/subscribe", "resources/unsubscribe":
		// Not offered on the modern face (listen: see docs/reverse.md); removed in 2026-07-28.
		return nil, jsonrpc.ErrMethodNotFound.Wrapf("%s", req.Method)
	default:
		return r.forwardModern(ctx, req)
	}
}

// discover builds server/discover from the upstream's initialize result.
func (r *Reverse) discover(ctx context.Context) (json.RawMessage, error) {
	in, err := r.upstream(ctx)
	if err != nil {
		return nil, reverseUpstreamErr(err)
	}
	caps, err := mapping.ServerCapsToModern(in.init.Capabilities, in.tasksCall)
	if err != nil {
		return nil, err
	}
	info, _ := json.Marshal(sep2663.Implementation{Name: in.init.ServerInfo.Name, Version: in.init.ServerInfo.Version, Title: in.init.ServerInfo.Title})
	return json.Marshal(sep2663.DiscoverResult{
		ResultType:        sep2663.ResultComplete,
		SupportedVersions: []string{sep2663.ProtocolVersion},
		Capabilities:      caps,
		Instructions:      in.init.Instructions,
		TTLMs:             r.cfg.InfoTTL.Milliseconds(),
		CacheScope:        "public",
		Meta:              map[string]json.RawMessage{sep2663.MetaServerInfo: info},
	})
}

// forwardModern passes any other request (tools/list, prompts/*, resources/*, completion)
// to the upstream session of the caller and stamps the 2026-07-28 result fields.
func (r *Reverse) forwardModern(ctx context.Context, req *sep2663.Request) (json.RawMessage, error) {
	p, err := mapping.LegacyParams(req.Params)
	if err != nil {
		return nil, err
	}
	params := p.Encode()
	release, err := r.gate.Acquire()
	if err != nil {
		return nil, err
	}
	defer release()
	ctx, cancel := context.WithTimeout(ctx, r.cfg.CreateTimeout)
	defer cancel()
	res, _, err := r.pool.Call(ctx, r.owner(req), req.Method, params, legacy.CallOptions{})
	if err != nil {
		return nil, reverseUpstreamErr(err)
	}
	if req.Method == "tools/list" {
		if res, err = mapping.ToolsListForModern(res); err != nil {
			return nil, err
		}
	}
	if cacheableMethods[req.Method] {
		return mapping.WithCacheHints(res)
	}
	return res, nil
}

// cacheableMethods are the 2026-07-28 results that must carry the cache hints ttlMs and
// cacheScope (a 2025-11-25 server never sends them).
var cacheableMethods = map[string]bool{"tools/list": true, "prompts/list": true, "resources/list": true,
	"resources/read": true, "resources/templates/list": true}

// isLegacyVersion reports whether v is a revision the legacy face negotiates.
func isLegacyVersion(v string) bool { return slices.Contains(legacy.SupportedVersions, v) }
