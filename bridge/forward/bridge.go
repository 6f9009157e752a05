package forward

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/rs/zerolog"
	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/bridge/internal/errmap"
	"github.com/taskbridge/taskbridge/bridge/internal/gate"
	"github.com/taskbridge/taskbridge/bridge/internal/pending"
	"github.com/taskbridge/taskbridge/bridge/internal/relatedtask"
	"github.com/taskbridge/taskbridge/bridge/internal/sessions"
	"github.com/taskbridge/taskbridge/internal/defaults"
	"github.com/taskbridge/taskbridge/internal/jsonrpc"
	"github.com/taskbridge/taskbridge/internal/metrics"
	"github.com/taskbridge/taskbridge/internal/redact"
	"github.com/taskbridge/taskbridge/legacy"
	"github.com/taskbridge/taskbridge/mapping"
	"github.com/taskbridge/taskbridge/sep2663"
	"github.com/taskbridge/taskbridge/store"
)

// Config configures a Bridge. Zero values take the defaults (internal/defaults).
type Config struct {
	Store    store.Store
	Upstream *sep2663.Client
	Logger   zerolog.Logger
	// Now is the clock (tests and the sunset check replace it). Default time.Now.
	Now func() time.Time

	MaxTTLMs    int64 // cap on the ttl told to legacy clients; default 24 h
	PollFloorMs int64 // lowest pollInterval told to legacy clients and used upstream; default 250
	PollCeilMs  int64 // highest; default 30 000
	// Heartbeat is the interval of keep-alives (SSE comments or progress notifications) on
	// long requests: sync-collapsed calls and blocking tasks/result. Default 10 s.
	Heartbeat    time.Duration
	ListPageSize int // tasks/list page size; default 50

	CreateTimeout time.Duration // upstream tools/call that may create a task; default 60 s
	StatusTimeout time.Duration // upstream tasks/get; default 10 s
	CancelTimeout time.Duration // upstream tasks/cancel and tasks/update; default 10 s
	// CallTimeout bounds a plain forwarded request (tools/list, resources/read, a
	// synchronous tools/call before any task appears). Default 10 min.
	CallTimeout time.Duration
	// InputTimeout bounds how long a stream waits for the answer to a relayed input request
	// before giving up (the task stays input_required). Default 5 min.
	InputTimeout time.Duration
	// PollFaultBudget is how many upstream tasks/get replies in a row may break the
	// protocol (or be about another task) before the task ends failed with an unknown
	// outcome; a sync-collapsed call gives up after as many failed polls. Default 5.
	PollFaultBudget int
	// NoUpstreamPush turns off subscriptions/listen towards the upstream: the task listen
	// (push.go; the bridge then learns of task changes by polling only) and the change
	// listen (changes.go; initialize then advertises no listChanged/subscribe and
	// resources/subscribe is -32601).
	NoUpstreamPush bool

	MaxBodyBytes int64 // see legacy.Options (the front door caps bodies first: DoorConfig)
	// MaxReplayBytes bounds the SSE events kept for resumption, all streams together, and
	// MaxSessionInfoBytes the clientInfo and capabilities stored per session (see
	// legacy.Options; zero: the legacy defaults).
	MaxReplayBytes      int64
	MaxSessionInfoBytes int

	// Gate is the work gate shared by every route of the process (kill switch, sunset,
	// drain, per-principal concurrency cap, upstream backpressure; admit.go). Nil: a gate
	// with an empty policy. Authentication and the request rate are the front door's
	// (DoorConfig): the bridge only reads the principal from the request context.
	Gate *gate.Gate
	// MaxResultBytes caps a stored result or error; a larger one fails the task with a
	// clear error. Default 8 MiB.
	MaxResultBytes int64
	// AuditRetention is how long the audit part of a record (owner, tool, arguments hash,
	// timestamps, outcome) outlives the ttl, after which the record is deleted. Default 30
	// days. PurgeInterval is how often the purge runs (default 1 min; negative disables).
	AuditRetention time.Duration
	PurgeInterval  time.Duration
	// SessionRetention is how long a legacy session last seen that long ago (closed or
	// idle) is kept; the purge then deletes it. The migration report looks no further back
	// (config report_window). Default 30 days.
	SessionRetention time.Duration

	// Metrics records requests, routes, polls and relays (nil: none). See internal/metrics.
	Metrics *metrics.Metrics

	// Fallback policy (fallback/, docs/fallback.md). HostAllow lists tools that may run as
	// bridge-hosted tasks whatever their annotations; HostDeny tools that never do (it wins);
	// NoHosting refuses every bridge-hosted task. ToolTaskSupport overrides the
	// execution.taskSupport advertised to 2025-11-25 clients per tool ("forbidden",
	// "optional", "required"), and the bridge keeps that word. HostWorkers is the size of the
	// pool running hosted calls (default 8; HostWorkers×16 may be queued or running).
	HostAllow       []string
	HostDeny        []string
	NoHosting       bool
	ToolTaskSupport map[string]string
	HostWorkers     int
	// OnDecision, when set, is called with every fallback decision (kind and reason slug).
	OnDecision func(kind, reason string)
	// AccessLog, when it returns false, suppresses the one info line per request (the
	// operator's access_log switch, changeable live). Nil: always logged.
	AccessLog func() bool
}

func (c *Config) setDefaults() {
	if c.Now == nil {
		c.Now = time.Now
	}
	d := defaults.Defaults
	defaults.Fill(&c.MaxTTLMs, d.MaxTTL.Milliseconds())
	defaults.Fill(&c.PollFloorMs, d.PollFloorMs)
	defaults.Fill(&c.PollCeilMs, d.PollCeilMs)
	defaults.Fill(&c.Heartbeat, d.Heartbeat)
	defaults.Fill(&c.CreateTimeout, d.CreateTimeout)
	defaults.Fill(&c.StatusTimeout, d.StatusTimeout)
	defaults.Fill(&c.CancelTimeout, d.CancelTimeout)
	defaults.Fill(&c.InputTimeout, d.InputTimeout)
	defaults.Fill(&c.CallTimeout, d.CallTimeout)
	defaults.Fill(&c.ListPageSize, d.ListPageSize)
	defaults.Fill(&c.PollFaultBudget, d.PollFaultBudget)
	defaults.Fill(&c.MaxResultBytes, d.MaxResultBytes)
	defaults.Fill(&c.AuditRetention, d.AuditRetention)
	defaults.Fill(&c.SessionRetention, d.SessionRetention)
	defaults.Fill(&c.HostWorkers, d.HostWorkers)
	if c.PurgeInterval == 0 {
		c.PurgeInterval = d.PurgeInterval
	}
}

// Bridge serves legacy clients in front of one SEP-2663 upstream.
//
// Concurrency: all exported methods are safe for concurrent use. mu guards closed (and
// makes starting a tracker atomic with it); inflight and asks are pending registries; disc
// is swapped atomically; the LRU is internally locked.
type Bridge struct {
	cfg  Config
	up   *sep2663.Client
	reg  *registry // the records: store, trackers, caches, compare-and-swap writes (registry.go)
	log  zerolog.Logger
	face *legacy.Server

	disc     atomic.Pointer[discovery]
	manifest atomic.Pointer[cachedManifest] // built from disc's result (route.go)

	mu     sync.Mutex
	closed bool

	inflight  pending.Registry[*inflightCall] // pending.Key(session, request id) → an in-flight call
	logLevels sync.Map                        // session id → its logging/setLevel level (setLevel)
	asks      pending.Registry[*ask]          // bridge-issued request id → waiting MRTR relay (input.go)

	metas *lru.Cache[string, sep2663.RequestMeta] // per-session upstream envelope
	gate  *gate.Gate                              // the work gate (admit.go)
	fb    *fallbackState                          // fallback policy, tools cache, hosted task pool (route.go, host.go)

	push    pushState   // the upstream listen loop (push.go)
	changes changeState // the change-notification relay and resource subscriptions (changes.go)

	ctx    context.Context // lives until Close; parent of pollers
	cancel context.CancelFunc
	wg     sync.WaitGroup // pollers
}

type discovery struct {
	res       *sep2663.DiscoverResult
	fetchedAt time.Time
}

// New builds a Bridge. Call Start before serving, Close when done.
func New(cfg Config) (*Bridge, error) {
	if cfg.Store == nil || cfg.Upstream == nil {
		return nil, errors.New("bridge: Store and Upstream are required")
	}
	cfg.setDefaults()
	metas, err := lru.New[string, sep2663.RequestMeta](16384)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	b := &Bridge{
		cfg: cfg, up: cfg.Upstream, log: cfg.Logger,
		metas: metas,
		gate:  cfg.Gate,
		fb:    newFallbackState(cfg),
		ctx:   ctx, cancel: cancel,
	}
	b.reg = newRegistry(cfg, &b.log)
	if b.gate == nil {
		b.gate = gate.New(gate.Config{Now: cfg.Now, Metrics: cfg.Metrics})
	}
	var kept legacy.EventStore
	if b.reg.peers != nil {
		kept = keptEvents{b.reg.peers.sh} // replicas: resumes reach any of them (events.go)
	}
	b.face = legacy.NewServer(legacy.Options{
		Logger:       &b.log,
		Store:        sessions.New(cfg.Store),
		Handler:      relatedtask.Guard(b, b.ownsTask), // the related-task screen (docs/security.md)
		MaxBodyBytes: cfg.MaxBodyBytes,
		Now:          cfg.Now,

		MaxReplayBytes:      cfg.MaxReplayBytes,
		MaxSessionInfoBytes: cfg.MaxSessionInfoBytes,
		Events:              kept,
		OnPushChannel:       b.changesKick,
	})
	return b, nil
}

// Face is the route's 2025-11-25 face (HTTP, WebSocket, stdio; its Push reaches all of
// them). Only the front door serves it (bridge.NewForward, bridge.NewDoor).
func (b *Bridge) Face() *legacy.Server { return b.face }

// Upstream is the 2026-07-28 upstream the route translates for; the era router puts the
// modern pass-through in front of the same one.
func (b *Bridge) Upstream() *sep2663.Client { return b.up }

// Gate is the work gate the route asks (Config.Gate, or its own).
func (b *Bridge) Gate() *gate.Gate { return b.gate }

// Start discovers the upstream (a failure is logged, not fatal: discovery is retried on
// demand) and resumes every non-terminal task found in the store.
func (b *Bridge) Start(ctx context.Context) error {
	if _, err := b.discovery(ctx); err != nil {
		b.log.Warn().Err(err).Msg("upstream discovery failed; will retry on demand")
	}
	if err := b.resume(ctx); err != nil {
		return err
	}
	return b.startBackground(ctx)
}

// Close stops the pollers and the legacy face, and waits for them. Safe to call twice.
func (b *Bridge) Close(ctx context.Context) error {
	b.mu.Lock()
	already := b.closed
	b.closed = true
	b.mu.Unlock()
	if already {
		return nil
	}
	err := b.face.Close(ctx)
	b.cancel()
	done := make(chan struct{})
	go func() { b.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		return ctx.Err()
	}
	return err
}

// discovery returns the upstream's discover result, refreshed when its ttlMs ran out
// (at least every 30 s when the upstream gives no lifetime).
func (b *Bridge) discovery(ctx context.Context) (*sep2663.DiscoverResult, error) {
	if d := b.disc.Load(); d != nil {
		ttl := time.Duration(d.res.TTLMs) * time.Millisecond
		if ttl < 30*time.Second {
			ttl = 30 * time.Second
		}
		if b.cfg.Now().Sub(d.fetchedAt) < ttl {
			return d.res, nil
		}
	}
	res, err := b.up.Discover(ctx)
	if err != nil {
		if d := b.disc.Load(); d != nil {
			return d.res, nil // stale beats nothing; the next call retries
		}
		return nil, err
	}
	b.disc.Store(&discovery{res: res, fetchedAt: b.cfg.Now()})
	return res, nil
}

// upstreamHasTasks reports whether the upstream advertised the SEP-2663 extension.
func (b *Bridge) upstreamHasTasks(ctx context.Context) bool {
	d, err := b.discovery(ctx)
	return err == nil && d.Capabilities.HasExtension(sep2663.ExtensionTasks)
}

// owner is the identity a task is bound to: the principal, or the session without auth.
func owner(sess *legacy.Session) string { return sessions.Owner(sess) }

// meta builds the per-request 2026-07-28 envelope for a legacy session: its capabilities
// translated (tasks extension always declared, so task-only tools work for every client)
// and its clientInfo.
func (b *Bridge) meta(sess *legacy.Session) sep2663.RequestMeta {
	m := b.baseMeta(sess)
	if lv, ok := b.logLevels.Load(sess.ID); ok {
		m.LogLevel = lv.(string)
	}
	return m
}

// logLevels are the LoggingLevel names, least severe first.
var logLevels = []string{"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"}

// setLevel serves logging/setLevel: 2026-07-28 removed it (the level travels in each
// request's _meta), so the session's level is kept here and sent as logLevel on every later
// upstream request of the session, whose notifications/message then reach the client on
// that request's stream (issue 16 item 8). The level lives in this process: a session
// served by another replica sends none until it sets it there.
func (b *Bridge) setLevel(sess *legacy.Session, req *jsonrpc.Message) (json.RawMessage, error) {
	lv := gjson.GetBytes(req.Params, "level")
	if lv.Type != gjson.String || !slices.Contains(logLevels, lv.Str) {
		return nil, jsonrpc.ErrInvalidParams.Wrapf("level must be one of %s", strings.Join(logLevels, ", "))
	}
	b.logLevels.Store(sess.ID, lv.Str)
	return json.RawMessage(`{}`), nil
}

// baseMeta is the session's envelope without the log level, cached per session.
func (b *Bridge) baseMeta(sess *legacy.Session) sep2663.RequestMeta {
	if m, ok := b.metas.Get(sess.ID); ok {
		return m
	}
	caps, err := mapping.ClientCapsToModern(sess.ClientCapabilities, true)
	if err != nil {
		caps = json.RawMessage(`{"extensions":{"` + sep2663.ExtensionTasks + `":{}}}`)
	}
	m := sep2663.RequestMeta{ClientCapabilities: caps}
	if name := gjson.GetBytes(sess.ClientInfo, "name").String(); name != "" {
		m.ClientInfo = &sep2663.Implementation{Name: name, Version: gjson.GetBytes(sess.ClientInfo, "version").String()}
	}
	if sess.ID != "" {
		b.metas.Add(sess.ID, m) // a session's capabilities never change
	}
	return m
}

// Initialize implements legacy.Handler: the bridge answers initialize itself.
func (b *Bridge) Initialize(ctx context.Context, sess *legacy.Session, params json.RawMessage) (json.RawMessage, error) {
	d, err := b.discovery(ctx)
	if err != nil {
		return nil, errmap.FromModernForLegacy(err)
	}
	b.cfg.Metrics.LegacyClient(gjson.GetBytes(sess.ClientInfo, "name").String(),
		gjson.GetBytes(sess.ClientInfo, "version").String(), sess.ProtocolVersion)
	withTasks := sess.ProtocolVersion == legacy.ProtocolVersion
	toLegacy := mapping.ServerCapsToLegacy
	if b.changesEnabled() {
		toLegacy = mapping.ServerCapsToLegacyRelayed // changes.go relays what the upstream offers
	}
	caps, err := toLegacy(d.Capabilities, withTasks)
	if err != nil {
		return nil, err
	}
	info, ok := d.ServerInfo()
	if !ok {
		info = sep2663.Implementation{Name: "taskbridge", Version: "dev"}
	}
	return json.Marshal(legacy.InitializeResult{
		ProtocolVersion: sess.ProtocolVersion,
		Capabilities:    caps,
		ServerInfo:      legacy.Implementation{Name: info.Name, Version: info.Version, Title: info.Title},
		Instructions:    d.Instructions,
	})
}

// Serve implements legacy.Handler: one dispatch table for every request method.
func (b *Bridge) Serve(ctx context.Context, sess *legacy.Session, req *jsonrpc.Message, out legacy.Stream) (res json.RawMessage, err error) {
	ctx, done := b.observe(ctx, sess, req) // one log line and the request metrics
	defer func() { done(res, err) }()
	if strings.HasPrefix(req.Method, "tasks/") && sess.ProtocolVersion != legacy.ProtocolVersion {
		// An older session got no tasks capability in initialize: tasks/* do not exist
		// for it (issue 16 item 15), and nothing of it may reach a record or the upstream.
		return nil, jsonrpc.ErrMethodNotFound.Wrapf("%s: tasks need protocol version %s", req.Method, legacy.ProtocolVersion)
	}
	switch req.Method {
	case "tools/call":
		return b.toolsCall(ctx, sess, req, out)
	case "tools/list":
		return b.toolsList(ctx, sess, req, out)
	case "tasks/get":
		return b.tasksGet(ctx, sess, req)
	case "tasks/result":
		return b.tasksResult(ctx, sess, req, out)
	case "tasks/list":
		return b.tasksList(ctx, sess, req)
	case "tasks/cancel":
		return b.tasksCancel(ctx, sess, req)
	case "logging/setLevel":
		return b.setLevel(sess, req)
	case "resources/subscribe", "resources/unsubscribe":
		return b.resourcesSubscribe(ctx, sess, req)
	default:
		return b.forward(ctx, sess, req, out)
	}
}

// Notify implements legacy.Handler.
func (b *Bridge) Notify(ctx context.Context, sess *legacy.Session, msg *jsonrpc.Message) {
	switch msg.Method {
	case "notifications/cancelled":
		// Cancels a plain in-flight request (a sync-collapsed call becomes an upstream
		// tasks/cancel). Never a task: 2025-11-25 forbids cancelling tasks this way.
		id := gjson.GetBytes(msg.Params, "requestId").Raw
		if c, ok := b.inflight.Get(pending.Key(sess.ID, id)); ok {
			c.cancel()
		}
	case "notifications/initialized", "notifications/roots/list_changed":
		// Session plumbing of 2025-11-25 (the second was removed in 2026-07-28): nothing
		// to tell a stateless upstream.
	default:
		// Anything else (e.g. an experimental notification) goes upstream as is.
		nctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), b.cfg.StatusTimeout)
		defer cancel()
		if err := b.up.Notify(nctx, msg.Method, msg.Params, b.meta(sess)); err != nil {
			b.log.Debug().Err(err).Str("method", redact.Field(msg.Method)).Msg("notification not forwarded")
		}
	}
}

// Respond implements legacy.Handler: a client's answer to a relayed input request.
func (b *Bridge) Respond(ctx context.Context, sess *legacy.Session, msg *jsonrpc.Message) {
	b.answerInput(ctx, sess, msg)
}

// Closed implements legacy.Handler.
func (b *Bridge) Closed(ctx context.Context, sess *legacy.Session) {
	b.logLevels.Delete(sess.ID)
	b.forgetSubscriptions(sess.ID)
}

// inflightCall is a plain in-flight request that notifications/cancelled may cancel; cancel
// ends its context with the cause legacy.ErrCancelled.
type inflightCall struct{ cancel func() }

// trackInflight registers cancel for (session, request id) until the returned func runs.
func (b *Bridge) trackInflight(sess *legacy.Session, id jsonrpc.ID, cancel func()) func() {
	return b.inflight.Put(pending.Key(sess.ID, id.Raw()), &inflightCall{cancel: cancel},
		func(a, b *inflightCall) bool { return a == b })
}

// forward passes a request through to the upstream with the 2026-07-28 envelope, relays
// the notifications on its stream, and strips the 2026-only result fields. A slow upstream
// gets keep-alives on the client's stream and, past CallTimeout, a clear error.
func (b *Bridge) forward(ctx context.Context, sess *legacy.Session, req *jsonrpc.Message, out legacy.Stream) (json.RawMessage, error) {
	release, err := b.upstreamSlot()
	if err != nil {
		return nil, err
	}
	defer release()
	ctx, cancel := context.WithTimeout(ctx, b.cfg.CallTimeout)
	defer cancel()
	defer b.keepAlive(out)()
	res, err := b.up.Call(ctx, req.Method, req.Params, b.meta(sess), relay(out))
	if err != nil {
		return nil, errmap.FromModernForLegacy(err)
	}
	return mapping.StripModern(res)
}

// keepAlive sends an SSE keep-alive on out every heartbeat until the returned stop runs,
// so that waiting on the upstream is never a silent long request. A re-arming timer, not a
// goroutine: most calls end long before the first beat.
func (b *Bridge) keepAlive(out legacy.Stream) (stop func()) {
	var (
		mu      sync.Mutex
		stopped bool
		t       *time.Timer
	)
	beat := func() {}
	beat = func() {
		mu.Lock()
		defer mu.Unlock()
		if stopped {
			return
		}
		_ = out.KeepAlive()
		t.Reset(b.cfg.Heartbeat)
	}
	mu.Lock()
	t = time.AfterFunc(b.cfg.Heartbeat, beat)
	mu.Unlock()
	return func() {
		mu.Lock()
		stopped = true
		t.Stop()
		mu.Unlock()
	}
}

// relay sends upstream notifications (progress, log messages) on the client's stream.
func relay(out legacy.Stream) func(*jsonrpc.Message) {
	return func(m *jsonrpc.Message) {
		if m.IsNotification() {
			_ = out.Send(m)
		}
	}
}

// toolsList forwards tools/list and adds execution.taskSupport to each tool: "optional"
// when a task is possible for this client (the upstream has the extension), else
// "forbidden".
func (b *Bridge) toolsList(ctx context.Context, sess *legacy.Session, req *jsonrpc.Message, out legacy.Stream) (json.RawMessage, error) {
	release, err := b.upstreamSlot()
	if err != nil {
		return nil, err
	}
	res, err := b.up.Call(ctx, req.Method, req.Params, b.meta(sess), relay(out))
	release()
	if err != nil {
		return nil, errmap.FromModernForLegacy(err)
	}
	return b.advertiseTools(ctx, sess, req, res) // taskSupport per tool: the fallback decision for this client
}
