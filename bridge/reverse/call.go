package reverse

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/bridge/internal/errmap"
	"github.com/taskbridge/taskbridge/bridge/internal/gate"
	"github.com/taskbridge/taskbridge/bridge/internal/ids"
	"github.com/taskbridge/taskbridge/internal/jsonrpc"
	"github.com/taskbridge/taskbridge/internal/redact"
	"github.com/taskbridge/taskbridge/legacy"
	"github.com/taskbridge/taskbridge/mapping"
	"github.com/taskbridge/taskbridge/record"
	"github.com/taskbridge/taskbridge/sep2663"
)

// gatherWindow is how long the bridge waits after a first server request on a held call
// for more to follow (a tool that asks several questions at once), so that one
// input_required result carries them all.
const gatherWindow = 50 * time.Millisecond

// heldCall is an upstream tools/call kept open while the modern client answers the
// server's requests through MRTR retries. Its requestState is a random handle (128 bits),
// bound to the owner; it is consumed when the call ends.
type heldCall struct {
	state  string
	owner  string
	method string // tools/call or prompts/get: a retry must be the same method
	asTask bool
	tool   string
	intent string // the intent record's id (asTask), else ""
	box    *inputBox
	cancel context.CancelFunc
	done   chan struct{} // closed when the upstream call returned and was recorded; then res/rec/err are set
	res    json.RawMessage
	rec    *record.Task // the created task's record (a CreateTaskResult)
	err    error

	turn  sync.Mutex  // one client round at a time
	timer *time.Timer // expiry while waiting for the client's retry; guarded by turn

	// stream is the reply stream of the client request waiting on the call (nil between
	// rounds): the upstream's progress notifications on the call's stream go there.
	stream atomic.Pointer[sep2663.Stream]
}

var errUnknownRequestState = jsonrpc.ErrInvalidParams.Wrapf("requestState is unknown or expired; call the tool again without it")

// toolsCall is the modern tools/call (design §4).
func (r *Reverse) toolsCall(ctx context.Context, req *sep2663.Request) (json.RawMessage, error) {
	if rs := gjson.GetBytes(req.Params, "requestState"); rs.Exists() {
		return r.resume(ctx, req, rs.String())
	}
	if ir := gjson.GetBytes(req.Params, "inputResponses"); ir.Exists() && !ir.IsObject() {
		return nil, jsonrpc.ErrInvalidParams.Wrapf("inputResponses must be an object")
	}
	name := gjson.GetBytes(req.Params, "name")
	if name.Type != gjson.String {
		return nil, jsonrpc.ErrInvalidParams.Wrapf("params.name must be a string")
	}
	mode, in, err := r.toolMode(ctx, name.Str)
	if err != nil {
		return nil, errmap.FromLegacy(err)
	}
	// The bridge is the 2026-07-28 server here: it enforces the Mcp-Param-* headers of the
	// upstream tool's x-mcp-header annotations (the legacy server never sees them).
	if req.HTTP != nil {
		if err := sep2663.CheckParamHeaders(req.HTTP.Header, in.params[name.Str], json.RawMessage(gjson.GetBytes(req.Params, "arguments").Raw)); err != nil {
			return nil, err
		}
	}
	taskable := in.tasksCall && (mode == legacy.TaskSupportOptional || mode == legacy.TaskSupportRequired)
	if mode == legacy.TaskSupportRequired && in.tasksCall && !req.Tasks() {
		return nil, sep2663.MissingTasksError("tool " + name.Str + " runs only as a task")
	}
	p, err := mapping.LegacyParams(req.Params)
	if err != nil {
		return nil, err
	}
	asTask := taskable && req.Tasks()
	owner := r.owner(req)
	var release func()
	if asTask {
		release, err = r.gate.StartTask(ctx, gate.Task{Era: gate.LegacyUpstream, Owner: owner,
			Active: func(ctx context.Context) (int, error) { return r.st.CountActive(ctx, owner) }})
		p = p.Set("task", json.RawMessage(`{}`)) // the upstream picks the ttl
	} else {
		release, err = r.gate.Acquire()
	}
	if err != nil {
		return nil, err
	}
	params := p.Encode()
	intent := ""
	if asTask {
		rec, err := r.newIntent(ctx, owner, name.Str, req.Params, mapping.InputCapsOf(req.CapabilitiesRaw))
		if err != nil {
			release()
			return nil, err
		}
		intent = rec.ID
	}
	hc := r.startCall(req, owner, name.Str, params, intent, release)
	return r.waitCall(ctx, hc, req)
}

// promptsGet is the modern prompts/get: like a synchronous tools/call, the upstream may
// ask for input on the call's stream first (MRTR; the suite's non-tool-request scenario).
func (r *Reverse) promptsGet(ctx context.Context, req *sep2663.Request) (json.RawMessage, error) {
	if rs := gjson.GetBytes(req.Params, "requestState"); rs.Exists() {
		return r.resume(ctx, req, rs.String())
	}
	if ir := gjson.GetBytes(req.Params, "inputResponses"); ir.Exists() && !ir.IsObject() {
		return nil, jsonrpc.ErrInvalidParams.Wrapf("inputResponses must be an object")
	}
	p, err := mapping.LegacyParams(req.Params)
	if err != nil {
		return nil, err
	}
	release, err := r.gate.Acquire()
	if err != nil {
		return nil, err
	}
	hc := r.startCall(req, r.owner(req), "", p.Encode(), "", release)
	return r.waitCall(ctx, hc, req)
}

// startCall runs the upstream call (req.Method: tools/call or prompts/get) on its own
// goroutine (it may outlive this HTTP request while the client answers MRTR input), and
// records its outcome on the intent (intent != "") before anyone can read it. release
// returns the gate's upstream slot when the call has answered. The request's
// inputResponses answer the questions the upstream names the same way before they are
// shown (inputBox.preset); its reply stream gets the call's progress from the start.
func (r *Reverse) startCall(req *sep2663.Request, owner, tool string, params json.RawMessage, intent string, release func()) *heldCall {
	key := r.poolKey(req) // the caller's session: its owner and declared capabilities
	hc := &heldCall{
		state: ids.NewTaskID(), owner: owner, method: req.Method, asTask: intent != "", tool: tool, intent: intent,
		box:  newInputBox("mrtr-", r.cfg.Now),
		done: make(chan struct{}),
	}
	if ir := gjson.GetBytes(req.Params, "inputResponses"); ir.IsObject() {
		hc.box.preset(json.RawMessage(ir.Raw))
	}
	hc.stream.Store(req.Stream())
	cctx, cancel := context.WithTimeout(r.ctx, r.cfg.CreateTimeout+r.cfg.InputTimeout)
	hc.cancel = cancel
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		defer cancel()
		if hc.asTask {
			defer r.creatingStarted(owner)() // until the task is registered (getstream.go)
		}
		res, sess, err := r.pool.Call(cctx, key, hc.method, params, legacy.CallOptions{OnRequest: hc.box.handler(), OnNotify: r.callNotify(hc)})
		release()
		hc.res, hc.err = res, err
		if hc.asTask {
			r.settleCall(hc, sess)
		}
		close(hc.done)
	}()
	return hc
}

// settleCall records a task-augmented call's outcome on its intent: a CreateTaskResult
// becomes the task (upstream task and session ids, written before the reply, and its
// held tasks/result); anything else ends the intent, which nobody will ever look up.
func (r *Reverse) settleCall(hc *heldCall, sess *legacy.UpstreamSession) {
	ctx := r.ctx
	var je *jsonrpc.Error
	switch {
	case hc.err == nil && gjson.GetBytes(hc.res, "task.taskId").Type == gjson.String:
		var ct legacy.CreateTaskResult
		if err := json.Unmarshal(hc.res, &ct); err != nil {
			hc.err = jsonrpc.NewError(jsonrpc.CodeUpstream, "upstream CreateTaskResult is malformed")
			r.endIntent(ctx, hc.intent, record.StatusFailed, record.OutcomeUnknown, "the upstream's CreateTaskResult is malformed")
			return
		}
		rec, err := r.created(ctx, hc.intent, sess, ct.Task)
		if err != nil {
			// The task runs upstream but no restart could find it: tell the upstream to stop.
			r.log.Error().Err(err).Str("task", hc.intent).Msg("reverse: created task not recorded; cancelling it upstream")
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.CancelTimeout)
			p, _ := json.Marshal(legacy.TaskIDParams{TaskID: ct.Task.TaskID})
			_, _ = sess.Call(cctx, "tasks/cancel", p, legacy.CallOptions{})
			cancel()
			hc.err = errNotRecorded
			return
		}
		r.keepSession(sess)
		hc.rec = rec
		r.hold(rec)
		r.log.Debug().Str("task", rec.ID).Str("upstreamTask", redact.Field(rec.UpstreamTaskID)).Str("tool", redact.Field(hc.tool)).Msg("reverse task created")
	case hc.err == nil:
		r.endIntent(ctx, hc.intent, record.StatusCompleted, record.OutcomeSucceeded, "the upstream answered without a task")
	case errors.As(hc.err, &je):
		r.endIntent(ctx, hc.intent, record.StatusFailed, record.OutcomeFailed, "the upstream refused the call")
	default:
		r.endIntent(ctx, hc.intent, record.StatusFailed, record.OutcomeUnknown, "the upstream call failed or was abandoned; the outcome is unknown")
	}
}

// relay sends the upstream's progress notifications on the call's stream to the waiting
// client's reply stream, unchanged (the progressToken is the client's own: _meta passes
// through). Between rounds nobody waits, and they are dropped.
func (hc *heldCall) relay(m *jsonrpc.Message) {
	if m.Method != "notifications/progress" {
		return
	}
	if s := hc.stream.Load(); s != nil {
		s.Send(m)
	}
}

// resume continues a held call with the client's inputResponses.
func (r *Reverse) resume(ctx context.Context, req *sep2663.Request, state string) (json.RawMessage, error) {
	hc, _ := r.held.Get(state)
	if hc == nil || hc.owner != r.owner(req) || hc.method != req.Method {
		return nil, errUnknownRequestState
	}
	if ir := gjson.GetBytes(req.Params, "inputResponses"); ir.Exists() && !ir.IsObject() {
		return nil, jsonrpc.ErrInvalidParams.Wrapf("inputResponses must be an object")
	}
	if !hc.turn.TryLock() {
		return nil, jsonrpc.ErrInvalidRequest.Wrapf("a retry with this requestState is already in progress")
	}
	if hc.timer != nil {
		hc.timer.Stop()
	}
	hc.turn.Unlock()
	if _, err := hc.box.answerAll(json.RawMessage(gjson.GetBytes(req.Params, "inputResponses").Raw)); err != nil {
		return nil, err
	}
	return r.waitCall(ctx, hc, req)
}

// waitCall waits for the held call to end or to ask for input. Input is returned as an
// input_required result and the call stays held (for InputTimeout) under its requestState.
// The capabilities the waiting request declared decide what may be shown: an input of a
// kind they lack is never sent (MRTR: servers MUST NOT); the call ends upstream and the
// client gets -32021 naming the capability (issue 16 item 6). While it waits, the call's
// progress goes to req's reply stream.
func (r *Reverse) waitCall(ctx context.Context, hc *heldCall, req *sep2663.Request) (json.RawMessage, error) {
	caps := req.CapabilitiesRaw
	hc.turn.Lock()
	defer hc.turn.Unlock()
	hc.stream.Store(req.Stream())
	defer hc.stream.Store(nil)
	wait := time.NewTimer(r.cfg.CreateTimeout)
	defer wait.Stop()
	for {
		if reqs := hc.box.unanswered(); len(reqs) > 0 {
			if !r.settle(ctx, hc) {
				return nil, ctx.Err()
			}
			if reqs = hc.box.unanswered(); len(reqs) > 0 {
				if err := undeclaredInput(caps, reqs); err != nil {
					r.unhold(hc)
					hc.cancel()
					return nil, err
				}
				return r.park(hc, reqs)
			}
		}
		select {
		case <-hc.done:
			r.unhold(hc)
			return r.callOutcome(hc)
		case <-hc.box.changed:
		case <-wait.C:
			r.unhold(hc)
			hc.cancel()
			return nil, jsonrpc.NewError(jsonrpc.CodeUpstream, "upstream timed out")
		case <-ctx.Done():
			// The client went away without learning a requestState: nobody can resume.
			if !r.isHeld(hc) {
				hc.cancel()
			}
			return nil, ctx.Err()
		}
	}
}

// settle waits gatherWindow for more requests (or the end of the call); false when ctx ended.
func (r *Reverse) settle(ctx context.Context, hc *heldCall) bool {
	t := time.NewTimer(gatherWindow)
	defer t.Stop()
	select {
	case <-t.C:
	case <-hc.done:
	case <-ctx.Done():
		return false
	}
	return true
}

// park registers hc under a fresh requestState and answers input_required. Each round
// gets its own state (the previous one is spent), so a retry carries the latest round's
// state and a replay of an earlier one is refused (SEP-2322; issue 16 item 4). Called with
// hc.turn held, like every other writer of hc.state.
func (r *Reverse) park(hc *heldCall, reqs sep2663.InputRequests) (json.RawMessage, error) {
	r.unhold(hc)
	hc.state = ids.NewTaskID()
	state := hc.state
	r.held.Put(state, hc, sameCall)
	hc.timer = time.AfterFunc(r.cfg.InputTimeout, func() {
		r.held.DeleteIf(state, func(cur *heldCall) bool { return cur == hc })
		hc.cancel()
	})
	return json.Marshal(sep2663.InputRequiredResult{ResultType: sep2663.ResultInputRequired, InputRequests: reqs, RequestState: hc.state})
}

func (r *Reverse) isHeld(hc *heldCall) bool {
	cur, _ := r.held.Get(hc.state)
	return cur == hc
}

func (r *Reverse) unhold(hc *heldCall) {
	r.held.DeleteIf(hc.state, func(cur *heldCall) bool { return cur == hc })
}

func sameCall(a, b *heldCall) bool { return a == b }

// callOutcome turns the upstream's answer into the modern reply: a CreateTaskResult
// becomes a bridge task (flat resultType:"task"), a CallToolResult gets
// resultType:"complete", a JSON-RPC error passes through.
func (r *Reverse) callOutcome(hc *heldCall) (json.RawMessage, error) {
	if hc.err != nil {
		return nil, errmap.FromLegacy(hc.err)
	}
	if hc.rec != nil {
		return json.Marshal(sep2663.CreateTaskResult{ResultType: sep2663.ResultTask, Task: r.modernTask(hc.rec)})
	}
	return mapping.ResultForModern(hc.res)
}

// undeclaredInput is the -32021 for the first input request whose kind the client's
// capabilities lack (elicitation, its form or URL mode, sampling, sampling with tools,
// roots: mapping.InputCaps.Missing), or nil.
func undeclaredInput(caps json.RawMessage, reqs sep2663.InputRequests) error {
	set := mapping.InputCapsOf(caps)
	for _, in := range reqs {
		if need, required := set.Missing(in.Method, in.Params); need != "" {
			return sep2663.ErrMissingCapability.Wrapf("the tool asked for %s, which needs the client capability %s, not declared in this request", in.Method, need).
				WithData(map[string]any{"requiredCapabilities": required})
		}
	}
	return nil
}
