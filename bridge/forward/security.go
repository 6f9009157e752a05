package forward

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/internal/auth"
	"github.com/taskbridge/taskbridge/internal/jsonrpc"
	"github.com/taskbridge/taskbridge/legacy"
	"github.com/taskbridge/taskbridge/record"
	"github.com/taskbridge/taskbridge/store"
)

// Tenancy and ownership (design §7).
//
// With DoorConfig.Auth set, the front door (door.go) authenticates every HTTP request and
// the legacy face binds each session to the principal that opened it (auth.Principal.Key:
// tenant and id). A task is owned by "principal:<key>"; every request re-reads the record
// and compares its owner with the caller's, so a revoked key (401 at the door) or a changed
// principal (the session answers 404) loses access at once. Without authentication the
// bridge is single-user and a task belongs to the session that created it. A foreign, unknown, expired or guessed id
// gets errmap.ErrTaskNotFound: the same bytes in every case.

// metaIdempotencyKey is the _meta member a client may use instead of the Idempotency-Key
// HTTP header (e.g. over stdio).
const metaIdempotencyKey = "taskbridge/idempotency-key"

// maxIdempotencyKeyLen bounds an idempotency key.
const maxIdempotencyKeyLen = 255

// callerOwner is the owner identity of the request's caller, re-checked against the
// principal the front door authenticated for this very request (the request context).
// false when they disagree (the face refuses that case already; this keeps the bridge safe
// behind any face).
func (b *Bridge) callerOwner(ctx context.Context, sess *legacy.Session) (string, bool) {
	if auth.KeyFrom(ctx) != sess.Principal {
		return "", false
	}
	return owner(sess), true
}

// owns reports whether the caller may see rec.
func (b *Bridge) owns(ctx context.Context, sess *legacy.Session, rec *record.Task) bool {
	own, ok := b.callerOwner(ctx, sess)
	return ok && rec.Owner == own && ownMode(rec.Mode)
}

// ownsTask is the route's ownership lookup for the related-task screen every client
// message passes (bridge/internal/relatedtask): the caller may name taskID (a bridge id)
// exactly when it could get it.
func (b *Bridge) ownsTask(ctx context.Context, sess *legacy.Session, taskID string) bool {
	_, err := b.load(ctx, sess, taskID)
	return err == nil
}

// ownMode reports whether a record of mode m is this route's: the store also holds the
// records of the modern pass-through and the reverse route (the same owner names, so a
// principal's cap counts them all), which this route never shows, resumes nor fails.
func ownMode(m record.Mode) bool {
	return m == record.ModeTranslate || m == record.ModeHost || m == record.ModeComplete
}

// idempotencyKey returns the request's idempotency key: the Idempotency-Key header, else
// params._meta["taskbridge/idempotency-key"]. "" when neither is present.
func idempotencyKey(ctx context.Context, req *jsonrpc.Message) (string, error) {
	k := legacy.IdempotencyKeyFrom(ctx)
	if k == "" {
		m := gjson.GetBytes(req.Params, "_meta").Get(gjson.Escape(metaIdempotencyKey))
		if m.Exists() && m.Type != gjson.String {
			return "", jsonrpc.ErrInvalidParams.Wrapf("_meta[%q] must be a string", metaIdempotencyKey)
		}
		k = m.Str
	}
	if k == "" {
		return "", nil
	}
	if len(k) > maxIdempotencyKeyLen || strings.IndexFunc(k, func(r rune) bool { return r < 0x21 || r > 0x7e }) >= 0 {
		return "", jsonrpc.ErrInvalidParams.Wrapf("idempotency key must be 1-%d visible ASCII characters", maxIdempotencyKeyLen)
	}
	return k, nil
}

// replay answers a tools/call whose idempotency key (or request id) names an existing task.
func (b *Bridge) replay(prev *record.Task, tool, hash string) ([]byte, error) {
	if prev.Tool != tool || prev.ArgsHash != hash {
		return nil, jsonrpc.ErrInvalidParams.Wrapf("idempotency key already used for a different call")
	}
	switch {
	case prev.UpstreamTaskID == "" && prev.Mode == record.ModeTranslate && !prev.Status.Terminal():
		// Another request (here or on another replica) is still creating it.
		return nil, jsonrpc.NewError(jsonrpc.CodeOverloaded, "a call with this idempotency key is still starting; retry shortly").
			WithData(map[string]any{"taskId": prev.ID, "retryable": true})
	case prev.UpstreamTaskID == "" && prev.Outcome == record.OutcomeUnknown:
		return nil, jsonrpc.NewError(jsonrpc.CodeOutcomeUnknown,
			"the earlier call with this idempotency key may or may not have run (outcome unknown); it is not re-executed until an operator reconciles task "+prev.ID).
			WithData(map[string]any{"taskId": prev.ID, "retryable": false, "outcome": "unknown"})
	}
	return replayResult(prev)
}

// Reconcile records an operator's verdict on a task whose outcome is unknown (the
// "taskbridge tasks reconcile" command calls it; it needs only the store, not a running
// bridge). ran=false means the operator established the call never ran: the outcome becomes
// failed and the idempotency key is released, so a retry with that key starts a new task.
// ran=true means it did run: the outcome becomes succeeded and the key stays bound, so a
// retry gets this task back. The protocol status never changes (a terminal status is
// final); note is kept in OutcomeDetail for the audit trail.
func Reconcile(ctx context.Context, st store.Store, taskID string, ran bool, note string, now time.Time) (*record.Task, error) {
	reg := &registry{st: st, now: func() time.Time { return now }, terminal: newTerminalCache()} // no peers: a CLI, not a replica
	rec, err := reg.get(ctx, taskID)
	if err != nil {
		return nil, err
	}
	var refused error
	rec, err = reg.update(ctx, rec, func(r *record.Task) bool {
		switch {
		case r.Outcome != record.OutcomeUnknown:
			refused = fmt.Errorf("task %s: outcome is %q, not unknown: nothing to reconcile", taskID, r.Outcome)
			return false
		case !r.Status.Terminal():
			refused = fmt.Errorf("task %s is still %s: wait until it ends", taskID, r.Status)
			return false
		}
		refused = nil
		verdict := "did not run"
		r.Outcome = record.OutcomeFailed
		if ran {
			verdict, r.Outcome = "ran", record.OutcomeSucceeded
		}
		r.OutcomeDetail = strings.TrimSpace(fmt.Sprintf("reconciled %s at %s: %s; %s",
			verdict, now.UTC().Format(time.RFC3339), note, r.OutcomeDetail))
		r.LastUpdatedAt = now.UTC()
		return true
	})
	if err != nil {
		return nil, err
	}
	if refused != nil {
		return nil, refused
	}
	if !ran && rec.IdempotencyKey != "" {
		if err := reg.releaseKey(ctx, rec.ID); err != nil {
			return nil, err
		}
		rec.IdempotencyKey = ""
	}
	return rec, nil
}
