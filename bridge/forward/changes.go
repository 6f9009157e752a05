package forward

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/internal/jsonobj"
	"github.com/taskbridge/taskbridge/internal/jsonrpc"
	"github.com/taskbridge/taskbridge/legacy"
	"github.com/taskbridge/taskbridge/sep2663"
)

// Change notifications (issue 16 item 8: deliver what is advertised). A 2025-11-25 client
// learns of list changes and resource updates on its session's GET stream; a 2026-07-28
// upstream sends them only on a subscriptions/listen stream whose filter asked for them.
// The bridge holds one such listen per process, shared by every legacy session:
//
//   - its filter asks for toolsListChanged / promptsListChanged / resourcesListChanged when
//     the upstream's discover advertises that listChanged, and resourceSubscriptions = the
//     URIs the sessions of this process subscribed to with resources/subscribe (when the
//     upstream advertises resources.subscribe);
//   - it is open only while some session has a push channel here (a GET stream, or a
//     stdio/WebSocket connection) and the filter asks for something; it is re-opened (after
//     a short debounce) when the URIs change, since a filter is fixed per listen, and the
//     old one is closed only once the new one is acknowledged (a list_changed sent in that
//     overlap may reach a session twice; a change is never lost to the swap);
//   - a list_changed notification goes to every session with a push channel, a
//     resources/updated {uri} to the sessions subscribed to that URI, without the listen's
//     subscriptionId _meta (a 2025-11-25 client knows no listen);
//   - a listen that ends is re-opened after a backoff (500 ms doubling to 30 s); a refusal
//     (-32601, …) waits pushRefusedWait. What the bridge advertises in initialize is
//     decided from discover alone (mapping.ServerCapsToLegacyRelayed), so an upstream that
//     advertises listChanged but refuses the listen breaks its own promise, and the bridge
//     logs it.
//
// Config.NoUpstreamPush turns this off with the task listen; initialize then advertises
// neither listChanged nor subscribe and resources/subscribe gets -32601.
//
// Subscriptions live in this process (like the log level): a session whose requests reach
// several replicas has its GET stream and its subscriptions where they were made.

// Bounds of resources/subscribe: URIs per session, and in all (the listen's filter).
const (
	maxSubsPerSession = 64
	maxSubsTotal      = 4096
	maxSubURIBytes    = 2048
)

// changeState is the Bridge's change relay. once starts the loop; kick (buffer 1) tells it
// the sessions' push channels or subscriptions changed. mu guards subs, acked and ackCh.
type changeState struct {
	once sync.Once
	kick chan struct{}

	mu    sync.Mutex
	subs  map[string]map[string]struct{} // session id → subscribed URIs
	acked []string                       // the URIs asked for by the newest acknowledged listen, sorted
	ackCh chan struct{}                  // closed (and replaced) at each acknowledgement
}

// subscribeAckWait bounds how long resources/subscribe waits for a listen that covers its
// URI to be acknowledged upstream.
const subscribeAckWait = 2 * time.Second

// acknowledged records the filter of a listen the upstream has just acknowledged and wakes
// the subscribe calls waiting for it.
func (b *Bridge) acknowledged(f sep2663.SubscriptionFilter) {
	b.changes.mu.Lock()
	defer b.changes.mu.Unlock()
	b.changes.acked = f.ResourceSubscriptions
	if b.changes.ackCh != nil {
		close(b.changes.ackCh)
	}
	b.changes.ackCh = make(chan struct{})
}

// awaitCovered waits until a listen asking for uri is acknowledged upstream, for at most
// subscribeAckWait, so that a change made right after the client's resources/subscribe
// returns is delivered. It returns at once when the session has no push channel here (its
// URIs join the listen when one opens).
func (b *Bridge) awaitCovered(ctx context.Context, session, uri string) {
	if !slices.Contains(b.face.PushSessions(), session) {
		return
	}
	t := time.NewTimer(subscribeAckWait)
	defer t.Stop()
	for {
		b.changes.mu.Lock()
		if _, ok := slices.BinarySearch(b.changes.acked, uri); ok {
			b.changes.mu.Unlock()
			return
		}
		if b.changes.ackCh == nil {
			b.changes.ackCh = make(chan struct{})
		}
		ch := b.changes.ackCh
		b.changes.mu.Unlock()
		select {
		case <-ch:
		case <-t.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

// changesEnabled reports whether the bridge relays change notifications at all.
func (b *Bridge) changesEnabled() bool { return !b.cfg.NoUpstreamPush }

// changesKick wakes the change loop, starting it the first time. It never blocks: the
// legacy face calls it whenever a push channel opens or closes.
func (b *Bridge) changesKick() {
	if !b.changesEnabled() {
		return
	}
	b.mu.Lock() // starting the loop is atomic with closed, so Close waits for it
	if b.closed {
		b.mu.Unlock()
		return
	}
	b.changes.once.Do(func() {
		b.changes.kick = make(chan struct{}, 1)
		b.wg.Add(1)
		go b.changeLoop()
	})
	b.mu.Unlock()
	select {
	case b.changes.kick <- struct{}{}:
	default:
	}
}

// changeFilter is what the listen should ask for now: the listChanged flags the upstream
// advertises, and the subscribed URIs of the sessions with a push channel, sorted. Empty
// when no session has a push channel.
func (b *Bridge) changeFilter(ctx context.Context) sep2663.SubscriptionFilter {
	var f sep2663.SubscriptionFilter
	sessions := b.face.PushSessions()
	if len(sessions) == 0 {
		return f
	}
	d, err := b.discovery(ctx)
	if err != nil {
		return f
	}
	caps := d.Capabilities
	f.ToolsListChanged = flag(caps.Tools, "listChanged")
	f.PromptsListChanged = flag(caps.Prompts, "listChanged")
	f.ResourcesListChanged = flag(caps.Resources, "listChanged")
	if flag(caps.Resources, "subscribe") {
		b.changes.mu.Lock()
		seen := map[string]struct{}{}
		for _, id := range sessions {
			for u := range b.changes.subs[id] {
				seen[u] = struct{}{}
			}
		}
		b.changes.mu.Unlock()
		for u := range seen {
			f.ResourceSubscriptions = append(f.ResourceSubscriptions, u)
		}
		slices.Sort(f.ResourceSubscriptions)
	}
	return f
}

// flag reports whether the capability object raw has key: true.
func flag(raw json.RawMessage, key string) bool {
	return len(raw) > 0 && gjson.GetBytes(raw, key).Type == gjson.True
}

// changeLoop owns the change listen; it runs until the bridge closes (b.wg waits for it).
// A listen replaced by a new filter is kept open until its successor is acknowledged
// (make before break), so a change the upstream sends while the filter is swapped still
// arrives on one of them.
func (b *Bridge) changeLoop() {
	defer b.wg.Done()
	ctx := b.ctx
	bo := newPushBackoff()
	var prev func() // stops the replaced listen, if one is still open
	stopPrev := func() {
		if prev != nil {
			prev()
			prev = nil
		}
	}
	defer stopPrev()
	for {
		f := b.changeFilter(ctx)
		if f.Empty() {
			stopPrev()
			select {
			case <-ctx.Done():
				return
			case <-b.changes.kick:
				if !b.sleep(ctx, pushDebounce) {
					return
				}
				continue
			}
		}
		replaced, delivered, stop, err := b.listenChanges(ctx, f, prev)
		prev = stop
		if ctx.Err() != nil {
			return
		}
		var je *jsonrpc.Error
		wait := time.Duration(0)
		switch {
		case replaced || (err == nil && delivered):
			bo.Reset()
		case errors.As(err, &je):
			b.log.Warn().Int64("code", je.Code).Msg("upstream refused subscriptions/listen for change notifications it advertises; none are relayed for now")
			wait = pushRefusedWait
		default:
			wait = bo.NextBackOff()
			if err != nil {
				b.log.Debug().Err(err).Dur("retryIn", wait).Msg("upstream change listen lost; reconnecting")
			}
		}
		if wait > 0 && !b.sleep(ctx, wait) {
			return
		}
	}
}

// listenChanges holds one listen with filter f until it ends or the filter changes
// (replaced). delivered tells whether any notification arrived. prev, when not nil, stops
// the listen this one replaces: it is called once this one is acknowledged, or when this
// one ends or is replaced before that. A replaced listen is returned still open, with the
// stop function its successor calls.
func (b *Bridge) listenChanges(ctx context.Context, f sep2663.SubscriptionFilter, prev func()) (replaced, delivered bool, stop func(), err error) {
	var prevOnce sync.Once
	endPrev := func() {
		if prev != nil {
			prevOnce.Do(prev)
		}
	}
	lctx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	var mu sync.Mutex
	go func() {
		errc <- b.up.Listen(lctx, f, sep2663.RequestMeta{}, sep2663.ChangeHandlers{
			Ack: func(got sep2663.SubscriptionFilter) {
				endPrev()
				b.acknowledged(f)
				if got.ToolsListChanged != f.ToolsListChanged || got.PromptsListChanged != f.PromptsListChanged ||
					got.ResourcesListChanged != f.ResourcesListChanged || len(got.ResourceSubscriptions) != len(f.ResourceSubscriptions) {
					b.log.Info().Msg("upstream honours only part of the change filter it advertises")
				}
			},
			Notify: func(m *jsonrpc.Message) {
				mu.Lock()
				delivered = true
				mu.Unlock()
				b.relayChange(m)
			},
		})
	}()
	for {
		select {
		case err := <-errc:
			cancel()
			endPrev()
			mu.Lock()
			defer mu.Unlock()
			return false, delivered, nil, err
		case <-b.changes.kick:
			if !b.sleep(ctx, pushDebounce) || !filterEqual(b.changeFilter(ctx), f) {
				endPrev()
				return true, false, func() { cancel(); <-errc }, nil
			}
		}
	}
}

func filterEqual(a, b sep2663.SubscriptionFilter) bool {
	return a.ToolsListChanged == b.ToolsListChanged && a.PromptsListChanged == b.PromptsListChanged &&
		a.ResourcesListChanged == b.ResourcesListChanged && slices.Equal(a.ResourceSubscriptions, b.ResourceSubscriptions)
}

// relayChange sends one upstream change notification to the legacy sessions it concerns.
// Other notifications on the listen are not the legacy client's business and are dropped.
func (b *Bridge) relayChange(m *jsonrpc.Message) {
	var targets []string
	switch m.Method {
	case sep2663.NotificationToolsListChanged, sep2663.NotificationPromptsListChanged, sep2663.NotificationResourcesListChanged:
		targets = b.face.PushSessions()
	case sep2663.NotificationResourceUpdated:
		uri := gjson.GetBytes(m.Params, "uri").String()
		b.changes.mu.Lock()
		for id, uris := range b.changes.subs {
			if _, ok := uris[uri]; ok {
				targets = append(targets, id)
			}
		}
		b.changes.mu.Unlock()
	default:
		return
	}
	out := &jsonrpc.Message{JSONRPC: jsonrpc.Version, Method: m.Method, Params: withoutSubscriptionID(m.Params)}
	for _, id := range targets {
		b.face.Push(id, out) // a session whose channel is full or gone misses it, as any SSE write
	}
}

// withoutSubscriptionID drops the listen's subscriptionId from params' _meta (and params
// when nothing else is left); every other byte is kept.
func withoutSubscriptionID(params json.RawMessage) json.RawMessage {
	if len(params) == 0 {
		return nil
	}
	o, err := jsonobj.Parse(params)
	if err != nil {
		return params
	}
	if o = o.DropMeta(sep2663.MetaSubscriptionID); len(o) == 0 {
		return nil
	}
	return o.Encode()
}

// resourcesSubscribe serves resources/subscribe and resources/unsubscribe: 2026-07-28
// removed both (a listen's resourceSubscriptions replaced them), so the bridge keeps the
// session's URIs and the shared listen asks for them.
func (b *Bridge) resourcesSubscribe(ctx context.Context, sess *legacy.Session, req *jsonrpc.Message) (json.RawMessage, error) {
	d, err := b.discovery(ctx)
	if err != nil || !b.changesEnabled() || !flag(d.Capabilities.Resources, "subscribe") {
		return nil, jsonrpc.ErrMethodNotFound.Wrapf("%s: the server does not offer resource subscriptions", req.Method)
	}
	uri := gjson.GetBytes(req.Params, "uri")
	if uri.Type != gjson.String || uri.Str == "" || len(uri.Str) > maxSubURIBytes {
		return nil, jsonrpc.ErrInvalidParams.Wrapf("%s: uri must be a non-empty string of at most %d bytes", req.Method, maxSubURIBytes)
	}
	if req.Method == "resources/unsubscribe" {
		b.unsubscribe(sess.ID, uri.Str)
		b.changesKick()
		return json.RawMessage(`{}`), nil
	}
	if err := b.subscribe(sess.ID, uri.Str); err != nil {
		return nil, err
	}
	b.changesKick()
	b.awaitCovered(ctx, sess.ID, uri.Str) // "subscribed" means: changes from now on arrive
	return json.RawMessage(`{}`), nil
}

// subscribe records (session, uri) within the bounds. At the total bound, the URIs of
// sessions without a push channel here are dropped first (sessions that went away without
// a DELETE).
func (b *Bridge) subscribe(session, uri string) error {
	b.changes.mu.Lock()
	defer b.changes.mu.Unlock()
	if b.changes.subs == nil {
		b.changes.subs = map[string]map[string]struct{}{}
	}
	mine := b.changes.subs[session]
	if _, ok := mine[uri]; ok {
		return nil
	}
	if len(mine) >= maxSubsPerSession {
		return jsonrpc.ErrInvalidParams.Wrapf("resources/subscribe: at most %d subscriptions per session", maxSubsPerSession)
	}
	if b.subsTotalLocked() >= maxSubsTotal {
		live := map[string]bool{}
		for _, id := range b.face.PushSessions() {
			live[id] = true
		}
		for id := range b.changes.subs {
			if !live[id] && id != session {
				delete(b.changes.subs, id)
			}
		}
		if b.subsTotalLocked() >= maxSubsTotal {
			return jsonrpc.ErrInvalidParams.Wrapf("resources/subscribe: the bridge holds its maximum of %d subscriptions", maxSubsTotal)
		}
	}
	if mine == nil {
		mine = map[string]struct{}{}
		b.changes.subs[session] = mine
	}
	mine[uri] = struct{}{}
	return nil
}

func (b *Bridge) subsTotalLocked() int {
	n := 0
	for _, uris := range b.changes.subs {
		n += len(uris)
	}
	return n
}

// unsubscribe removes (session, uri); unknown pairs are fine (2025-11-25 asks nothing more).
func (b *Bridge) unsubscribe(session, uri string) {
	b.changes.mu.Lock()
	defer b.changes.mu.Unlock()
	delete(b.changes.subs[session], uri)
	if len(b.changes.subs[session]) == 0 {
		delete(b.changes.subs, session)
	}
}

// forgetSubscriptions drops a closed session's subscriptions.
func (b *Bridge) forgetSubscriptions(session string) {
	b.changes.mu.Lock()
	_, had := b.changes.subs[session]
	delete(b.changes.subs, session)
	b.changes.mu.Unlock()
	if had {
		b.changesKick()
	}
}
