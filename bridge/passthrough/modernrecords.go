package passthrough

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/bridge/internal/errmap"
	"github.com/taskbridge/taskbridge/internal/jsonrpc"
	"github.com/taskbridge/taskbridge/record"
	"github.com/taskbridge/taskbridge/sep2663"
	"github.com/taskbridge/taskbridge/store"
)

// The modern pass-through's task records (record.ModePassThrough). The task is the
// upstream's, under the upstream's id; the record only says who created it (tenancy) and
// whether it is unfinished (the per-principal cap, counted by the store on every replica
// and across restarts). It is written before the CreateTaskResult goes back to the
// client, keyed by record.PassThroughID(origin, upstream id), and moves to a terminal
// status when a tasks/get shows one, a tasks/cancel is acknowledged, or its ttl ran out.

// errNotRecorded answers a task the bridge could not bind to its creator: the upstream
// was asked to cancel it, so nobody holds an id that nobody could use.
var errNotRecorded = jsonrpc.NewError(jsonrpc.CodeInternalError, "the task could not be recorded; call the tool again")

// errStoreDown answers a request about a task whose record cannot be read.
var errStoreDown = jsonrpc.NewError(jsonrpc.CodeInternalError, "the task store is unavailable; retry")

// recordCreated writes the record of a task the upstream just created for owner. On a
// failed write the upstream task is cancelled (best effort) and the call fails.
func (m *Modern) recordCreated(ctx context.Context, owner, tool string, res json.RawMessage) error {
	r := gjson.ParseBytes(res)
	upID := r.Get("taskId").Str
	now := m.now().UTC()
	rec := &record.Task{
		ID: record.PassThroughID(m.origin, upID), Owner: owner, Origin: m.origin, UpstreamTaskID: upID,
		Mode: record.ModePassThrough, Tool: tool, Status: record.StatusWorking, Outcome: record.OutcomePending,
		CreatedAt: now, LastUpdatedAt: now,
	}
	if t := r.Get("ttlMs"); t.Type == gjson.Number {
		ms := t.Int()
		rec.TTLMs = &ms
	}
	err := m.st.CreateTask(context.WithoutCancel(ctx), rec)
	if err == nil {
		return nil
	}
	m.log.Error().Err(err).Msg("modern pass-through: task record not written; cancelling the task upstream")
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	p, _ := json.Marshal(map[string]string{"taskId": upID})
	_, _ = m.up.Call(cctx, sep2663.MethodTasksCancel, p, sep2663.RequestMeta{}, nil)
	return errNotRecorded
}

// owned returns the record of the request's taskId when owner created it, else
// errmap.ErrTaskNotFound: the same bytes for an unknown id, another owner's and another
// upstream's, and the request never reaches the upstream.
func (m *Modern) owned(ctx context.Context, owner string, req *sep2663.Request) (*record.Task, error) {
	id := gjson.GetBytes(req.Params, "taskId")
	if id.Type != gjson.String {
		return nil, jsonrpc.ErrInvalidParams.Wrapf("params.taskId must be a string")
	}
	rec, err := m.st.GetTask(ctx, record.PassThroughID(m.origin, id.Str))
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, errmap.ErrTaskNotFound
	case err != nil:
		m.log.Warn().Err(err).Msg("modern pass-through: task record unreadable")
		return nil, errStoreDown
	case rec.Mode != record.ModePassThrough || rec.Owner != owner:
		return nil, errmap.ErrTaskNotFound
	}
	return rec, nil
}

// observe moves a record to the terminal status a tasks/get shows or a tasks/cancel
// acknowledged, so that it no longer counts against its owner.
func (m *Modern) observe(ctx context.Context, req *sep2663.Request, rec *record.Task, res json.RawMessage) {
	status := record.Status(gjson.GetBytes(res, "status").Str)
	if req.Method == sep2663.MethodTasksCancel && !status.Terminal() {
		status = record.StatusCancelled // the ack is empty; the client gave the task up
	}
	if !status.Terminal() || rec.Status.Terminal() {
		return
	}
	m.end(ctx, rec, status, "")
}

// end writes a terminal status on rec (compare-and-swap; a concurrent writer wins).
func (m *Modern) end(ctx context.Context, rec *record.Task, status record.Status, why string) {
	rec.Status, rec.StatusMessage, rec.LastUpdatedAt = status, why, m.now().UTC()
	if status == record.StatusCancelled {
		rec.Outcome = record.OutcomeCancelled
	} else {
		rec.Outcome = record.OutcomeUnknown // the payload stays upstream; the bridge does not judge it
	}
	if err := m.st.UpdateTask(context.WithoutCancel(ctx), rec); err != nil && !errors.Is(err, store.ErrConflict) {
		m.log.Warn().Err(err).Str("task", rec.ID).Msg("modern pass-through: task record not updated")
	}
}

// active counts owner's unfinished tasks on every route for the gate's cap, first ending
// this route's records of owner whose ttl ran out (nobody may poll them any more).
func (m *Modern) active(ctx context.Context, owner string) (int, error) {
	recs, err := m.st.ListActive(ctx)
	if err != nil {
		return 0, err
	}
	now := m.now()
	for _, rec := range recs {
		if rec.Mode != record.ModePassThrough || rec.Owner != owner {
			continue
		}
		if exp, ok := rec.ExpiresAt(); ok && now.After(exp) {
			m.end(ctx, rec, record.StatusFailed, "the task's ttl ran out before the bridge saw it end")
		}
	}
	return m.st.CountActive(ctx, owner)
}

// listenable refuses a subscriptions/listen whose taskIds filter names a task that is not
// owner's, with the one not-found answer: a listen must not show another caller's task.
func (m *Modern) listenable(ctx context.Context, owner string, req *sep2663.Request) error {
	var err error
	gjson.GetBytes(req.Params, "notifications.taskIds").ForEach(func(_, v gjson.Result) bool {
		if v.Type != gjson.String {
			err = jsonrpc.ErrInvalidParams.Wrapf("notifications.taskIds must hold strings")
			return false
		}
		rec, gerr := m.st.GetTask(ctx, record.PassThroughID(m.origin, v.Str))
		switch {
		case errors.Is(gerr, store.ErrNotFound):
			err = errmap.ErrTaskNotFound
		case gerr != nil:
			err = errStoreDown
		case rec.Mode != record.ModePassThrough || rec.Owner != owner:
			err = errmap.ErrTaskNotFound
		}
		return err == nil
	})
	return err
}
