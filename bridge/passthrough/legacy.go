package passthrough

import (
	"context"
	"encoding/json"
	"errors"
	"github.com/rs/zerolog"
	"strings"
	"sync"
	"time"

	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/bridge/internal/errmap"
	"github.com/taskbridge/taskbridge/bridge/internal/gate"
	"github.com/taskbridge/taskbridge/bridge/internal/ids"
	"github.com/taskbridge/taskbridge/bridge/internal/pending"
	"github.com/taskbridge/taskbridge/bridge/internal/relatedtask"
	"github.com/taskbridge/taskbridge/bridge/internal/sessions"
	"github.com/taskbridge/taskbridge/internal/defaults"
	"github.com/taskbridge/taskbridge/internal/jsonrpc"
	"github.com/taskbridge/taskbridge/internal/metrics"
	"github.com/taskbridge/taskbridge/legacy"
	"github.com/taskbridge/taskbridge/store"
)

// LegacyConfig configures a Legacy pass-through. Zero values take the defaults
// (internal/defaults).
type LegacyConfig struct {
	// Upstream is the legacy (2025-11-25) server. Required.
	Upstream *legacy.Client
	// Store holds the sessions of the face. Required.
	Store  store.Store
	Logger zerolog.Logger
	Now    func() time.Time

	StatusTimeout time.Duration // an upstream tasks/get of a synthesized tasks/list
	InputTimeout  time.Duration // how long a relayed server request waits for the client

	// MaxBodyBytes, MaxReplayBytes and MaxSessionInfoBytes bound the face (legacy.Options;
	// the front door caps bodies first).
	MaxBodyBytes        int64
	MaxReplayBytes      int64
	MaxSessionInfoBytes int
	// SessionRetention: sessions last seen longer ago are deleted every PurgeInterval
	// (purge.go); a negative interval disables the purge.
	SessionRetention time.Duration
	PurgeInterval    time.Duration

	// Gate is the work gate shared by every route of the process. Nil: an empty policy.
	Gate *gate.Gate
	// Metrics counts the standalone GET streams opened upstream (getstream.go). Nil: none.
	Metrics *metrics.Metrics
}

func (c *LegacyConfig) setDefaults() {
	if c.Now == nil {
		c.Now = time.Now
	}
	d := defaults.Defaults
	defaults.Fill(&c.StatusTimeout, d.StatusTimeout)
	defaults.Fill(&c.InputTimeout, d.InputTimeout)
	defaults.Fill(&c.MaxBodyBytes, d.MaxBodyBytes)
	defaults.Fill(&c.SessionRetention, d.SessionRetention)
	if c.PurgeInterval == 0 {
		c.PurgeInterval = d.PurgeInterval
	}
}

// Legacy serves legacy clients in front of a legacy upstream (same era): every client
// session gets its own upstream session, opened with the client's own initialize params,
// and every request — tasks/* included — is forwarded over it with its params and result
// bytes unchanged. Server→client requests on a response stream are relayed to the client
// on its own response stream under a bridge-minted id, and the client's answer is POSTed
// back upstream.
//
// Concurrency: mu guards sessions and logs; inflight and asks are pending registries; the
// purge loop is owned by wg and ends with Close.
type Legacy struct {
	cfg    LegacyConfig
	up     *legacy.Client
	log    zerolog.Logger
	gate   *gate.Gate
	face   *legacy.Server
	ledger *gate.Ledger // unfinished tasks per owner, for the gate's cap (legacylist.go)

	inflight pending.Registry[context.CancelFunc]    // pending.Key(session, request id) → cancel
	asks     pending.Registry[chan *jsonrpc.Message] // bridge-issued request id → waiting relay

	mu       sync.Mutex
	sessions map[string]*passSession // client session id → upstream session
	logs     map[string]*passTaskLog // client session id → recorded tasks (legacylist.go)
	owned    map[string]*ownedSet    // client session id → the tasks it owns (owned.go)

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

type passSession struct {
	ready chan struct{}
	s     *legacy.UpstreamSession
	err   error
	// adopted: s was rebuilt from the id stored with the client session (after a restart);
	// when the upstream no longer knows it, the client's session ends too (adoptUpstream).
	adopted bool
}

// NewLegacy builds the legacy pass-through. Call Start before serving, Close when done.
func NewLegacy(cfg LegacyConfig) (*Legacy, error) {
	if cfg.Upstream == nil || cfg.Store == nil {
		return nil, errors.New("passthrough: LegacyConfig needs Upstream and Store")
	}
	cfg.setDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	p := &Legacy{cfg: cfg, up: cfg.Upstream, log: cfg.Logger, gate: cfg.Gate,
		sessions: map[string]*passSession{}, logs: map[string]*passTaskLog{}, owned: map[string]*ownedSet{}, ctx: ctx, cancel: cancel}
	if p.gate == nil {
		p.gate = gate.New(gate.Config{Now: cfg.Now})
	}
	p.ledger = gate.NewLedger(p.gate)
	p.face = legacy.NewServer(legacy.Options{
		Store: sessions.New(cfg.Store), Handler: relatedtask.Guard(p, p.ownsTask), MaxBodyBytes: cfg.MaxBodyBytes, Now: cfg.Now,
		MaxReplayBytes: cfg.MaxReplayBytes, MaxSessionInfoBytes: cfg.MaxSessionInfoBytes,
	})
	return p, nil
}

// Start starts the session purge (purge.go).
func (p *Legacy) Start() { p.startPurge() }

// Face is the route's 2025-11-25 face (HTTP, WebSocket, stdio). Only the front door serves
// it (bridge.NewReverse, bridge.NewDoor).
func (p *Legacy) Face() *legacy.Server { return p.face }

// Close closes the face and stops the purge. The upstream sessions are released, not
// ended: the client sessions live on in the store, and a restarted bridge (or another
// replica) adopts their upstream sessions, where their tasks are (upstream).
func (p *Legacy) Close(ctx context.Context) error {
	err := p.face.Close(ctx)
	p.cancel()
	p.wg.Wait()
	p.mu.Lock()
	all := p.sessions
	p.sessions = map[string]*passSession{}
	p.mu.Unlock()
	for _, ps := range all {
		select {
		case <-ps.ready:
			if ps.s != nil {
				ps.s.Release()
			}
		default:
		}
	}
	return err
}

// upstream returns the client session's upstream session: the one this process holds, else
// the one stored with the client session, adopted (after a restart: a 2025-11-25 upstream
// binds its tasks to its session, so a new one would lose them), else a new one (first use;
// the upstream dropped one this process opened). An adopted session the upstream no longer
// knows ends the client's session: legacy.ErrSessionEnded, as for an unknown session.
func (p *Legacy) upstream(ctx context.Context, sess *legacy.Session) (*legacy.UpstreamSession, error) {
	for range 2 {
		p.mu.Lock()
		ps := p.sessions[sess.ID]
		if ps == nil {
			ps = &passSession{ready: make(chan struct{})}
			p.sessions[sess.ID] = ps
			p.mu.Unlock()
			if sess.Upstream != "" {
				ps.s, ps.adopted = p.up.Adopt(sess.Upstream, sess.ProtocolVersion), true
				close(ps.ready)
				p.holdGetStream(sess, ps.s)
				return ps.s, nil
			}
			var info legacy.Implementation
			json.Unmarshal(sess.ClientInfo, &info)
			ps.s, ps.err = p.up.ConnectAs(context.WithoutCancel(ctx), legacy.InitializeParams{
				ProtocolVersion: sess.ProtocolVersion, Capabilities: sess.ClientCapabilities, ClientInfo: info,
			})
			close(ps.ready)
			if ps.err != nil {
				p.forget(sess.ID, ps)
			} else {
				p.holdGetStream(sess, ps.s) // getstream.go
			}
			return ps.s, ps.err
		}
		p.mu.Unlock()
		select {
		case <-ps.ready:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if ps.err == nil && !ps.s.Gone() {
			return ps.s, nil
		}
		p.forget(sess.ID, ps)
		if ps.adopted {
			return nil, p.endSession(ctx, sess)
		}
	}
	return nil, jsonrpc.NewError(jsonrpc.CodeUpstream, "upstream session unavailable")
}

// endSession ends a client session whose adopted upstream session is gone (with its
// tasks): the face closes it, so the client's next request gets 404 -32001 and it
// re-initializes; this request gets the same -32001.
func (p *Legacy) endSession(ctx context.Context, sess *legacy.Session) error {
	if err := p.face.EndSession(context.WithoutCancel(ctx), sess.ID); err != nil {
		p.log.Warn().Err(err).Str("session", sess.ID).Msg("passthrough: ending a session whose upstream session is gone failed")
	}
	p.mu.Lock()
	delete(p.logs, sess.ID)
	delete(p.owned, sess.ID)
	p.mu.Unlock()
	p.ledger.EndGroup(sess.ID)
	return legacy.ErrSessionEnded
}

func (p *Legacy) forget(id string, ps *passSession) {
	p.mu.Lock()
	if p.sessions[id] == ps {
		delete(p.sessions, id)
	}
	p.mu.Unlock()
}

// Initialize implements legacy.Handler: the upstream's own initialize result, opened
// with the client's params, is the answer.
func (p *Legacy) Initialize(ctx context.Context, sess *legacy.Session, params json.RawMessage) (json.RawMessage, error) {
	s, err := p.upstream(ctx, sess)
	if err != nil {
		return nil, errmap.FromLegacy(err)
	}
	sess.Upstream = s.ID() // stored with the client session (the face creates it next)
	_, raw := s.InitializeResult()
	return initializeWithList(raw), nil
}

// Serve implements legacy.Handler: forward with the bytes unchanged.
func (p *Legacy) Serve(ctx context.Context, sess *legacy.Session, req *jsonrpc.Message, out legacy.Stream) (json.RawMessage, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer p.inflight.Put(pending.Key(sess.ID, req.ID.Raw()), cancel, sameCancel)()
	release, err := p.admit(ctx, sess, req)
	if err != nil {
		return nil, err
	}
	defer release()
	for attempt := 0; ; attempt++ {
		s, err := p.upstream(ctx, sess)
		if err == legacy.ErrSessionEnded {
			return nil, err
		}
		if err != nil {
			return nil, errmap.FromLegacy(err)
		}
		if req.Method == "tasks/list" && !upstreamLists(s) && upstreamRunsTasks(initRaw(s)) {
			return p.listTasks(ctx, sess.ID, s, req.Params)
		}
		p.redeliver(ctx, sess, s, req, out) // legacyinput.go: a question whose stream was cut
		res, err := s.Call(ctx, req.Method, req.Params, legacy.CallOptions{
			OnRequest: p.keepQuestions(sess, s, onStream(out), p.relayRequest(sess.ID, out)),
			OnNotify: func(m *jsonrpc.Message) {
				p.rememberRelated(sess.ID, m)
				p.observeStatus(sess.ID, m)
				p.countStatus(sess.ID, m)
				_ = out.Send(m)
			},
		})
		if err == nil {
			p.rememberCreated(sess.ID, req, res)
			p.observe(sess.ID, s, req, res)
			p.questionsSettled(ctx, sess, req, res) // legacyinput.go
			p.count(sess, req, res)
		}
		if err != nil && errors.Is(err, legacy.ErrSessionGone) && attempt == 0 {
			continue // never reached a handler; the new session is a fresh start
		}
		if err != nil {
			var je *jsonrpc.Error
			if errors.As(err, &je) {
				return nil, je
			}
			return nil, errmap.FromLegacy(err)
		}
		return res, nil
	}
}

// admit asks the work gate about one forwarded request: a task-augmented call is a new
// 2025-11-25 task (kill switch, sunset, drain, the owner's unfinished tasks, a slot);
// tasks/* reach existing tasks and are never refused; anything else takes an upstream slot.
func (p *Legacy) admit(ctx context.Context, sess *legacy.Session, req *jsonrpc.Message) (release func(), err error) {
	switch {
	case gjson.GetBytes(req.Params, "task").Exists():
		own := sessions.Owner(sess)
		return p.gate.StartTask(ctx, gate.Task{Era: gate.Legacy, Owner: own,
			Active: func(context.Context) (int, error) { return p.ledger.Active(own), nil }})
	case strings.HasPrefix(req.Method, "tasks/"):
		return func() {}, nil
	}
	return p.gate.Acquire()
}

// relayRequest sends an upstream server request to the client on out under a fresh id
// and waits for the client's answer (it arrives through Respond, on any POST).
func (p *Legacy) relayRequest(sessID string, out legacy.Stream) legacy.RequestHandler {
	return func(ctx context.Context, m *jsonrpc.Message) (json.RawMessage, error) {
		p.rememberRelated(sessID, m) // the client's answer may carry this task's related-task
		id := ids.NewRequestID()
		ch := make(chan *jsonrpc.Message, 1)
		defer p.asks.Put(id, ch, sameChan)()
		fwd := &jsonrpc.Message{JSONRPC: jsonrpc.Version, ID: jsonrpc.StringID(id), Method: m.Method, Params: m.Params}
		if err := out.Send(fwd); err != nil {
			return nil, jsonrpc.NewError(jsonrpc.CodeInternalError, "the client's stream is closed")
		}
		t := time.NewTimer(p.cfg.InputTimeout)
		defer t.Stop()
		select {
		case resp := <-ch:
			if resp.Error != nil {
				return nil, resp.Error
			}
			return resp.Result, nil
		case <-t.C:
			return nil, jsonrpc.NewError(jsonrpc.CodeInternalError, "the client did not answer in time")
		case <-ctx.Done():
			return nil, jsonrpc.NewError(jsonrpc.CodeInternalError, "request abandoned")
		}
	}
}

// Notify implements legacy.Handler: notifications/cancelled cancels the in-flight
// forward (which tells the upstream under its own id); initialized was sent by the
// bridge already; anything else is forwarded.
func (p *Legacy) Notify(ctx context.Context, sess *legacy.Session, msg *jsonrpc.Message) {
	switch msg.Method {
	case "notifications/initialized":
	case "notifications/cancelled":
		if cancel, ok := p.inflight.Get(pending.Key(sess.ID, gjson.GetBytes(msg.Params, "requestId").Raw)); ok {
			cancel()
		}
	default:
		if s, err := p.upstream(ctx, sess); err == nil {
			_ = s.Notify(ctx, msg.Method, msg.Params)
		}
	}
}

// Respond implements legacy.Handler: the client's answer to a relayed request.
func (p *Legacy) Respond(ctx context.Context, sess *legacy.Session, msg *jsonrpc.Message) {
	if ch, ok := p.asks.Get(msg.ID.String()); ok {
		select {
		case ch <- msg:
		default: // answered twice: the first answer wins
		}
		return
	}
	p.answerQuestion(ctx, sess, msg) // legacyinput.go: a stored question
}

// Closed implements legacy.Handler: the client ended its session, so does the bridge.
func (p *Legacy) Closed(ctx context.Context, sess *legacy.Session) {
	p.mu.Lock()
	ps := p.sessions[sess.ID]
	delete(p.sessions, sess.ID)
	delete(p.logs, sess.ID)
	delete(p.owned, sess.ID)
	p.mu.Unlock()
	p.ledger.EndGroup(sess.ID) // its upstream session, and with it its tasks, end now
	if ps != nil {
		<-ps.ready
		if ps.s != nil {
			ps.s.Close(ctx)
		}
	}
}

// sameChan and sameCancel tell whether a registry entry is still the one a caller put.
func sameChan(a, b chan *jsonrpc.Message) bool { return a == b }

// Funcs cannot be compared: a request's end removes whatever its key holds.
func sameCancel(a, b context.CancelFunc) bool { return true }
