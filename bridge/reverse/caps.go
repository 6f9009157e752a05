package reverse

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/taskbridge/taskbridge/internal/jsonrpc"
	"github.com/taskbridge/taskbridge/legacy"
	"github.com/taskbridge/taskbridge/mapping"
	"github.com/taskbridge/taskbridge/record"
	"github.com/taskbridge/taskbridge/sep2663"
)

// Input requests a caller did not declare (issue 16 item 6). Every upstream session
// declares the capability set of the callers it serves (poolKey), so a conforming upstream
// never asks for more. One that does is answered with a JSON-RPC error, and nothing is
// relayed to the modern client (MRTR: servers MUST NOT send what it did not declare): on a
// held MRTR call the client gets -32021 (undeclaredInput, call.go); a task's request fails
// the task (failUndeclared); a session's own request, tied to no task, is refused alone.

// undeclaredAnswer is the error the upstream gets for a request of a kind the client did
// not declare: -32601, as a 2025-11-25 client without that capability answers.
func undeclaredAnswer(method, need string) *jsonrpc.Error {
	return jsonrpc.ErrMethodNotFound.Wrapf("%s: the client did not declare the %s capability", method, need)
}

// capsOf is the capability set rec's creator declared; a record written before the set was
// kept was created in a session that declared everything.
func capsOf(rec *record.Task) mapping.InputCaps {
	if rec.ClientCaps == "" {
		return mapping.AllInputCaps
	}
	return mapping.InputCapsOf([]byte(rec.ClientCaps))
}

// undeclaredStatus is the statusMessage of a task failed by an undeclared input request.
func undeclaredStatus(method, need string) string {
	return fmt.Sprintf("The upstream asked for %s, which needs the client capability %s; the request that created this task did not declare it, so the bridge refused it and cancelled the task upstream.", method, need)
}

// failUndeclared ends rec on an input request m of a kind its creator did not declare
// (need, required: mapping.InputCaps.Missing): the upstream's request is answered with an
// error first, the record is failed with -32021 naming the capability (never shown as an
// input request), then the upstream task is cancelled (best effort: it can no longer get
// what it waits for). It returns legacy.ErrNoReply: the answer went already.
func (r *Reverse) failUndeclared(ctx context.Context, rec *record.Task, sess *legacy.UpstreamSession, m *jsonrpc.Message, need string, required map[string]any) error {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.CancelTimeout)
	defer cancel()
	if err := sess.Respond(cctx, json.RawMessage(m.ID.Raw()), nil, undeclaredAnswer(m.Method, need)); err != nil {
		r.log.Warn().Err(err).Str("task", rec.ID).Msg("reverse: refusal of an undeclared input request not delivered upstream")
	}
	msg := undeclaredStatus(m.Method, need)
	e := sep2663.ErrMissingCapability.Wrapf("the upstream asked for %s, which needs the client capability %s, not declared by the request that created this task", m.Method, need).
		WithData(map[string]any{"requiredCapabilities": required})
	r.record(r.update(ctx, rec.ID, func(cur *record.Task) bool {
		if settled(cur) || cur.Status.Terminal() {
			return false
		}
		cur.Status, cur.StatusMessage, cur.Outcome = record.StatusFailed, msg, record.OutcomeFailed
		cur.Error, cur.OutcomeDetail = mustJSON(e), "undeclared input: "+need
		cur.LastUpdatedAt = r.cfg.Now().UTC()
		return true
	}))
	r.log.Info().Str("task", rec.ID).Str("method", m.Method).Str("capability", need).Msg("reverse: task failed on an input request its creator did not declare")
	params, _ := json.Marshal(legacy.TaskIDParams{TaskID: rec.UpstreamTaskID})
	if _, err := sess.Call(cctx, "tasks/cancel", params, legacy.CallOptions{}); err != nil {
		r.log.Debug().Err(err).Str("task", rec.ID).Msg("reverse: upstream tasks/cancel after an undeclared input request failed")
	}
	return legacy.ErrNoReply
}
