package reverse

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"regexp"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/internal/jsonobj"
	"github.com/taskbridge/taskbridge/internal/jsonrpc"
	"github.com/taskbridge/taskbridge/internal/redact"
	"github.com/taskbridge/taskbridge/internal/trace"
	"github.com/taskbridge/taskbridge/legacy"
	"github.com/taskbridge/taskbridge/mapping"
	"github.com/taskbridge/taskbridge/record"
)

// Held tasks/result calls. A legacy task delivers its input requests and its payload only
// on a tasks/result stream, so from creation on the bridge keeps one open upstream for
// every unfinished task it knows (a holder), in the session the task lives in. A holder
// writes each input request to the store (its key is derived from the upstream's request
// id, so every process names it the same) and leaves it unanswered on the stream
// (legacy.ErrNoReply): the answer, whenever and wherever it comes (tasks/update on any
// replica, before or after a restart), is POSTed back by its stored upstream id. A broken
// stream is re-opened with jittered backoff (tasks/result is idempotent); a restarted process
// re-opens one for every unfinished record (resumeTasks), and any process that serves a
// request about a task it holds nothing for starts one (hold), so a task keeps its holder
// whichever replica survives.

// holder is this process's held tasks/result of one task. done is closed when it ends.
type holder struct {
	id   string
	done chan struct{}
}

// hold starts a holder for rec unless this process has one, or rec can change no more.
func (r *Reverse) hold(rec *record.Task) {
	if rec.UpstreamTaskID == "" || settled(rec) {
		return
	}
	r.mu.Lock()
	if r.closed || r.holders[rec.ID] != nil {
		r.mu.Unlock()
		return
	}
	h := &holder{id: rec.ID, done: make(chan struct{})}
	r.holders[rec.ID] = h
	r.wg.Add(1)
	r.mu.Unlock()
	go func() {
		defer r.wg.Done()
		defer func() {
			r.mu.Lock()
			delete(r.holders, h.id)
			r.mu.Unlock()
			close(h.done)
		}()
		r.holdResult(rec)
	}()
}

// holdResult keeps tasks/result open until it answers, re-opening it when the stream
// breaks, and records the answer. A vanished session marks the task lost. It stops when
// the bridge closes, or a minute after the task's ttl ran out.
func (r *Reverse) holdResult(rec *record.Task) {
	ctx := trace.ForTask(r.ctx, rec.ID, rec.TraceParent) // a child of the create span
	if exp, ok := rec.ExpiresAt(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, exp.Add(time.Minute))
		defer cancel()
	}
	params, _ := json.Marshal(legacy.TaskIDParams{TaskID: rec.UpstreamTaskID})
	// cenkalti/backoff/v5: doubling from 250 ms to 5 s, jittered ±20% within them.
	bo := &backoff.ExponentialBackOff{InitialInterval: heldRetryMin, RandomizationFactor: 0.2, Multiplier: 2, MaxInterval: heldRetryMax}
	bo.Reset()
	for {
		sess := r.sessionFor(rec)
		r.forwardAnswers(ctx, rec, sess)
		res, err := sess.Call(ctx, "tasks/result", params, legacy.CallOptions{OnRequest: r.inputHandler(rec, sess)})
		var je *jsonrpc.Error
		switch {
		case err == nil:
			r.record(r.finish(ctx, rec.ID, res, nil))
			return
		case ctx.Err() != nil:
			return
		case errors.Is(err, legacy.ErrSessionGone):
			r.record(r.markLost(ctx, rec.ID))
			return
		case errors.As(err, &je):
			r.record(r.finish(ctx, rec.ID, nil, je))
			return
		}
		select { // the stream broke: wait, then ask again
		case <-ctx.Done():
			return
		case <-time.After(min(max(bo.NextBackOff(), heldRetryMin), heldRetryMax)):
		}
	}
}

// heldRetryMin and heldRetryMax bound the wait before asking tasks/result again after the
// stream broke.
const (
	heldRetryMin = 250 * time.Millisecond
	heldRetryMax = 5 * time.Second
)

// record logs a failed record write of a holder (the next poll or restart redoes it).
func (r *Reverse) record(_ *record.Task, err error) {
	if err != nil && r.ctx.Err() == nil {
		r.log.Warn().Err(err).Msg("reverse: task record not updated")
	}
}

// inputMethods are the requests a 2026-07-28 client can answer as inputRequests.
var inputMethods = map[string]bool{"elicitation/create": true, "sampling/createMessage": true, "roots/list": true}

// inputHandler answers the server requests on a task's tasks/result stream: ping at once,
// an input request by recording it (answered later by its id: ErrNoReply), anything else
// -32601. A request the task's client already answered (an upstream that sends it again on
// a new stream) gets the stored answer again. A request of a kind the task's creator did
// not declare is never recorded: it fails the task (failUndeclared, caps.go).
func (r *Reverse) inputHandler(rec *record.Task, sess *legacy.UpstreamSession) legacy.RequestHandler {
	return func(ctx context.Context, m *jsonrpc.Message) (json.RawMessage, error) {
		if m.Method == "ping" {
			return json.RawMessage(`{}`), nil
		}
		if !inputMethods[m.Method] {
			return nil, jsonrpc.ErrMethodNotFound.Wrapf("%s", m.Method)
		}
		if need, required := capsOf(rec).Missing(m.Method, m.Params); need != "" {
			return nil, r.failUndeclared(ctx, rec, sess, m, need, required)
		}
		now := r.cfg.Now().UTC()
		in := record.Input{TaskID: rec.ID, Key: inputKey(m.ID.Raw()), Method: m.Method,
			Params: mapping.InputParamsForModern(m.Params), UpstreamRequestID: json.RawMessage(m.ID.Raw()), DeliveredAt: &now}
		if err := r.putInput(ctx, in); err != nil {
			r.log.Error().Err(err).Str("task", rec.ID).Msg("reverse: input request not recorded; refused upstream")
			return nil, jsonrpc.NewError(jsonrpc.CodeInternalError, "the bridge could not record the request")
		}
		r.touch(rec.ID, now)
		r.log.Debug().Str("task", rec.ID).Str("key", redact.Field(in.Key)).Str("method", m.Method).Msg("reverse input request recorded")
		r.forwardAnswers(ctx, rec, sess) // answered already (a re-sent request): answer again
		return nil, legacy.ErrNoReply
	}
}

// putInput writes one input request, retrying a failing store briefly: an input that is
// not recorded can never be shown nor answered.
func (r *Reverse) putInput(ctx context.Context, in record.Input) error {
	var err error
	for i := range 3 {
		if err = r.st.PutInputs(context.WithoutCancel(ctx), []record.Input{in}); err == nil {
			return nil
		}
		time.Sleep(time.Duration(i+1) * 100 * time.Millisecond)
	}
	return err
}

// touch moves the record's lastUpdatedAt to at (an input arrived or was answered).
func (r *Reverse) touch(id string, at time.Time) {
	r.record(r.update(r.ctx, id, func(rec *record.Task) bool {
		if !at.After(rec.LastUpdatedAt) || settled(rec) {
			return false
		}
		rec.LastUpdatedAt = at
		return true
	}))
}

// forwardAnswers POSTs every answered input of rec not yet forwarded (an answer given
// while no stream was open, or one whose POST failed) to the upstream by its id.
func (r *Reverse) forwardAnswers(ctx context.Context, rec *record.Task, sess *legacy.UpstreamSession) {
	ins, err := r.st.ListInputs(ctx, rec.ID)
	if err != nil {
		return
	}
	for _, in := range ins {
		if in.Response != nil && in.ForwardedAt == nil {
			r.forwardAnswer(ctx, sess, rec.UpstreamTaskID, in)
		}
	}
}

// forwardAnswer POSTs one stored answer upstream and records that it went. The answer
// carries the related-task _meta of the upstream's task (upID): it answers a request the
// upstream sent on that task's tasks/result stream (2025-11-25: every response associated
// with a task MUST carry it; issue 16 item 13).
func (r *Reverse) forwardAnswer(ctx context.Context, sess *legacy.UpstreamSession, upID string, in record.Input) bool {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.CancelTimeout)
	defer cancel()
	if err := sess.Respond(cctx, in.UpstreamRequestID, withRelatedTask(in.Response, upID), nil); err != nil {
		if errors.Is(err, legacy.ErrSessionGone) {
			r.record(r.markLost(ctx, in.TaskID))
		}
		r.log.Warn().Err(err).Str("task", in.TaskID).Msg("reverse: answer not delivered upstream yet; retried")
		return false
	}
	if err := r.st.MarkInputForwarded(cctx, in.TaskID, in.Key, r.cfg.Now().UTC()); err != nil {
		r.log.Warn().Err(err).Str("task", in.TaskID).Msg("reverse: forwarded answer not recorded")
	}
	return true
}

// plainID is an upstream request id that may appear in a key as it is.
var plainID = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// inputKey is the inputRequests key of the upstream request rawID: "in-" and the id when
// it is a short plain number or string, else "in-h" and a digest. Every process derives
// the same key, and an upstream never reuses a request id in a session, so keys are
// stable across polls, restarts and replicas and never reused for a task.
func inputKey(rawID string) string {
	v := gjson.Parse(rawID)
	s := rawID
	if v.Type == gjson.String {
		s = v.Str
	}
	if (v.Type == gjson.Number || v.Type == gjson.String) && plainID.MatchString(s) {
		return "in-" + s
	}
	sum := sha256.Sum256([]byte(rawID))
	return "in-h" + hex.EncodeToString(sum[:12])
}

// sessionFor returns the handle of the upstream session rec lives in: the one this
// process opened or adopted already, else one adopted from the stored id (after a restart
// or on another replica) at the protocol version the upstream negotiates with this bridge.
func (r *Reverse) sessionFor(rec *record.Task) *legacy.UpstreamSession {
	r.mu.Lock()
	defer r.mu.Unlock()
	if s := r.upSessions[rec.UpstreamSessionID]; s != nil {
		return s
	}
	s := r.up.Adopt(rec.UpstreamSessionID, r.upstreamVersion())
	r.upSessions[rec.UpstreamSessionID] = s
	return s
}

// keepSession remembers the handle of a session a task was just created in.
func (r *Reverse) keepSession(s *legacy.UpstreamSession) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if cur := r.upSessions[s.ID()]; cur == nil || cur.Gone() {
		r.upSessions[s.ID()] = s
	}
}

// upstreamVersion is the protocol version the upstream negotiated with this bridge (the
// cached initialize), else the newest this bridge speaks.
func (r *Reverse) upstreamVersion() string {
	if in := r.info.Load(); in != nil && in.init.ProtocolVersion != "" {
		return in.init.ProtocolVersion
	}
	return legacy.ProtocolVersion
}

// resumeTasks re-opens a holder for every unfinished reverse task of this upstream in the store
// (after a restart, every process's), and ends the intents no process can still complete.
func (r *Reverse) resumeTasks(ctx context.Context) error {
	active, err := r.st.ListActive(ctx)
	if err != nil {
		return err
	}
	unsettled, err := r.st.ListUnsettled(ctx)
	if err != nil {
		return err
	}
	n := 0
	for _, rec := range append(active, unsettled...) {
		if rec.Mode != record.ModeReverse || rec.Origin != r.up.URL() {
			continue
		}
		if rec.UpstreamTaskID == "" {
			r.sweepIntent(ctx, rec)
			continue
		}
		r.hold(rec)
		n++
	}
	if n > 0 {
		r.log.Info().Int("tasks", n).Msg("reverse: resumed the held tasks/result of unfinished tasks")
	}
	return nil
}

// intentGrace is the age after which an intent without an upstream id cannot belong to a
// live create call anywhere: a held call gives up after CreateTimeout+InputTimeout.
func (r *Reverse) intentGrace() time.Duration {
	return r.cfg.CreateTimeout + r.cfg.InputTimeout + 5*time.Second
}

// sweepIntent fails an orphaned intent (outcome unknown: the tools/call may or may not
// have run; it is never sent again). With a single-process store every intent found at
// start is one; with a shared store only those older than intentGrace.
func (r *Reverse) sweepIntent(ctx context.Context, rec *record.Task) {
	if r.shared && r.cfg.Now().Sub(rec.CreatedAt) < r.intentGrace() {
		return
	}
	r.endIntent(ctx, rec.ID, record.StatusFailed, record.OutcomeUnknown,
		"The bridge stopped before the upstream answered; the outcome is unknown and the call was not retried.")
}

// background starts the owned loops: the ttl purge of the store, and (shared stores) the
// sweep of intents orphaned by dead replicas and the holders of tasks they held.
func (r *Reverse) background() {
	if r.cfg.PurgeInterval > 0 {
		r.loop(r.cfg.PurgeInterval, r.purge)
	}
	if r.shared {
		r.loop(r.intentGrace()/2, func(ctx context.Context) {
			if err := r.resumeTasks(ctx); err != nil {
				r.log.Warn().Err(err).Msg("reverse: sweep failed")
			}
		})
	}
}

// loop runs fn every d until the route closes.
func (r *Reverse) loop(d time.Duration, fn func(context.Context)) {
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		t := time.NewTicker(d)
		defer t.Stop()
		for {
			select {
			case <-r.ctx.Done():
				return
			case <-t.C:
				fn(r.ctx)
			}
		}
	}()
}

// purge applies the ttl to the store (payloads go, the audit part stays for
// AuditRetention) and forgets session handles no holder uses.
func (r *Reverse) purge(ctx context.Context) {
	p, d, err := r.st.PurgeExpired(ctx, r.cfg.Now(), r.cfg.AuditRetention)
	if err != nil {
		r.log.Warn().Err(err).Msg("reverse: ttl purge failed")
	} else if p+d > 0 {
		r.log.Info().Int("purged", p).Int("deleted", d).Msg("ttl purge")
	}
	r.mu.Lock()
	if len(r.holders) == 0 {
		r.upSessions = map[string]*legacy.UpstreamSession{}
	}
	r.mu.Unlock()
}

// withRelatedTask sets _meta["io.modelcontextprotocol/related-task"] = {taskId: upID} on an
// answer object (replacing one the client may have put there); an answer it cannot edit, or
// an empty upID, leaves it as it is.
func withRelatedTask(answer json.RawMessage, upID string) json.RawMessage {
	if upID == "" {
		return answer
	}
	rt, err := json.Marshal(legacy.RelatedTask{TaskID: upID})
	if err != nil {
		return answer
	}
	out, err := jsonobj.Edit(answer, func(o jsonobj.Object) jsonobj.Object { return o.SetMeta(legacy.MetaRelatedTask, rt) })
	if err != nil {
		return answer
	}
	return out
}
