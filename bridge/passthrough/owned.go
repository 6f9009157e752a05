package passthrough

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/internal/jsonrpc"
	"github.com/taskbridge/taskbridge/legacy"
)

// The pass-through's ownership lookup, for the related-task screen every client message
// passes (bridge/internal/relatedtask): does the client session own the upstream task id?
//
// The pass-through keeps no task records (ids travel through untouched) and each client
// session has its own upstream session, which is where the upstream binds its tasks. So a
// session owns the tasks seen created in it and those the upstream relays messages about
// on its streams (remembered here, per session, bounded); any other id is asked of the
// upstream over the session's own upstream session (tasks/get: a task it shows there is
// the session's, e.g. one created before a restart), and remembered when it is.

// maxOwnedPerSession bounds the ids remembered per session (the oldest go first).
const maxOwnedPerSession = 1000

// ownedSet is one session's remembered task ids, oldest first.
//
// Concurrency: mu guards ids and order.
type ownedSet struct {
	mu    sync.Mutex
	ids   map[string]bool
	order []string
}

func (o *ownedSet) add(id string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if id == "" || o.ids[id] {
		return
	}
	if len(o.order) >= maxOwnedPerSession {
		delete(o.ids, o.order[0])
		o.order = o.order[1:]
	}
	o.ids[id] = true
	o.order = append(o.order, id)
}

func (o *ownedSet) has(id string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.ids[id]
}

// ownedOf returns the session's set (created when create is true; nil otherwise).
func (p *Legacy) ownedOf(sessID string, create bool) *ownedSet {
	p.mu.Lock()
	defer p.mu.Unlock()
	o := p.owned[sessID]
	if o == nil && create {
		o = &ownedSet{ids: map[string]bool{}}
		p.owned[sessID] = o
	}
	return o
}

// rememberCreated records the task a task-augmented request created in the session.
func (p *Legacy) rememberCreated(sessID string, req *jsonrpc.Message, res json.RawMessage) {
	if !gjson.GetBytes(req.Params, "task").Exists() {
		return
	}
	if id := gjson.GetBytes(res, "task.taskId"); id.Type == gjson.String {
		p.ownedOf(sessID, true).add(id.Str)
	}
}

// rememberRelated records the task an upstream message relayed to the session is about
// (its related-task _meta, or a status notification's taskId).
func (p *Legacy) rememberRelated(sessID string, m *jsonrpc.Message) {
	id := gjson.GetBytes(m.Params, "_meta."+gjson.Escape(legacy.MetaRelatedTask)+".taskId")
	if m.Method == "notifications/tasks/status" {
		id = gjson.GetBytes(m.Params, "taskId")
	}
	if id.Type == gjson.String {
		p.ownedOf(sessID, true).add(id.Str)
	}
}

// ownsTask is the lookup (relatedtask.Owns): remembered, else shown by the upstream over
// the session's own upstream session.
func (p *Legacy) ownsTask(ctx context.Context, sess *legacy.Session, taskID string) bool {
	if o := p.ownedOf(sess.ID, false); o != nil && o.has(taskID) {
		return true
	}
	s, err := p.upstream(ctx, sess)
	if err != nil {
		return false
	}
	cctx, cancel := context.WithTimeout(ctx, p.cfg.StatusTimeout)
	defer cancel()
	q, _ := json.Marshal(legacy.TaskIDParams{TaskID: taskID})
	res, err := s.Call(cctx, "tasks/get", q, legacy.CallOptions{})
	if err != nil || gjson.GetBytes(res, "taskId").Str != taskID {
		return false
	}
	p.ownedOf(sess.ID, true).add(taskID)
	return true
}

// forgetOwned drops a session's set (the session ended).
func (p *Legacy) forgetOwned(sessID string) {
	p.mu.Lock()
	delete(p.owned, sessID)
	p.mu.Unlock()
}
