package forward

import (
	"context"
	"errors"

	"github.com/taskbridge/taskbridge/internal/jsonrpc"
	"github.com/taskbridge/taskbridge/record"
	"github.com/taskbridge/taskbridge/store"
)

// A repeated JSON-RPC request id in a session is a retry only when it is the same call.
//
// The store keeps (session, request id) unique, so a retried task-augmented tools/call gets
// the task it made (even two concurrent copies of it on two replicas). But request ids are
// not forever: a TS SDK v1 client that resumes a stored session starts its ids at 0 again,
// and its "id 3" may be a new call. The earlier task is the answer only when its tool and
// arguments hash match and it has not expired; otherwise the earlier record gives up the id
// (it keeps everything else, and stays reachable by its task id) and the call starts anew.

// errRequestIDBusy answers a call whose request id another, different call of the same
// session took a moment ago (two calls racing with one id).
var errRequestIDBusy = jsonrpc.NewError(jsonrpc.CodeInvalidRequest,
	"Invalid Request: this request id is in use by another call of this session; use a new id")

// earlierTask returns the task a repeated request id made, when rec (the new call's
// record, not stored yet) is a retry of it: same tool and arguments, not expired. An
// earlier task that does not qualify loses the request id, and ok is false.
func (b *Bridge) earlierTask(ctx context.Context, rec *record.Task) (prev *record.Task, ok bool, err error) {
	prev, err = b.reg.findByRequest(ctx, rec.SessionID, rec.RequestID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	if b.sameCall(prev, rec) {
		return prev, true, nil
	}
	b.log.Info().Str("task", prev.ID).Msg("request id reused by the session for another call: a new task starts")
	if err := b.reg.releaseRequestID(ctx, prev.ID, rec.RequestID); err != nil && !errors.Is(err, store.ErrNotFound) {
		return nil, false, err
	}
	return nil, false, nil
}

// sameCall reports whether prev may answer a repeat of rec's request: the same tool and
// arguments, and not expired.
func (b *Bridge) sameCall(prev, rec *record.Task) bool {
	if prev.Tool != rec.Tool || prev.ArgsHash != rec.ArgsHash {
		return false
	}
	if exp, ok := prev.ExpiresAt(); ok && b.cfg.Now().After(exp) {
		return false
	}
	return true
}

// racedRequest answers a create whose insert conflicted on the request id: the task of a
// concurrent copy of the same call, or errRequestIDBusy when a different call took the id.
func (b *Bridge) racedRequest(ctx context.Context, rec *record.Task) (*record.Task, error) {
	prev, err := b.reg.findByRequest(ctx, rec.SessionID, rec.RequestID)
	if err != nil {
		return nil, err
	}
	if !b.sameCall(prev, rec) {
		return nil, errRequestIDBusy
	}
	return prev, nil
}
