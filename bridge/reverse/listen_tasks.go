package reverse

// notifications/tasks on subscriptions/listen (SEP-2663 §1.7; issue 16 item 8). A listen
// whose filter names taskIds is told of each status change of those tasks the bridge
// records: params is the DetailedTask as tasks/get would answer it from the record (status,
// inputRequests, the inlined result or error), plus _meta subscriptionId; the final state
// is the last one sent for a task.
//
//   - Only the caller's own reverse tasks of this upstream are covered: an unknown id, another
//     principal's, another route's or another upstream's is left out of the acknowledgement
//     silently, the same for each (no caller learns another's task exists).
//   - The record is the source: every write this process makes to a watched task (update in
//     records.go) wakes the listen, which reads the record and its inputs and sends a
//     notification when the state differs from the last one it sent (status, message,
//     update time, pending input keys); a write by another replica is seen within
//     taskListenSample. Nothing is asked upstream for it (tasks/get still refreshes).
//   - Bounds: at most maxListenTaskIDs ids per listen (-32602 beyond).

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"time"

	"github.com/taskbridge/taskbridge/internal/jsonobj"
	"github.com/taskbridge/taskbridge/internal/jsonrpc"
	"github.com/taskbridge/taskbridge/record"
	"github.com/taskbridge/taskbridge/sep2663"
	"github.com/taskbridge/taskbridge/store"
)

const (
	maxListenTaskIDs = 64
	// taskListenSample is how often a listen re-reads its tasks' records when nothing woke
	// it (a change recorded by another replica).
	taskListenSample = time.Second
)

// ownTasks returns the ids among ids that are owner's reverse tasks of this upstream; nil
// when the filter asked for none (ids nil).
func (r *Reverse) ownTasks(ctx context.Context, owner string, ids []string) (map[string]bool, error) {
	if ids == nil {
		return nil, nil
	}
	if len(ids) > maxListenTaskIDs {
		return nil, jsonrpc.ErrInvalidParams.Wrapf("subscriptions/listen: at most %d taskIds", maxListenTaskIDs)
	}
	own := map[string]bool{}
	for _, id := range ids {
		rec, err := r.st.GetTask(ctx, id)
		switch {
		case errors.Is(err, store.ErrNotFound):
		case err != nil:
			return nil, jsonrpc.NewError(jsonrpc.CodeInternalError, "the task store is unavailable; retry")
		case r.isOwnTask(rec, owner):
			own[id] = true
		}
	}
	return own, nil
}

// isOwnTask reports whether rec is owner's task on this route and upstream (lookupTask's test).
func (r *Reverse) isOwnTask(rec *record.Task, owner string) bool {
	return rec.Mode == record.ModeReverse && rec.Origin == r.up.URL() && rec.Owner == owner
}

// taskIDList is the acknowledged taskIds, in a stable order.
func (l *listener) taskIDList() json.RawMessage {
	list := make([]string, 0, len(l.tasks))
	for id := range l.tasks {
		list = append(list, id)
	}
	slices.Sort(list)
	b, _ := json.Marshal(list)
	return b
}

// taskChanged wakes the owner's listens that watch rec (called after every record write
// of this process). It never blocks.
func (r *Reverse) taskChanged(rec *record.Task) {
	r.listens.mu.Lock()
	defer r.listens.mu.Unlock()
	for l := range r.listens.byOwner[rec.Owner] {
		if l.tasks[rec.ID] {
			select {
			case l.wake <- struct{}{}:
			default: // already woken
			}
		}
	}
}

// taskWatch is a listen's view of its tasks: the fingerprint of the last state sent per
// task still watched (a task whose final state was sent is dropped). Owned by the listen's
// goroutine.
type taskWatch map[string]string

func newTaskWatch(l *listener) taskWatch {
	w := taskWatch{}
	for id := range l.tasks {
		w[id] = ""
	}
	return w
}

// sendTaskStates sends, for each watched task whose recorded state differs from the last one sent,
// notifications/tasks on stream; false when the stream is lost.
func (r *Reverse) sendTaskStates(ctx context.Context, l *listener, w taskWatch, stream *sep2663.Stream) bool {
	for id, last := range w {
		rec, err := r.st.GetTask(ctx, id)
		if err != nil || !r.isOwnTask(rec, l.owner) {
			if errors.Is(err, store.ErrNotFound) {
				delete(w, id) // purged: nothing more to tell
			}
			continue
		}
		ins, err := r.st.ListInputs(ctx, id)
		if err != nil {
			continue
		}
		dt := r.detailed(rec, ins)
		fp := taskFingerprint(dt)
		if fp == last {
			continue
		}
		m, err := taskNotification(dt, l.id)
		if err != nil {
			continue
		}
		if !stream.Send(m) {
			return false
		}
		w[id] = fp
		if dt.Status.IsTerminal() {
			delete(w, id)
		}
	}
	return true
}

// taskFingerprint identifies a task state: status, message, update time, pending keys.
func taskFingerprint(dt sep2663.DetailedTask) string {
	keys := make([]string, 0, len(dt.InputRequests))
	for k := range dt.InputRequests {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b, _ := json.Marshal([]any{dt.Status, dt.StatusMessage, dt.LastUpdatedAt, keys})
	return string(b)
}

// taskNotification is notifications/tasks for dt on the listen subID.
func taskNotification(dt sep2663.DetailedTask, subID string) (*jsonrpc.Message, error) {
	b, err := json.Marshal(dt)
	if err != nil {
		return nil, err
	}
	params, err := jsonobj.Edit(b, func(o jsonobj.Object) jsonobj.Object {
		return o.SetMeta(sep2663.MetaSubscriptionID, json.RawMessage(subID))
	})
	if err != nil {
		return nil, err
	}
	return &jsonrpc.Message{JSONRPC: jsonrpc.Version, Method: sep2663.NotificationTasks, Params: params}, nil
}
