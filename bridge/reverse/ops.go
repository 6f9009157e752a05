package reverse

import (
	"context"
	"encoding/json"

	"github.com/taskbridge/taskbridge/legacy"
)

// ActiveTasks counts the reverse tasks this process holds that have not ended (no payload
// yet, not lost, not terminal upstream). A drain waits for them.
func (r *Reverse) ActiveTasks() int { return r.countActive(func(*rtask) bool { return true }) }

// activeTasks counts owner's reverse tasks that have not ended, for the gate's cap.
func (r *Reverse) activeTasks(owner string) int {
	return r.countActive(func(t *rtask) bool { return t.owner == owner })
}

// countActive counts the unended tasks that match. Tasks are copied under r.mu and read
// after, so r.mu is never held with a task's lock.
func (r *Reverse) countActive(match func(*rtask) bool) int {
	r.mu.Lock()
	ts := make([]*rtask, 0, len(r.tasks))
	for _, t := range r.tasks {
		if match(t) {
			ts = append(ts, t)
		}
	}
	r.mu.Unlock()
	n := 0
	for _, t := range ts {
		if v := t.snapshot(); !v.lost && !v.finalSet && !v.last.Status.Terminal() {
			n++
		}
	}
	return n
}

// UpstreamReady reports whether the legacy upstream's initialize and tools are known (a
// cached copy within InfoTTL counts; otherwise it asks now). /readyz uses it.
func (r *Reverse) UpstreamReady(ctx context.Context) error {
	_, err := r.upstream(ctx)
	return err
}

// CheckUpstream asks the legacy upstream now: a ping in the pooled anonymous session (a
// gone session is re-initialized first, which is itself a live answer). /readyz uses it,
// at most once per few seconds.
func (r *Reverse) CheckUpstream(ctx context.Context) error {
	_, _, err := r.pool.Call(ctx, "", "ping", json.RawMessage(`{}`), legacy.CallOptions{})
	return err
}
