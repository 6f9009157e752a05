// Package relatedtask is the one step every client message passes on the 2025-11-25 face
// of every route (the legacy pass-through and the forward route; HTTP, WebSocket and stdio
// share that face): a related-task _meta the receiver must ignore is removed before the
// message goes on.
//
// 2025-11-25 §4: for tasks/get, tasks/result and tasks/cancel, params.taskId is
// authoritative and a receiver MUST ignore a related-task _meta that contradicts it. Not
// every upstream does (the TS SDK v1 server reads the _meta id: it answers about the task
// the _meta names, and routes a tools/call's messages into that task's queue), so the
// bridge enforces it for all of them: on a client request, notification or response,
// _meta["io.modelcontextprotocol/related-task"] is removed when it contradicts
// params.taskId (tasks/get, tasks/result, tasks/cancel) or names a task the caller does not
// own (any other message; the route's own ownership lookup decides). An owned one passes
// untouched, and so do the message's other bytes (internal/jsonobj edits only the _meta).
// This departs from "bytes you do not translate pass through" on purpose: the spec's MUST
// ignore, enforced for upstreams that do not (docs/security.md, docs/translation.md).
package relatedtask

import (
	"bytes"
	"context"
	"encoding/json"

	"github.com/taskbridge/taskbridge/internal/jsonobj"
	"github.com/taskbridge/taskbridge/internal/jsonrpc"
	"github.com/taskbridge/taskbridge/legacy"
)

// Owns is a route's ownership lookup: whether the caller of this request (sess, under
// the principal in ctx) owns the task id as the route names it to its clients.
type Owns func(ctx context.Context, sess *legacy.Session, taskID string) bool

// Guard returns h with every client request, notification and response screened
// (Screen) before h sees it. Initialize and Closed pass unchanged (initialize has no
// task to relate to; Closed carries no message).
func Guard(h legacy.Handler, owns Owns) legacy.Handler {
	return &guarded{Handler: h, owns: owns}
}

type guarded struct {
	legacy.Handler
	owns Owns
}

func (g *guarded) Serve(ctx context.Context, sess *legacy.Session, req *jsonrpc.Message, out legacy.Stream) (json.RawMessage, error) {
	return g.Handler.Serve(ctx, sess, Screen(ctx, sess, req, g.owns), out)
}

func (g *guarded) Notify(ctx context.Context, sess *legacy.Session, msg *jsonrpc.Message) {
	g.Handler.Notify(ctx, sess, Screen(ctx, sess, msg, g.owns))
}

func (g *guarded) Respond(ctx context.Context, sess *legacy.Session, msg *jsonrpc.Message) {
	g.Handler.Respond(ctx, sess, Screen(ctx, sess, msg, g.owns))
}

// byTaskID are the requests whose params.taskId is authoritative (§4).
var byTaskID = map[string]bool{"tasks/get": true, "tasks/result": true, "tasks/cancel": true}

// Screen returns msg, or a copy of it without the related-task _meta when that must be
// ignored: in params._meta of a request or notification, in result._meta of a response.
// A related-task that is not an object with a string taskId names no task the caller
// owns, so it goes too. msg itself is never modified.
func Screen(ctx context.Context, sess *legacy.Session, msg *jsonrpc.Message, owns Owns) *jsonrpc.Message {
	member := msg.Params
	if msg.Method == "" {
		member = msg.Result
	}
	// Fast path: no related-task key can be there (a key written with \u escapes is
	// looked at properly).
	if len(member) == 0 || !bytes.Contains(member, []byte("related-task")) && !bytes.Contains(member, []byte(`\u`)) {
		return msg
	}
	top, err := jsonobj.Parse(member)
	if err != nil {
		return msg // not an object: no _meta to screen (the handler refuses bad params)
	}
	raw, ok := top.Child("_meta").Get(legacy.MetaRelatedTask)
	if !ok || keep(ctx, sess, msg, top, raw, owns) {
		return msg
	}
	edited := top.DropMeta(legacy.MetaRelatedTask).Encode()
	out := *msg
	if msg.Method == "" {
		out.Result = edited
	} else {
		out.Params = edited
	}
	return &out
}

// keep decides whether the related-task value raw may pass.
func keep(ctx context.Context, sess *legacy.Session, msg *jsonrpc.Message, top jsonobj.Object, raw json.RawMessage, owns Owns) bool {
	named, ok := taskID(raw)
	if !ok {
		return false
	}
	if byTaskID[msg.Method] && !msg.ID.IsZero() {
		authoritative, ok := top.Get("taskId")
		var id string
		return ok && json.Unmarshal(authoritative, &id) == nil && id == named
	}
	return owns != nil && owns(ctx, sess, named)
}

// taskID reads {"taskId": "<id>"} (the last taskId, as a JSON decoder keeps it).
func taskID(raw json.RawMessage) (string, bool) {
	if !jsonobj.IsObject(raw) {
		return "", false
	}
	o, err := jsonobj.Parse(raw)
	if err != nil {
		return "", false
	}
	v, ok := o.Get("taskId")
	var id string
	if !ok || json.Unmarshal(v, &id) != nil || id == "" {
		return "", false
	}
	return id, true
}
