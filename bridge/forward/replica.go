package forward

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/taskbridge/taskbridge/bridge/internal/ids"
	"github.com/taskbridge/taskbridge/internal/jsonrpc"
	"github.com/taskbridge/taskbridge/internal/metrics"
	"github.com/taskbridge/taskbridge/legacy"
	"github.com/taskbridge/taskbridge/record"
	"github.com/taskbridge/taskbridge/store"
)

// Scale-out (design §6). Sessions, task records and input deliveries live in the store, so
// any replica serves any request. What the store alone cannot do is wake a request blocked
// on another replica: a client's tasks/result stream or GET stream is held by one process,
// while the status change may be observed by another. A shared store (store.Shared:
// PostgreSQL, with LISTEN/NOTIFY) carries one-line events between replicas:
//
//	<replica> t <taskID> <0|1>   the task record changed; 1 when its status changed
//	<replica> i <taskID> <key>   an input request of the task was answered
//	<replica> d <taskID> -       inputs of the task wait for a carrier (new, or released)
//	<replica> a <requestID> -    an MRTR ask (input request of a waiting call) was answered
//
// A replica receiving "t" re-reads the record: its tracker (if any) adopts it and wakes
// the blocked tasks/result calls (the `changed` broadcast), delivers input requests on the
// streams it holds, and pushes notifications/tasks/status to the session's GET stream if it
// holds that. "d" makes it deliver the task's inputs on its streams (claiming each, see
// below); "a" hands the stored answer to the call waiting here. Events from itself are
// ignored. A lost notification (connection drop) is harmless: trackers re-read the store
// on their own schedule, waiting MRTR calls re-read their asks, and every tracker reads
// again on resubscription. Events carry ids only, never payloads.
//
// Exactly one replica polls an upstream task at a time: the poll lease (store.TakeLease,
// "poll:<taskID>", on the store's clock) is taken or renewed before each upstream
// tasks/get; a replica that does not hold it reads the record from the store instead. The
// lease lasts twice the holder's longest next wait (pollLeaseTTL), so a replica that dies
// hands it over within a few poll intervals; a closing one releases it at once.
//
// Exactly one replica delivers an input request at a time: before sending it on a stream
// it holds, a replica claims the input (store.ClaimInput) and renews the claim while such a
// stream stays open; it releases the claim (and says "d") when its streams end, so the
// replica holding the client's next stream delivers it at once. A dead carrier's claim
// expires (claimTTL).
//
// MRTR asks (input.go) are stored too (store.PutAsk): a client's answer reaching another
// replica is stored there (first answer wins) and announced with "a".
//
// Writes are compare-and-swap on the record version, so replicas racing on one record
// never lose or reorder a transition.

// listenWait bounds how long Start waits for the first subscription to peer events.
const listenWait = 5 * time.Second

// notifyChannel is the LISTEN/NOTIFY channel of bridge events.
const notifyChannel = "taskbridge_events"

// peers sends and receives cross-replica events and holds the shared store's coordination
// (store.Shared). self tells this process's events, leases and claims apart.
type peers struct {
	sh   store.Shared
	self string
}

// newPeers returns the coordination for st, or nil when st is single-process (SQLite).
func newPeers(st store.Store) *peers {
	sh, ok := st.(store.Shared)
	if !ok {
		sh, ok = metrics.Unwrap(st).(store.Shared) // the instrumented wrapper hides it
	}
	if !ok {
		return nil
	}
	return &peers{sh: sh, self: ids.NewTaskID()[:12]}
}

// startBackground starts the owned background loops: the peer listener (shared stores),
// the TTL purge, the orphan sweep and the heartbeat of hosted tasks run here (shared stores).
func (b *Bridge) startBackground(context.Context) error {
	if b.reg.peers != nil {
		// Serving starts once this replica hears its peers (bounded: a slow subscription
		// only delays what events would have sped up), so no event sent meanwhile is lost.
		subscribed := make(chan struct{})
		var once sync.Once
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			defer once.Do(func() { close(subscribed) })
			err := b.reg.peers.sh.Listen(b.ctx, notifyChannel, func(payload string) {
				if payload == "" {
					once.Do(func() { close(subscribed) })
				}
				b.onPeerEvent(payload)
			})
			if err != nil {
				b.log.Error().Err(err).Msg("listening for peer events failed; other replicas' changes arrive by polling only")
			}
		}()
		select {
		case <-subscribed:
		case <-time.After(listenWait):
			b.log.Warn().Msg("not yet subscribed to peer events; serving anyway")
		}
		b.loop(b.intentGrace()/2, b.sweepIntents)
		b.loop(b.cfg.Heartbeat, b.beatHosted)
	}
	if b.cfg.PurgeInterval > 0 {
		b.loop(b.cfg.PurgeInterval, b.purge)
	}
	return nil
}

// loop runs fn every d until the bridge closes.
func (b *Bridge) loop(d time.Duration, fn func(context.Context)) {
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		t := time.NewTicker(d)
		defer t.Stop()
		for {
			select {
			case <-b.ctx.Done():
				return
			case <-t.C:
				fn(b.ctx)
			}
		}
	}()
}

// purge applies the TTL to the store: payloads go, the audit part stays for
// AuditRetention; and sessions not seen for SessionRetention (closed or idle) go. Every
// replica may run it; it is idempotent.
func (b *Bridge) purge(ctx context.Context) {
	p, d, n, err := b.reg.purge(ctx, b.cfg.AuditRetention, b.cfg.Now().Add(-b.cfg.SessionRetention))
	if err != nil {
		b.log.Warn().Err(err).Msg("purge failed")
	}
	if p+d > 0 {
		b.log.Info().Int("purged", p).Int("deleted", d).Msg("ttl purge")
	}
	if n > 0 {
		b.log.Info().Int("sessions", n).Msg("session purge")
	}
	// Replicas: expired asks, leases and buckets, and streams idle past the resume window.
	if _, err := b.reg.purgeShared(ctx, legacy.DefaultResumeWindow+time.Minute); err != nil {
		b.log.Warn().Err(err).Msg("purge of replica coordination failed")
	}
}

// intentGrace is the age after which an intent without an upstream id cannot belong to a
// live create call anywhere: every create call gives up after CreateTimeout.
func (b *Bridge) intentGrace() time.Duration { return b.cfg.CreateTimeout + 5*time.Second }

// sweepIntents fails the orphaned intents of dead replicas (outcome unknown).
func (b *Bridge) sweepIntents(ctx context.Context) {
	recs, err := b.reg.listActive(ctx)
	if err != nil {
		b.log.Warn().Err(err).Msg("intent sweep: list active failed")
		return
	}
	if err := b.failOrphans(ctx, recs); err != nil {
		b.log.Warn().Err(err).Msg("intent sweep failed")
	}
	// A cancel recorded by a replica that died before telling the upstream: older than a
	// whole cancel call could take anywhere.
	b.settle(ctx, b.cfg.CancelTimeout+5*time.Second)
}

// hostLease is how long a bridge-hosted record may go without a heartbeat before no live
// replica is taken to run it: three missed beats (beatHosted writes one every Heartbeat)
// plus 5 s for clock skew between replicas and a slow store.
func (b *Bridge) hostLease() time.Duration { return 3*b.cfg.Heartbeat + 5*time.Second }

// beatHosted is the heartbeat of the hosted tasks this process owns (queued or running in
// its worker pool): their LastUpdatedAt is refreshed, so another replica's sweep can tell
// a live hosted call from one whose replica died. Only shared stores need it.
func (b *Bridge) beatHosted(ctx context.Context) {
	b.fb.mu.Lock()
	ids := make([]string, 0, len(b.fb.running))
	for id := range b.fb.running {
		ids = append(ids, id)
	}
	b.fb.mu.Unlock()
	for _, id := range ids {
		rec, err := b.reg.get(ctx, id)
		if err != nil {
			continue // finished and purged, or the store is down: the next beat retries
		}
		if _, err := b.reg.update(ctx, rec, func(r *record.Task) bool {
			if r.Status.Terminal() || r.Mode != record.ModeHost {
				return false
			}
			r.LastUpdatedAt = b.cfg.Now().UTC()
			return true
		}); err != nil {
			b.log.Warn().Err(err).Str("task", id).Msg("hosted task heartbeat failed")
		}
	}
}

// hostedHere reports whether this process's worker pool holds the hosted task id.
func (b *Bridge) hostedHere(id string) bool {
	b.fb.mu.Lock()
	defer b.fb.mu.Unlock()
	return b.fb.running[id] != nil
}

// orphan reports whether rec is an unfinished record no live process can still complete.
// With a single-process store (SQLite) that is every intent and bridge-hosted task found
// at startup. With a shared store it is a translate intent older than intentGrace (a
// younger one may still be in its create call elsewhere), or a hosted task not run here
// whose heartbeat (LastUpdatedAt, see beatHosted) is older than hostLease: a hosted call
// may legitimately run for as long as its ttl on a live replica, which keeps beating.
func (b *Bridge) orphan(rec *record.Task) bool {
	if rec.Status.Terminal() || (rec.Mode == record.ModeTranslate && rec.UpstreamTaskID != "") || !ownMode(rec.Mode) {
		return false
	}
	if b.reg.peers == nil {
		return true
	}
	now := b.cfg.Now()
	switch rec.Mode {
	case record.ModeTranslate:
		return now.Sub(rec.CreatedAt) > b.intentGrace()
	case record.ModeHost:
		return !b.hostedHere(rec.ID) && now.Sub(rec.LastUpdatedAt) > b.hostLease()
	}
	return false
}

// failOrphans marks orphaned intents failed with an unknown outcome. They are never
// re-run: a retry with the same idempotency key is refused until reconciled.
func (b *Bridge) failOrphans(ctx context.Context, recs []*record.Task) error {
	for _, rec := range recs {
		if !b.orphan(rec) {
			continue
		}
		_, err := b.reg.update(ctx, rec, func(r *record.Task) bool {
			if !b.orphan(r) {
				return false
			}
			r.Status = record.StatusFailed
			r.StatusMessage = "The bridge stopped before the upstream answered; the outcome is unknown and the call was not retried."
			r.Outcome = record.OutcomeUnknown
			r.Error = mustJSON(jsonrpc.NewError(jsonrpc.CodeInternalError, r.StatusMessage).
				WithData(map[string]any{"retryable": false, "outcome": "unknown"}))
			r.LastUpdatedAt = b.cfg.Now().UTC()
			return true
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// onPeerEvent handles one event from another replica. It runs on the listener goroutine
// and hands work off, so notifications never wait.
func (b *Bridge) onPeerEvent(payload string) {
	if payload == "" {
		b.resync() // (re)subscribed: events may have been missed
		return
	}
	f := strings.SplitN(payload, " ", 4)
	if len(f) != 4 || f[0] == b.reg.peers.self {
		return
	}
	b.mu.Lock()
	closed := b.closed
	if !closed {
		b.wg.Add(1)
	}
	b.mu.Unlock()
	if closed {
		return
	}
	go func() {
		defer b.wg.Done()
		ctx, cancel := context.WithTimeout(b.ctx, b.cfg.StatusTimeout)
		defer cancel()
		switch f[1] {
		case "t":
			b.peerChanged(ctx, f[2], f[3] == "1")
		case "i":
			b.peerAnswered(f[2], f[3])
		case "d":
			if t := b.reg.tracker(f[2]); t != nil {
				b.deliverInputs(ctx, t)
			}
		case "a":
			b.collectAsk(ctx, f[2])
		}
	}()
}

// peerChanged applies a record change made by another replica.
func (b *Bridge) peerChanged(ctx context.Context, id string, statusChanged bool) {
	rec, err := b.reg.get(ctx, id)
	if err != nil {
		return
	}
	b.reg.cacheFinished(rec)
	t := b.reg.tracker(id)
	if t != nil && t.adopt(rec) && rec.Status == record.StatusInputRequired {
		b.deliverInputs(ctx, t)
	}
	if statusChanged && b.face.HasGetStream(rec.SessionID) {
		b.pushStatus(rec)
	}
}

// peerAnswered stops counting an input against this replica's streams' timeout once
// another replica received its answer, and polls soon.
func (b *Bridge) peerAnswered(taskID, key string) {
	t := b.reg.tracker(taskID)
	if t == nil {
		return
	}
	t.mu.Lock()
	for _, rs := range t.streams {
		rs.answered(key)
	}
	t.mu.Unlock()
	t.nudge()
}

// resync re-reads every tracked record and every waiting ask after a (re)subscription.
func (b *Bridge) resync() {
	for _, t := range b.reg.allTrackers() {
		t.nudge()
	}
	b.mu.Lock()
	closed := b.closed
	if !closed {
		b.wg.Add(1)
	}
	b.mu.Unlock()
	if closed {
		return
	}
	go func() {
		defer b.wg.Done()
		ctx, cancel := context.WithTimeout(b.ctx, b.cfg.StatusTimeout)
		defer cancel()
		for _, id := range b.asks.Keys() {
			b.collectAsk(ctx, id)
		}
	}()
}

// adopt replaces the tracker's record with a newer one read from the store and wakes the
// waiters. It reports whether it took rec.
func (t *tracker) adopt(rec *record.Task) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if rec.Version <= t.rec.Version {
		return false
	}
	c := *rec
	t.rec = &c
	close(t.changed)
	t.changed = make(chan struct{})
	return true
}
