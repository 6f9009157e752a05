package passthrough

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/bridge/internal/errmap"
	"github.com/taskbridge/taskbridge/bridge/internal/sessions"
	"github.com/taskbridge/taskbridge/internal/jsonobj"
	"github.com/taskbridge/taskbridge/internal/jsonrpc"
	"github.com/taskbridge/taskbridge/legacy"
	"github.com/taskbridge/taskbridge/mapping"
)

// Pass-through tasks/list for an upstream without it (issue 4): a 2025-11-25 server may
// run tools/call as tasks (tasks.requests.tools.call) without offering tasks.list. The
// pass-through then records the tasks it sees created in each client session and answers
// tasks/list from those records (docs/reverse.md, "Synthesized tasks/list").
//
// A record is bound to the client session it was created in, which is also the only
// upstream session that knows the task (one upstream session per client session), so no
// caller ever sees another session's task. Records live in memory: after a bridge restart
// the upstream session is gone, and so are its tasks.

const (
	passListPageSize = 50   // tasks per synthesized tasks/list page
	passListMaxTasks = 1000 // records kept per session; the oldest terminal ones go first
)

// passTaskLog is one client session's recorded tasks, oldest first.
//
// Concurrency: mu guards tasks.
type passTaskLog struct {
	mu    sync.Mutex
	tasks []*passTask
}

type passTask struct {
	id         string
	task       legacy.Task // the upstream's last view, as it sent it
	recordedAt time.Time
}

// taskLog returns the session's log, creating it.
func (p *Legacy) taskLog(sessID string) *passTaskLog {
	p.mu.Lock()
	defer p.mu.Unlock()
	l := p.logs[sessID]
	if l == nil {
		l = &passTaskLog{}
		p.logs[sessID] = l
	}
	return l
}

// upstreamLists reports whether the upstream session offers tasks/list itself.
func upstreamLists(s *legacy.UpstreamSession) bool {
	_, raw := s.InitializeResult()
	return gjson.GetBytes(raw, "capabilities.tasks.list").Exists()
}

func initRaw(s *legacy.UpstreamSession) json.RawMessage { _, raw := s.InitializeResult(); return raw }

// upstreamRunsTasks reports whether the upstream runs any request as a task.
func upstreamRunsTasks(raw json.RawMessage) bool {
	return gjson.GetBytes(raw, "capabilities.tasks.requests").IsObject()
}

// initializeWithList adds capabilities.tasks.list to the upstream's initialize result when
// it runs tasks but does not list them (the bridge lists them instead). Every other byte
// stays as the upstream sent it (internal/jsonobj).
func initializeWithList(raw json.RawMessage) json.RawMessage {
	if !upstreamRunsTasks(raw) || gjson.GetBytes(raw, "capabilities.tasks.list").Exists() {
		return raw
	}
	top, err := jsonobj.Parse(raw)
	if err != nil {
		return raw
	}
	caps := top.Child("capabilities")
	tasks := caps.Child("tasks").Set("list", json.RawMessage(`{}`))
	return top.Set("capabilities", caps.Set("tasks", tasks.Encode()).Encode()).Encode()
}

// observe records what a forwarded request and its result say about tasks: a task
// created (result.task), or a task's new state (tasks/get, tasks/cancel results). Only
// sessions whose upstream does not list tasks keep records.
func (p *Legacy) observe(sessID string, s *legacy.UpstreamSession, req *jsonrpc.Message, res json.RawMessage) {
	if upstreamLists(s) {
		return
	}
	var raw gjson.Result
	switch req.Method {
	case "tasks/get", "tasks/cancel":
		raw = gjson.ParseBytes(res)
	default:
		if !gjson.GetBytes(req.Params, "task").Exists() {
			return
		}
		raw = gjson.GetBytes(res, "task")
	}
	var t legacy.Task
	if !raw.IsObject() || json.Unmarshal([]byte(raw.Raw), &t) != nil || t.TaskID == "" || t.Status == "" {
		return
	}
	l := p.taskLog(sessID)
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, pt := range l.tasks {
		if pt.id == t.TaskID {
			if !pt.task.Status.Terminal() {
				pt.task = t
			}
			return
		}
	}
	if req.Method != "tasks/get" && req.Method != "tasks/cancel" { // only creations add records
		l.tasks = append(l.tasks, &passTask{id: t.TaskID, task: t, recordedAt: p.cfg.Now()})
		l.pruneLocked(p.cfg.Now())
	}
}

// count keeps the gate's ledger (the owner's unfinished tasks) in step with what passes: a
// task created starts a count, a terminal tasks/get or tasks/cancel answer ends it. Unlike
// observe it counts on every upstream, listing or not.
func (p *Legacy) count(sess *legacy.Session, req *jsonrpc.Message, res json.RawMessage) {
	raw := gjson.ParseBytes(res)
	if req.Method != "tasks/get" && req.Method != "tasks/cancel" {
		if !gjson.GetBytes(req.Params, "task").Exists() {
			return
		}
		raw = raw.Get("task")
	}
	id, status := raw.Get("taskId").Str, legacy.TaskStatus(raw.Get("status").Str)
	switch {
	case id == "":
	case req.Method == "tasks/get" || req.Method == "tasks/cancel":
		if status.Terminal() {
			p.ledger.Ended(sess.ID + "\x00" + id)
		}
	case !status.Terminal():
		ttl := time.Duration(raw.Get("ttl").Int()) * time.Millisecond
		p.ledger.Started(sessions.Owner(sess), sess.ID, sess.ID+"\x00"+id, ttl)
	}
}

// countStatus ends a counted task that a notifications/tasks/status shows terminal.
func (p *Legacy) countStatus(sessID string, m *jsonrpc.Message) {
	if m.Method == "notifications/tasks/status" && legacy.TaskStatus(gjson.GetBytes(m.Params, "status").Str).Terminal() {
		p.ledger.Ended(sessID + "\x00" + gjson.GetBytes(m.Params, "taskId").Str)
	}
}

// observeStatus records a notifications/tasks/status the upstream sent on a stream.
func (p *Legacy) observeStatus(sessID string, m *jsonrpc.Message) {
	if m.Method != "notifications/tasks/status" {
		return
	}
	var t legacy.Task
	if json.Unmarshal(m.Params, &t) != nil || t.TaskID == "" || t.Status == "" {
		return
	}
	p.mu.Lock()
	l := p.logs[sessID]
	p.mu.Unlock()
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, pt := range l.tasks {
		if pt.id == t.TaskID && !pt.task.Status.Terminal() {
			pt.task = t
		}
	}
}

// pruneLocked drops records past their ttl (plus a minute), then the oldest terminal ones
// above the cap, then the oldest. l.mu is held.
func (l *passTaskLog) pruneLocked(now time.Time) {
	l.tasks = slices.DeleteFunc(l.tasks, func(pt *passTask) bool {
		return pt.task.TTL != nil && now.Sub(pt.recordedAt) > time.Duration(*pt.task.TTL)*time.Millisecond+time.Minute
	})
	for len(l.tasks) > passListMaxTasks {
		i := slices.IndexFunc(l.tasks, func(pt *passTask) bool { return pt.task.Status.Terminal() })
		if i < 0 {
			i = 0
		}
		l.tasks = slices.Delete(l.tasks, i, i+1)
	}
}

// listTasks answers tasks/list from the session's records: one page in creation order,
// non-terminal tasks refreshed with an upstream tasks/get first (a task the upstream no
// longer knows is dropped). The cursor is opaque to clients ("p" + offset).
func (p *Legacy) listTasks(ctx context.Context, sessID string, s *legacy.UpstreamSession, params json.RawMessage) (json.RawMessage, error) {
	off := 0
	if c := gjson.GetBytes(params, "cursor"); c.Exists() {
		n, err := strconv.Atoi(strings.TrimPrefix(c.String(), "p"))
		if c.Type != gjson.String || !strings.HasPrefix(c.Str, "p") || err != nil || n < 0 {
			return nil, jsonrpc.ErrInvalidParams.Wrapf("invalid cursor")
		}
		off = n
	}
	l := p.taskLog(sessID)
	l.mu.Lock()
	l.pruneLocked(p.cfg.Now())
	page := []*passTask{}
	if off < len(l.tasks) {
		page = slices.Clone(l.tasks[off:min(off+passListPageSize, len(l.tasks))])
	}
	more := off+len(page) < len(l.tasks)
	l.mu.Unlock()

	var wg sync.WaitGroup
	gone := make([]bool, len(page))
	views := make([]legacy.Task, len(page))
	for i, pt := range page {
		l.mu.Lock()
		views[i] = pt.task
		l.mu.Unlock()
		if views[i].Status.Terminal() {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			cctx, cancel := context.WithTimeout(ctx, p.cfg.StatusTimeout)
			defer cancel()
			q, _ := json.Marshal(legacy.TaskIDParams{TaskID: pt.id})
			res, err := s.Call(cctx, "tasks/get", q, legacy.CallOptions{})
			var t legacy.Task
			switch {
			case err == nil && json.Unmarshal(res, &t) == nil && t.TaskID == pt.id:
				if st, ok := mapping.NormalizeStatus(string(t.Status)); ok {
					t.Status = legacy.TaskStatus(st)
				}
				views[i] = t
				l.mu.Lock()
				if !pt.task.Status.Terminal() {
					pt.task = t
				}
				l.mu.Unlock()
			case err != nil && (errors.Is(err, legacy.ErrSessionGone) || errmap.IsNotFound(err)):
				gone[i] = true
			}
		}()
	}
	wg.Wait()
	out := legacy.ListTasksResult{}
	for i := range page {
		if !gone[i] {
			out.Tasks = append(out.Tasks, views[i])
		}
	}
	if more {
		out.NextCursor = "p" + strconv.Itoa(off+len(page))
	}
	if len(gone) > 0 {
		l.mu.Lock()
		l.tasks = slices.DeleteFunc(l.tasks, func(pt *passTask) bool {
			i := slices.Index(page, pt)
			return i >= 0 && gone[i]
		})
		l.mu.Unlock()
	}
	return json.Marshal(out)
}
