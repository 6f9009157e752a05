package forward

import (
	"context"
	"encoding/json"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/bridge/internal/errmap"
	"github.com/taskbridge/taskbridge/fallback"
	"github.com/taskbridge/taskbridge/internal/jsonrpc"
	"github.com/taskbridge/taskbridge/internal/redact"
	"github.com/taskbridge/taskbridge/legacy"
	"github.com/taskbridge/taskbridge/mapping"
	"github.com/taskbridge/taskbridge/sep2663"
)

// toolsTTL is how long a fetched upstream tools/list is trusted for hosting decisions.
const toolsTTL = 30 * time.Second

// maxToolPages bounds the pages read from an upstream tools/list.
const maxToolPages = 100

// fallbackState is the bridge's use of fallback/: the policy, the upstream's tools (for
// annotations and modes), and the bridge-hosted task pool (host.go).
//
// Concurrency: policy is swapped atomically (a reload: SetHostingPolicy); tools is swapped
// atomically and toolsMu lets one fetch run at a time; mu guards running; slots and jobs
// are channels.
type fallbackState struct {
	policy atomic.Pointer[fallback.Policy]

	tools   atomic.Pointer[toolsSnapshot]
	toolsMu sync.Mutex

	slots     chan struct{} // one token per queued or running hosted call (bounds both)
	jobs      chan *hostJob // buffered like slots, so a reserved send never blocks
	workers   int           // pool size
	startOnce sync.Once     // workers start with the first hosted task
	started   atomic.Bool   // set once the workers run
	mu        sync.Mutex    // guards running
	running   map[string]*hostRun
}

type toolsSnapshot struct {
	byName    map[string]fallback.Tool
	params    map[string]toolParams // x-mcp-header annotations by tool (params.go)
	fetchedAt time.Time
}

func newFallbackState(cfg Config) *fallbackState {
	ts := make(map[string]fallback.Mode, len(cfg.ToolTaskSupport))
	for name, mode := range cfg.ToolTaskSupport {
		ts[name] = fallback.ParseMode(mode)
	}
	workers := cfg.HostWorkers // set by setDefaults
	queue := workers * hostQueuePerWorker
	fb := &fallbackState{
		slots:   make(chan struct{}, queue),
		jobs:    make(chan *hostJob, queue),
		workers: workers,
		running: map[string]*hostRun{},
	}
	fb.policy.Store(&fallback.Policy{HostAllow: cfg.HostAllow, HostDeny: cfg.HostDeny, NoHosting: cfg.NoHosting, TaskSupport: ts})
	return fb
}

// upstreamManifest is the upstream's manifest from its (cached, ttl-refreshed) discover.
// Only 2026-07-28 upstreams reach the forward bridge: serve detects a legacy upstream at
// start (cmd/taskbridge/era.go) and runs the reverse route, which passes legacy clients
// through (bridge/passthrough/legacy.go).
func (b *Bridge) upstreamManifest(ctx context.Context) (fallback.UpstreamManifest, error) {
	d, err := b.discovery(ctx)
	if err != nil {
		return fallback.UpstreamManifest{}, errmap.FromModernForLegacy(err)
	}
	if c := b.manifest.Load(); c != nil && c.from == d {
		return c.m, nil // the same discover result: the manifest is the same
	}
	m := fallback.FromDiscover(d)
	b.manifest.Store(&cachedManifest{from: d, m: m})
	return m, nil
}

// cachedManifest is the upstream manifest built from one discover result.
type cachedManifest struct {
	from *sep2663.DiscoverResult
	m    fallback.UpstreamManifest
}

// decide routes one legacy tools/call, logs the decision with its reason and counts it.
func (b *Bridge) decide(ctx context.Context, sess *legacy.Session, req *jsonrpc.Message) (fallback.Decision, error) {
	up, err := b.upstreamManifest(ctx)
	if err != nil {
		return fallback.Decision{}, err
	}
	client := fallback.LegacyClient(sess.ProtocolVersion)
	name := gjson.GetBytes(req.Params, "name").Str
	r := fallback.Request{Task: gjson.GetBytes(req.Params, "task").Exists()}
	// The tool's annotations matter only when the bridge may have to host it; other routes
	// need no upstream tools/list.
	hosting := client.Tasks && r.Task && !up.Tasks
	tool, ok := b.upstreamTool(ctx, sess, name, hosting)
	if !ok {
		tool = fallback.Tool{Name: name, Mode: fallback.ModeUnknown}
	}
	d := fallback.Decide(client, up, b.fb.policy.Load().Apply(tool), r)
	b.logDecision(ctx, sess, name, d)
	return d, nil
}

func (b *Bridge) logDecision(ctx context.Context, sess *legacy.Session, tool string, d fallback.Decision) {
	ev := b.log.Debug()
	if d.Kind == fallback.Host || d.Kind == fallback.Refuse {
		ev = b.log.Info()
	}
	ev.Str("session", sess.ID).Str("tool", redact.Field(tool)).Str("decision", string(d.Kind)).Str("reason", d.Reason).Msg("fallback decision")
	noteRoute(ctx, string(d.Kind)) // the request log line and the fallback metric
	if b.cfg.OnDecision != nil {
		b.cfg.OnDecision(string(d.Kind), d.Reason)
	}
}

// upstreamTool returns the upstream's tools/list entry for name from the cache. With fetch,
// a missing or stale cache is refreshed first (a fresh cache that lacks the tool is
// trusted: an unknown name does not make the bridge re-list the upstream).
func (b *Bridge) upstreamTool(ctx context.Context, sess *legacy.Session, name string, fetch bool) (fallback.Tool, bool) {
	snap := b.fb.tools.Load()
	if fetch && (snap == nil || time.Since(snap.fetchedAt) > toolsTTL) {
		snap = b.refreshTools(ctx, sess)
	}
	if snap == nil {
		return fallback.Tool{}, false
	}
	t, ok := snap.byName[name]
	return t, ok
}

// refreshTools lists the upstream's tools (every page) unless a snapshot younger than
// toolsTTL exists; one fetch at a time. On failure the previous snapshot (possibly nil)
// stays.
func (b *Bridge) refreshTools(ctx context.Context, sess *legacy.Session) *toolsSnapshot {
	return b.refreshToolsBefore(ctx, sess, time.Now().Add(-toolsTTL))
}

// refreshToolsBefore is refreshTools for a snapshot fetched before staleBefore.
func (b *Bridge) refreshToolsBefore(ctx context.Context, sess *legacy.Session, staleBefore time.Time) *toolsSnapshot {
	b.fb.toolsMu.Lock()
	defer b.fb.toolsMu.Unlock()
	if snap := b.fb.tools.Load(); snap != nil && !snap.fetchedAt.Before(staleBefore) {
		return snap // another caller just fetched it
	}
	ctx, cancel := context.WithTimeout(ctx, b.cfg.StatusTimeout)
	defer cancel()
	byName := map[string]fallback.Tool{}
	annotated := map[string]toolParams{}
	cursor := ""
	for range maxToolPages {
		params := json.RawMessage(`{}`)
		if cursor != "" {
			params = mustJSON(map[string]string{"cursor": cursor})
		}
		res, err := b.up.Call(ctx, "tools/list", params, b.meta(sess), nil)
		if err != nil {
			b.log.Warn().Err(err).Msg("upstream tools/list for the fallback policy failed")
			return b.fb.tools.Load()
		}
		for _, t := range fallback.ToolsFromList(fallback.EraModern, res) {
			byName[t.Name] = t
		}
		maps.Copy(annotated, paramsFromList(res))
		if cursor = gjson.GetBytes(res, "nextCursor").Str; cursor == "" {
			break
		}
	}
	snap := &toolsSnapshot{byName: byName, params: annotated, fetchedAt: time.Now()}
	b.fb.tools.Store(snap)
	return snap
}

// advertiseTools rewrites an upstream tools/list result for a legacy session: each tool's
// execution.taskSupport is what fallback decides for this client (TaskSupport). A complete
// list (first page, no nextCursor) also refreshes the tools cache.
func (b *Bridge) advertiseTools(ctx context.Context, sess *legacy.Session, req *jsonrpc.Message, res json.RawMessage) (json.RawMessage, error) {
	up, err := b.upstreamManifest(ctx)
	if err != nil {
		return nil, err
	}
	client := fallback.LegacyClient(sess.ProtocolVersion)
	tools := fallback.ToolsFromList(up.Era, res)
	annotated := paramsFromList(res)
	if !gjson.GetBytes(req.Params, "cursor").Exists() && !gjson.GetBytes(res, "nextCursor").Exists() {
		byName := make(map[string]fallback.Tool, len(tools))
		for _, t := range tools {
			byName[t.Name] = t
		}
		b.fb.tools.Store(&toolsSnapshot{byName: byName, params: annotated, fetchedAt: time.Now()})
	}
	// A tool with invalid x-mcp-header annotations is not offered (params.go).
	if drop := b.invalidTools(annotated); drop != nil {
		if res, err = mapping.WithoutTools(res, func(name string) bool { return drop[name] }); err != nil {
			return nil, err
		}
	}
	return mapping.ToolsListForLegacy(res, func(_ string, raw json.RawMessage) string {
		t := fallback.ToolFromJSON(up.Era, raw)
		return string(fallback.TaskSupport(client, up, b.fb.policy.Load().Apply(t)))
	})
}

// routeCall serves tools/call by the fallback decision.
func (b *Bridge) routeCall(ctx context.Context, sess *legacy.Session, req *jsonrpc.Message, out legacy.Stream) (json.RawMessage, error) {
	d, err := b.decide(ctx, sess, req)
	if err != nil {
		return nil, err
	}
	task := gjson.GetBytes(req.Params, "task")
	switch d.Kind {
	case fallback.Refuse:
		return nil, d.Err
	case fallback.Translate, fallback.Host:
		if !task.IsObject() {
			return nil, jsonrpc.ErrInvalidParams.Wrapf("params.task must be an object (TaskMetadata), e.g. {}")
		}
		if ttl := task.Get("ttl"); ttl.Exists() && (ttl.Type != gjson.Number || ttl.Num < 0 || ttl.Num != float64(int64(ttl.Num))) {
			return nil, jsonrpc.ErrInvalidParams.Wrapf("params.task.ttl must be a non-negative integer (milliseconds)")
		}
		if d.Kind == fallback.Host {
			return b.hostTask(ctx, sess, req, task)
		}
		return b.createTask(ctx, sess, req, out, task)
	}
	// Collapse or passthrough: a synchronous call; an upstream task is polled to its end.
	// A params.task from a client that cannot hold tasks is ignored, as 2025-11-25 says.
	return b.callSync(ctx, sess, req, out)
}
