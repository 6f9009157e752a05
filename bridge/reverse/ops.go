package reverse

import (
	"context"
	"encoding/json"

	"github.com/taskbridge/taskbridge/legacy"
)

// ActiveTasks counts the reverse tasks this process holds a tasks/result for (unfinished:
// no payload yet, not lost, not cancelled). A drain waits for them for at most
// drain_timeout; whatever is left resumes from the store, on any replica or after a restart.
func (r *Reverse) ActiveTasks() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.holders)
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
	_, _, err := r.pool.Call(ctx, anonymousPool, "ping", json.RawMessage(`{}`), legacy.CallOptions{})
	return err
}
