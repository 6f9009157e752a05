package reverse

// The upstream sessions' standalone GET streams (2025-11-25 §Transports: "Listening for
// Messages from the Server"). Some servers send a task's server→client requests there
// rather than on the task's tasks/result stream: mcp-go sends sampling/createMessage and
// roots/list (and a task's elicitation/create) only on the GET stream, with no related-task
// _meta, and waits for the answer. Without the stream open they wait until their own
// timeout and the modern client sees its call end "upstream timed out".
//
// So every upstream session the pool opens gets its GET stream held open (legacy.Listen:
// re-opened with backoff and jitter while the session lives). A request arriving there is
// attributed to a task of that session — by related-task _meta when present, else the
// newest unfinished task of that principal this process holds in that session — and is
// recorded as that task's input request exactly as one on its tasks/result stream
// (inputHandler, held.go): the modern client sees it in inputRequests on tasks/get, and its
// tasks/update answer goes back upstream by the request's id (UpstreamSession.Respond). A request that comes while no task of the session is
// unfinished waits for one only while a task-creating tools/call of that principal is in
// flight (the upstream may ask before the bridge has read the CreateTaskResult); otherwise
// it belongs to the session, not to a task (server-everything asks roots/list right after
// initialized), and gets -32601: no client is there to answer it.

import (
	"context"
	"encoding/json"
	"time"

	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/internal/jsonrpc"
	"github.com/taskbridge/taskbridge/legacy"
	"github.com/taskbridge/taskbridge/mapping"
	"github.com/taskbridge/taskbridge/record"
)

// attributeWait bounds how long a request on the GET stream waits for its task to be
// registered (the upstream may ask before the bridge has read its CreateTaskResult).
const attributeWait = 2 * time.Second

// onSessionOpen is the pool's hook: hold the new session's GET stream open until the
// route closes or the session is gone. key is the pool key: the owner and the capability
// set the session declared (poolKey; the owner alone for the empty set, the session the
// owner's listens subscribe in: listen.go).
func (r *Reverse) onSessionOpen(key string, s *legacy.UpstreamSession) {
	owner, caps := splitKey(key)
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return
	}
	r.wg.Add(1)
	r.mu.Unlock()
	go func() {
		defer r.wg.Done()
		// listen.go keys the listens by owner, and subscribes in the owner's capability-less
		// session (key == owner); a session of a capability set relays none of them.
		r.resubscribe(key, s) // listen.go: the open listens' URIs, in this new session
		err := s.Listen(r.ctx, legacy.ListenOptions{
			OnNotify:  func(m *jsonrpc.Message) { r.changeNotify(key, m) }, // listen.go
			OnRequest: r.streamRequest(owner, caps, s),
			Claims:    func(m *jsonrpc.Message) bool { return r.taskForStream(r.ctx, owner, s, m) != nil },
			OnOpen:    func() { r.cfg.Metrics.GetStreamOpened("reverse") },
		})
		if r.ctx.Err() == nil {
			r.log.Debug().Err(err).Msg("reverse: upstream standalone stream ended")
		}
	}()
}

// streamRequest answers a server request from s's GET stream through the task it belongs
// to. caps is what s declared: a request without related-task _meta of a kind s did not
// declare belongs to no task (a conforming upstream would not send it) and is refused at
// once (undeclaredAnswer), never attached to a task; one that names its task is checked
// against that task's creator (inputHandler).
func (r *Reverse) streamRequest(owner string, caps mapping.InputCaps, s *legacy.UpstreamSession) legacy.RequestHandler {
	return func(ctx context.Context, m *jsonrpc.Message) (json.RawMessage, error) {
		if m.Method == "ping" {
			return json.RawMessage(`{}`), nil
		}
		if !inputMethods[m.Method] {
			return nil, jsonrpc.ErrMethodNotFound.Wrapf("%s", m.Method)
		}
		if need, _ := caps.Missing(m.Method, m.Params); need != "" && relatedTask(m) == "" {
			return nil, undeclaredAnswer(m.Method, need)
		}
		rec := r.taskForStream(ctx, owner, s, m)
		for deadline := time.Now().Add(attributeWait); rec == nil && r.creatingFor(owner) && time.Now().Before(deadline); {
			select {
			case <-ctx.Done():
				return nil, jsonrpc.NewError(jsonrpc.CodeInternalError, "request abandoned by the bridge")
			case <-time.After(50 * time.Millisecond):
			}
			rec = r.taskForStream(ctx, owner, s, m)
		}
		if rec == nil {
			return nil, jsonrpc.ErrMethodNotFound.Wrapf("%s: no task of this session is waiting for input", m.Method)
		}
		return r.inputHandler(rec, s)(ctx, m)
	}
}

// taskForStream finds the task of owner in session s that a GET-stream request belongs to:
// the one its related-task _meta names, else the newest unsettled one this process holds;
// nil when there is none.
func (r *Reverse) taskForStream(ctx context.Context, owner string, s *legacy.UpstreamSession, m *jsonrpc.Message) *record.Task {
	related := relatedTask(m)
	r.mu.Lock()
	ids := make([]string, 0, len(r.holders))
	for id := range r.holders {
		ids = append(ids, id)
	}
	r.mu.Unlock()
	var best *record.Task
	for _, id := range ids {
		rec, err := r.st.GetTask(ctx, id)
		if err != nil || rec.Owner != owner || rec.UpstreamSessionID != s.ID() || settled(rec) {
			continue
		}
		if related != "" {
			if rec.UpstreamTaskID == related {
				return rec
			}
			continue
		}
		if best == nil || rec.CreatedAt.After(best.CreatedAt) {
			best = rec
		}
	}
	return best
}

// relatedTask is the upstream task id a server request's related-task _meta names, or "".
func relatedTask(m *jsonrpc.Message) string {
	return gjson.GetBytes(m.Params, `_meta.io\.modelcontextprotocol/related-task.taskId`).Str
}

// creatingFor reports whether a task-creating tools/call of owner is in flight, or ended
// less than attributeWait ago (its task is registered just after the call returns).
func (r *Reverse) creatingFor(owner string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.creating[owner]
	return c.n > 0 || time.Since(c.ended) < attributeWait
}

// creatingStarted counts a task-creating tools/call of owner until the returned func runs.
func (r *Reverse) creatingStarted(owner string) func() {
	r.mu.Lock()
	c := r.creating[owner]
	c.n++
	r.creating[owner] = c
	r.mu.Unlock()
	return func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		c := r.creating[owner]
		c.n--
		c.ended = time.Now()
		r.creating[owner] = c
		for k, v := range r.creating { // forget owners idle for a while
			if v.n <= 0 && time.Since(v.ended) > time.Minute {
				delete(r.creating, k)
			}
		}
	}
}

// creations are one owner's task-creating tools/calls: in flight, and when the last ended.
type creations struct {
	n     int
	ended time.Time
}
