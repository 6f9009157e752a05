package forward

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/taskbridge/taskbridge/bridge/internal/errmap"
	"github.com/taskbridge/taskbridge/internal/jsonrpc"
	"github.com/taskbridge/taskbridge/internal/trace"
	"github.com/taskbridge/taskbridge/internal/upstream"
	"github.com/taskbridge/taskbridge/legacy"
	"github.com/taskbridge/taskbridge/mapping"
	"github.com/taskbridge/taskbridge/record"
	"github.com/taskbridge/taskbridge/sep2663"
)

// tracker watches one upstream task for this process: it polls upstream tasks/get (one
// poll in flight at a time, at most one per interval however many clients ask), writes
// every observed change through to the store, wakes waiters and pushes status
// notifications.
//
// mu guards every field below it. The poll loop is owned by the Bridge's WaitGroup.
type tracker struct {
	b           *Bridge
	id          string
	traceParent string // the create span's (record.Task.TraceParent): polls are its children

	mu       sync.Mutex
	rec      *record.Task  // latest record; replaced, never mutated in place
	lastPoll time.Time     // start of the last upstream poll
	polling  chan struct{} // non-nil while a poll is in flight; closed when it ends
	changed  chan struct{} // closed and replaced on every record change
	waiters  int           // blocked tasks/result calls: poll at the base interval
	streams  []*resultStream
	// onGet holds the input keys pushed on the session's GET stream from this process. A
	// key delivered there is not sent again on a tasks/result stream while that GET stream
	// stays open: each message goes out on exactly one stream.
	onGet map[string]bool
	// carried holds the input keys whose claim this process holds (replicas only: the
	// one replica delivering each input; keepClaims renews or releases them).
	carried   map[string]bool
	renewed   time.Time // when keepClaims last renewed the carried claims
	asked     time.Time // when a client last asked for the task here (tasks/get)
	unchanged int       // polls in a row that saw no change (for backoff)
	faults    int       // polls in a row whose reply broke the protocol (the failure budget)

	wake chan struct{} // nudges the loop (buffer 1)
}

// track returns the tracker for a record that still needs watching, starting it if
// needed; nil for records that do not (finished, not upstream-backed, or closing).
func (b *Bridge) track(rec *record.Task) *tracker {
	if finished(rec) || rec.Mode != record.ModeTranslate || rec.UpstreamTaskID == "" {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if t := b.reg.tracker(rec.ID); t != nil {
		return t
	}
	if b.closed {
		return nil
	}
	c := *rec
	t := &tracker{b: b, id: rec.ID, traceParent: rec.TraceParent, rec: &c, changed: make(chan struct{}), wake: make(chan struct{}, 1)}
	b.reg.putTracker(t)
	b.wg.Add(1)
	go t.run()
	b.pushChanged() // push.go: listen for the new task too
	return t
}

func (t *tracker) snapshot() *record.Task {
	t.mu.Lock()
	defer t.mu.Unlock()
	c := *t.rec
	return &c
}

// interval is the minimum spacing of upstream polls: the upstream's pollIntervalMs, never
// below the operator floor.
func (t *tracker) interval() time.Duration {
	t.mu.Lock()
	ms := max(t.rec.UpstreamPollMs, t.b.cfg.PollFloorMs)
	t.mu.Unlock()
	return time.Duration(ms) * time.Millisecond
}

// markAsked notes that a client asked for the task here: the loop does not back off.
func (t *tracker) markAsked() {
	t.mu.Lock()
	t.asked = time.Now()
	t.mu.Unlock()
}

func (t *tracker) nudge() {
	select {
	case t.wake <- struct{}{}:
	default:
	}
}

// run is the poll loop: jittered interval (10–20 % above the floor), backing off while
// nothing changes and nobody waits, stopping when the record is finished, when the ttl
// (an absolute deadline) passes, or when the bridge closes.
func (t *tracker) run() {
	defer t.b.wg.Done()
	defer t.retire()
	ctx := t.b.ctx
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		rec := t.snapshot()
		if finished(rec) {
			return
		}
		if exp, ok := rec.ExpiresAt(); ok && t.b.cfg.Now().After(exp) {
			t.expire(ctx)
			return
		}
		timer.Reset(t.nextWait())
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		case <-t.wake:
		}
		t.refresh(ctx)
		t.b.keepClaims(ctx, t)
	}
}

func (t *tracker) nextWait() time.Duration {
	t.mu.Lock()
	base, factor := t.interval0(), t.factorLocked(t.unchanged)
	t.mu.Unlock()
	return t.capWait(base, time.Duration(float64(base)*factor*(1.1+0.1*rand.Float64())))
}

// factorLocked is the backoff of the wait after unchanged polls that saw no change: none
// while a client waits here (tasks/result) or asked lately (tasks/get), else 1.5× per
// unchanged poll, up to 4×.
func (t *tracker) factorLocked(unchanged int) float64 {
	factor := 1.0
	if t.waiters > 0 || time.Since(t.asked) < 2*t.interval0() {
		return factor
	}
	for i := 0; i < unchanged && factor < 4; i++ {
		factor *= 1.5
	}
	return factor
}

// capWait bounds a wait by the poll ceiling (never below the interval).
func (t *tracker) capWait(base, d time.Duration) time.Duration {
	return min(d, max(base, time.Duration(t.b.cfg.PollCeilMs)*time.Millisecond))
}

// pollLeaseTTL is how long the poll lease outlives a poll (replica.go): twice the longest
// wait the loop may take before it polls again, so a live holder renews well before its
// lease ends and a dead one's passes to another replica within a few intervals.
func (t *tracker) pollLeaseTTL() time.Duration {
	t.mu.Lock()
	base, factor := t.interval0(), t.factorLocked(t.unchanged+1)
	t.mu.Unlock()
	return 2*t.capWait(base, time.Duration(float64(base)*factor*1.2)) + base/2
}

// retire removes the tracker once it stops, lets another replica poll (or nobody, when
// the task finished) and caches a finished record.
func (t *tracker) retire() {
	rec := t.snapshot()
	t.b.reg.dropTracker(t)
	t.b.reg.releasePollLease(t.id)
	t.b.pushChanged()
	t.b.reg.cacheFinished(rec)
}

// refresh returns the record, polling upstream first when the last poll is older than the
// interval. Concurrent callers share one poll (coalescing).
func (t *tracker) refresh(ctx context.Context) *record.Task {
	t.mu.Lock()
	if finished(t.rec) {
		c := *t.rec
		t.mu.Unlock()
		return &c
	}
	if wait := t.polling; wait != nil {
		t.mu.Unlock()
		t.b.cfg.Metrics.PollCoalesced() // shares the poll in flight
		select {
		case <-wait:
		case <-ctx.Done():
		}
		return t.snapshot()
	}
	if time.Since(t.lastPoll) < t.interval0() {
		c := *t.rec
		t.mu.Unlock()
		t.b.cfg.Metrics.PollCoalesced() // polled recently enough
		return &c
	}
	done := make(chan struct{})
	t.polling = done
	t.lastPoll = time.Now()
	upID := t.rec.UpstreamTaskID
	sessID := t.rec.SessionID
	t.mu.Unlock()

	if t.holdPollLease() {
		t.poll(upID, sessID)
	} else {
		t.readStore() // another replica polls: what it saw is in the store
	}

	t.mu.Lock()
	t.polling = nil
	t.mu.Unlock()
	close(done)
	return t.snapshot()
}

// holdPollLease takes or renews this process's poll lease of the task (replica.go).
func (t *tracker) holdPollLease() bool {
	ctx, cancel := context.WithTimeout(t.b.ctx, t.b.cfg.StatusTimeout)
	defer cancel()
	return t.b.reg.takePollLease(ctx, t.id, t.pollLeaseTTL())
}

// readStore adopts what the replica holding the poll lease wrote, and delivers the task's
// inputs on this process's streams if it waits for input (events may have been lost).
func (t *tracker) readStore() {
	t.b.cfg.Metrics.PollCoalesced() // the holder's poll serves this one too
	ctx, cancel := context.WithTimeout(t.b.ctx, t.b.cfg.StatusTimeout)
	defer cancel()
	rec, err := t.b.reg.get(ctx, t.id)
	if err != nil {
		return
	}
	t.adopt(rec)
	t.mu.Lock()
	carriers := len(t.streams)
	t.mu.Unlock()
	if rec.Status == record.StatusInputRequired && (carriers > 0 || t.b.face.HasGetStream(rec.SessionID)) {
		t.b.deliverInputs(ctx, t)
	}
}

// interval0 is interval() for callers already holding mu.
func (t *tracker) interval0() time.Duration {
	return time.Duration(max(t.rec.UpstreamPollMs, t.b.cfg.PollFloorMs)) * time.Millisecond
}

// poll performs one upstream tasks/get and applies it. It runs on the bridge's context, not
// a client's: one client hanging up must not spoil the poll others are waiting on.
func (t *tracker) poll(upstreamID, sessionID string) {
	ctx, cancel := context.WithTimeout(trace.ForTask(t.b.ctx, t.id, t.traceParent), t.b.cfg.StatusTimeout)
	defer cancel()
	sess, _ := t.b.session(ctx, sessionID)
	t.b.cfg.Metrics.UpstreamPoll()
	dt, err := t.b.up.GetTask(ctx, upstreamID, t.b.meta(sess))
	if err != nil {
		var je *jsonrpc.Error
		if errors.As(err, &je) && je.Code == jsonrpc.CodeInvalidParams {
			t.lost(ctx)
			return
		}
		if invalidReply(err) {
			t.fault(ctx, err)
			return
		}
		t.b.log.Warn().Err(err).Str("task", t.id).Msg("upstream tasks/get failed")
		return
	}
	obs, err := mapping.Observe(dt)
	if err != nil {
		t.fault(ctx, err) // an unknown task status
		return
	}
	t.mu.Lock()
	t.faults = 0
	t.mu.Unlock()
	t.observe(ctx, dt, obs)
}

// invalidReply reports whether a tasks/get failure is the upstream answering something
// that breaks the protocol (or is about another task), as opposed to not answering: a
// timeout, a refused connection, a 5xx page from a proxy while the upstream restarts.
func invalidReply(err error) bool {
	var ue *upstream.Error
	if !errors.Is(err, sep2663.ErrInvalidReply) || !errors.As(err, &ue) {
		return false
	}
	return ue.Status == 0 || ue.Status/100 == 2
}

// fault counts one invalid tasks/get reply: never adopted into the record, logged,
// counted; after PollFaultBudget of them in a row the task ends failed with an unknown
// outcome instead of staying working until its ttl.
func (t *tracker) fault(ctx context.Context, err error) {
	kind := "upstream_invalid_reply"
	if errors.Is(err, sep2663.ErrTaskMismatch) {
		kind = "upstream_task_mismatch"
	}
	t.b.cfg.Metrics.AnswerRefused(kind)
	t.mu.Lock()
	t.faults++
	n := t.faults
	t.mu.Unlock()
	t.b.log.Warn().Err(err).Str("task", t.id).Int("inARow", n).Int("budget", t.b.cfg.PollFaultBudget).
		Msg("upstream fault: invalid tasks/get reply not adopted; keeping the last known state")
	if n < t.b.cfg.PollFaultBudget {
		return
	}
	msg := fmt.Sprintf("The upstream answered %d invalid replies to tasks/get in a row; the bridge stopped watching the task and its outcome is unknown.", n)
	t.update(ctx, func(r *record.Task) bool {
		if r.Status.Terminal() {
			if r.Outcome == record.OutcomePending {
				r.Outcome, r.OutcomeDetail = record.OutcomeUnknown, msg
				return true
			}
			return false
		}
		r.Status, r.StatusMessage, r.Outcome = record.StatusFailed, msg, record.OutcomeUnknown
		r.Error = mustJSON(jsonrpc.NewError(jsonrpc.CodeUpstream, errmap.MsgInvalid).
			WithData(map[string]any{"retryable": false, "outcome": "unknown"}))
		r.LastUpdatedAt = t.b.cfg.Now().UTC()
		return true
	})
}

// observe applies an upstream observation to the record through the store.
func (t *tracker) observe(ctx context.Context, dt *sep2663.DetailedTask, obs mapping.Observation) {
	var inputs map[string]sep2663.InputRequest
	changed := false
	_, err := t.update(ctx, func(r *record.Task) bool {
		changed = false
		if dt.PollIntervalMs != nil && *dt.PollIntervalMs != r.UpstreamPollMs {
			r.UpstreamPollMs = *dt.PollIntervalMs
			r.PollIntervalMs = mapping.ClampPollInterval(r.UpstreamPollMs, t.b.cfg.PollFloorMs, t.b.cfg.PollCeilMs)
			changed = true
		}
		if r.Status.Terminal() {
			// Cancelled here while upstream carried on: record only the real outcome.
			if r.Outcome == record.OutcomePending && obs.Status.Terminal() {
				r.Outcome = obs.Outcome
				r.OutcomeDetail = "upstream ended " + string(dt.Status) + " after the cancel"
				return true
			}
			return changed
		}
		if obs.Status == r.Status && obs.StatusMessage == r.StatusMessage {
			if obs.Status == record.StatusInputRequired {
				inputs = obs.Inputs
			}
			return changed
		}
		if !mapping.CanTransition(r.Status, obs.Status) {
			return changed
		}
		applyObservation(r, obs)
		r.LastUpdatedAt = t.b.cfg.Now().UTC()
		if obs.Status == record.StatusInputRequired {
			inputs = obs.Inputs
		}
		return true
	})
	if err != nil {
		t.b.log.Error().Err(err).Str("task", t.id).Msg("store update failed")
		return
	}
	t.mu.Lock()
	if changed {
		t.unchanged = 0
	} else {
		t.unchanged++
	}
	t.mu.Unlock()
	if len(inputs) > 0 {
		t.b.relayInputs(ctx, t, inputs)
	}
}

// lost handles a task the upstream no longer knows.
func (t *tracker) lost(ctx context.Context) {
	obs := mapping.LostTask()
	t.update(ctx, func(r *record.Task) bool {
		if r.Status.Terminal() {
			if r.Outcome == record.OutcomePending {
				r.Outcome = record.OutcomeUnknown
				r.OutcomeDetail = "the upstream no longer knows the task"
				return true
			}
			return false
		}
		applyObservation(r, obs)
		r.LastUpdatedAt = t.b.cfg.Now().UTC()
		return true
	})
}

// expire ends a task whose ttl passed before the upstream finished it.
func (t *tracker) expire(ctx context.Context) {
	rec := t.snapshot()
	// ttl is a retention hint in both revisions, not a deadline for the work: a task still
	// running upstream when it passes is not declared "failed, outcome unknown" while the
	// work goes on unobserved. The bridge cancels it upstream explicitly and records that
	// (issue 16 item 14; docs/translation.md, "ttl").
	outcome, msg := record.OutcomeCancelled, "The task's ttl passed before it finished; taskbridge cancelled it upstream."
	if !rec.Status.Terminal() && rec.UpstreamTaskID != "" {
		sess, _ := t.b.session(ctx, rec.SessionID)
		cctx, cancel := context.WithTimeout(ctx, t.b.cfg.CancelTimeout)
		err := t.b.up.CancelTask(cctx, rec.UpstreamTaskID, t.b.meta(sess))
		cancel()
		if err != nil {
			outcome, msg = record.OutcomeUnknown, "The task's ttl passed before it finished and cancelling it upstream failed; the outcome is unknown."
			t.b.log.Warn().Err(err).Str("task", rec.ID).Msg("upstream tasks/cancel at ttl failed")
		}
	}
	t.update(ctx, func(r *record.Task) bool {
		if r.Status.Terminal() {
			if r.Outcome == record.OutcomePending {
				r.Outcome = record.OutcomeUnknown
				r.OutcomeDetail = "ttl passed before the upstream reported an end"
				return true
			}
			return false
		}
		r.Status = record.StatusCancelled
		r.StatusMessage = msg
		r.Outcome = outcome
		r.LastUpdatedAt = t.b.cfg.Now().UTC()
		return true
	})
}

// update applies fn to the tracker's record through the store (compare-and-swap), then
// wakes waiters and pushes the change to the session's GET stream.
func (t *tracker) update(ctx context.Context, fn func(*record.Task) bool) (*record.Task, error) {
	t.mu.Lock()
	cur := t.rec
	t.mu.Unlock()
	before := cur.Status
	rec, err := t.b.reg.update(ctx, cur, fn)
	if err != nil {
		return nil, err
	}
	if rec.Version == cur.Version {
		return rec, nil // fn declined: nothing changed
	}
	t.mu.Lock()
	t.rec = rec
	close(t.changed)
	t.changed = make(chan struct{})
	t.mu.Unlock()
	if rec.Status != before {
		t.b.pushStatus(rec)
	}
	return rec, nil
}

// pushStatus sends notifications/tasks/status to the session's GET stream, if this
// process holds one. Optional in 2025-11-25; clients keep polling.
func (b *Bridge) pushStatus(rec *record.Task) {
	m, err := jsonrpc.NewNotification("notifications/tasks/status", mapping.TaskToLegacy(rec))
	if err == nil {
		b.face.Push(rec.SessionID, m)
	}
}

// session loads a session record (nil when unknown: its envelope then carries no
// clientInfo, and capabilities default to the tasks extension only).
func (b *Bridge) session(ctx context.Context, id string) (*legacy.Session, error) {
	return b.reg.session(ctx, id)
}

// resume restarts watching every unfinished task after a restart. An intent with no
// upstream id is an operation whose fate cannot be known: it is failed with an unknown
// outcome and never re-run.
func (b *Bridge) resume(ctx context.Context) error {
	recs, err := b.reg.listActive(ctx)
	if err != nil {
		return err
	}
	for _, rec := range recs {
		if rec.Mode == record.ModeTranslate && rec.UpstreamTaskID != "" {
			b.track(rec)
		}
	}
	b.settle(ctx, 0)
	return b.failOrphans(ctx, recs) // see replica.go: with replicas, only intents past the grace
}

// settle picks up tasks cancelled by a client whose upstream tasks/cancel may never have
// left (the process died between the record and the upstream call): the cancel is sent
// again (an idempotent ack upstream) and the task watched until its real outcome is known.
// Only records older than minAge are taken, so a cancel in flight on a live replica is left
// to it.
func (b *Bridge) settle(ctx context.Context, minAge time.Duration) {
	recs, err := b.reg.listUnsettled(ctx)
	if err != nil {
		b.log.Warn().Err(err).Msg("list unsettled tasks failed")
		return
	}
	for _, rec := range recs {
		if rec.Mode != record.ModeTranslate || b.cfg.Now().Sub(rec.LastUpdatedAt) < minAge {
			continue
		}
		if b.reg.tracker(rec.ID) != nil {
			continue
		}
		if rec.Status == record.StatusCancelled {
			sess, _ := b.session(ctx, rec.SessionID)
			cctx, cancel := context.WithTimeout(trace.ForTask(ctx, rec.ID, rec.TraceParent), b.cfg.CancelTimeout)
			if err := b.up.CancelTask(cctx, rec.UpstreamTaskID, b.meta(sess)); err != nil {
				b.log.Warn().Err(err).Str("task", rec.ID).Msg("resent upstream tasks/cancel failed; still watching")
			}
			cancel()
		}
		b.track(rec)
	}
}
