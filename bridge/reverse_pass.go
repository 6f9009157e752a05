package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/bridge/internal/gate"
	"github.com/taskbridge/taskbridge/bridge/internal/sessions"
	"github.com/taskbridge/taskbridge/internal/jsonrpc"
	"github.com/taskbridge/taskbridge/legacy"
)

// passThrough serves legacy clients in front of a legacy upstream (same era): every
// client session gets its own upstream session, opened with the client's own initialize
// params, and every request — tasks/* included — is forwarded over it with its params and
// result bytes unchanged. Server→client requests on a response stream are relayed to the
// client on its own response stream under a bridge-minted id, and the client's answer is
// POSTed back upstream.
//
// Concurrency: mu guards sessions, inflight and asks.
type passThrough struct {
	r      *Reverse
	face   *legacy.Server
	ledger *gate.Ledger // unfinished tasks per owner, for the gate's cap (reverse_passlist.go)

	mu       sync.Mutex
	sessions map[string]*passSession          // client session id → upstream session
	inflight map[string]context.CancelFunc    // "session\x00requestID" → cancel
	asks     map[string]chan *jsonrpc.Message // bridge-issued request id → waiting relay
	logs     map[string]*passTaskLog          // client session id → recorded tasks (reverse_passlist.go)
}

type passSession struct {
	ready chan struct{}
	s     *legacy.UpstreamSession
	err   error
}

func newPassThrough(r *Reverse) *passThrough {
	p := &passThrough{r: r, sessions: map[string]*passSession{}, inflight: map[string]context.CancelFunc{},
		asks: map[string]chan *jsonrpc.Message{}, logs: map[string]*passTaskLog{}, ledger: gate.NewLedger(r.gate)}
	p.face = legacy.NewServer(legacy.Options{
		Store: sessions.New(r.cfg.Store), Handler: p, MaxBodyBytes: r.cfg.MaxBodyBytes, Now: r.cfg.Now,
		MaxReplayBytes: r.cfg.MaxReplayBytes, MaxSessionInfoBytes: r.cfg.MaxSessionInfoBytes,
	})
	return p
}

func (p *passThrough) close(ctx context.Context) error {
	err := p.face.Close(ctx)
	p.mu.Lock()
	all := p.sessions
	p.sessions = map[string]*passSession{}
	p.mu.Unlock()
	for _, ps := range all {
		select {
		case <-ps.ready:
			if ps.s != nil {
				ps.s.Close(ctx)
			}
		default:
		}
	}
	return err
}

// upstream returns the client session's upstream session, (re)opening it when there is
// none (first use, a bridge restart) or the upstream dropped it.
func (p *passThrough) upstream(ctx context.Context, sess *legacy.Session) (*legacy.UpstreamSession, error) {
	for range 2 {
		p.mu.Lock()
		ps := p.sessions[sess.ID]
		if ps == nil {
			ps = &passSession{ready: make(chan struct{})}
			p.sessions[sess.ID] = ps
			p.mu.Unlock()
			var info legacy.Implementation
			json.Unmarshal(sess.ClientInfo, &info)
			ps.s, ps.err = p.r.up.ConnectAs(context.WithoutCancel(ctx), legacy.InitializeParams{
				ProtocolVersion: sess.ProtocolVersion, Capabilities: sess.ClientCapabilities, ClientInfo: info,
			})
			close(ps.ready)
			if ps.err != nil {
				p.forget(sess.ID, ps)
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
	}
	return nil, jsonrpc.NewError(jsonrpc.CodeUpstream, "upstream session unavailable")
}

func (p *passThrough) forget(id string, ps *passSession) {
	p.mu.Lock()
	if p.sessions[id] == ps {
		delete(p.sessions, id)
	}
	p.mu.Unlock()
}

// Initialize implements legacy.Handler: the upstream's own initialize result, opened
// with the client's params, is the answer.
func (p *passThrough) Initialize(ctx context.Context, sess *legacy.Session, params json.RawMessage) (json.RawMessage, error) {
	s, err := p.upstream(ctx, sess)
	if err != nil {
		return nil, reverseUpstreamErr(err)
	}
	_, raw := s.InitializeResult()
	return initializeWithList(raw), nil
}

// Serve implements legacy.Handler: forward with the bytes unchanged.
func (p *passThrough) Serve(ctx context.Context, sess *legacy.Session, req *jsonrpc.Message, out legacy.Stream) (json.RawMessage, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	key := sess.ID + "\x00" + req.ID.Raw()
	p.mu.Lock()
	p.inflight[key] = cancel
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.inflight, key)
		p.mu.Unlock()
	}()
	release, err := p.admit(ctx, sess, req)
	if err != nil {
		return nil, err
	}
	defer release()
	for attempt := 0; ; attempt++ {
		s, err := p.upstream(ctx, sess)
		if err != nil {
			return nil, reverseUpstreamErr(err)
		}
		if req.Method == "tasks/list" && !upstreamLists(s) && upstreamRunsTasks(initRaw(s)) {
			return p.listTasks(ctx, sess.ID, s, req.Params)
		}
		res, err := s.Call(ctx, req.Method, req.Params, legacy.CallOptions{
			OnRequest: p.relayRequest(out),
			OnNotify: func(m *jsonrpc.Message) {
				p.observeStatus(sess.ID, m)
				p.countStatus(sess.ID, m)
				_ = out.Send(m)
			},
		})
		if err == nil {
			p.observe(sess.ID, s, req, res)
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
			return nil, reverseUpstreamErr(err)
		}
		return res, nil
	}
}

// admit asks the work gate about one forwarded request: a task-augmented call is a new
// 2025-11-25 task (kill switch, sunset, drain, the owner's unfinished tasks, a slot);
// tasks/* reach existing tasks and are never refused; anything else takes an upstream slot.
func (p *passThrough) admit(ctx context.Context, sess *legacy.Session, req *jsonrpc.Message) (release func(), err error) {
	switch {
	case gjson.GetBytes(req.Params, "task").Exists():
		own := owner(sess)
		return p.r.gate.StartTask(ctx, gate.Task{Era: gate.Legacy, Owner: own,
			Active: func(context.Context) (int, error) { return p.ledger.Active(own), nil }})
	case strings.HasPrefix(req.Method, "tasks/"):
		return func() {}, nil
	}
	return p.r.gate.Acquire()
}

// relayRequest sends an upstream server request to the client on out under a fresh id
// and waits for the client's answer (it arrives through Respond, on any POST).
func (p *passThrough) relayRequest(out legacy.Stream) legacy.RequestHandler {
	return func(ctx context.Context, m *jsonrpc.Message) (json.RawMessage, error) {
		id := newRequestID()
		ch := make(chan *jsonrpc.Message, 1)
		p.mu.Lock()
		p.asks[id] = ch
		p.mu.Unlock()
		defer func() {
			p.mu.Lock()
			delete(p.asks, id)
			p.mu.Unlock()
		}()
		fwd := &jsonrpc.Message{JSONRPC: jsonrpc.Version, ID: jsonrpc.StringID(id), Method: m.Method, Params: m.Params}
		if err := out.Send(fwd); err != nil {
			return nil, jsonrpc.NewError(jsonrpc.CodeInternalError, "the client's stream is closed")
		}
		t := time.NewTimer(p.r.cfg.InputTimeout)
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
func (p *passThrough) Notify(ctx context.Context, sess *legacy.Session, msg *jsonrpc.Message) {
	switch msg.Method {
	case "notifications/initialized":
	case "notifications/cancelled":
		key := sess.ID + "\x00" + gjson.GetBytes(msg.Params, "requestId").Raw
		p.mu.Lock()
		cancel := p.inflight[key]
		p.mu.Unlock()
		if cancel != nil {
			cancel()
		}
	default:
		if s, err := p.upstream(ctx, sess); err == nil {
			_ = s.Notify(ctx, msg.Method, msg.Params)
		}
	}
}

// Respond implements legacy.Handler: the client's answer to a relayed request.
func (p *passThrough) Respond(ctx context.Context, sess *legacy.Session, msg *jsonrpc.Message) {
	p.mu.Lock()
	ch := p.asks[msg.ID.String()]
	p.mu.Unlock()
	if ch != nil {
		select {
		case ch <- msg:
		default: // answered twice: the first answer wins
		}
	}
}

// Closed implements legacy.Handler: the client ended its session, so does the bridge.
func (p *passThrough) Closed(ctx context.Context, sess *legacy.Session) {
	p.mu.Lock()
	ps := p.sessions[sess.ID]
	delete(p.sessions, sess.ID)
	delete(p.logs, sess.ID)
	p.mu.Unlock()
	p.ledger.EndGroup(sess.ID) // its upstream session, and with it its tasks, end now
	if ps != nil {
		<-ps.ready
		if ps.s != nil {
			ps.s.Close(ctx)
		}
	}
}
