package forward

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/bridge/internal/ids"
	"github.com/taskbridge/taskbridge/internal/jsonobj"
	"github.com/taskbridge/taskbridge/internal/jsonrpc"
	"github.com/taskbridge/taskbridge/internal/redact"
	"github.com/taskbridge/taskbridge/internal/trace"
	"github.com/taskbridge/taskbridge/legacy"
	"github.com/taskbridge/taskbridge/mapping"
	"github.com/taskbridge/taskbridge/record"
	"github.com/taskbridge/taskbridge/sep2663"
	"github.com/taskbridge/taskbridge/store"
)

// maxMRTRRounds bounds input_required rounds on one tools/call.
const maxMRTRRounds = 8

// errInputTimeout is the answer to a call whose pre-task input request (an MRTR round) the
// client never answered: the upstream asked before starting anything, so the tool did not
// run, and the caller may retry.
var errInputTimeout = jsonrpc.NewError(jsonrpc.CodeInputTimeout, "the tool asked for input before it started and no answer came in time; the tool did not run")

// notStarted reports whether err is errInputTimeout (however wrapped).
func notStarted(err error) bool {
	var je *jsonrpc.Error
	return errors.As(err, &je) && je.Code == jsonrpc.CodeInputTimeout
}

// callTool calls the upstream tool, relaying MRTR input rounds (resultType
// "input_required") to the client on its open stream and retrying with the answers, until
// the upstream answers with a result or a task. With perCall > 0 each upstream call is
// detached from ctx (its answer must reach the record even if the client hangs up) and
// bounded by perCall; otherwise ctx bounds everything. The waits for the client's answers
// end with ctx or after InputTimeout.
func (b *Bridge) callTool(ctx context.Context, sess *legacy.Session, taskID string, params json.RawMessage, out legacy.Stream, perCall time.Duration) (*sep2663.CallToolOutcome, error) {
	for range maxMRTRRounds {
		cctx, cancel := ctx, context.CancelFunc(func() {})
		if perCall > 0 {
			cctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), perCall)
		}
		oc, err := b.callUpstreamTool(cctx, sess, params, relay(out))
		cancel()
		if err != nil || oc.Kind != sep2663.KindInputRequired {
			return oc, err
		}
		answers, err := b.askClient(ctx, sess, taskID, oc.Input.InputRequests, out)
		if err != nil {
			return nil, err
		}
		if params, err = withInputResponses(params, answers, oc.Input.RequestState); err != nil {
			return nil, err
		}
	}
	return nil, jsonrpc.NewError(jsonrpc.CodeUpstream, fmt.Sprintf("upstream asked for input more than %d times on one call", maxMRTRRounds))
}

// ask is one input request of a pre-task MRTR round waiting for its answer: only the
// session that was asked, under the principal that was asked, may answer it (like stored
// inputs, whose answers are checked against the task's owner).
type ask struct {
	ch      chan *jsonrpc.Message // buffer 1: the first accepted answer
	session string                // the session the request went out on
	owner   string                // owner(sess) of that session: principal or session
}

func sameAsk(a, b *ask) bool { return a == b }

// askClient sends each input request to the client as a server→client request on out and
// waits for every answer (bounded by InputTimeout). With replicas each request is stored
// as an ask first, so the answer may reach any replica (answerSharedAsk); it comes back
// here on an "a" event (collectAsk), or when the wait re-reads the store (askRecheck).
func (b *Bridge) askClient(ctx context.Context, sess *legacy.Session, taskID string, reqs sep2663.InputRequests, out legacy.Stream) (sep2663.InputResponses, error) {
	type wait struct {
		id, key, method string
		ch              chan *jsonrpc.Message
	}
	var waits []wait
	var removes []func()
	defer func() {
		for _, remove := range removes {
			remove()
		}
	}()
	for key, in := range reqs {
		if !declared(sess, in.Method, in.Params) {
			return nil, undeclaredInput(inputKind(in.Method, in.Params))
		}
		method, params, err := mapping.InputToLegacy(taskID, key, in)
		if err != nil {
			return nil, jsonrpc.NewError(jsonrpc.CodeUpstream, "upstream asked for unsupported input: "+err.Error())
		}
		id := ids.NewRequestID()
		ch := make(chan *jsonrpc.Message, 1)
		a := &ask{ch: ch, session: sess.ID, owner: owner(sess)}
		if err := b.reg.putAsk(ctx, &store.Ask{RequestID: id, SessionID: a.session, Owner: a.owner, Method: method,
			ExpiresAt: b.cfg.Now().Add(b.cfg.InputTimeout + time.Minute)}); err != nil {
			b.log.Warn().Err(err).Str("request", redact.Field(id)).Msg("input request not stored; only an answer reaching this replica counts")
		}
		removes = append(removes, b.asks.Put(id, a, sameAsk), func() { b.reg.deleteAsk(ctx, id) })
		waits = append(waits, wait{id: id, key: key, method: method, ch: ch})
		msg, _ := jsonrpc.NewRequest(jsonrpc.StringID(id), method, params)
		if err := out.Send(msg); err != nil {
			return nil, jsonrpc.NewError(jsonrpc.CodeInternalError, "cannot relay the upstream's input request: the client's stream does not accept server requests")
		}
		b.cfg.Metrics.InputRelayed(method)
	}
	timeout := time.NewTimer(b.cfg.InputTimeout)
	defer timeout.Stop()
	var recheck <-chan time.Time
	if b.reg.peers != nil {
		tick := time.NewTicker(askRecheck)
		defer tick.Stop()
		recheck = tick.C
	}
	answers := sep2663.InputResponses{}
	for _, p := range waits {
		for answers[p.key] == nil {
			select {
			case <-ctx.Done():
				return nil, errInputTimeout.Wrapf("the client went away before answering").
					WithData(map[string]any{"retryable": true, "outcome": "failed"})
			case <-timeout.C:
				return nil, errInputTimeout.Wrapf("unanswered for %s", b.cfg.InputTimeout).
					WithData(map[string]any{"retryable": true, "outcome": "failed"})
			case <-recheck:
				b.collectAsk(ctx, p.id) // a lost "a" event
			case msg := <-p.ch:
				res, err := responseToInput(p.method, msg)
				if err != nil {
					return nil, err
				}
				answers[p.key] = res
			}
		}
	}
	return answers, nil
}

// askRecheck is how often a call waiting on stored asks re-reads them, in case the event
// announcing an answer on another replica was lost.
const askRecheck = 2 * time.Second

// collectAsk hands the answer another replica stored for an ask waiting here to its call.
func (b *Bridge) collectAsk(ctx context.Context, requestID string) {
	if _, ok := b.asks.Get(requestID); !ok {
		return // not waiting here (another replica's, or already answered)
	}
	a, err := b.reg.getAsk(ctx, requestID)
	if err != nil || a.AnsweredAt == nil {
		return
	}
	msg, err := jsonrpc.Decode(a.Response)
	if err != nil || !msg.IsResponse() {
		return
	}
	if w, _, taken := b.asks.TakeIf(requestID, func(*ask) bool { return true }); taken {
		w.ch <- msg
	}
}

// answerSharedAsk handles a client's answer to an ask another replica waits on: checked
// against the session and principal that were asked, stored first-answer-wins and
// announced to the holder. It reports whether id named a stored ask at all.
func (b *Bridge) answerSharedAsk(ctx context.Context, sess *legacy.Session, id string, msg *jsonrpc.Message) bool {
	a, err := b.reg.getAsk(ctx, id)
	if err != nil {
		return false
	}
	if own, ok := b.callerOwner(ctx, sess); !ok || sess.ID != a.SessionID || own != a.Owner {
		b.cfg.Metrics.AnswerRefused("foreign_input_answer")
		b.log.Warn().Str("request", redact.Field(id)).Msg("answer to an input request from a session or principal that was not asked dropped")
		return true
	}
	raw, err := jsonrpc.Encode(msg)
	if err != nil {
		return true
	}
	if _, err := b.reg.answerAsk(ctx, id, raw); err != nil {
		b.log.Warn().Err(err).Str("request", redact.Field(id)).Msg("answer to an input request waiting on another replica not stored")
	}
	return true
}

// responseToInput turns a client's JSON-RPC response into an InputResponse. An error
// response to an elicitation counts as "cancel"; to anything else it cannot be expressed.
func responseToInput(method string, msg *jsonrpc.Message) (json.RawMessage, error) {
	if msg.Error != nil {
		if method == "elicitation/create" {
			return json.RawMessage(`{"action":"cancel"}`), nil
		}
		return nil, jsonrpc.NewError(jsonrpc.CodeInvalidParams, "client refused the "+method+" request: "+msg.Error.Message)
	}
	return mapping.InputResponseToModern(msg.Result)
}

// withInputResponses is the MRTR retry's params: the call's own, as written, with
// inputResponses and the upstream's requestState (internal/jsonobj).
func withInputResponses(params json.RawMessage, answers sep2663.InputResponses, state string) (json.RawMessage, error) {
	return jsonobj.Edit(params, func(o jsonobj.Object) jsonobj.Object {
		o = o.Set("inputResponses", mustJSON(answers)).Without("requestState")
		if state != "" {
			o = o.Set("requestState", mustJSON(state))
		}
		return o
	})
}

// declared reports whether the legacy client declared the capability an input needs.
func declared(sess *legacy.Session, method string, params json.RawMessage) bool {
	caps := sess.ClientCapabilities
	switch method {
	case "elicitation/create":
		el := gjson.GetBytes(caps, "elicitation")
		if !el.Exists() {
			return false
		}
		if gjson.GetBytes(params, "mode").Str == "url" {
			return el.Get("url").Exists()
		}
		return true // {} (2025-06-18) or {form:{}}
	case "sampling/createMessage":
		return gjson.GetBytes(caps, "sampling").Exists()
	case "roots/list":
		return gjson.GetBytes(caps, "roots").Exists()
	}
	return false
}

// inputKind names an input request for a message: its method, and for a URL-mode
// elicitation that mode, since a client may declare form elicitation without URL mode.
func inputKind(method string, params json.RawMessage) string {
	if method == "elicitation/create" && gjson.GetBytes(params, "mode").Str == "url" {
		return "elicitation/create in URL mode (capability elicitation.url)"
	}
	return method
}

func undeclaredInput(method string) *jsonrpc.Error {
	return jsonrpc.NewError(jsonrpc.CodeUpstream,
		"the upstream asked for "+method+", a capability this client did not declare")
}

// relayInputs records an upstream task's outstanding input requests and delivers them.
// A request for a kind the client did not declare fails the task instead of hanging it.
func (b *Bridge) relayInputs(ctx context.Context, t *tracker, inputs map[string]sep2663.InputRequest) {
	rec := t.snapshot()
	sess, _ := b.session(ctx, rec.SessionID)
	var list []record.Input
	for key, in := range inputs {
		if !declared(sess, in.Method, in.Params) {
			b.failUndeclared(ctx, t, sess, inputKind(in.Method, in.Params))
			return
		}
		method, params, err := mapping.InputToLegacy(rec.ID, key, in)
		if err != nil {
			b.failUndeclared(ctx, t, sess, in.Method)
			return
		}
		list = append(list, record.Input{TaskID: rec.ID, Key: key, Method: method, Params: params})
	}
	if err := b.reg.putInputs(ctx, list); err != nil {
		b.log.Error().Err(err).Str("task", rec.ID).Msg("store inputs")
		return
	}
	b.reg.announceDeliver(ctx, rec.ID) // the client's stream may be on another replica
	b.deliverInputs(ctx, t)
}

func (b *Bridge) failUndeclared(ctx context.Context, t *tracker, sess *legacy.Session, method string) {
	msg := "The upstream asked for " + method + ", which this client did not declare; the task was stopped."
	rec, err := t.update(ctx, func(r *record.Task) bool {
		if r.Status.Terminal() {
			return false
		}
		r.Status = record.StatusFailed
		r.StatusMessage = msg
		r.Outcome = record.OutcomeFailed
		r.Error = mustJSON(jsonrpc.NewError(jsonrpc.CodeInternalError, msg).WithData(map[string]any{"retryable": false, "outcome": "failed"}))
		r.LastUpdatedAt = b.cfg.Now().UTC()
		return true
	})
	if err == nil && rec.UpstreamTaskID != "" {
		cctx, cancel := context.WithTimeout(ctx, b.cfg.CancelTimeout)
		_ = b.up.CancelTask(cctx, rec.UpstreamTaskID, b.meta(sess))
		cancel()
	}
}

// deliverInputs sends every unanswered input of the task: on each blocked tasks/result
// stream here that has not carried it yet (unless it went out on a still-open GET stream),
// else once on the session's GET stream. With replicas, only the replica holding the
// input's claim sends it (carry): the first to claim delivers, and the others leave it to
// it until it releases the claim or dies. An answer stored but not forwarded within the
// forward timeout (its forwarder failed or died) is forwarded again.
func (b *Bridge) deliverInputs(ctx context.Context, t *tracker) {
	ins, err := b.reg.listInputs(ctx, t.id)
	if err != nil {
		return
	}
	rec := t.snapshot()
	getOpen := b.face.HasGetStream(rec.SessionID)
	t.mu.Lock()
	streams := append([]*resultStream(nil), t.streams...)
	if t.onGet == nil {
		t.onGet = map[string]bool{}
	}
	t.mu.Unlock()
	for _, in := range ins {
		if in.AnsweredAt != nil {
			if in.ForwardedAt == nil && time.Since(*in.AnsweredAt) > b.cfg.CancelTimeout+time.Second {
				b.forwardAnswer(ctx, rec, in.Key, in.Response)
			}
			continue
		}
		t.mu.Lock()
		pushed := t.onGet[in.Key]
		t.mu.Unlock()
		switch {
		case pushed && getOpen:
			// delivered on the GET stream, which is still open
		case len(streams) > 0:
			if msg := b.carry(ctx, t, in); msg != nil {
				for _, rs := range streams {
					rs.send(in.Key, msg)
				}
			}
		case !pushed && getOpen:
			if msg := b.carry(ctx, t, in); msg != nil && b.face.Push(rec.SessionID, msg) {
				t.mu.Lock()
				t.onGet[in.Key] = true
				t.mu.Unlock()
			}
		}
	}
}

// carry claims an input for this process's streams and returns the request to send, with
// the bridge-issued id the input keeps for every delivery; nil when another replica
// carries it (or no id could be issued).
func (b *Bridge) carry(ctx context.Context, t *tracker, in record.Input) *jsonrpc.Message {
	if !b.reg.claimInput(ctx, in.TaskID, in.Key, b.claimTTL()) {
		return nil
	}
	t.markCarried(in.Key)
	reqID := in.RequestID
	if reqID == "" {
		var first bool
		if reqID, first = b.assignRequestID(ctx, in); reqID == "" {
			return nil
		}
		if first {
			b.cfg.Metrics.InputRelayed(in.Method) // counted once, when the bridge issues its id
		}
	}
	msg, _ := jsonrpc.NewRequest(jsonrpc.StringID(reqID), in.Method, in.Params)
	return msg
}

// claimTTL is how long an input claim outlives its last renewal (keepClaims runs on every
// tracker turn and on every tasks/result heartbeat): a dead carrier's inputs go to another
// replica's stream after at most this long.
func (b *Bridge) claimTTL() time.Duration { return 2*b.cfg.Heartbeat + 5*time.Second }

// keepClaims renews the claims this process holds on the task's inputs while a stream of
// its own may still carry them (a tasks/result here, or the GET stream they were pushed
// on; at most every half heartbeat), and releases the others at once, telling the replicas ("d") so the client's next stream
// gets them at once.
func (b *Bridge) keepClaims(ctx context.Context, t *tracker) {
	if b.reg.peers == nil {
		return
	}
	rec := t.snapshot()
	getOpen := b.face.HasGetStream(rec.SessionID)
	t.mu.Lock()
	keys := make([]string, 0, len(t.carried))
	for k := range t.carried {
		keys = append(keys, k)
	}
	streams, onGet := len(t.streams), maps.Clone(t.onGet)
	t.mu.Unlock()
	t.mu.Lock()
	renew := time.Since(t.renewed) >= b.cfg.Heartbeat/2
	if renew {
		t.renewed = time.Now()
	}
	t.mu.Unlock()
	released := false
	for _, k := range keys {
		if streams > 0 || (onGet[k] && getOpen) {
			if renew && !b.reg.claimInput(ctx, t.id, k, b.claimTTL()) {
				t.dropCarried(k) // answered, or expired and taken by another replica
			}
			continue
		}
		b.reg.releaseInput(ctx, t.id, k)
		t.dropCarried(k)
		released = true
	}
	if released {
		b.reg.announceDeliver(ctx, t.id)
	}
}

// answerInput handles a client's response to a relayed input request. It is matched by the
// JSON-RPC id the bridge issued (never by a related-task _meta the client claims), checked
// against the task's owner, stored first-answer-wins, and forwarded with tasks/update.
func (b *Bridge) answerInput(ctx context.Context, sess *legacy.Session, msg *jsonrpc.Message) {
	id := msg.ID.String()
	a, found, taken := b.asks.TakeIf(id, func(a *ask) bool { return b.askedHere(ctx, sess, a) })
	if found && !taken {
		// Someone else learnt the id: ignored (acknowledged like any answer), counted, and
		// the request stays open for the client that was asked.
		b.cfg.Metrics.AnswerRefused("foreign_input_answer")
		b.log.Warn().Str("request", redact.Field(id)).Msg("answer to an input request from a session or principal that was not asked dropped")
		return
	}
	if taken {
		a.ch <- msg
		return
	}
	if !found && b.answerSharedAsk(ctx, sess, id, msg) {
		return // an MRTR ask another replica waits on
	}
	in, err := b.reg.findInput(ctx, id)
	if err != nil {
		b.log.Info().Str("request", redact.Field(id)).Msg("answer to an unknown input request dropped")
		return
	}
	rec, err := b.reg.fresh(ctx, in.TaskID)
	if err != nil || !b.owns(ctx, sess, rec) {
		b.log.Warn().Str("request", redact.Field(id)).Msg("answer from a session that does not own the task dropped")
		return
	}
	trace.Task(ctx, rec.ID, rec.TraceParent)
	resp, err := responseToInput(in.Method, msg)
	if err != nil {
		b.log.Info().Err(err).Str("task", rec.ID).Msg("input answer not usable")
		return
	}
	first, err := b.reg.answerInput(ctx, in.TaskID, in.Key, resp)
	if err != nil || !first {
		return // duplicate or late: acknowledged (202) and dropped
	}
	b.forwardAnswer(ctx, rec, in.Key, resp)
	b.reg.announceAnswer(ctx, rec.ID, in.Key)
	if t := b.reg.tracker(rec.ID); t != nil {
		t.mu.Lock()
		for _, rs := range t.streams {
			rs.answered(in.Key)
		}
		t.mu.Unlock()
		t.nudge()
	}
}

// askedHere reports whether sess (under the principal of this very request) is the one an
// MRTR input request was sent to.
func (b *Bridge) askedHere(ctx context.Context, sess *legacy.Session, a *ask) bool {
	own, ok := b.callerOwner(ctx, sess)
	return ok && sess.ID == a.session && own == a.owner
}

// forwardAnswer sends one answer upstream with tasks/update and records that it went.
func (b *Bridge) forwardAnswer(ctx context.Context, rec *record.Task, key string, resp json.RawMessage) {
	sess, _ := b.session(ctx, rec.SessionID)
	cctx, cancel := context.WithTimeout(trace.ForTask(context.WithoutCancel(ctx), rec.ID, rec.TraceParent), b.cfg.CancelTimeout)
	defer cancel()
	err := b.up.UpdateTask(cctx, rec.UpstreamTaskID, sep2663.InputResponses{key: resp}, b.meta(sess))
	if err != nil {
		var je *jsonrpc.Error
		if !errors.As(err, &je) {
			b.log.Warn().Err(err).Str("task", rec.ID).Msg("tasks/update failed; will retry on the next poll")
			return
		}
	}
	_ = b.reg.markForwarded(ctx, rec.ID, key)
}

// assignRequestID gives an input its delivery id: a fresh one (first=true), unless another
// goroutine or replica delivered it first, whose id then stands (the store keeps the first).
func (b *Bridge) assignRequestID(ctx context.Context, in record.Input) (id string, first bool) {
	id = ids.NewRequestID()
	err := b.reg.markDelivered(ctx, in.TaskID, in.Key, id)
	if err == nil {
		return id, true
	}
	if !errors.Is(err, store.ErrConflict) {
		return "", false
	}
	ins, err := b.reg.listInputs(ctx, in.TaskID)
	if err != nil {
		return "", false
	}
	for _, cur := range ins {
		if cur.Key == in.Key {
			return cur.RequestID, false
		}
	}
	return "", false
}

// markCarried records that this process holds the claim on input key.
func (t *tracker) markCarried(key string) {
	t.mu.Lock()
	if t.carried == nil {
		t.carried = map[string]bool{}
	}
	t.carried[key] = true
	t.mu.Unlock()
}

func (t *tracker) dropCarried(key string) {
	t.mu.Lock()
	delete(t.carried, key)
	t.mu.Unlock()
}
