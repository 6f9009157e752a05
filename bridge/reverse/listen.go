package reverse

// subscriptions/listen on the modern face (2026-07-28 §subscriptions/listen; issue 16 item 8),
// fed by the upstream sessions' GET streams (getstream.go). A 2025-11-25 server tells its
// session's GET stream of list changes (notifications/tools/list_changed, …) and, after
// resources/subscribe, of resource updates (notifications/resources/updated); a 2026-07-28
// client asks for them with one long-lived listen request whose filter names what it wants.
//
//   - The filter is honoured as far as the upstream's initialize offers it: toolsListChanged /
//     promptsListChanged / resourcesListChanged when that capability has listChanged,
//     resourceSubscriptions when resources.subscribe (each URI is subscribed upstream, in the
//     caller's pooled session, with a legacy resources/subscribe the upstream accepted).
//     taskIds is honoured for the caller's own tasks (listen_tasks.go: notifications/tasks;
//     a caller without the tasks extension asking for it gets -32021). The acknowledgement,
//     the first message of the stream, carries exactly the honoured subset.
//   - Every notification on the stream carries _meta subscriptionId = the listen's JSON-RPC
//     id; only the requested types are sent, and only from the caller's own upstream session
//     (sessions are per principal), so one caller never hears of another's session.
//   - It ends when the client disconnects or sends notifications/cancelled for it (the
//     listen gets no further message), and when the route closes (the clean-close result,
//     resultType complete with the subscriptionId). A resource URI no listen of the caller
//     covers any more is unsubscribed upstream.
//   - Bounds: 16 open listens per caller in a process, 64 URIs per listen, 2048 bytes per
//     URI; a listener that reads too slowly loses notifications beyond 64 queued.

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/bridge/internal/sessions"
	"github.com/taskbridge/taskbridge/internal/jsonobj"
	"github.com/taskbridge/taskbridge/internal/jsonrpc"
	"github.com/taskbridge/taskbridge/legacy"
	"github.com/taskbridge/taskbridge/sep2663"
)

const (
	maxListensPerOwner = 16
	maxListenURIs      = 64
	maxListenURIBytes  = 2048
	listenQueue        = 64
)

// listener is one open subscriptions/listen.
type listener struct {
	owner     string
	id        string // the listen request's JSON-RPC id, raw
	tools     bool
	prompts   bool
	resources bool
	uris      map[string]bool
	tasks     map[string]bool // the caller's own task ids watched (listen_tasks.go); nil: none asked; never changed after creation
	wake      chan struct{}   // a watched task's record was written (taskChanged)
	ch        chan *jsonrpc.Message
	cancel    context.CancelCauseFunc // ends the listen; errListenCancelled on notifications/cancelled
}

// listens is the route's open listens and the resource URIs they hold upstream. mu guards
// both maps and every listener's uris.
type listens struct {
	mu      sync.Mutex
	byOwner map[string]map[*listener]struct{}
	uris    map[string]map[string]int // owner → URI → listens covering it
}

// listenFilter is the core filter of a listen request and the Tasks extension's taskIds.
type listenFilter struct {
	ToolsListChanged      bool            `json:"toolsListChanged"`
	PromptsListChanged    bool            `json:"promptsListChanged"`
	ResourcesListChanged  bool            `json:"resourcesListChanged"`
	ResourceSubscriptions json.RawMessage `json:"resourceSubscriptions"`
	TaskIDs               []string        `json:"taskIds"`
}

// listen serves subscriptions/listen.
func (r *Reverse) listen(ctx context.Context, req *sep2663.Request) (json.RawMessage, error) {
	l, err := r.newListener(ctx, req)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	l.cancel = cancel
	if err := r.addListener(l); err != nil {
		return nil, err
	}
	defer r.removeListener(l)
	for u := range l.uris {
		if err := r.holdURI(ctx, l.owner, u); err != nil {
			r.log.Debug().Err(err).Msg("reverse: upstream refused resources/subscribe; not acknowledged")
			r.listens.mu.Lock()
			delete(l.uris, u)
			r.listens.mu.Unlock()
		}
	}
	if !req.Stream().Send(l.ack()) {
		return nil, jsonrpc.ErrInvalidRequest.Wrapf("subscriptions/listen is answered with an SSE stream: the request's Accept must list text/event-stream")
	}
	watch := newTaskWatch(l) // listen_tasks.go: the tasks' current state first, then each change
	if !r.sendTaskStates(ctx, l, watch, req.Stream()) {
		return nil, jsonrpc.NewError(jsonrpc.CodeInternalError, "listen stream lost")
	}
	sample := time.NewTicker(taskListenSample)
	defer sample.Stop()
	for {
		select {
		case <-l.wake:
			if !r.sendTaskStates(ctx, l, watch, req.Stream()) {
				return nil, jsonrpc.NewError(jsonrpc.CodeInternalError, "listen stream lost")
			}
		case <-sample.C: // a change another replica recorded
			if len(watch) > 0 && !r.sendTaskStates(ctx, l, watch, req.Stream()) {
				return nil, jsonrpc.NewError(jsonrpc.CodeInternalError, "listen stream lost")
			}
		case <-r.ctx.Done(): // the route closes: a clean close
			return l.closeResult(), nil
		case <-ctx.Done():
			if context.Cause(ctx) == errListenCancelled {
				return l.closeResult(), nil
			}
			return nil, ctx.Err() // the client went away: nothing more to send
		case m := <-l.ch:
			if !req.Stream().Send(m) {
				return nil, jsonrpc.NewError(jsonrpc.CodeInternalError, "listen stream lost")
			}
		}
	}
}

// newListener validates the request and decides the honoured filter.
func (r *Reverse) newListener(ctx context.Context, req *sep2663.Request) (*listener, error) {
	n := gjson.GetBytes(req.Params, "notifications")
	if !n.IsObject() {
		return nil, jsonrpc.ErrInvalidParams.Wrapf("subscriptions/listen: params.notifications must be an object")
	}
	var f listenFilter
	if err := json.Unmarshal([]byte(n.Raw), &f); err != nil {
		return nil, jsonrpc.ErrInvalidParams.Wrapf("subscriptions/listen: notifications: %v", err)
	}
	if len(f.TaskIDs) > 0 && !req.Tasks() {
		return nil, sep2663.MissingTasksError("subscriptions/listen with notifications.taskIds requires the " + sep2663.ExtensionTasks + " extension")
	}
	var uris []string
	if len(f.ResourceSubscriptions) > 0 && string(f.ResourceSubscriptions) != "null" {
		if err := json.Unmarshal(f.ResourceSubscriptions, &uris); err != nil {
			return nil, jsonrpc.ErrInvalidParams.Wrapf("subscriptions/listen: notifications.resourceSubscriptions must be an array of URIs")
		}
	}
	if len(uris) > maxListenURIs {
		return nil, jsonrpc.ErrInvalidParams.Wrapf("subscriptions/listen: at most %d resourceSubscriptions", maxListenURIs)
	}
	for _, u := range uris {
		if u == "" || len(u) > maxListenURIBytes {
			return nil, jsonrpc.ErrInvalidParams.Wrapf("subscriptions/listen: a resource URI must be a non-empty string of at most %d bytes", maxListenURIBytes)
		}
	}
	in, err := r.upstream(ctx)
	if err != nil {
		return nil, err
	}
	caps := in.init.Capabilities
	tasks, err := r.ownTasks(ctx, r.owner(req), f.TaskIDs) // listen_tasks.go
	if err != nil {
		return nil, err
	}
	l := &listener{owner: r.owner(req), id: req.ID.Raw(), ch: make(chan *jsonrpc.Message, listenQueue),
		tasks: tasks, wake: make(chan struct{}, 1),
		tools:     f.ToolsListChanged && capFlag(caps, "tools.listChanged"),
		prompts:   f.PromptsListChanged && capFlag(caps, "prompts.listChanged"),
		resources: f.ResourcesListChanged && capFlag(caps, "resources.listChanged"),
	}
	if uris != nil && capFlag(caps, "resources.subscribe") {
		l.uris = map[string]bool{}
		for _, u := range uris {
			l.uris[u] = true
		}
	}
	if _, err := r.pool.Get(ctx, l.owner); err != nil { // the caller's session: its GET stream feeds the listen
		return nil, err
	}
	return l, nil
}

// capFlag reports whether the capabilities object has path: true.
func capFlag(caps json.RawMessage, path string) bool {
	return gjson.GetBytes(caps, path).Type == gjson.True
}

// ack is notifications/subscriptions/acknowledged with the honoured subset.
func (l *listener) ack() *jsonrpc.Message {
	covered := jsonobj.Object{}
	if l.tools {
		covered = covered.Set("toolsListChanged", json.RawMessage(`true`))
	}
	if l.prompts {
		covered = covered.Set("promptsListChanged", json.RawMessage(`true`))
	}
	if l.resources {
		covered = covered.Set("resourcesListChanged", json.RawMessage(`true`))
	}
	if l.uris != nil {
		list := make([]string, 0, len(l.uris))
		for u := range l.uris {
			list = append(list, u)
		}
		b, _ := json.Marshal(list)
		covered = covered.Set("resourceSubscriptions", b)
	}
	if l.tasks != nil {
		covered = covered.Set("taskIds", l.taskIDList())
	}
	params := jsonobj.Object{}.SetMeta(sep2663.MetaSubscriptionID, json.RawMessage(l.id)).Set("notifications", covered.Encode())
	return &jsonrpc.Message{JSONRPC: jsonrpc.Version, Method: sep2663.NotificationAck, Params: params.Encode()}
}

// closeResult is the clean close: resultType complete with the subscriptionId.
func (l *listener) closeResult() json.RawMessage {
	return jsonobj.Object{}.Set("resultType", json.RawMessage(`"complete"`)).
		SetMeta(sep2663.MetaSubscriptionID, json.RawMessage(l.id)).Encode()
}

// wants reports whether the listener asked for the notification m.
func (l *listener) wants(m *jsonrpc.Message) bool {
	switch m.Method {
	case sep2663.NotificationToolsListChanged:
		return l.tools
	case sep2663.NotificationPromptsListChanged:
		return l.prompts
	case sep2663.NotificationResourcesListChanged:
		return l.resources
	case sep2663.NotificationResourceUpdated:
		return l.uris[gjson.GetBytes(m.Params, "uri").Str]
	}
	return false
}

// errListenCancelled is the cause of a listen the client cancelled (notifications/cancelled).
var errListenCancelled = jsonrpc.NewError(jsonrpc.CodeInternalError, "listen cancelled by the client")

func (r *Reverse) addListener(l *listener) error {
	r.listens.mu.Lock()
	defer r.listens.mu.Unlock()
	if r.listens.byOwner == nil {
		r.listens.byOwner = map[string]map[*listener]struct{}{}
	}
	mine := r.listens.byOwner[l.owner]
	if len(mine) >= maxListensPerOwner {
		return jsonrpc.ErrInvalidRequest.Wrapf("subscriptions/listen: at most %d open listens per caller", maxListensPerOwner)
	}
	for o := range mine {
		if o.id == l.id {
			return jsonrpc.ErrInvalidRequest.Wrapf("subscriptions/listen: a listen with this id is already open")
		}
	}
	if mine == nil {
		mine = map[*listener]struct{}{}
		r.listens.byOwner[l.owner] = mine
	}
	mine[l] = struct{}{}
	return nil
}

// removeListener unregisters l and unsubscribes upstream the URIs no listen of its owner
// covers any more (best effort, bounded by CancelTimeout).
func (r *Reverse) removeListener(l *listener) {
	r.listens.mu.Lock()
	delete(r.listens.byOwner[l.owner], l)
	if len(r.listens.byOwner[l.owner]) == 0 {
		delete(r.listens.byOwner, l.owner)
	}
	var drop []string
	for u := range l.uris {
		held := r.listens.uris[l.owner]
		if held[u]--; held[u] <= 0 {
			delete(held, u)
			drop = append(drop, u)
		}
		if len(held) == 0 {
			delete(r.listens.uris, l.owner)
		}
	}
	r.listens.mu.Unlock()
	if len(drop) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.ctx), r.cfg.CancelTimeout)
	defer cancel()
	for _, u := range drop {
		params, _ := json.Marshal(map[string]string{"uri": u})
		if _, _, err := r.pool.Call(ctx, l.owner, "resources/unsubscribe", params, legacy.CallOptions{}); err != nil {
			r.log.Debug().Err(err).Msg("reverse: upstream resources/unsubscribe failed")
		}
	}
}

// holdURI counts a listen of owner covering u, subscribing upstream when it is the first.
func (r *Reverse) holdURI(ctx context.Context, owner, u string) error {
	r.listens.mu.Lock()
	if r.listens.uris == nil {
		r.listens.uris = map[string]map[string]int{}
	}
	held := r.listens.uris[owner]
	if held == nil {
		held = map[string]int{}
		r.listens.uris[owner] = held
	}
	held[u]++
	first := held[u] == 1
	r.listens.mu.Unlock()
	if !first {
		return nil
	}
	params, _ := json.Marshal(map[string]string{"uri": u})
	cctx, cancel := context.WithTimeout(ctx, r.cfg.StatusTimeout)
	defer cancel()
	if _, _, err := r.pool.Call(cctx, owner, "resources/subscribe", params, legacy.CallOptions{}); err != nil {
		r.listens.mu.Lock()
		if held[u]--; held[u] <= 0 {
			delete(held, u)
		}
		r.listens.mu.Unlock()
		return err
	}
	return nil
}

// resubscribe repeats, in a new upstream session of owner, the resources/subscribe of the
// URIs its open listens cover (the session they were made in is gone).
func (r *Reverse) resubscribe(owner string, s *legacy.UpstreamSession) {
	r.listens.mu.Lock()
	var uris []string
	for u := range r.listens.uris[owner] {
		uris = append(uris, u)
	}
	r.listens.mu.Unlock()
	for _, u := range uris {
		ctx, cancel := context.WithTimeout(r.ctx, r.cfg.StatusTimeout)
		params, _ := json.Marshal(map[string]string{"uri": u})
		if _, err := s.Call(ctx, "resources/subscribe", params, legacy.CallOptions{}); err != nil {
			r.log.Debug().Err(err).Msg("reverse: re-subscribing in a new upstream session failed")
		}
		cancel()
	}
}

// changeNotify takes a notification from owner's upstream GET stream to the owner's listens
// that asked for it, each stamped with its subscriptionId. It never blocks (the GET stream's
// reader calls it): a listener whose queue is full misses it.
func (r *Reverse) changeNotify(owner string, m *jsonrpc.Message) {
	switch m.Method {
	case sep2663.NotificationToolsListChanged, sep2663.NotificationPromptsListChanged,
		sep2663.NotificationResourcesListChanged, sep2663.NotificationResourceUpdated:
	default:
		return
	}
	r.listens.mu.Lock()
	var targets []*listener
	for l := range r.listens.byOwner[owner] {
		if l.wants(m) {
			targets = append(targets, l)
		}
	}
	r.listens.mu.Unlock()
	for _, l := range targets {
		params, err := jsonobj.Edit(orEmpty(m.Params), func(o jsonobj.Object) jsonobj.Object {
			return o.SetMeta(sep2663.MetaSubscriptionID, json.RawMessage(l.id))
		})
		if err != nil {
			continue
		}
		select {
		case l.ch <- &jsonrpc.Message{JSONRPC: jsonrpc.Version, Method: m.Method, Params: params}:
		default:
			r.log.Debug().Str("method", m.Method).Msg("reverse: listener too slow; notification dropped")
		}
	}
}

func orEmpty(p json.RawMessage) json.RawMessage {
	if len(p) == 0 || string(p) == "null" {
		return json.RawMessage(`{}`)
	}
	return p
}

// Notified implements sep2663.Notifier: notifications/cancelled naming an open listen of
// the caller ends it (the only client notification the modern face acts on).
func (r *Reverse) Notified(_ context.Context, principal string, m *jsonrpc.Message) {
	if m.Method != "notifications/cancelled" {
		return
	}
	id := gjson.GetBytes(m.Params, "requestId").Raw
	owner := sessions.ModernOwner(principal)
	r.listens.mu.Lock()
	defer r.listens.mu.Unlock()
	for l := range r.listens.byOwner[owner] {
		if l.id == id && l.cancel != nil {
			l.cancel(errListenCancelled)
		}
	}
}
