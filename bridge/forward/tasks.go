package forward

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/bridge/internal/errmap"
	"github.com/taskbridge/taskbridge/bridge/internal/ids"
	"github.com/taskbridge/taskbridge/internal/jsonobj"
	"github.com/taskbridge/taskbridge/internal/jsonrpc"
	"github.com/taskbridge/taskbridge/internal/trace"
	"github.com/taskbridge/taskbridge/internal/upstream"
	"github.com/taskbridge/taskbridge/legacy"
	"github.com/taskbridge/taskbridge/mapping"
	"github.com/taskbridge/taskbridge/record"
	"github.com/taskbridge/taskbridge/sep2663"
	"github.com/taskbridge/taskbridge/store"
)

// taskIDParam reads params.taskId.
func taskIDParam(req *jsonrpc.Message) (string, error) {
	id := gjson.GetBytes(req.Params, "taskId")
	if id.Type != gjson.String || id.Str == "" {
		return "", jsonrpc.ErrInvalidParams.Wrapf("params.taskId must be a non-empty string")
	}
	return id.Str, nil
}

// load returns the caller's record for id, or errmap.ErrTaskNotFound.
func (b *Bridge) load(ctx context.Context, sess *legacy.Session, id string) (*record.Task, error) {
	rec, err := b.reg.fresh(ctx, id)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return nil, errmap.ErrTaskNotFound
		}
		return nil, err
	}
	if !b.owns(ctx, sess, rec) { // re-checked on every request: access follows the caller
		return nil, errmap.ErrTaskNotFound
	}
	if exp, ok := rec.ExpiresAt(); ok && b.cfg.Now().After(exp) {
		return nil, errmap.ErrTaskNotFound
	}
	trace.Task(ctx, rec.ID, rec.TraceParent)
	return rec, nil
}

// toolsCall routes tools/call: with params.task it creates a task, without it runs the
// call synchronously (collapsing an upstream task if one comes back).
func (b *Bridge) toolsCall(ctx context.Context, sess *legacy.Session, req *jsonrpc.Message, out legacy.Stream) (json.RawMessage, error) {
	if gjson.GetBytes(req.Params, "name").Type != gjson.String {
		return nil, jsonrpc.ErrInvalidParams.Wrapf("params.name must be a string")
	}
	// The fallback decision picks translate (createTask), host (hostTask), collapse or
	// passthrough (callSync), or refuse (route.go).
	return b.routeCall(ctx, sess, req, out)
}

// createTask serves a task-augmented tools/call: intent record first, then the upstream
// call, then the record completed with what the upstream said, and only then the reply.
func (b *Bridge) createTask(ctx context.Context, sess *legacy.Session, req *jsonrpc.Message, out legacy.Stream, task gjson.Result) (json.RawMessage, error) {
	own, ok := b.callerOwner(ctx, sess)
	if !ok {
		return nil, errmap.ErrTaskNotFound
	}
	rec := b.newRecord(sess, req, task)
	rec.TraceParent = trace.Created(ctx, rec.ID) // later requests link to this span
	if prev, ok, err := b.earlierTask(ctx, rec); err != nil || ok {
		if err != nil {
			return nil, err
		}
		return replayResult(prev) // a repeated request id of the same call: the task it made
	}
	key, err := idempotencyKey(ctx, req)
	if err != nil {
		return nil, err
	}
	rec.IdempotencyKey = key
	if key != "" {
		if prev, err := b.reg.findByKey(ctx, own, key); err == nil {
			return b.replay(prev, rec.Tool, rec.ArgsHash)
		}
	}
	release, err := b.startTask(ctx, own) // the gate, before the intent record
	if err != nil {
		return nil, err
	}
	defer release() // the slot covers the create call; the task then runs upstream
	noteRoute(ctx, "translate")
	if err := b.reg.create(ctx, rec); err != nil {
		if errors.Is(err, store.ErrConflict) {
			if prev, err2 := b.racedRequest(ctx, rec); err2 == nil {
				return replayResult(prev)
			} else if errors.Is(err2, errRequestIDBusy) {
				return nil, err2
			}
			if prev, err2 := b.reg.findByKey(ctx, own, key); key != "" && err2 == nil {
				return b.replay(prev, rec.Tool, rec.ArgsHash)
			}
		}
		return nil, fmt.Errorf("store intent: %w", err)
	}
	params, err := withoutKey(req.Params, "task")
	if err != nil {
		return nil, jsonrpc.ErrInvalidParams.Wrapf("%v", err)
	}
	// The upstream call outlives a client that hangs up: its answer must reach the record.
	// Each upstream call gets CreateTimeout; waiting for the client's MRTR answers is
	// bounded by InputTimeout, not by the upstream's timeout.
	oc, err := b.callTool(ctx, sess, "", params, out, b.cfg.CreateTimeout) // MRTR rounds precede the task: no related-task yet
	if err != nil {
		return nil, b.failCreate(context.WithoutCancel(ctx), rec, err)
	}
	// The record must learn the upstream's answer even if the client has hung up.
	if err := b.settleCreate(context.WithoutCancel(ctx), rec, oc); err != nil {
		return nil, err
	}
	b.cfg.Metrics.TaskCreated(string(rec.Mode))
	if rec.Mode == record.ModeTranslate && !finished(rec) {
		b.track(rec)
	}
	return createResult(rec)
}

func (b *Bridge) newRecord(sess *legacy.Session, req *jsonrpc.Message, task gjson.Result) *record.Task {
	now := b.cfg.Now().UTC()
	maxTTL := b.cfg.MaxTTLMs
	if ttl := task.Get("ttl"); ttl.Type == gjson.Number && ttl.Int() > 0 && ttl.Int() < maxTTL {
		maxTTL = ttl.Int()
	}
	rec := &record.Task{
		ID:             ids.NewTaskID(),
		Owner:          owner(sess),
		SessionID:      sess.ID,
		RequestID:      req.ID.Raw(),
		Origin:         b.up.URL(),
		Mode:           record.ModeTranslate,
		Tool:           gjson.GetBytes(req.Params, "name").Str,
		ArgsHash:       argsHash([]byte(gjson.GetBytes(req.Params, "arguments").Raw)),
		Status:         record.StatusWorking,
		CreatedAt:      now,
		LastUpdatedAt:  now,
		TTLMs:          &maxTTL,
		PollIntervalMs: b.cfg.PollFloorMs,
		Outcome:        record.OutcomePending,
	}
	if pt := gjson.GetBytes(req.Params, "_meta.progressToken"); pt.Exists() {
		rec.ProgressToken = json.RawMessage(pt.Raw)
	}
	return rec
}

// settleCreate writes what the upstream's tools/call answer means into the record.
func (b *Bridge) settleCreate(ctx context.Context, rec *record.Task, oc *sep2663.CallToolOutcome) error {
	switch oc.Kind {
	case sep2663.KindTask:
		rec.UpstreamTaskID = oc.Task.TaskID
		rec.TTLMs = mapping.CapTTL(oc.Task.TTLMs, *rec.TTLMs)
		if oc.Task.PollIntervalMs != nil {
			rec.UpstreamPollMs = *oc.Task.PollIntervalMs
		}
		rec.PollIntervalMs = mapping.ClampPollInterval(rec.UpstreamPollMs, b.cfg.PollFloorMs, b.cfg.PollCeilMs)
		// A task that already ended when its CreateTaskResult was written carries no result
		// or error there: the record stays working and the first poll (tasks/get) fetches
		// the outcome, instead of "completed without a result".
		if obs, err := mapping.Observe(&sep2663.DetailedTask{Task: *oc.Task}); err == nil && !obs.Status.Terminal() {
			applyObservation(rec, obs)
		}
	default: // KindComplete: the upstream answered synchronously; the record holds the result
		rec.Mode = record.ModeComplete
		obs, err := mapping.Observe(&sep2663.DetailedTask{
			Task:   sep2663.Task{Status: sep2663.StatusCompleted},
			Result: oc.Result,
		})
		if err != nil {
			return err
		}
		applyObservation(rec, obs)
	}
	rec.LastUpdatedAt = b.cfg.Now().UTC()
	b.reg.capResult(rec)
	if err := b.reg.write(ctx, rec); err != nil {
		return fmt.Errorf("store upstream answer: %w", err)
	}
	return nil
}

// failCreate records a failed upstream create call and returns the error for the client.
// A transport failure after the request may have left leaves the outcome unknown; a
// refused connection means the call never ran.
func (b *Bridge) failCreate(ctx context.Context, rec *record.Task, err error) error {
	rec.Status = record.StatusFailed
	rec.LastUpdatedAt = b.cfg.Now().UTC()
	var je *jsonrpc.Error
	switch {
	case notStarted(err):
		// Asked before it started and never answered: a known "did not run". The
		// idempotency key is released, so a retry with it starts afresh.
		errors.As(err, &je)
		rec.Outcome = record.OutcomeFailed
		rec.Error, _ = json.Marshal(je)
		rec.StatusMessage = "The tool asked for input before it started and the client did not answer within input_timeout; the tool did not run."
		defer b.releaseKey(ctx, rec)
	case errors.As(err, &je):
		rec.Outcome = record.OutcomeFailed
		rec.Error, _ = json.Marshal(je)
		rec.StatusMessage = mapping.SanitizeStatusMessage(je.Message)
	case upstream.NeverSent(err):
		rec.Outcome = record.OutcomeFailed
		rec.StatusMessage = "The upstream refused the connection; the tool did not run."
		je = jsonrpc.NewError(jsonrpc.CodeUpstream, errmap.Class(err)).
			WithData(map[string]any{"retryable": true, "outcome": "failed"})
	default:
		rec.Outcome = record.OutcomeUnknown
		rec.StatusMessage = "The upstream did not answer; whether the tool ran is unknown."
		je = jsonrpc.NewError(jsonrpc.CodeUpstream, errmap.Class(err)).
			WithData(map[string]any{"retryable": false, "outcome": "unknown"})
	}
	if uerr := b.reg.write(ctx, rec); uerr != nil {
		b.log.Error().Err(uerr).Str("task", rec.ID).Msg("store failed create")
	}
	return je
}

// releaseKey frees a failed record's idempotency key (the call did not run), so that a
// retry with the same key starts a new call instead of replaying the failure.
func (b *Bridge) releaseKey(ctx context.Context, rec *record.Task) {
	if rec.IdempotencyKey == "" {
		return
	}
	if err := b.reg.releaseKey(ctx, rec.ID); err != nil {
		b.log.Error().Err(err).Str("task", rec.ID).Msg("release idempotency key")
		return
	}
	rec.IdempotencyKey = ""
}

// neverAnnounced reports a record whose id the client never received: a translated call
// with no upstream task yet, i.e. a create still in flight or one that ended in an error
// before any CreateTaskResult was sent (issue 16 item 12). The record stays in the store
// (request-id and idempotency replays, the report) but tasks/list does not show it.
func neverAnnounced(rec *record.Task) bool {
	return rec.Mode == record.ModeTranslate && rec.UpstreamTaskID == ""
}

// createResult renders the CreateTaskResult of a task just created. It always says
// "working": 2025-11-25 says tasks MUST begin in that status, so a call the upstream
// answered at once (ModeComplete) still begins there, and the first tasks/get tells the
// status the record holds.
func createResult(rec *record.Task) (json.RawMessage, error) {
	t := mapping.TaskToLegacy(rec)
	if t.Status != legacy.StatusWorking {
		t.Status = legacy.StatusWorking
		t.StatusMessage = ""
	}
	return json.Marshal(legacy.CreateTaskResult{Task: t})
}

// replayResult renders the CreateTaskResult of a repeated creation (the same request id or
// idempotency key): the task the first one made, in the status it holds now. The client
// may already have seen that task move on, so saying "working" again would show it an
// illegal transition (a terminal task never becomes working again).
func replayResult(rec *record.Task) (json.RawMessage, error) {
	return json.Marshal(legacy.CreateTaskResult{Task: mapping.TaskToLegacy(rec)})
}

// tasksGet returns the record, refreshed from upstream at most once per poll interval.
func (b *Bridge) tasksGet(ctx context.Context, sess *legacy.Session, req *jsonrpc.Message) (json.RawMessage, error) {
	id, err := taskIDParam(req)
	if err != nil {
		return nil, err
	}
	rec, err := b.load(ctx, sess, id)
	if err != nil {
		return nil, err
	}
	if t := b.track(rec); t != nil {
		t.markAsked()
		rec = t.refresh(ctx)
	}
	return json.Marshal(mapping.TaskToLegacy(rec))
}

// tasksList lists the caller's tasks, newest first, with an opaque keyset cursor.
func (b *Bridge) tasksList(ctx context.Context, sess *legacy.Session, req *jsonrpc.Message) (json.RawMessage, error) {
	var after *store.Cursor
	if c := gjson.GetBytes(req.Params, "cursor"); c.Exists() {
		if c.Type != gjson.String {
			return nil, errBadCursor
		}
		cur, err := decodeCursor(c.Str)
		if err != nil {
			return nil, err
		}
		after = cur
	}
	own, ok := b.callerOwner(ctx, sess)
	if !ok {
		return nil, errmap.ErrTaskNotFound
	}
	n := b.cfg.ListPageSize
	recs, err := b.reg.list(ctx, own, after, n+1)
	if err != nil {
		return nil, err
	}
	res := legacy.ListTasksResult{Tasks: []legacy.Task{}}
	if len(recs) > n {
		recs = recs[:n]
		res.NextCursor = encodeCursor(recs[n-1])
	}
	now := b.cfg.Now()
	for _, rec := range recs {
		if exp, ok := rec.ExpiresAt(); (ok && now.After(exp)) || !ownMode(rec.Mode) {
			continue
		}
		if neverAnnounced(rec) {
			continue
		}
		// The page was just read from the store; only a tracker here may hold a newer copy
		// (a poll not written yet is impossible: trackers write through), so no per-row
		// re-read: a page is one query.
		if t := b.reg.tracker(rec.ID); t != nil {
			if live := t.snapshot(); live.Version > rec.Version {
				rec = live
			}
		}
		res.Tasks = append(res.Tasks, mapping.TaskToLegacy(rec))
	}
	return json.Marshal(res)
}

// tasksCancel makes the record cancelled before replying (2025-11-25 semantics), sends the
// upstream tasks/cancel, and keeps watching upstream to record the real outcome.
func (b *Bridge) tasksCancel(ctx context.Context, sess *legacy.Session, req *jsonrpc.Message) (json.RawMessage, error) {
	id, err := taskIDParam(req)
	if err != nil {
		return nil, err
	}
	rec, err := b.load(ctx, sess, id)
	if err != nil {
		return nil, err
	}
	if rec.Status.Terminal() {
		return nil, cannotCancel(rec.Status)
	}
	// The upstream hears of the cancel first, then the record turns cancelled, then the
	// client is answered (2025-11-25: terminal before the reply). A replica that dies in
	// between leaves either a working record whose next poll sees the upstream's cancel,
	// or a cancelled one the upstream already knows about — never a cancel the upstream
	// misses. (A cancel that failed upstream is re-sent by settle.)
	if rec.UpstreamTaskID != "" {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), b.cfg.CancelTimeout)
		err := b.up.CancelTask(cctx, rec.UpstreamTaskID, b.meta(sess))
		cancel()
		if err != nil {
			b.log.Warn().Err(err).Str("task", rec.ID).Msg("upstream tasks/cancel failed; still watching")
		}
	}
	var already record.Status
	cancelled := func(r *record.Task) bool {
		if r.Status.Terminal() {
			already = r.Status
			return false
		}
		r.Status = record.StatusCancelled
		r.StatusMessage = "The task was cancelled by request."
		r.LastUpdatedAt = b.cfg.Now().UTC()
		return true
	}
	ctx = context.WithoutCancel(ctx) // the upstream knows: the record must follow
	if t := b.track(rec); t != nil {
		rec, err = t.update(ctx, cancelled)
	} else {
		rec, err = b.reg.update(ctx, rec, cancelled)
	}
	if err != nil {
		return nil, err
	}
	// A poll that saw the upstream's cancel first is this very cancel taking effect.
	if already != "" && already != record.StatusCancelled {
		return nil, cannotCancel(already)
	}
	b.cancelHosted(rec.ID) // a bridge-hosted task: abort its in-flight upstream call
	return json.Marshal(mapping.TaskToLegacy(rec))
}

func cannotCancel(s record.Status) error {
	return jsonrpc.NewError(jsonrpc.CodeInvalidParams, fmt.Sprintf("Cannot cancel task: already in terminal status '%s'", s))
}

// withoutKey returns a JSON object without one top-level key; other members keep their
// bytes and order (internal/jsonobj).
func withoutKey(obj json.RawMessage, key string) (json.RawMessage, error) {
	return jsonobj.Edit(obj, func(o jsonobj.Object) jsonobj.Object { return o.Without(key) })
}

// finished reports whether a record needs no more watching: terminal, and its real
// outcome known.
func finished(rec *record.Task) bool {
	return rec.Status.Terminal() && rec.Outcome != record.OutcomePending
}

// applyObservation copies an upstream observation into a record.
func applyObservation(rec *record.Task, obs mapping.Observation) {
	rec.Status = obs.Status
	rec.StatusMessage = obs.StatusMessage
	if obs.Status.Terminal() {
		rec.Result = obs.Result
		rec.Error = obs.Error
		rec.Outcome = obs.Outcome
	}
}
