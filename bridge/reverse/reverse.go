package reverse

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/bridge/internal/errmap"
	"github.com/taskbridge/taskbridge/bridge/internal/gate"
	"github.com/taskbridge/taskbridge/bridge/internal/pending"
	"github.com/taskbridge/taskbridge/bridge/internal/sessions"
	"github.com/taskbridge/taskbridge/internal/defaults"
	"github.com/taskbridge/taskbridge/internal/jsonobj"
	"github.com/taskbridge/taskbridge/internal/jsonrpc"
	"github.com/taskbridge/taskbridge/internal/metrics"
	"github.com/taskbridge/taskbridge/legacy"
	"github.com/taskbridge/taskbridge/mapping"
	"github.com/taskbridge/taskbridge/record"
	"github.com/taskbridge/taskbridge/sep2663"
	"github.com/taskbridge/taskbridge/store"
)

// Config configures a Reverse. Zero values take the defaults (internal/defaults).
type Config struct {
	// Upstream is the legacy (2025-11-25) server. Required.
	Upstream *legacy.Client
	// Store holds the route's task records and input requests (records.go). Required.
	Store  store.Store
	Logger zerolog.Logger
	Now    func() time.Time

	PollFloorMs int64 // lowest pollIntervalMs told to modern clients
	PollCeilMs  int64 // highest

	CreateTimeout time.Duration // upstream tools/call until it answers or asks for input
	StatusTimeout time.Duration // upstream tasks/get
	CancelTimeout time.Duration // upstream tasks/cancel
	// InputTimeout bounds how long a held MRTR call waits for the client's retry, and how
	// long a task's held input request waits for tasks/update.
	InputTimeout time.Duration
	// InfoTTL is how long the upstream's initialize result and tool modes are cached
	// (also discover's ttlMs).
	InfoTTL time.Duration

	// MaxBodyBytes caps a body at the face (the front door caps it first: DoorConfig).
	MaxBodyBytes int64
	// MaxResultBytes caps a task's result or error: a larger one fails the task (0: no cap).
	MaxResultBytes int64
	// AuditRetention is how long the audit part of a record outlives its ttl; the ttl
	// purge runs every PurgeInterval (negative: never).
	AuditRetention time.Duration
	PurgeInterval  time.Duration

	// Gate is the work gate shared by every route of the process (kill switch, sunset,
	// drain, per-principal concurrency cap, upstream backpressure). Nil: a gate with an
	// empty policy. The caller of a modern request (the owner of its tasks and the key of
	// its pooled upstream session) is the principal the front door authenticated
	// (sep2663.Request.Principal; "" when anonymous).
	Gate *gate.Gate
	// Metrics counts the standalone GET streams opened upstream (getstream.go). Nil: none.
	Metrics *metrics.Metrics
}

func (c *Config) setDefaults() {
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
	defaults.Fill(&c.AuditRetention, d.AuditRetention)
	if c.PurgeInterval == 0 {
		c.PurgeInterval = d.PurgeInterval
	}
}

// Reverse serves modern clients in front of one legacy upstream (reverse translation).
//
// Concurrency: exported methods are safe for concurrent use. The store holds the task
// records (any replica serves any task). mu guards holders, upSessions and closed; held is
// a pending registry; info is swapped atomically; each heldCall has its own lock. Every
// goroutine (held tasks/result, held tools/call, the loops) is tracked by wg and ends with
// ctx.
type Reverse struct {
	cfg    Config
	up     *legacy.Client
	st     store.Store
	shared bool         // the store is shared by replicas (it can notify: PostgreSQL)
	pool   *legacy.Pool // modern callers: one upstream session per owner
	log    zerolog.Logger
	modern *sep2663.Server
	gate   *gate.Gate

	info atomic.Pointer[upstreamInfo]
	held pending.Registry[*heldCall] // requestState → held MRTR call

	mu         sync.Mutex
	holders    map[string]*holder                 // task id → this process's held tasks/result (held.go)
	upSessions map[string]*legacy.UpstreamSession // Mcp-Session-Id → handle (opened or adopted)
	creating   map[string]creations               // owner → task-creating tools/calls in flight (getstream.go)
	listens    listens                            // open subscriptions/listen (listen.go; its own lock)
	logs       logRelay                           // log levels and the streams that take logs (logs.go; its own lock)
	closed     bool

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// upstreamInfo is what the bridge knows about the legacy upstream.
type upstreamInfo struct {
	init      legacy.InitializeResult
	tasksCall bool                             // tasks.requests.tools.call declared
	tools     map[string]string                // tool name → execution.taskSupport ("" = forbidden)
	params    map[string][]sep2663.ParamHeader // tool name → its x-mcp-header annotations (valid ones only)
	fetchedAt time.Time
}

// New builds a Reverse. Call Start before serving and Close when done.
func New(cfg Config) (*Reverse, error) {
	if cfg.Upstream == nil || cfg.Store == nil {
		return nil, errors.New("reverse: Config needs an Upstream and a Store")
	}
	cfg.setDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	r := &Reverse{
		cfg: cfg, up: cfg.Upstream, st: cfg.Store, shared: canNotify(cfg.Store),
		pool: legacy.NewPool(cfg.Upstream), log: cfg.Logger,
		holders: map[string]*holder{}, upSessions: map[string]*legacy.UpstreamSession{},
		creating: map[string]creations{}, gate: cfg.Gate,
		ctx: ctx, cancel: cancel,
	}
	if r.gate == nil {
		r.gate = gate.New(gate.Config{Now: cfg.Now})
	}
	r.pool.OnOpen(r.onSessionOpen) // each upstream session's GET stream (getstream.go)
	r.pool.DeclareFor(func(key string) json.RawMessage { _, caps := splitKey(key); return caps.Legacy() })
	r.modern = sep2663.NewServer(sep2663.ServerOptions{Handler: r, MaxBodyBytes: cfg.MaxBodyBytes})
	return r, nil
}

// Start opens the first upstream session and reads the upstream's capabilities and tools
// (a failure is returned: an unreachable upstream at start is an operator error), resumes
// the unfinished tasks of the store (held.go) and starts the background loops.
func (r *Reverse) Start(ctx context.Context) error {
	if _, err := r.upstream(ctx); err != nil {
		return err
	}
	if err := r.resumeTasks(ctx); err != nil {
		return fmt.Errorf("reverse: resume from the store: %w", err)
	}
	r.background()
	return nil
}

// notifier is the store capability that tells a store shared by replicas (PostgreSQL's
// LISTEN/NOTIFY) from a single-process one.
type notifier interface {
	Notify(ctx context.Context, channel, payload string) error
}

func canNotify(st store.Store) bool {
	if _, ok := st.(notifier); ok {
		return true
	}
	_, ok := metrics.Unwrap(st).(notifier) // the instrumented wrapper hides it
	return ok
}

// Handler is the route's 2026-07-28 face. Only the front door serves it (bridge.NewReverse,
// bridge.NewDoor).
func (r *Reverse) Handler() http.Handler { return r.modern }

// Close stops held calls and held tasks/result, and ends the pooled upstream sessions that
// hold no unfinished task: a session with one stays open upstream, so that the next
// process (or another replica) resumes its tasks in it. Safe to call twice.
func (r *Reverse) Close(ctx context.Context) error {
	r.mu.Lock()
	already := r.closed
	r.closed = true
	r.mu.Unlock()
	if already {
		return nil
	}
	r.cancel()
	done := make(chan struct{})
	go func() { r.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		return ctx.Err()
	}
	inUse, err := r.sessionsInUse(ctx)
	r.pool.CloseUnless(ctx, func(s *legacy.UpstreamSession) bool { return err != nil || inUse[s.ID()] })
	return nil
}

// sessionsInUse are the upstream sessions unfinished tasks of this upstream live in.
func (r *Reverse) sessionsInUse(ctx context.Context) (map[string]bool, error) {
	active, err := r.st.ListActive(ctx)
	if err != nil {
		return nil, err
	}
	unsettled, err := r.st.ListUnsettled(ctx)
	if err != nil {
		return nil, err
	}
	in := map[string]bool{}
	for _, rec := range append(active, unsettled...) {
		if rec.Mode == record.ModeReverse && rec.Origin == r.up.URL() {
			in[rec.UpstreamSessionID] = true
		}
	}
	return in, nil
}

// anonymousPool is the pool key of the bridge's own requests (initialize result, tool
// modes, ping): an anonymous caller that declares no input capability, which is what that
// session tells the upstream (nobody is there to answer its requests).
var anonymousPool = sessionKey(sessions.AnonymousModern, mapping.InputCaps{})

// owner is the owner of a modern request's tasks (sessions.ModernOwner).
func (r *Reverse) owner(req *sep2663.Request) string { return sessions.ModernOwner(req.Principal) }

// poolKey is the key of the pooled upstream session a modern request runs in: its owner
// and the input capabilities its _meta declares (issue 16 item 6). The upstream session is
// initialized with exactly that set, so a 2025-11-25 upstream learns what this caller can
// answer, and callers that declare different sets never share a session. The number of
// sessions per owner is bounded by the number of distinct sets (mapping.InputCaps: at most
// 40), and sessions come and go as before (re-initialized when gone, closed with the route).
func (r *Reverse) poolKey(req *sep2663.Request) string {
	return sessionKey(r.owner(req), mapping.InputCapsOf(req.CapabilitiesRaw))
}

// sessionKey joins an owner and a capability set into a pool key; splitKey undoes it. The
// empty set's key is the owner alone: the session the owner's listens subscribe in
// (listen.go keys its pool calls by owner) is its capability-less callers' session.
func sessionKey(owner string, caps mapping.InputCaps) string {
	if caps == (mapping.InputCaps{}) {
		return owner
	}
	return owner + "\x00" + caps.String()
}

// splitKey returns the owner and capability set of a pool key.
func splitKey(key string) (owner string, caps mapping.InputCaps) {
	owner, set, _ := strings.Cut(key, "\x00")
	return owner, mapping.InputCapsOf([]byte(set))
}

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
	s, err := r.pool.Get(ctx, anonymousPool)
	if err != nil {
		return nil, err
	}
	init, raw := s.InitializeResult()
	in := &upstreamInfo{init: init, tools: map[string]string{}, params: map[string][]sep2663.ParamHeader{}, fetchedAt: r.cfg.Now()}
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
			// A tool whose annotations are invalid is one a conforming client never calls
			// (it MUST drop it); nothing is checked for it.
			if hs, err := sep2663.ParamHeaders(json.RawMessage(t.Get("inputSchema").Raw)); err == nil && len(hs) > 0 {
				in.params[t.Get("name").Str] = hs
			}
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

// Serve implements sep2663.Handler: one dispatch table for the modern face. Every result
// carries the upstream server's identity in _meta serverInfo (2026-07-28: results SHOULD;
// issue 16 item 16).
func (r *Reverse) Serve(ctx context.Context, req *sep2663.Request) (json.RawMessage, error) {
	done, err := r.logScope(ctx, req) // logs.go: the request's logLevel
	if err != nil {
		return nil, err
	}
	defer done()
	res, err := r.serve(ctx, req)
	if err != nil || req.Method == sep2663.MethodDiscover {
		return res, err // discover sets serverInfo itself
	}
	return r.withServerInfo(res), nil
}

// withServerInfo sets _meta serverInfo on a result object that has none, from the cached
// upstream initialize; a result it cannot edit is returned as it is.
func (r *Reverse) withServerInfo(res json.RawMessage) json.RawMessage {
	in := r.info.Load()
	if in == nil || gjson.GetBytes(res, "_meta."+gjson.Escape(sep2663.MetaServerInfo)).Exists() {
		return res
	}
	info, err := json.Marshal(sep2663.Implementation{Name: in.init.ServerInfo.Name, Version: in.init.ServerInfo.Version, Title: in.init.ServerInfo.Title})
	if err != nil {
		return res
	}
	out, err := jsonobj.Edit(res, func(o jsonobj.Object) jsonobj.Object { return o.SetMeta(sep2663.MetaServerInfo, info) })
	if err != nil {
		return res
	}
	return out
}

func (r *Reverse) serve(ctx context.Context, req *sep2663.Request) (json.RawMessage, error) {
	switch req.Method {
	case sep2663.MethodDiscover:
		return r.discover(ctx)
	case sep2663.MethodToolsCall:
		return r.toolsCall(ctx, req)
	case "prompts/get":
		return r.promptsGet(ctx, req)
	case sep2663.MethodTasksGet:
		return r.tasksGet(ctx, req)
	case sep2663.MethodTasksUpdate:
		return r.tasksUpdate(ctx, req)
	case sep2663.MethodTasksCancel:
		return r.tasksCancel(ctx, req)
	case sep2663.MethodSubscriptionsListen:
		return r.listen(ctx, req) // listen.go
	case "initialize", "ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe":
		// Removed in 2026-07-28 (subscriptions/listen replaced the last two).
		return nil, jsonrpc.ErrMethodNotFound.Wrapf("%s", req.Method)
	default:
		return r.forwardModern(ctx, req)
	}
}

// discover builds server/discover from the upstream's initialize result.
func (r *Reverse) discover(ctx context.Context) (json.RawMessage, error) {
	in, err := r.upstream(ctx)
	if err != nil {
		return nil, errmap.FromLegacy(err)
	}
	caps, err := mapping.ServerCapsToModernRelayed(in.init.Capabilities, in.tasksCall) // listen.go delivers listChanged/subscribe
	if err != nil {
		return nil, err
	}
	caps.Logging = loggingCap(in) // logs.go relays logLevel requests' messages
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
	res, _, err := r.pool.Call(ctx, r.poolKey(req), req.Method, params, legacy.CallOptions{OnNotify: r.logNotify(req.Stream())})
	if err != nil {
		return nil, errmap.FromLegacy(err)
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
