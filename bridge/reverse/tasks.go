package reverse

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/bridge/internal/errmap"
	"github.com/taskbridge/taskbridge/bridge/internal/ids"
	"github.com/taskbridge/taskbridge/internal/jsonrpc"
	"github.com/taskbridge/taskbridge/internal/redact"
	"github.com/taskbridge/taskbridge/legacy"
	"github.com/taskbridge/taskbridge/mapping"
	"github.com/taskbridge/taskbridge/sep2663"
)

// msgUnknownOutcome is the statusMessage of a task whose upstream session or task
// vanished before it ended: the work may or may not have happened.
const msgUnknownOutcome = "the upstream session holding this task is gone; the outcome of the operation is unknown (do not assume it did not run)"

// rtask is one bridge task on the reverse route: a legacy task in one upstream session.
// The bridge keeps a tasks/result call open upstream from creation on; the requests that
// arrive on it are the task's inputRequests, and its answer is the task's payload.
//
// Concurrency: id, owner, tool, sess, upID, created and box are set at creation; mu guards
// last, lost, final and finalSet; finalCh is closed once final is set.
type rtask struct {
	id, owner, tool string
	sess            *legacy.UpstreamSession
	upID            string
	created         time.Time
	box             *inputBox

	mu       sync.Mutex
	last     legacy.Task // last upstream view (status, timestamps, ttl, pollInterval)
	lost     bool        // upstream session or task vanished while non-terminal
	final    taskFinal
	finalSet bool
	finalCh  chan struct{}
}

// taskFinal is the answer of the held tasks/result: a result object or a JSON-RPC error.
type taskFinal struct {
	result json.RawMessage
	err    *jsonrpc.Error
}

// rtaskView is a consistent copy of an rtask's mutable state.
type rtaskView struct {
	last     legacy.Task
	lost     bool
	final    taskFinal
	finalSet bool
}

func (t *rtask) snapshot() rtaskView {
	t.mu.Lock()
	defer t.mu.Unlock()
	return rtaskView{last: t.last, lost: t.lost, final: t.final, finalSet: t.finalSet}
}

// registerTask records a new legacy task (the reply goes out after this returns, so a
// tasks/get right after it finds the task) and starts holding its tasks/result.
func (r *Reverse) registerTask(owner, tool string, sess *legacy.UpstreamSession, lt legacy.Task) *rtask {
	t := &rtask{
		id: ids.NewTaskID(), owner: owner, tool: tool, sess: sess, upID: lt.TaskID,
		created: r.cfg.Now(), box: newInputBox("in-", r.cfg.Now), last: lt,
		finalCh: make(chan struct{}),
	}
	r.mu.Lock()
	r.pruneLocked()
	r.tasks[t.id] = t
	r.mu.Unlock()
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		r.holdResult(t)
	}()
	r.log.Debug().Str("task", t.id).Str("upstreamTask", redact.Field(t.upID)).Str("tool", redact.Field(tool)).Msg("reverse task created")
	return t
}

// pruneLocked forgets tasks whose ttl ran out (plus a minute of grace). r.mu is held.
func (r *Reverse) pruneLocked() {
	now := r.cfg.Now()
	for id, t := range r.tasks {
		t.mu.Lock()
		ttl := t.last.TTL
		t.mu.Unlock()
		if ttl != nil && now.Sub(t.created) > time.Duration(*ttl)*time.Millisecond+time.Minute {
			delete(r.tasks, id)
		}
	}
}

// holdResult keeps legacy tasks/result open until it answers, retrying when the stream
// breaks, and records the payload. A vanished session or task marks the task lost.
func (r *Reverse) holdResult(t *rtask) {
	params, _ := json.Marshal(legacy.TaskIDParams{TaskID: t.upID})
	backoff := 250 * time.Millisecond
	for {
		cctx, cancel := context.WithCancel(r.ctx)
		res, err := t.sess.Call(cctx, "tasks/result", params, legacy.CallOptions{OnRequest: t.box.handler()})
		cancel() // releases input handlers still waiting
		switch {
		case err == nil:
			t.setFinal(taskFinal{result: res})
			return
		case r.ctx.Err() != nil:
			return
		case errors.Is(err, legacy.ErrSessionGone):
			t.markLost()
			return
		}
		var je *jsonrpc.Error
		if errors.As(err, &je) {
			t.setFinal(taskFinal{err: je})
			return
		}
		select { // the stream broke: wait, then ask again (tasks/result is idempotent)
		case <-r.ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

func (t *rtask) setFinal(f taskFinal) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.finalSet {
		t.final, t.finalSet = f, true
		close(t.finalCh)
	}
}

func (t *rtask) markLost() {
	t.mu.Lock()
	if !t.last.Status.Terminal() {
		t.lost = true
	}
	t.mu.Unlock()
}

// lookupTask returns the caller's task, or errmap.ErrTaskNotFound (the same bytes for unknown and
// foreign ids).
func (r *Reverse) lookupTask(req *sep2663.Request) (*rtask, error) {
	id := gjson.GetBytes(req.Params, "taskId")
	if id.Type != gjson.String {
		return nil, jsonrpc.ErrInvalidParams.Wrapf("params.taskId must be a string")
	}
	r.mu.Lock()
	t := r.tasks[id.Str]
	r.mu.Unlock()
	if t == nil || t.owner != r.owner(req) {
		return nil, errmap.ErrTaskNotFound
	}
	return t, nil
}

// refresh reads the upstream task with tasks/get and records it. Transport failures keep
// the last view (stale beats nothing); a vanished session or task marks it lost.
func (r *Reverse) refresh(ctx context.Context, t *rtask) {
	v := t.snapshot()
	if v.lost || v.last.Status.Terminal() {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, r.cfg.StatusTimeout)
	defer cancel()
	params, _ := json.Marshal(legacy.TaskIDParams{TaskID: t.upID})
	res, err := t.sess.Call(ctx, "tasks/get", params, legacy.CallOptions{})
	if err != nil {
		if errors.Is(err, legacy.ErrSessionGone) || errmap.IsNotFound(err) {
			t.markLost()
		}
		return
	}
	var lt legacy.Task
	if json.Unmarshal(res, &lt) != nil || lt.Status == "" {
		return
	}
	if s, ok := mapping.NormalizeStatus(string(lt.Status)); ok {
		lt.Status = legacy.TaskStatus(s)
	}
	t.mu.Lock()
	if !t.last.Status.Terminal() { // a terminal view never changes
		t.last = lt
	}
	t.mu.Unlock()
}

// tasksGet answers the modern tasks/get: status mapped, payload inlined once terminal.
func (r *Reverse) tasksGet(ctx context.Context, req *sep2663.Request) (json.RawMessage, error) {
	t, err := r.lookupTask(req)
	if err != nil {
		return nil, err
	}
	r.refresh(ctx, t)
	if st := t.snapshot().last.Status; st == legacy.StatusCompleted || st == legacy.StatusFailed {
		r.awaitFinal(ctx, t)
	}
	return json.Marshal(sep2663.GetTaskResult{ResultType: sep2663.ResultComplete, DetailedTask: r.detailed(t)})
}

// awaitFinal waits (bounded) for the held tasks/result to deliver the payload of a task
// the upstream reports terminal; if the held call is not coming back, it asks once more.
func (r *Reverse) awaitFinal(ctx context.Context, t *rtask) {
	wait := time.NewTimer(r.cfg.StatusTimeout / 2)
	defer wait.Stop()
	select {
	case <-t.finalCh:
		return
	case <-ctx.Done():
		return
	case <-wait.C:
	}
	cctx, cancel := context.WithTimeout(ctx, r.cfg.StatusTimeout/2)
	defer cancel()
	params, _ := json.Marshal(legacy.TaskIDParams{TaskID: t.upID})
	res, err := t.sess.Call(cctx, "tasks/result", params, legacy.CallOptions{})
	var je *jsonrpc.Error
	switch {
	case err == nil:
		t.setFinal(taskFinal{result: res})
	case errors.As(err, &je):
		t.setFinal(taskFinal{err: je})
	}
}

// detailed builds the DetailedTask (design §4 status table):
//
//	lost (session/task gone)        → failed, error data outcome "unknown"
//	cancelled                       → cancelled
//	completed|failed + result       → completed + result (isError kept: a legacy tool
//	                                  error is completed in SEP-2663)
//	completed|failed + JSON-RPC err → failed + error
//	completed|failed, no payload yet→ working (the next poll inlines it)
//	requests held, unanswered       → input_required + inputRequests
//	otherwise                       → working
func (r *Reverse) detailed(t *rtask) sep2663.DetailedTask {
	v := t.snapshot()
	dt := sep2663.DetailedTask{Task: r.modernTask(t, v)}
	switch {
	case v.lost:
		dt.Status, dt.StatusMessage = sep2663.StatusFailed, msgUnknownOutcome
		dt.Error = jsonrpc.NewError(jsonrpc.CodeUpstream, msgUnknownOutcome).WithData(map[string]any{"outcome": "unknown", "retryable": false})
	case v.last.Status == legacy.StatusCancelled:
		dt.Status = sep2663.StatusCancelled
	case v.last.Status.Terminal() && v.finalSet && v.final.err != nil:
		dt.Status, dt.Error = sep2663.StatusFailed, v.final.err
	case v.last.Status.Terminal() && v.finalSet:
		res, err := mapping.ResultForModern(v.final.result)
		if err != nil {
			dt.Status, dt.Error = sep2663.StatusFailed, jsonrpc.AsError(err)
			break
		}
		dt.Status, dt.Result = sep2663.StatusCompleted, res
	case v.last.Status.Terminal():
		dt.Status, dt.StatusMessage = sep2663.StatusWorking, "finishing"
	default:
		if reqs := t.box.unanswered(); len(reqs) > 0 {
			dt.Status, dt.InputRequests = sep2663.StatusInputRequired, reqs
		} else {
			dt.Status = sep2663.StatusWorking
		}
	}
	return dt
}

// modernTask renders the Task fields: the bridge id, the upstream's timestamps (the
// bridge's own last change when later), ttl → ttlMs, pollInterval → pollIntervalMs.
func (r *Reverse) modernTask(t *rtask, v rtaskView) sep2663.Task {
	lt := v.last
	upd := lt.LastUpdatedAt
	if at := t.box.lastTouched(); !at.IsZero() {
		if u, err := time.Parse(time.RFC3339Nano, upd); err != nil || at.After(u) {
			upd = mapping.FormatTime(at)
		}
	}
	created := lt.CreatedAt
	if created == "" {
		created = mapping.FormatTime(t.created)
	}
	if upd == "" {
		upd = created
	}
	var poll int64
	if lt.PollInterval != nil {
		poll = *lt.PollInterval
	}
	poll = mapping.ClampPollInterval(poll, r.cfg.PollFloorMs, r.cfg.PollCeilMs)
	status := sep2663.TaskStatus(lt.Status)
	if status == "" || status == sep2663.StatusInputRequired {
		status = sep2663.StatusWorking // refined by detailed()
	}
	return sep2663.Task{
		TaskID: t.id, Status: status, StatusMessage: mapping.SanitizeStatusMessage(lt.StatusMessage),
		CreatedAt: created, LastUpdatedAt: upd, TTLMs: lt.TTL, PollIntervalMs: &poll,
	}
}

// tasksUpdate delivers inputResponses to the requests held on the task's tasks/result.
func (r *Reverse) tasksUpdate(ctx context.Context, req *sep2663.Request) (json.RawMessage, error) {
	t, err := r.lookupTask(req)
	if err != nil {
		return nil, err
	}
	if _, err := t.box.answerAll(json.RawMessage(gjson.GetBytes(req.Params, "inputResponses").Raw)); err != nil {
		return nil, err
	}
	return json.RawMessage(`{"resultType":"complete"}`), nil
}

// tasksCancel forwards tasks/cancel and acks. A task that is already terminal upstream
// gets the same ack (the upstream's -32602 for terminal tasks is not the client's error).
func (r *Reverse) tasksCancel(ctx context.Context, req *sep2663.Request) (json.RawMessage, error) {
	t, err := r.lookupTask(req)
	if err != nil {
		return nil, err
	}
	if v := t.snapshot(); !v.lost && !v.last.Status.Terminal() {
		ctx, cancel := context.WithTimeout(ctx, r.cfg.CancelTimeout)
		defer cancel()
		params, _ := json.Marshal(legacy.TaskIDParams{TaskID: t.upID})
		res, err := t.sess.Call(ctx, "tasks/cancel", params, legacy.CallOptions{})
		var je *jsonrpc.Error
		switch {
		case err == nil:
			var lt legacy.Task
			if json.Unmarshal(res, &lt) == nil && lt.Status != "" {
				t.mu.Lock()
				if !t.last.Status.Terminal() {
					t.last = lt
				}
				t.mu.Unlock()
			}
		case errors.As(err, &je):
			// terminal or unknown upstream: the next tasks/get tells
		case errors.Is(err, legacy.ErrSessionGone):
			t.markLost()
		default:
			return nil, errmap.FromLegacy(err)
		}
	}
	return json.RawMessage(`{"resultType":"complete"}`), nil
}
