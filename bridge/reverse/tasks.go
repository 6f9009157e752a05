package reverse

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/bridge/internal/errmap"
	"github.com/taskbridge/taskbridge/internal/jsonrpc"
	"github.com/taskbridge/taskbridge/legacy"
	"github.com/taskbridge/taskbridge/mapping"
	"github.com/taskbridge/taskbridge/record"
	"github.com/taskbridge/taskbridge/sep2663"
)

// tasksGet answers the modern tasks/get from the record, refreshed from the upstream
// first: status mapped, payload inlined once terminal, unanswered inputs as inputRequests.
func (r *Reverse) tasksGet(ctx context.Context, req *sep2663.Request) (json.RawMessage, error) {
	rec, err := r.lookupTask(ctx, req)
	if err != nil {
		return nil, err
	}
	r.hold(rec)
	rec = r.refresh(ctx, rec)
	if rec.Status.Terminal() && !settled(rec) {
		rec = r.awaitFinal(ctx, rec)
	}
	ins, err := r.st.ListInputs(ctx, rec.ID)
	if err != nil {
		r.log.Warn().Err(err).Str("task", rec.ID).Msg("reverse: inputs unreadable")
	}
	return json.Marshal(sep2663.GetTaskResult{ResultType: sep2663.ResultComplete, DetailedTask: r.detailed(rec, ins)})
}

// refresh reads the upstream task with tasks/get and records what changed. Transport
// failures keep the stored view (stale beats nothing); a vanished session or task marks
// the task lost.
func (r *Reverse) refresh(ctx context.Context, rec *record.Task) *record.Task {
	if rec.UpstreamTaskID == "" || rec.Status.Terminal() {
		return rec
	}
	ctx, cancel := context.WithTimeout(ctx, r.cfg.StatusTimeout)
	defer cancel()
	params, _ := json.Marshal(legacy.TaskIDParams{TaskID: rec.UpstreamTaskID})
	res, err := r.sessionFor(rec).Call(ctx, "tasks/get", params, legacy.CallOptions{})
	if err != nil {
		if errors.Is(err, legacy.ErrSessionGone) || errmap.IsNotFound(err) {
			if lost, lerr := r.markLost(ctx, rec.ID); lerr == nil {
				return lost
			}
		}
		return rec
	}
	var lt legacy.Task
	if json.Unmarshal(res, &lt) != nil || lt.Status == "" || lt.TaskID != rec.UpstreamTaskID {
		return rec // an invalid reply, or one about another task, is never adopted
	}
	next, err := r.update(ctx, rec.ID, func(cur *record.Task) bool {
		if cur.Status.Terminal() || !viewChanged(cur, lt) { // a terminal view never changes
			return false
		}
		r.applyView(cur, lt)
		return true
	})
	if err != nil {
		return rec
	}
	return next
}

// awaitFinal waits (bounded) for the payload of a task the upstream reports terminal: a
// holder (here or on another replica) writes it to the store; if none does within
// StatusTimeout/2, this request asks tasks/result once itself.
func (r *Reverse) awaitFinal(ctx context.Context, rec *record.Task) *record.Task {
	deadline := time.Now().Add(r.cfg.StatusTimeout / 2)
	for time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return rec
		case <-time.After(25 * time.Millisecond):
		}
		if cur, err := r.st.GetTask(ctx, rec.ID); err == nil && settled(cur) {
			return cur
		}
	}
	cctx, cancel := context.WithTimeout(ctx, r.cfg.StatusTimeout/2)
	defer cancel()
	params, _ := json.Marshal(legacy.TaskIDParams{TaskID: rec.UpstreamTaskID})
	res, err := r.sessionFor(rec).Call(cctx, "tasks/result", params, legacy.CallOptions{})
	var je *jsonrpc.Error
	var next *record.Task
	switch {
	case err == nil:
		next, err = r.finish(ctx, rec.ID, res, nil)
	case errors.As(err, &je):
		next, err = r.finish(ctx, rec.ID, nil, je)
	}
	if err != nil || next == nil {
		return rec
	}
	return next
}

// detailed builds the DetailedTask (design §4 status table) from the record and its inputs:
//
//	cancelled                       → cancelled
//	terminal + error (a JSON-RPC    → failed + error (lost: -32010, data outcome "unknown";
//	  error, lost, too large)         a result over max_result_bytes: its error)
//	terminal + result               → completed + result (isError kept: a legacy tool
//	                                  error is completed in SEP-2663)
//	terminal, no payload yet        → working (the next poll inlines it)
//	inputs recorded, unanswered     → input_required + inputRequests
//	otherwise                       → working
func (r *Reverse) detailed(rec *record.Task, ins []record.Input) sep2663.DetailedTask {
	dt := sep2663.DetailedTask{Task: r.modernTask(rec)}
	switch {
	case rec.Status == record.StatusCancelled:
		dt.Status = sep2663.StatusCancelled
	case rec.Status.Terminal() && rec.Error != nil:
		var e jsonrpc.Error
		if json.Unmarshal(rec.Error, &e) != nil {
			e = *jsonrpc.NewError(jsonrpc.CodeInternalError, "task failed")
		}
		dt.Status, dt.Error = sep2663.StatusFailed, &e
	case rec.Status.Terminal() && rec.Result != nil:
		res, err := mapping.ResultForModern(rec.Result)
		if err != nil {
			dt.Status, dt.Error = sep2663.StatusFailed, jsonrpc.AsError(err)
			break
		}
		dt.Status, dt.Result = sep2663.StatusCompleted, res
	case rec.Status.Terminal():
		dt.Status, dt.StatusMessage = sep2663.StatusWorking, "finishing"
	default:
		if reqs := unanswered(ins); len(reqs) > 0 {
			dt.Status, dt.InputRequests = sep2663.StatusInputRequired, reqs
		} else {
			dt.Status = sep2663.StatusWorking
		}
	}
	return dt
}

// unanswered is the inputRequests of the inputs nobody answered yet (nil when none).
func unanswered(ins []record.Input) sep2663.InputRequests {
	var out sep2663.InputRequests
	for _, in := range ins {
		if in.Response != nil {
			continue
		}
		if out == nil {
			out = sep2663.InputRequests{}
		}
		out[in.Key] = sep2663.InputRequest{Method: in.Method, Params: in.Params}
	}
	return out
}

// modernTask renders the Task fields of a record: the bridge id, the bridge's creation
// time, the last change the bridge saw (upstream or input), ttl → ttlMs, the clamped poll
// interval.
func (r *Reverse) modernTask(rec *record.Task) sep2663.Task {
	poll := mapping.ClampPollInterval(rec.UpstreamPollMs, r.cfg.PollFloorMs, r.cfg.PollCeilMs)
	status := sep2663.TaskStatus(rec.Status)
	if !status.IsTerminal() {
		status = sep2663.StatusWorking // refined by detailed()
	}
	upd := rec.LastUpdatedAt
	if upd.Before(rec.CreatedAt) {
		upd = rec.CreatedAt
	}
	return sep2663.Task{
		TaskID: rec.ID, Status: status, StatusMessage: mapping.SanitizeStatusMessage(rec.StatusMessage),
		CreatedAt: mapping.FormatTime(rec.CreatedAt), LastUpdatedAt: mapping.FormatTime(upd),
		TTLMs: rec.TTLMs, PollIntervalMs: &poll,
	}
}

// tasksUpdate records each answer (the first answer to a key wins) and POSTs it to the
// request it answers, by the upstream's id. Unknown, already answered or malformed
// entries are ignored silently (SEP-2663 SHOULD).
func (r *Reverse) tasksUpdate(ctx context.Context, req *sep2663.Request) (json.RawMessage, error) {
	rec, err := r.lookupTask(ctx, req)
	if err != nil {
		return nil, err
	}
	responses := gjson.GetBytes(req.Params, "inputResponses")
	if responses.Exists() && !responses.IsObject() && responses.Type != gjson.Null {
		return nil, jsonrpc.ErrInvalidParams.Wrapf("inputResponses must be an object")
	}
	ins, err := r.st.ListInputs(ctx, rec.ID)
	if err != nil {
		return nil, jsonrpc.NewError(jsonrpc.CodeInternalError, "the task store is unavailable; retry")
	}
	byKey := map[string]record.Input{}
	for _, in := range ins {
		byKey[in.Key] = in
	}
	sess := r.sessionFor(rec)
	now := r.cfg.Now().UTC()
	answered := false
	responses.ForEach(func(k, v gjson.Result) bool {
		in, ok := byKey[k.Str]
		if !ok || !v.IsObject() {
			return true
		}
		first, err := r.st.AnswerInput(ctx, rec.ID, in.Key, json.RawMessage(v.Raw), now)
		if err != nil || !first {
			return true
		}
		in.Response = json.RawMessage(v.Raw)
		r.forwardAnswer(ctx, sess, rec.UpstreamTaskID, in)
		answered = true
		return true
	})
	if answered {
		r.touch(rec.ID, now)
	}
	r.hold(rec)
	return json.RawMessage(`{"resultType":"complete"}`), nil
}

// tasksCancel forwards tasks/cancel and acks. A task that is already terminal upstream
// gets the same ack (the upstream's -32602 for terminal tasks is not the client's error).
func (r *Reverse) tasksCancel(ctx context.Context, req *sep2663.Request) (json.RawMessage, error) {
	rec, err := r.lookupTask(ctx, req)
	if err != nil {
		return nil, err
	}
	if rec.UpstreamTaskID == "" || rec.Status.Terminal() {
		return json.RawMessage(`{"resultType":"complete"}`), nil
	}
	if _, err := r.update(ctx, rec.ID, func(cur *record.Task) bool {
		if cur.OutcomeDetail == cancelRequested || cur.Status.Terminal() {
			return false
		}
		cur.OutcomeDetail = cancelRequested
		return true
	}); err != nil {
		return nil, jsonrpc.NewError(jsonrpc.CodeInternalError, "the task store is unavailable; retry")
	}
	cctx, cancel := context.WithTimeout(ctx, r.cfg.CancelTimeout)
	defer cancel()
	params, _ := json.Marshal(legacy.TaskIDParams{TaskID: rec.UpstreamTaskID})
	res, err := r.sessionFor(rec).Call(cctx, "tasks/cancel", params, legacy.CallOptions{})
	var je *jsonrpc.Error
	switch {
	case err == nil:
		var lt legacy.Task
		if json.Unmarshal(res, &lt) == nil && lt.Status != "" && lt.TaskID == rec.UpstreamTaskID {
			r.record(r.update(ctx, rec.ID, func(cur *record.Task) bool {
				if cur.Status.Terminal() {
					return false
				}
				r.applyView(cur, lt)
				if cur.Status == record.StatusCancelled {
					cur.Outcome = record.OutcomeCancelled
				}
				return true
			}))
		}
	case errors.As(err, &je):
		// terminal or unknown upstream: the next tasks/get tells
	case errors.Is(err, legacy.ErrSessionGone):
		r.record(r.markLost(ctx, rec.ID))
	default:
		return nil, errmap.FromLegacy(err)
	}
	return json.RawMessage(`{"resultType":"complete"}`), nil
}
