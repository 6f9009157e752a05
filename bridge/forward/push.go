package forward

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v5"

	"github.com/taskbridge/taskbridge/internal/jsonrpc"
	"github.com/taskbridge/taskbridge/mapping"
	"github.com/taskbridge/taskbridge/sep2663"
)

// Upstream push (SEP-2663 §Notifications): the bridge keeps one subscriptions/listen open
// with notifications.taskIds = the upstream ids of the tasks this process tracks, and
// applies every notifications/tasks exactly like a poll result (observe), so the record,
// the waiters of tasks/result and the legacy client's notifications/tasks/status move as
// soon as the upstream says so rather than at the next poll.
//
// Polling is never switched off: trackers keep their normal schedule, so a listen that
// fails, is refused, or drops silently loses nothing, and only latency is at stake. A
// pushed observation and a poll of the same task never run at once (both hold the
// tracker's poll slot), so the record moves forward in one order.
//
// Listen lifecycle: started with the first tracked task; re-opened (after a short
// debounce) when the tracked set changes, since taskIds is fixed per listen; closed while
// nothing is tracked. A listen that delivered something and then closed cleanly is
// re-opened at once; one that ended without delivering anything (an upstream that closes
// every listen at once), a transport failure or an unexpected disconnect after a backoff
// with jitter (500 ms doubling to 30 s, backoff/v5); every listen opened is counted by how
// it ended (upstream_listen_opens_total: its rate is the reconnect rate); a JSON-RPC
// refusal (-32601 from an upstream without listen, -32021, …) means "not supported": the
// bridge tries again only after pushRefusedWait. Config.NoUpstreamPush disables all of it.

const (
	pushDebounce    = 50 * time.Millisecond
	pushBackoffMin  = 500 * time.Millisecond
	pushBackoffMax  = 30 * time.Second
	pushRefusedWait = 5 * time.Minute
)

// pushState is the Bridge's listen loop. once starts it; kick (buffer 1) tells it the
// tracked set changed.
type pushState struct {
	once sync.Once
	kick chan struct{}
}

// pushChanged tells the listen loop that the tracked set changed, starting the loop the
// first time. It never blocks and does not take b.mu (track calls it holding it).
func (b *Bridge) pushChanged() {
	if b.cfg.NoUpstreamPush {
		return
	}
	b.push.once.Do(func() {
		b.push.kick = make(chan struct{}, 1)
		b.wg.Add(1)
		go b.pushLoop()
	})
	select {
	case b.push.kick <- struct{}{}:
	default:
	}
}

// pushLoop owns the listen; it runs until the bridge closes (b.wg waits for it).
func (b *Bridge) pushLoop() {
	defer b.wg.Done()
	ctx := b.ctx
	bo := newPushBackoff()
	for {
		ids := b.reg.upstreamIDs()
		if len(ids) == 0 {
			select {
			case <-ctx.Done():
				return
			case <-b.push.kick:
				if !b.sleep(ctx, pushDebounce) {
					return
				}
				continue
			}
		}
		end := b.listenUntilChange(ctx, ids)
		if ctx.Err() != nil {
			return
		}
		b.cfg.Metrics.ListenOpened(end.outcome())
		if wait := b.pushWait(end, bo); wait > 0 && !b.sleep(ctx, wait) {
			return
		}
	}
}

// newPushBackoff is the wait between listens that ended without delivering anything:
// 500 ms doubling to 30 s, ±30 % jitter so replicas do not re-open in step.
func newPushBackoff() *backoff.ExponentialBackOff {
	bo := &backoff.ExponentialBackOff{InitialInterval: pushBackoffMin, RandomizationFactor: 0.3,
		Multiplier: 2, MaxInterval: pushBackoffMax}
	bo.Reset()
	return bo
}

// pushWait is how long to wait before the next listen. A listen we replaced (the tracked
// set changed) or one that delivered something is re-opened at once; one the upstream
// closed without delivering anything (some upstreams close every listen at once) or that
// failed waits the backoff; a refusal waits pushRefusedWait.
func (b *Bridge) pushWait(end listenEnd, bo *backoff.ExponentialBackOff) time.Duration {
	var je *jsonrpc.Error
	switch {
	case end.replaced || (end.err == nil && end.delivered):
		bo.Reset()
		return 0
	case errors.As(end.err, &je):
		b.log.Info().Int64("code", je.Code).Msg("upstream refused subscriptions/listen; polling only")
		return pushRefusedWait
	case end.err == nil:
		wait := bo.NextBackOff()
		b.log.Debug().Dur("retryIn", wait).Msg("upstream closed subscriptions/listen without delivering anything; re-opening after a backoff")
		return wait
	}
	wait := bo.NextBackOff()
	b.log.Warn().Err(end.err).Dur("retryIn", wait).Msg("upstream listen stream lost; polling covers it, reconnecting")
	return wait
}

// listenEnd is how one listen ended: replaced by us (the tracked set changed), or ended by
// the upstream (err nil: a clean close) after delivering something or not.
type listenEnd struct {
	replaced  bool
	delivered bool
	err       error
}

// outcome labels upstream_listen_opens_total (metrics.ListenOutcomes).
func (e listenEnd) outcome() string {
	var je *jsonrpc.Error
	switch {
	case e.replaced:
		return "replaced"
	case errors.As(e.err, &je):
		return "refused"
	case e.err != nil:
		return "failed"
	case e.delivered:
		return "delivered"
	}
	return "empty"
}

// listenUntilChange holds one listen for ids until it ends or the tracked set changes.
func (b *Bridge) listenUntilChange(ctx context.Context, ids []string) listenEnd {
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 1)
	var delivered atomic.Bool
	go func() {
		errc <- b.up.ListenTasks(lctx, ids, sep2663.RequestMeta{}, sep2663.ListenHandlers{
			Task: func(dt *sep2663.DetailedTask) { delivered.Store(true); b.observePushed(dt) },
		})
	}()
	for {
		select {
		case err := <-errc:
			return listenEnd{delivered: delivered.Load(), err: err}
		case <-b.push.kick:
			if !b.sleep(ctx, pushDebounce) {
				cancel()
				<-errc
				return listenEnd{replaced: true}
			}
			if slices.Equal(b.reg.upstreamIDs(), ids) {
				continue // e.g. a tracker replaced by itself: keep the listen
			}
			cancel()
			<-errc
			return listenEnd{replaced: true}
		}
	}
}

// sleep waits d; false when ctx ended first.
func (b *Bridge) sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// observePushed applies an upstream notifications/tasks to the tracker of that upstream
// task, exactly as a poll result, holding the tracker's poll slot so a poll and a push never
// apply at once. A task no tracker here watches is ignored (another replica's, or ended).
func (b *Bridge) observePushed(dt *sep2663.DetailedTask) {
	t := b.reg.byUpstream(dt.TaskID)
	if t == nil {
		return
	}
	obs, err := mapping.Observe(dt)
	if err != nil {
		b.log.Warn().Err(err).Str("task", t.id).Msg("upstream fault: unknown task status in a notification; ignored")
		return
	}
	if !t.acquirePollSlot(b.ctx) {
		return
	}
	ctx, cancel := context.WithTimeout(b.ctx, b.cfg.StatusTimeout)
	t.observe(ctx, dt, obs)
	cancel()
	t.releasePollSlot()
	if finished(t.snapshot()) {
		t.nudge() // the poll loop sees the end and retires the tracker
	}
}

// acquirePollSlot waits until no poll of t is in flight and takes the slot (t.polling), as
// refresh does; false when ctx ended.
func (t *tracker) acquirePollSlot(ctx context.Context) bool {
	for {
		t.mu.Lock()
		wait := t.polling
		if wait == nil {
			t.polling = make(chan struct{})
			t.mu.Unlock()
			return true
		}
		t.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return false
		}
	}
}

func (t *tracker) releasePollSlot() {
	t.mu.Lock()
	done := t.polling
	t.polling = nil
	t.mu.Unlock()
	close(done)
}
