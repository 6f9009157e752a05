package reverse

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/bridge/internal/errmap"
	"github.com/taskbridge/taskbridge/bridge/internal/ids"
	"github.com/taskbridge/taskbridge/internal/jsonrpc"
	"github.com/taskbridge/taskbridge/internal/trace"
	"github.com/taskbridge/taskbridge/legacy"
	"github.com/taskbridge/taskbridge/mapping"
	"github.com/taskbridge/taskbridge/record"
	"github.com/taskbridge/taskbridge/sep2663"
	"github.com/taskbridge/taskbridge/store"
)

// The route's records (docs/durability.md). The store is the truth, shared by every
// replica; a reverse task is a record.Task of record.ModeReverse whose fields mean:
//
//	ID                 the bridge's id (the only one the client sees)
//	Owner              sessions.ModernOwner of the creating request
//	Origin             the upstream (redacted URL): another upstream's records are foreign
//	UpstreamTaskID     the legacy task id; "" while the creating tools/call is in flight
//	UpstreamSessionID  the Mcp-Session-Id the legacy task lives in
//	ClientCaps         the input capabilities the creating request declared, which that
//	                   session was initialized with (mapping.InputCaps)
//	Status             the upstream's last status (legacy vocabulary); failed when lost
//	Result / Error     the held tasks/result's answer (the payload), once it came
//	Outcome            pending until the payload (or a cancel, or a loss: unknown)
//
// Write-through: the intent is written before the legacy tools/call, the upstream ids
// before the reply to the client, each input request before a tasks/get can show it, each
// answer before it goes upstream. Every write is a compare-and-swap (update).

// msgUnknownOutcome is the statusMessage of a task whose upstream session or task
// vanished before it ended: the work may or may not have happened.
const msgUnknownOutcome = "the upstream session holding this task is gone; the outcome of the operation is unknown (do not assume it did not run)"

// errUnknownOutcome is the error of such a task.
var errUnknownOutcome = jsonrpc.NewError(jsonrpc.CodeUpstream, msgUnknownOutcome).
	WithData(map[string]any{"outcome": "unknown", "retryable": false})

// cancelRequested is the OutcomeDetail of a record whose client asked for a cancel: it is
// written before the upstream's tasks/cancel, so that whichever process sees the held
// tasks/result end knows its error is the cancel's.
const cancelRequested = "cancel requested by the client"

// errNotRecorded answers a create whose record could not be written: nothing is handed
// out that a restart could not find again.
var errNotRecorded = jsonrpc.NewError(jsonrpc.CodeInternalError, "the task could not be recorded; call the tool again")

// argsHash is the hex sha-256 of a tools/call's arguments (the arguments are never stored).
func argsHash(params json.RawMessage) string {
	sum := sha256.Sum256([]byte(gjson.GetBytes(params, "arguments").Raw))
	return hex.EncodeToString(sum[:])
}

// newIntent writes the intent record of a task-augmented call, before the call leaves.
// caps is the capability set the request declared (record.Task.ClientCaps).
func (r *Reverse) newIntent(ctx context.Context, owner, tool string, params json.RawMessage, caps mapping.InputCaps) (*record.Task, error) {
	now := r.cfg.Now().UTC()
	rec := &record.Task{
		ID: ids.NewTaskID(), Owner: owner, Origin: r.up.URL(), Mode: record.ModeReverse, Tool: tool,
		ArgsHash: argsHash(params), Status: record.StatusWorking, Outcome: record.OutcomePending,
		CreatedAt: now, LastUpdatedAt: now, PollIntervalMs: r.cfg.PollFloorMs, ClientCaps: caps.String(),
	}
	rec.TraceParent = trace.Created(ctx, rec.ID) // later requests link to this span
	if err := r.st.CreateTask(ctx, rec); err != nil {
		r.log.Error().Err(err).Msg("reverse: intent record not written; the call was not sent")
		return nil, errNotRecorded
	}
	return rec, nil
}

// update applies fn to the freshest record of id with compare-and-swap, re-reading on a
// conflict; fn returns false to leave the record as it is. A written record is capped to
// MaxResultBytes. It returns the record as stored.
func (r *Reverse) update(ctx context.Context, id string, fn func(*record.Task) bool) (*record.Task, error) {
	ctx = context.WithoutCancel(ctx) // a client that left must not leave a half-told record
	for range 8 {
		rec, err := r.st.GetTask(ctx, id)
		if err != nil {
			return nil, err
		}
		if !fn(rec) {
			return rec, nil
		}
		r.capResult(rec)
		err = r.st.UpdateTask(ctx, rec)
		if err == nil {
			r.taskChanged(rec) // listen_tasks.go: the listens watching it
			return rec, nil
		}
		if !errors.Is(err, store.ErrConflict) {
			return nil, err
		}
	}
	return nil, fmt.Errorf("reverse task %s: too many concurrent updates", id)
}

// capResult enforces MaxResultBytes: a larger payload is dropped and the task fails with
// the route-independent "too large" error; the real outcome is kept.
func (r *Reverse) capResult(rec *record.Task) {
	n := int64(max(len(rec.Result), len(rec.Error)))
	if r.cfg.MaxResultBytes <= 0 || n <= r.cfg.MaxResultBytes {
		return
	}
	msg, e := errmap.ResultTooLarge(n, r.cfg.MaxResultBytes, string(rec.Outcome))
	rec.Result, rec.Error = nil, mustJSON(e)
	rec.Status, rec.StatusMessage = record.StatusFailed, msg
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic("reverse: " + err.Error())
	}
	return b
}

// settled reports whether a record's task can change no more: cancelled, its payload in,
// or its outcome unknown.
func settled(rec *record.Task) bool {
	return rec.Status == record.StatusCancelled || rec.Result != nil || rec.Error != nil ||
		rec.Outcome == record.OutcomeUnknown
}

// created records the upstream's CreateTaskResult on the intent: upstream task and
// session ids, status, ttl and poll interval. Written before the reply goes out.
func (r *Reverse) created(ctx context.Context, id string, sess *legacy.UpstreamSession, lt legacy.Task) (*record.Task, error) {
	return r.update(ctx, id, func(rec *record.Task) bool {
		rec.UpstreamTaskID, rec.UpstreamSessionID = lt.TaskID, sess.ID()
		r.applyView(rec, lt)
		return true
	})
}

// applyView copies an upstream Task view into a record whose status is not terminal. The
// record's lastUpdatedAt moves to the upstream's, when that is a time between the
// bridge's creation of the task and now; else (another clock) to now. It never goes back.
func (r *Reverse) applyView(rec *record.Task, lt legacy.Task) {
	if s, ok := mapping.NormalizeStatus(string(lt.Status)); ok {
		rec.Status = record.Status(s)
	}
	rec.StatusMessage = lt.StatusMessage
	rec.TTLMs = lt.TTL
	if lt.PollInterval != nil {
		rec.UpstreamPollMs = *lt.PollInterval
	}
	rec.PollIntervalMs = mapping.ClampPollInterval(rec.UpstreamPollMs, r.cfg.PollFloorMs, r.cfg.PollCeilMs)
	now := r.cfg.Now().UTC()
	at, err := time.Parse(time.RFC3339Nano, lt.LastUpdatedAt)
	if err != nil || at.After(now) || at.Before(rec.CreatedAt) {
		at = now
	}
	if at.After(rec.LastUpdatedAt) {
		rec.LastUpdatedAt = at
	}
}

// viewChanged reports whether an upstream view says anything the record does not.
func viewChanged(rec *record.Task, lt legacy.Task) bool {
	s, _ := mapping.NormalizeStatus(string(lt.Status))
	poll := rec.UpstreamPollMs
	if lt.PollInterval != nil {
		poll = *lt.PollInterval
	}
	return record.Status(s) != rec.Status || lt.StatusMessage != rec.StatusMessage ||
		poll != rec.UpstreamPollMs || !sameTTL(lt.TTL, rec.TTLMs)
}

func sameTTL(a, b *int64) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

// endIntent ends an intent whose call gave no task (a plain result, a refusal, a failure
// or an abandoned call): nobody holds its id, so its payload is not kept and its ttl is
// zero (the audit part stays for AuditRetention).
func (r *Reverse) endIntent(ctx context.Context, id string, status record.Status, outcome record.Outcome, why string) {
	zero := int64(0)
	_, err := r.update(ctx, id, func(rec *record.Task) bool {
		if rec.UpstreamTaskID != "" || rec.Status.Terminal() {
			return false
		}
		rec.Status, rec.Outcome, rec.StatusMessage, rec.TTLMs = status, outcome, why, &zero
		rec.LastUpdatedAt = r.cfg.Now().UTC()
		return true
	})
	if err != nil {
		r.log.Warn().Err(err).Str("task", id).Msg("reverse: intent not closed; the sweep ends it")
	}
}

// finish records the held tasks/result's answer: the payload, the outcome, and the
// terminal status when the last tasks/get had not seen it yet. A cancelled, lost or
// already finished record keeps what it has.
func (r *Reverse) finish(ctx context.Context, id string, res json.RawMessage, rpcErr *jsonrpc.Error) (*record.Task, error) {
	return r.update(ctx, id, func(rec *record.Task) bool {
		if settled(rec) {
			return false
		}
		isErr := rpcErr != nil || gjson.GetBytes(res, "isError").Bool()
		switch {
		case rpcErr != nil && rec.OutcomeDetail == cancelRequested:
			// the upstream ends a cancelled task's tasks/result with an error: that is the
			// cancel the client asked for, not a failure
			rec.Status, rec.Outcome, rec.StatusMessage = record.StatusCancelled, record.OutcomeCancelled, ""
			rec.LastUpdatedAt = r.cfg.Now().UTC()
			return true
		case rpcErr != nil:
			rec.Error, rec.Outcome = mustJSON(modernTaskError(rpcErr)), record.OutcomeFailed
		default:
			rec.Result, rec.Outcome = res, record.OutcomeSucceeded
			if isErr {
				rec.Outcome = record.OutcomeFailed
			}
		}
		if !rec.Status.Terminal() {
			rec.Status, rec.StatusMessage = record.StatusCompleted, "" // a working message says nothing of the end
			if isErr {
				rec.Status = record.StatusFailed
			}
		}
		rec.LastUpdatedAt = r.cfg.Now().UTC()
		return true
	})
}

// markLost ends a task whose upstream session or task vanished while it was unfinished:
// failed, with an outcome nobody can know.
func (r *Reverse) markLost(ctx context.Context, id string) (*record.Task, error) {
	return r.update(ctx, id, func(rec *record.Task) bool {
		if settled(rec) || rec.Status.Terminal() {
			return false
		}
		rec.Status, rec.Outcome, rec.StatusMessage = record.StatusFailed, record.OutcomeUnknown, msgUnknownOutcome
		rec.Error = mustJSON(errUnknownOutcome)
		rec.LastUpdatedAt = r.cfg.Now().UTC()
		return true
	})
}

// lookupTask returns the caller's record of the request's taskId, or
// errmap.ErrTaskNotFound: the same bytes for an unknown id, another owner's, another
// route's or another upstream's.
func (r *Reverse) lookupTask(ctx context.Context, req *sep2663.Request) (*record.Task, error) {
	id := gjson.GetBytes(req.Params, "taskId")
	if id.Type != gjson.String {
		return nil, jsonrpc.ErrInvalidParams.Wrapf("params.taskId must be a string")
	}
	rec, err := r.st.GetTask(ctx, id.Str)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, errmap.ErrTaskNotFound
	case err != nil:
		r.log.Warn().Err(err).Msg("reverse: task record unreadable")
		return nil, jsonrpc.NewError(jsonrpc.CodeInternalError, "the task store is unavailable; retry")
	case rec.Mode != record.ModeReverse || rec.Origin != r.up.URL() || rec.Owner != r.owner(req):
		return nil, errmap.ErrTaskNotFound
	}
	trace.Task(ctx, rec.ID, rec.TraceParent)
	return rec, nil
}

// modernTaskError is a legacy upstream's task error as the 2026-07-28 face may send it:
// the codes that revision retired are renumbered by the one mapper (errmap.FromLegacy),
// so a failed task's error is never -32002 or -32042 (issue 16 item 7).
func modernTaskError(je *jsonrpc.Error) *jsonrpc.Error {
	return jsonrpc.AsError(errmap.FromLegacy(je))
}
