package forward

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/bridge/internal/errmap"
	"github.com/taskbridge/taskbridge/internal/jsonrpc"
	"github.com/taskbridge/taskbridge/internal/redact"
	"github.com/taskbridge/taskbridge/internal/trace"
	"github.com/taskbridge/taskbridge/internal/upstream"
	"github.com/taskbridge/taskbridge/legacy"
	"github.com/taskbridge/taskbridge/mapping"
	"github.com/taskbridge/taskbridge/record"
	"github.com/taskbridge/taskbridge/sep2663"
	"github.com/taskbridge/taskbridge/store"
)

// hostQueuePerWorker bounds the hosted calls queued or running: HostWorkers × this. Beyond
// it a task-augmented call gets CodeOverloaded at once, never an unbounded queue.
const hostQueuePerWorker = 16

// Status messages of bridge-hosted tasks (shown to the legacy client).
const (
	msgHostQueued   = "Queued: the bridge runs this call as its own task (the upstream has no task support)."
	msgHostRunning  = "Running: the bridge is waiting for the upstream's synchronous answer."
	msgHostShutdown = "The bridge shut down while the upstream call was in flight; the outcome is unknown and the call was not retried."
	msgHostNotRun   = "The bridge shut down before the call was sent upstream; the tool did not run. Retry the call."
	msgHostTTL      = "The task's ttl passed before the upstream answered; the outcome is unknown."
)

// hostJob is one bridge-hosted call waiting for a worker.
type hostJob struct {
	id       string
	sessID   string
	params   json.RawMessage // the tools/call params without task
	deadline time.Time       // the task's ttl: an absolute deadline for the upstream call
	release  func()          // the gate's upstream slot, held from creation until the call ends
}

// hostRun is the in-process state of a hosted task until its worker finished: done closes
// after the outcome is in the store; cancel (set while the upstream call runs) aborts it.
type hostRun struct {
	done   chan struct{}
	cancel context.CancelFunc
}

// hostTask serves a task-augmented tools/call the bridge hosts: the durable record first,
// then the job queued, then the CreateTaskResult; a worker makes the synchronous upstream
// call in the background and keeps the result.
func (b *Bridge) hostTask(ctx context.Context, sess *legacy.Session, req *jsonrpc.Message, task gjson.Result) (json.RawMessage, error) {
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
	params, err := withoutKey(req.Params, "task")
	if err != nil {
		return nil, jsonrpc.ErrInvalidParams.Wrapf("%v", err)
	}
	key, err := idempotencyKey(ctx, req)
	if err != nil {
		return nil, err
	}
	rec.Mode = record.ModeHost
	rec.StatusMessage = msgHostQueued
	rec.IdempotencyKey = key
	if key != "" {
		if prev, err := b.reg.findByKey(ctx, own, key); err == nil {
			return b.replay(prev, rec.Tool, rec.ArgsHash)
		}
	}
	// The gate's upstream slot is held while the call is queued or running (a queued call
	// is an upstream call in flight that nobody can refuse any more).
	release, err := b.startTask(ctx, own)
	if err != nil {
		return nil, err
	}
	if !b.startHostWorkers() {
		release()
		return nil, jsonrpc.NewError(jsonrpc.CodeOverloaded, "the bridge is shutting down; retry on another replica or later").
			WithData(map[string]any{"retryable": true})
	}
	select {
	case b.fb.slots <- struct{}{}:
	default:
		release()
		return nil, jsonrpc.NewError(jsonrpc.CodeOverloaded,
			fmt.Sprintf("overloaded: %d bridge-hosted calls are queued or running; retry later", cap(b.fb.slots))).
			WithData(map[string]any{"reason": "overloaded", "retryable": true, "retryAfterMs": 1000})
	}
	if err := b.reg.create(ctx, rec); err != nil {
		<-b.fb.slots
		release()
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
		return nil, fmt.Errorf("store hosted task: %w", err)
	}
	b.cfg.Metrics.TaskCreated(string(record.ModeHost))
	deadline := time.Now().Add(b.cfg.CreateTimeout)
	if exp, ok := rec.ExpiresAt(); ok {
		deadline = exp
	}
	b.fb.mu.Lock()
	b.fb.running[rec.ID] = &hostRun{done: make(chan struct{})}
	b.fb.mu.Unlock()
	b.fb.jobs <- &hostJob{id: rec.ID, sessID: sess.ID, params: params, deadline: deadline, release: release}
	b.log.Info().Str("task", rec.ID).Str("tool", redact.Field(rec.Tool)).Str("args_sha256", rec.ArgsHash).Msg("bridge-hosted task created")
	return createResult(rec)
}

// startHostWorkers starts the pool once; false when the bridge is closing.
func (b *Bridge) startHostWorkers() bool {
	b.fb.startOnce.Do(func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		if b.closed {
			return
		}
		b.wg.Add(b.fb.workers)
		for range b.fb.workers {
			go b.hostWorker()
		}
		b.fb.started.Store(true)
	})
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.fb.started.Load() && !b.closed
}

// hostWorker runs queued hosted calls until the bridge closes; then it fails the calls still
// queued (they never ran, so their outcome is known: failed, retryable).
func (b *Bridge) hostWorker() {
	defer b.wg.Done()
	for {
		select {
		case <-b.ctx.Done():
			for {
				select {
				case job := <-b.fb.jobs:
					b.finishHosted(job.id, func(r *record.Task) {
						r.Status, r.StatusMessage, r.Outcome = record.StatusFailed, msgHostNotRun, record.OutcomeFailed
						r.Error = mustJSON(jsonrpc.NewError(jsonrpc.CodeUpstream, msgHostNotRun).
							WithData(map[string]any{"retryable": true, "outcome": "failed"}))
					}, true)
					job.release()
					<-b.fb.slots
				default:
					return
				}
			}
		case job := <-b.fb.jobs:
			b.runHosted(job)
			job.release()
			<-b.fb.slots
		}
	}
}

// runHosted makes one hosted call upstream and records what came of it.
func (b *Bridge) runHosted(job *hostJob) {
	ctx, cancel := context.WithDeadline(b.ctx, job.deadline)
	defer cancel()
	b.fb.mu.Lock()
	run := b.fb.running[job.id]
	if run != nil {
		run.cancel = cancel
	}
	b.fb.mu.Unlock()

	rec, err := b.reg.get(ctx, job.id)
	if err != nil {
		b.log.Error().Err(err).Str("task", job.id).Msg("hosted task: read record")
		b.finishHosted(job.id, nil, false)
		return
	}
	if rec.Status.Terminal() { // cancelled while queued: it never ran
		b.finishHosted(job.id, func(r *record.Task) { r.Outcome, r.OutcomeDetail = record.OutcomeCancelled, "cancelled before it ran" }, true)
		return
	}
	_, _ = b.reg.update(ctx, rec, func(r *record.Task) bool {
		if r.Status.Terminal() {
			return false
		}
		r.StatusMessage, r.LastUpdatedAt = msgHostRunning, b.cfg.Now().UTC()
		return true
	})
	sess, _ := b.session(ctx, job.sessID)
	oc, err := b.callUpstreamTool(trace.ForTask(ctx, job.id, rec.TraceParent), sess, job.params, nil)
	switch {
	case err == nil && oc.Kind == sep2663.KindTask:
		b.adoptUpstreamTask(job.id, oc.Task, sess)
		b.finishHosted(job.id, nil, false)
	case err == nil && oc.Kind == sep2663.KindComplete:
		b.finishHosted(job.id, func(r *record.Task) { b.hostedResult(r, oc.Result) }, true)
	case err == nil: // input_required: nobody is on a stream to ask
		b.finishHosted(job.id, func(r *record.Task) { hostedInputRequired(r) }, true)
	default:
		b.finishHosted(job.id, func(r *record.Task) { b.hostedError(r, ctx, err) }, true)
	}
}

// finishHosted applies fn to the record (when non-nil), pushes the status change, and wakes
// tasks/result callers. A record already terminal (cancelled meanwhile) keeps its status:
// fn's outcome is recorded only (when apply says so).
func (b *Bridge) finishHosted(id string, fn func(*record.Task), apply bool) {
	defer func() {
		b.fb.mu.Lock()
		run := b.fb.running[id]
		delete(b.fb.running, id)
		b.fb.mu.Unlock()
		if run != nil {
			close(run.done)
		}
	}()
	if fn == nil || !apply {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), b.cfg.StatusTimeout)
	defer cancel()
	rec, err := b.reg.get(ctx, id)
	if err != nil {
		b.log.Error().Err(err).Str("task", id).Msg("hosted task: read record")
		return
	}
	before := rec.Status
	rec, err = b.reg.update(ctx, rec, func(r *record.Task) bool {
		if r.Status.Terminal() {
			if r.Outcome != record.OutcomePending {
				return false
			}
			c := *r
			fn(&c)
			r.Outcome, r.OutcomeDetail = c.Outcome, "after the cancel: "+orDefault(c.OutcomeDetail, c.StatusMessage)
			return true
		}
		fn(r)
		r.LastUpdatedAt = b.cfg.Now().UTC()
		return true
	})
	if err != nil {
		b.log.Error().Err(err).Str("task", id).Msg("hosted task: store outcome")
		return
	}
	if rec.Status != before {
		b.pushStatus(rec)
	}
	b.log.Info().Str("task", id).Str("status", string(rec.Status)).Str("outcome", string(rec.Outcome)).
		Int("result_bytes", len(rec.Result)).Msg("bridge-hosted task finished")
}

// hostedResult records the upstream's synchronous CallToolResult (isError:true → failed
// with the result kept, as 2025-11-25 means it).
func (b *Bridge) hostedResult(r *record.Task, result json.RawMessage) {
	obs, err := mapping.Observe(&sep2663.DetailedTask{Task: sep2663.Task{Status: sep2663.StatusCompleted}, Result: result})
	if err != nil {
		r.Status, r.Outcome, r.StatusMessage = record.StatusFailed, record.OutcomeUnknown, "The upstream answered with an unreadable result."
		return
	}
	applyObservation(r, obs)
}

// hostedError records a failed upstream call: a JSON-RPC error is a known failure; a
// refused connection means the tool never ran; anything else (a cut connection, the bridge
// shutting down, the ttl) leaves the outcome unknown, and it is never retried.
func (b *Bridge) hostedError(r *record.Task, ctx context.Context, err error) {
	r.Status = record.StatusFailed
	var je *jsonrpc.Error
	switch {
	case errors.As(err, &je):
		r.Outcome, r.Error = record.OutcomeFailed, mustJSON(je)
		r.StatusMessage = mapping.SanitizeStatusMessage(je.Message)
		return
	case upstream.NeverSent(err):
		r.Outcome = record.OutcomeFailed
		r.StatusMessage = "The upstream refused the connection; the tool did not run."
	case b.ctx.Err() != nil:
		r.Outcome, r.StatusMessage = record.OutcomeUnknown, msgHostShutdown
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		r.Outcome, r.StatusMessage = record.OutcomeUnknown, msgHostTTL
	case errors.Is(ctx.Err(), context.Canceled):
		r.Outcome, r.StatusMessage = record.OutcomeUnknown, "The call was aborted while in flight; whether the tool ran is unknown."
	default:
		r.Outcome, r.StatusMessage = record.OutcomeUnknown, "The upstream did not answer; whether the tool ran is unknown."
	}
	r.Error = mustJSON(jsonrpc.NewError(jsonrpc.CodeUpstream, r.StatusMessage).
		WithData(map[string]any{"retryable": r.Outcome == record.OutcomeFailed, "outcome": string(r.Outcome)}))
}

// hostedInputRequired fails a hosted call whose tool asked for input before running
// (2026-07-28 MRTR): a hosted task has no request stream to ask the client on.
func hostedInputRequired(r *record.Task) {
	r.Status, r.Outcome = record.StatusFailed, record.OutcomeFailed
	r.StatusMessage = "The tool asked for input, which a bridge-hosted task cannot relay; the tool did not run. Call it without params.task."
	r.Error = mustJSON(jsonrpc.NewError(jsonrpc.CodeTaskUnavailable, r.StatusMessage).
		WithData(map[string]any{"retryable": false, "outcome": "failed", "retryWithoutTask": true}))
}

// adoptUpstreamTask turns a hosted record into a translated one when the upstream answered
// with a task after all (it gained the extension since discover): the tracker takes over.
func (b *Bridge) adoptUpstreamTask(id string, t *sep2663.Task, sess *legacy.Session) {
	ctx, cancel := context.WithTimeout(context.Background(), b.cfg.StatusTimeout)
	defer cancel()
	rec, err := b.reg.get(ctx, id)
	if err != nil {
		return
	}
	rec, err = b.reg.update(ctx, rec, func(r *record.Task) bool {
		r.Mode, r.UpstreamTaskID = record.ModeTranslate, t.TaskID
		if t.PollIntervalMs != nil {
			r.UpstreamPollMs = *t.PollIntervalMs
		}
		r.PollIntervalMs = mapping.ClampPollInterval(r.UpstreamPollMs, b.cfg.PollFloorMs, b.cfg.PollCeilMs)
		if !r.Status.Terminal() {
			r.StatusMessage = ""
		}
		return true
	})
	if err != nil {
		b.log.Error().Err(err).Str("task", id).Msg("hosted task: adopt upstream task")
		return
	}
	if rec.Status == record.StatusCancelled {
		_ = b.up.CancelTask(ctx, t.TaskID, b.meta(sess))
	}
	b.track(rec)
}

// cancelHosted aborts the in-flight upstream call of a hosted task (after tasks/cancel made
// the record cancelled). No-op for other tasks.
func (b *Bridge) cancelHosted(id string) {
	b.fb.mu.Lock()
	run := b.fb.running[id]
	b.fb.mu.Unlock()
	if run != nil && run.cancel != nil {
		run.cancel()
	}
}

// hostDone returns a channel closed when this process's worker for a hosted task has
// stored its outcome; nil (blocks forever in a select) for any other task.
func (b *Bridge) hostDone(id string) <-chan struct{} {
	b.fb.mu.Lock()
	defer b.fb.mu.Unlock()
	if run := b.fb.running[id]; run != nil {
		return run.done
	}
	return nil
}
