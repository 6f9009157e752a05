package bridge

import (
	"context"

	"github.com/taskbridge/taskbridge/internal/jsonrpc"
	"github.com/taskbridge/taskbridge/legacy"
)

// ActiveTasks counts the reverse tasks this process holds that have not ended (no payload
// yet, not lost, not terminal upstream). A drain waits for them.
func (r *Reverse) ActiveTasks() int {
	r.mu.Lock()
	ts := make([]*rtask, 0, len(r.tasks))
	for _, t := range r.tasks {
		ts = append(ts, t)
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

// admitTask refuses a new task-augmented upstream call while the kill switch is on or the
// process drains (the same codes as the forward route, bridge/admit.go); nil admits it.
func (r *Reverse) admitTask() error {
	switch {
	case r.cfg.KillSwitch:
		return jsonrpc.NewError(CodeTasksRefused,
			"taskbridge is not accepting new tasks (kill switch is on); existing tasks are still served; call the tool without a task").
			WithData(map[string]any{"reason": "kill_switch", "retryable": false})
	case r.cfg.Draining != nil && r.cfg.Draining():
		return jsonrpc.NewError(jsonrpc.CodeOverloaded,
			"taskbridge is draining: new tasks are refused; retry on another replica").
			WithData(map[string]any{"reason": "draining", "retryable": true})
	}
	return nil
}

// Legacy returns the pass-through legacy face, which also serves stdio sessions
// (ServeStdio): a 2025-11-25 client on stdin/stdout in front of the legacy upstream.
func (r *Reverse) Legacy() *legacy.Server { return r.pass.face }
