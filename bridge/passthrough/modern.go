package passthrough

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/bridge/internal/errmap"
	"github.com/taskbridge/taskbridge/bridge/internal/gate"
	"github.com/taskbridge/taskbridge/internal/jsonrpc"
	"github.com/taskbridge/taskbridge/mapping"
	"github.com/taskbridge/taskbridge/sep2663"
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
// Unfinished tasks are counted in a Ledger from what passes through: a resultType "task"
// answer starts one, a terminal tasks/get or a tasks/cancel ends it, its ttlMs bounds it.
// Every tools/call and forwarded request holds an upstream slot (backpressure); task
// reads, updates, cancels and listens never do, so existing tasks stay reachable under load.
type Modern struct {
	up     *sep2663.Client
	gate   *gate.Gate
	ledger *gate.Ledger
	face   *sep2663.Server
}

// ModernConfig configures a Modern pass-through.
type ModernConfig struct {
	// Upstream is the 2026-07-28 server. Required.
	Upstream *sep2663.Client
	// Gate is the work gate shared by every route of the process. Nil: an empty policy.
	Gate *gate.Gate
	// MaxBodyBytes caps a body at the face (the front door caps it first).
	MaxBodyBytes int64
}

// NewModern builds the modern pass-through.
func NewModern(cfg ModernConfig) *Modern {
	m := &Modern{up: cfg.Upstream, gate: cfg.Gate}
	if m.gate == nil {
		m.gate = gate.New(gate.Config{})
	}
	m.ledger = gate.NewLedger(m.gate)
	m.face = sep2663.NewServer(sep2663.ServerOptions{Handler: m, MaxBodyBytes: cfg.MaxBodyBytes})
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
	case sep2663.MethodTasksGet, sep2663.MethodTasksUpdate, sep2663.MethodTasksCancel, sep2663.MethodSubscriptionsListen:
		res, err := m.up.Call(ctx, req.Method, req.Params, sep2663.RequestMeta{}, nil)
		if err != nil {
			return nil, errmap.FromModern(err)
		}
		m.observe(req, res)
		return res, nil
	}
	release, err := m.gate.Acquire()
	if err != nil {
		return nil, err
	}
	defer release()
	res, err := m.up.Call(ctx, req.Method, req.Params, sep2663.RequestMeta{}, nil)
	if err != nil {
		return nil, errmap.FromModern(err)
	}
	return res, nil
}

// toolsCall forwards a tools/call through the gate (see the type's comment).
func (m *Modern) toolsCall(ctx context.Context, req *sep2663.Request) (json.RawMessage, error) {
	var meta sep2663.RequestMeta
	var refused error
	if req.Tasks() {
		refused = m.gate.Admit(ctx, gate.Task{Era: gate.Modern, Owner: req.Principal,
			Active: func(context.Context) (int, error) { return m.ledger.Active(req.Principal), nil }})
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
	res, err := m.up.Call(ctx, req.Method, req.Params, meta, nil)
	release()
	if err != nil {
		if refused != nil && jsonrpc.AsError(err).Code == jsonrpc.CodeMissingCapability {
			return nil, refused // the tool runs only as a task, and no task may start
		}
		return nil, errmap.FromModern(err)
	}
	if r := gjson.ParseBytes(res); r.Get("resultType").Str == sep2663.ResultTask {
		ttl := time.Duration(r.Get("ttlMs").Int()) * time.Millisecond
		m.ledger.Started(req.Principal, "", r.Get("taskId").Str, ttl)
	}
	return res, nil
}

// observe ends a counted task that a tasks/get shows terminal or a tasks/cancel gave up.
func (m *Modern) observe(req *sep2663.Request, res json.RawMessage) {
	id := gjson.GetBytes(req.Params, "taskId").Str
	switch req.Method {
	case sep2663.MethodTasksCancel:
		m.ledger.Ended(id)
	case sep2663.MethodTasksGet:
		if sep2663.TaskStatus(gjson.GetBytes(res, "status").Str).IsTerminal() {
			m.ledger.Ended(id)
		}
	}
}
