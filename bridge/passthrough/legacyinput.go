package passthrough

// Questions the upstream asks about a task (docs/durability.md, "The legacy pass-through's
// questions"). A 2025-11-25 upstream sends an input request with the related-task _meta on
// the client's tasks/result stream (or its GET stream) once, and then waits for the answer
// by its own JSON-RPC id: the TS SDK v1 takes the request off its queue when it sends it,
// so a question whose client stream was cut is never sent again. The bridge therefore
// keeps every such question in the store until it is answered upstream:
//
//   - a holder record (record.ModeLegacyPassThrough, id record.LegacyPassThroughID of the
//     client session and the upstream task id) with one input per question: the method and
//     params as the upstream sent them, the upstream's JSON-RPC id, and the bridge-issued
//     request id the question keeps for every delivery;
//   - each delivery goes out under that one id: on the stream it came with, then on every
//     later tasks/result of that task in that client session (after a cut, a restart, on
//     another replica); a question that came on the GET stream is also pushed again each
//     time the client re-opens its GET stream, while this process waits for its answer
//     (at most InputTimeout; pushQuestion);
//   - the client's answer, matched by that id and checked against the session and owner of
//     the holder, is stored first-answer-wins and POSTed upstream under the upstream's id
//     (legacy.UpstreamSession.Respond). A repeated answer is acknowledged (202) and never
//     sent again;
//   - once every question of the task went upstream, or the upstream shows the task ended
//     (questionsSettled), the holder is ended (completed, outcome unknown: the task's own
//     outcome is the upstream's), so it no longer counts as unfinished; its ttl (holderTTL)
//     lets the purge remove it.

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/bridge/internal/ids"
	"github.com/taskbridge/taskbridge/bridge/internal/sessions"
	"github.com/taskbridge/taskbridge/internal/jsonrpc"
	"github.com/taskbridge/taskbridge/internal/redact"
	"github.com/taskbridge/taskbridge/legacy"
	"github.com/taskbridge/taskbridge/record"
	"github.com/taskbridge/taskbridge/store"
)

// holderTTL is the ttl of a question holder: once ended (every question answered upstream)
// the purge empties it after this long and deletes it after the audit retention. A holder
// with an unanswered question is never purged.
const holderTTL = time.Hour

// relatedTaskPath reads the related-task id of a server request's params.
const relatedTaskPath = `_meta.io\.modelcontextprotocol/related-task.taskId`

// questionTask returns the upstream task id a server request is about, "" when it is about
// none (a pre-task question, a ping): only task questions are kept.
func questionTask(m *jsonrpc.Message) string {
	if m.Method == "ping" {
		return ""
	}
	return gjson.GetBytes(m.Params, relatedTaskPath).Str
}

// questionSender delivers the stored question msg (input key of holder) to the client.
type questionSender func(ctx context.Context, holder, key string, msg *jsonrpc.Message)

// onStream is the questionSender of a response stream: one send; after a cut the task's next
// tasks/result carries the question.
func onStream(out legacy.Stream) questionSender {
	return func(_ context.Context, _, _ string, msg *jsonrpc.Message) { _ = out.Send(msg) }
}

// holderOf is the id of the question holder of upstream task task of sess.
func holderOf(sess *legacy.Session, task string) string {
	return record.LegacyPassThroughID(sess.ID, task)
}

// keepQuestions wraps relay, the handler for server requests on one client stream: a
// question about a task is stored and sent on out under its durable id (sendQuestion), and
// answered later through Respond (legacy.ErrNoReply: nothing is POSTed for it now);
// anything else goes to relay.
func (p *Legacy) keepQuestions(sess *legacy.Session, s *legacy.UpstreamSession, send questionSender, relay legacy.RequestHandler) legacy.RequestHandler {
	return func(ctx context.Context, m *jsonrpc.Message) (json.RawMessage, error) {
		p.rememberRelated(sess.ID, m) // the client's answer carries this task's related-task
		task := questionTask(m)
		if task == "" {
			return relay(ctx, m)
		}
		msg, err := p.storeQuestion(context.WithoutCancel(ctx), sess, s, task, m)
		if err != nil {
			p.log.Warn().Err(err).Msg("passthrough: a task's question could not be stored; relayed for this stream only")
			return relay(ctx, m)
		}
		if msg != nil {
			send(ctx, holderOf(sess, task), m.ID.Raw(), msg) // a cut stream: the next tasks/result of the task delivers it again
		}
		return nil, legacy.ErrNoReply
	}
}

// storeQuestion records the upstream's question m about upstream task task of sess (the
// holder first) and returns it as the client sees it: the upstream's method and params
// under the bridge-issued id. nil when the question was answered already.
func (p *Legacy) storeQuestion(ctx context.Context, sess *legacy.Session, s *legacy.UpstreamSession, task string, m *jsonrpc.Message) (*jsonrpc.Message, error) {
	holder, err := p.openHolder(ctx, sess, s, task)
	if err != nil {
		return nil, err
	}
	key := m.ID.Raw()
	in := record.Input{TaskID: holder, Key: key, Method: m.Method, Params: m.Params, UpstreamRequestID: json.RawMessage(key)}
	if err := p.cfg.Store.PutInputs(ctx, []record.Input{in}); err != nil {
		return nil, err
	}
	ins, err := p.cfg.Store.ListInputs(ctx, holder)
	if err != nil {
		return nil, err
	}
	for _, cur := range ins {
		if cur.Key == key {
			return p.question(ctx, cur)
		}
	}
	return nil, store.ErrNotFound
}

// openHolder creates the question holder of the task, or re-opens an ended one (the task
// asks again), and returns its id.
func (p *Legacy) openHolder(ctx context.Context, sess *legacy.Session, s *legacy.UpstreamSession, task string) (string, error) {
	id := holderOf(sess, task)
	now := p.cfg.Now().UTC()
	ttl := holderTTL.Milliseconds()
	rec := &record.Task{ID: id, Owner: sessions.Owner(sess), SessionID: sess.ID, Origin: p.up.URL(),
		UpstreamTaskID: task, UpstreamSessionID: s.ID(), Mode: record.ModeLegacyPassThrough,
		Status: record.StatusInputRequired, Outcome: record.OutcomePending, CreatedAt: now, LastUpdatedAt: now, TTLMs: &ttl}
	err := p.cfg.Store.CreateTask(ctx, rec)
	if err == nil || !errors.Is(err, store.ErrConflict) {
		return id, err
	}
	for range 3 {
		cur, err := p.cfg.Store.GetTask(ctx, id)
		if err != nil {
			return "", err
		}
		if cur.Status == record.StatusInputRequired {
			return id, nil
		}
		cur.Status, cur.Outcome, cur.StatusMessage, cur.LastUpdatedAt = record.StatusInputRequired, record.OutcomePending, "", now
		if err := p.cfg.Store.UpdateTask(ctx, cur); !errors.Is(err, store.ErrConflict) {
			return id, err
		}
	}
	return "", store.ErrConflict
}

// question is an unanswered stored question as the client gets it, under the request id it
// keeps for every delivery (issued on its first one); nil once answered.
func (p *Legacy) question(ctx context.Context, in record.Input) (*jsonrpc.Message, error) {
	if in.AnsweredAt != nil {
		return nil, nil
	}
	id := in.RequestID
	if id == "" {
		id = ids.NewRequestID()
		err := p.cfg.Store.MarkInputDelivered(ctx, in.TaskID, in.Key, id, p.cfg.Now().UTC())
		if errors.Is(err, store.ErrConflict) { // delivered meanwhile (another stream, another replica)
			id, err = p.deliveredID(ctx, in)
		}
		if err != nil {
			return nil, err
		}
	}
	return &jsonrpc.Message{JSONRPC: jsonrpc.Version, ID: jsonrpc.StringID(id), Method: in.Method, Params: in.Params}, nil
}

// deliveredID reads the request id another delivery stored for in.
func (p *Legacy) deliveredID(ctx context.Context, in record.Input) (string, error) {
	ins, err := p.cfg.Store.ListInputs(ctx, in.TaskID)
	if err != nil {
		return "", err
	}
	for _, cur := range ins {
		if cur.Key == in.Key && cur.RequestID != "" {
			return cur.RequestID, nil
		}
	}
	return "", store.ErrConflict
}

// redeliver sends the unanswered stored questions of the task a tasks/result names on out,
// each under the id it was first delivered with; only the session that was asked gets
// them (the holder id is derived from it). An answer that was stored but never reached the
// upstream (the process died in between) is sent upstream now.
func (p *Legacy) redeliver(ctx context.Context, sess *legacy.Session, s *legacy.UpstreamSession, req *jsonrpc.Message, out legacy.Stream) {
	if req.Method != "tasks/result" {
		return
	}
	task := gjson.GetBytes(req.Params, "taskId").Str
	if task == "" {
		return
	}
	holder := holderOf(sess, task)
	rec, err := p.cfg.Store.GetTask(ctx, holder)
	if err != nil || !p.holds(rec, sess) {
		return
	}
	ins, err := p.cfg.Store.ListInputs(ctx, holder)
	if err != nil {
		return
	}
	for _, in := range ins {
		if in.AnsweredAt != nil {
			if in.ForwardedAt == nil {
				p.forwardAnswer(ctx, s, in)
			}
			continue
		}
		if msg, err := p.question(ctx, in); err == nil && msg != nil {
			_ = out.Send(msg)
		}
	}
}

// holds reports whether rec is a question holder of sess under its owner.
func (p *Legacy) holds(rec *record.Task, sess *legacy.Session) bool {
	return rec.Mode == record.ModeLegacyPassThrough && rec.SessionID == sess.ID && rec.Owner == sessions.Owner(sess)
}

// answerQuestion handles a client's answer to a stored question: it reports whether msg's
// id names one. The first answer is stored and POSTed upstream under the upstream's id; a
// repeated one (the same id, before or after a cut or a restart) is dropped. An answer
// from a session or owner that was not asked is dropped too.
func (p *Legacy) answerQuestion(ctx context.Context, sess *legacy.Session, msg *jsonrpc.Message) bool {
	ctx = context.WithoutCancel(ctx)
	in, err := p.cfg.Store.FindInputByRequestID(ctx, msg.ID.String())
	if err != nil {
		return false
	}
	rec, err := p.cfg.Store.GetTask(ctx, in.TaskID)
	if err != nil || rec.Mode != record.ModeLegacyPassThrough {
		return false
	}
	if !p.holds(rec, sess) {
		p.log.Warn().Str("request", redact.Field(msg.ID.String())).Msg("passthrough: an answer from a session or principal that was not asked dropped")
		return true
	}
	raw, err := jsonrpc.Encode(msg)
	if err != nil {
		return true
	}
	first, err := p.cfg.Store.AnswerInput(ctx, in.TaskID, in.Key, raw, p.cfg.Now().UTC())
	if err != nil || !first {
		return true // a repeated answer: the first one went (or goes) upstream
	}
	in.Response = raw
	s, err := p.upstream(ctx, sess)
	if err != nil {
		p.log.Warn().Err(err).Msg("passthrough: answer stored; the upstream session is unavailable, it goes on the next tasks/result")
		return true
	}
	p.forwardAnswer(ctx, s, *in)
	return true
}

// forwardAnswer POSTs the stored answer of in upstream under the upstream's request id,
// marks it forwarded, and ends the holder once no question of the task waits any more.
func (p *Legacy) forwardAnswer(ctx context.Context, s *legacy.UpstreamSession, in record.Input) {
	msg, err := jsonrpc.Decode(in.Response)
	if err != nil || !msg.IsResponse() {
		return
	}
	var rpcErr *jsonrpc.Error
	if msg.Error != nil {
		rpcErr = msg.Error
	}
	if err := s.Respond(ctx, in.UpstreamRequestID, msg.Result, rpcErr); err != nil {
		p.log.Warn().Err(err).Msg("passthrough: an answer did not reach the upstream; it is sent again on the next tasks/result")
		return
	}
	now := p.cfg.Now().UTC()
	if err := p.cfg.Store.MarkInputForwarded(ctx, in.TaskID, in.Key, now); err != nil {
		return
	}
	p.closeHolder(ctx, in.TaskID, now)
}

// closeHolder ends the holder when every question it holds went upstream.
func (p *Legacy) closeHolder(ctx context.Context, holder string, now time.Time) {
	ins, err := p.cfg.Store.ListInputs(ctx, holder)
	if err != nil {
		return
	}
	for _, in := range ins {
		if in.ForwardedAt == nil {
			return
		}
	}
	rec, err := p.cfg.Store.GetTask(ctx, holder)
	if err != nil || rec.Status != record.StatusInputRequired {
		return
	}
	rec.Status, rec.Outcome, rec.LastUpdatedAt = record.StatusCompleted, record.OutcomeUnknown, now
	rec.StatusMessage = "every question was answered upstream; the task itself is the upstream's"
	if err := p.cfg.Store.UpdateTask(ctx, rec); err != nil && !errors.Is(err, store.ErrConflict) {
		p.log.Warn().Err(err).Msg("passthrough: question holder not ended")
	}
}

// getQuestionCheck is how often a question pushed on the GET stream looks for a re-opened
// stream (and for its answer).
const getQuestionCheck = 200 * time.Millisecond

// pushQuestion is the questionSender of the session's GET stream: it pushes the question
// (waiting at most clientStreamWait for an open stream), then pushes it again each time the
// client re-opens its GET stream after losing it, until the question is answered, the route
// closes, the upstream session ends, or InputTimeout passed. It holds the upstream's GET-stream handler, which has
// nothing to answer (legacy.ErrNoReply) but keeps the stream reading on (legacy.Listen
// handles each request on its own goroutine).
func (p *Legacy) pushQuestion(sessID string, s *legacy.UpstreamSession) questionSender {
	return func(ctx context.Context, holder, key string, msg *jsonrpc.Message) {
		carried, _ := p.pushOnceOpen(p.ctx, sessID, msg) // the GET stream that carried msg last
		deadline := time.Now().Add(p.cfg.InputTimeout)
		tick := time.NewTicker(getQuestionCheck)
		defer tick.Stop()
		for time.Now().Before(deadline) {
			select {
			case <-p.ctx.Done():
				return
			case <-tick.C:
			}
			if s.Gone() || p.answered(holder, key) {
				return // the session ended (Close waits for this handler), or the answer came
			}
			if g := p.face.NewestGetStream(sessID); g != 0 && g != carried {
				if seq, ok := p.face.PushOn(sessID, msg); ok {
					carried = seq
				}
			}
		}
	}
}

// answered reports whether input key of holder needs no more delivery: it has an answer,
// it is gone, or its holder was ended (the task ended upstream).
func (p *Legacy) answered(holder, key string) bool {
	rec, err := p.cfg.Store.GetTask(p.ctx, holder)
	if errors.Is(err, store.ErrNotFound) || (err == nil && rec.Status != record.StatusInputRequired) {
		return true
	}
	ins, err := p.cfg.Store.ListInputs(p.ctx, holder)
	if err != nil {
		return false
	}
	for _, in := range ins {
		if in.Key == key {
			return in.AnsweredAt != nil
		}
	}
	return true
}

// questionsSettled ends the question holder of a task the upstream shows ended (a
// tasks/result answered, or a tasks/get or tasks/cancel with a terminal status): its
// unanswered questions will never be asked for again, and it must not count as unfinished.
func (p *Legacy) questionsSettled(ctx context.Context, sess *legacy.Session, req *jsonrpc.Message, res json.RawMessage) {
	switch req.Method {
	case "tasks/result":
	case "tasks/get", "tasks/cancel":
		if !record.Status(gjson.GetBytes(res, "status").Str).Terminal() {
			return
		}
	default:
		return
	}
	task := gjson.GetBytes(req.Params, "taskId").Str
	if task == "" {
		return
	}
	ctx = context.WithoutCancel(ctx)
	rec, err := p.cfg.Store.GetTask(ctx, holderOf(sess, task))
	if err != nil || !p.holds(rec, sess) || rec.Status != record.StatusInputRequired {
		return
	}
	rec.Status, rec.Outcome, rec.LastUpdatedAt = record.StatusCompleted, record.OutcomeUnknown, p.cfg.Now().UTC()
	rec.StatusMessage = "the task ended upstream"
	if err := p.cfg.Store.UpdateTask(ctx, rec); err != nil && !errors.Is(err, store.ErrConflict) {
		p.log.Warn().Err(err).Msg("passthrough: question holder not ended")
	}
}
