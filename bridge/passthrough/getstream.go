package passthrough

// The upstream sessions' standalone GET streams (2025-11-25 §Transports: "Listening for
// Messages from the Server"). Some servers send server→client requests only there: mcp-go
// sends a task's sampling/createMessage and roots/list (and elicitation/create) on the GET
// stream and waits for the answer. Without it open the upstream waits until its own
// timeout and the client's task never gets its input.
//
// Each client session has its own upstream session, so what arrives on that session's GET
// stream is the client's: every upstream session opened here gets its GET stream held open
// (legacy.Listen, re-opened with backoff and jitter while the session lives), and a request
// arriving there is relayed to the client on the client's own GET stream under a
// bridge-minted id (its answer comes back through Respond and is sent upstream as the
// response). Task status notifications from there are not relayed: some upstreams (mcp-go)
// send every session the status of every task, which would show this client other clients'
// task ids; the client's polls and its response streams carry its own. Other notifications
// (list changes, logging) are relayed. A child over stdio has one session shared by every
// client (legacy.UpstreamSession.Shared): nothing unsolicited can be told apart there, so no
// stream is held for it.

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/taskbridge/taskbridge/bridge/internal/ids"
	"github.com/taskbridge/taskbridge/internal/jsonrpc"
	"github.com/taskbridge/taskbridge/legacy"
)

// clientStreamWait bounds how long a relayed request waits for the client to open its GET
// stream (clients open it right after initialize).
const clientStreamWait = 5 * time.Second

// holdGetStream holds s's GET stream open for client session sess until the route closes
// or the session is gone. A question about a task arriving there is stored (legacyinput.go)
// and pushed on the client's GET stream; after a cut it comes again on the task's next
// tasks/result.
func (p *Legacy) holdGetStream(sess *legacy.Session, s *legacy.UpstreamSession) {
	sessID := sess.ID
	if s.Shared() {
		return
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		err := s.Listen(p.ctx, legacy.ListenOptions{
			OnRequest: p.keepQuestions(sess, s, p.pushQuestion(sessID, s), p.relayToGetStream(sessID)),
			OnNotify: func(m *jsonrpc.Message) {
				p.rememberRelated(sessID, m)
				if !strings.HasPrefix(m.Method, "notifications/tasks/") {
					p.face.Push(sessID, m)
				}
			},
			OnOpen: func() { p.cfg.Metrics.GetStreamOpened("legacy-passthrough") },
		})
		if p.ctx.Err() == nil {
			p.log.Debug().Err(err).Msg("passthrough: upstream standalone stream ended")
		}
	}()
}

// relayToGetStream sends an upstream request from the GET stream to the client on its GET
// stream under a fresh id and waits for the client's answer.
func (p *Legacy) relayToGetStream(sessID string) legacy.RequestHandler {
	return func(ctx context.Context, m *jsonrpc.Message) (json.RawMessage, error) {
		if m.Method == "ping" {
			return json.RawMessage(`{}`), nil
		}
		p.rememberRelated(sessID, m)
		id := ids.NewRequestID()
		ch := make(chan *jsonrpc.Message, 1)
		defer p.asks.Put(id, ch, sameChan)()
		fwd := &jsonrpc.Message{JSONRPC: jsonrpc.Version, ID: jsonrpc.StringID(id), Method: m.Method, Params: m.Params}
		if !p.pushWhenOpen(ctx, sessID, fwd) {
			return nil, jsonrpc.NewError(jsonrpc.CodeInternalError, "the client has no open stream for server requests")
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

// pushWhenOpen pushes msg on the client's GET stream, waiting (at most clientStreamWait)
// for the client to open it.
func (p *Legacy) pushWhenOpen(ctx context.Context, sessID string, msg *jsonrpc.Message) bool {
	_, ok := p.pushOnceOpen(ctx, sessID, msg)
	return ok
}

// pushOnceOpen is pushWhenOpen naming the GET stream that took msg (legacy.Server.PushOn).
func (p *Legacy) pushOnceOpen(ctx context.Context, sessID string, msg *jsonrpc.Message) (uint64, bool) {
	deadline := time.Now().Add(clientStreamWait)
	for {
		if seq, ok := p.face.PushOn(sessID, msg); ok {
			return seq, true
		}
		if time.Now().After(deadline) {
			return 0, false
		}
		select {
		case <-ctx.Done():
			return 0, false
		case <-time.After(50 * time.Millisecond):
		}
	}
}
