package passthrough

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/bridge/internal/errmap"
	"github.com/taskbridge/taskbridge/bridge/internal/gate"
	"github.com/taskbridge/taskbridge/bridge/internal/sessions"
	"github.com/taskbridge/taskbridge/internal/jsonrpc"
	"github.com/taskbridge/taskbridge/mapping"
	"github.com/taskbridge/taskbridge/sep2663"
	"github.com/taskbridge/taskbridge/store"
)

// Modern serves 2026-07-28 clients in front of a 2026-07-28 upstream (same
// era, design §1): after the face validated the envelope, the request goes upstream with
// the client's own _meta and params, and the upstream's result comes back unchanged (task
// ids included: no translation happens on this route).
//
// The work gate applies as on every route, in the way this route can: the bridge keeps
// no task records here and the upstream alone decides whether a tools/call becomes a
// task. So "no new task may start" (kill switch, drain, the owner at max_concurrent_tasks)
// means: the tools/call is forwarded with the tasks extension removed from the declared
// capabilities, so the upstream must answer synchronously or refuse, exactly as a legacy
// client is told to call without params.task; when the upstream refuses because the tool
// runs only as a task (-32021), the client gets the gate's refusal, which says why.
// Every task created through this route gets a record in the store (modernrecords.go): the
// owner it is bound to (tasks/get, tasks/update and tasks/cancel of anyone else's, or of
// an unknown id, get the one not-found answer without reaching the upstream), and whether
// it is unfinished (counted by the store for the cap, on every replica).
// Every tools/call and forwarded request holds an upstream slot (backpressure); task
// reads, updates, cancels and listens never do, so existing tasks stay reachable under load.
type Modern struct {
	up     *sep2663.Client
	st     store.Store
	origin string // the upstream (redacted URL): the records' Origin
	log    zerolog.Logger
	now    func() time.Time
	gate   *gate.Gate
	face   *sep2663.Server
}

// ModernConfig configures a Modern pass-through.
type ModernConfig struct {
	// Upstream is the 2026-07-28 server. Required.
	Upstream *sep2663.Client
	// Store holds the route's task records (modernrecords.go). Required.
	Store  store.Store
	Logger zerolog.Logger
	Now    func() time.Time
	// Gate is the work gate shared by every route of the process. Nil: an empty policy.
	Gate *gate.Gate
	// MaxBodyBytes caps a body at the face (the front door caps it first).
	MaxBodyBytes int64
	// KeepAlive is the interval of keep-alive comments on a streamed reply (0: the face's
	// default).
	KeepAlive time.Duration
}

// NewModern builds the modern pass-through.
func NewModern(cfg ModernConfig) *Modern {
	m := &Modern{up: cfg.Upstream, st: cfg.Store, origin: cfg.Upstream.URL(), log: cfg.Logger, now: cfg.Now, gate: cfg.Gate}
	if m.gate == nil {
		m.gate = gate.New(gate.Config{})
	}
	if m.now == nil {
		m.now = time.Now
	}
	m.face = sep2663.NewServer(sep2663.ServerOptions{Handler: m, MaxBodyBytes: cfg.MaxBodyBytes, KeepAlive: cfg.KeepAlive})
	return m
}

// Handler is the route's 2026-07-28 face. Only the front door serves it (bridge.NewForward,
// bridge.NewDoor).
func (m *Modern) Handler() http.Handler { return m.face }

// Serve implements sep2663.Handler.
func (m *Modern) Serve(ctx context.Context, req *sep2663.Request) (json.RawMessage, error) {
	switch req.Method {
	case sep2663.MethodToolsCall:
		return m.toolsCall(ctx, req)
	case sep2663.MethodTasksGet, sep2663.MethodTasksUpdate, sep2663.MethodTasksCancel:
		rec, err := m.owned(ctx, sessions.ModernOwner(req.Principal), req)
		if err != nil {
			return nil, err
		}
		res, err := m.up.Call(ctx, req.Method, req.Params, clientMeta(req), relay(req))
		if err != nil {
			return nil, errmap.FromModern(err)
		}
		m.observe(ctx, req, rec, res)
		return res, nil
	case sep2663.MethodSubscriptionsListen:
		if err := m.listenable(ctx, sessions.ModernOwner(req.Principal), req); err != nil {
			return nil, err
		}
		res, err := m.up.Call(ctx, req.Method, req.Params, clientMeta(req), relay(req))
		if err != nil {
			return nil, errmap.FromModern(err)
		}
		return res, nil
	}
	release, err := m.gate.Acquire()
	if err != nil {
		return nil, err
	}
	defer release()
	res, err := m.up.Call(ctx, req.Method, req.Params, clientMeta(req), relay(req))
	if err != nil {
		return nil, errmap.FromModern(err)
	}
	return res, nil
}

// toolsCall forwards a tools/call through the gate (see the type's comment).
func (m *Modern) toolsCall(ctx context.Context, req *sep2663.Request) (json.RawMessage, error) {
	meta := clientMeta(req)
	var refused error
	owner := sessions.ModernOwner(req.Principal)
	if req.Tasks() {
		refused = m.gate.Admit(ctx, gate.Task{Era: gate.Modern, Owner: owner,
			Active: func(ctx context.Context) (int, error) { return m.active(ctx, owner) }})
		if refused != nil {
			caps, err := mapping.WithoutTasksExtension(req.CapabilitiesRaw)
			if err != nil {
				return nil, refused
			}
			meta.ClientCapabilities = caps
		}
	}
	release, err := m.gate.Acquire()
	if err != nil {
		return nil, err
	}
	res, err := m.up.Call(ctx, req.Method, req.Params, meta, relay(req))
	release()
	if err != nil {
		if refused != nil && jsonrpc.AsError(err).Code == jsonrpc.CodeMissingCapability {
			return nil, refused // the tool runs only as a task, and no task may start
		}
		return nil, errmap.FromModern(err)
	}
	if gjson.GetBytes(res, "resultType").Str == sep2663.ResultTask && gjson.GetBytes(res, "taskId").Type == gjson.String {
		if err := m.recordCreated(ctx, owner, gjson.GetBytes(req.Params, "name").Str, res); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// relay passes the notifications of an upstream SSE reply (the acknowledgement and
// notifications/tasks of a listen, progress of a long call) to the client's own stream as
// each arrives (sep2663.Stream: the client's reply turns into SSE with the first one). The
// client hanging up ends the request's ctx, which cancels the upstream request.
func relay(req *sep2663.Request) func(*jsonrpc.Message) {
	return func(msg *jsonrpc.Message) {
		if msg.IsNotification() {
			req.Stream().Send(msg)
		}
	}
}

// clientMeta is the RequestMeta of a forwarded request: the client's own _meta stays in
// params, and every Mcp-Param-* header the client sent goes upstream as it came (values
// byte for byte, every value of a repeated one). The spec requires an intermediary to
// forward the Mcp-Param-* headers it does not recognize, and the upstream validates them
// against the body (-32020). No other client header is forwarded: Authorization, cookies
// and the like are the door's, and the upstream gets the bridge's own credentials.
func clientMeta(req *sep2663.Request) sep2663.RequestMeta {
	var meta sep2663.RequestMeta
	if req.HTTP == nil {
		return meta
	}
	for k, vs := range req.HTTP.Header {
		if len(k) > len(sep2663.HeaderParamPrefix) && strings.EqualFold(k[:len(sep2663.HeaderParamPrefix)], sep2663.HeaderParamPrefix) {
			if meta.Header == nil {
				meta.Header = http.Header{}
			}
			meta.Header[k] = append([]string(nil), vs...)
		}
	}
	return meta
}
