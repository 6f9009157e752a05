package bridge

import (
	"context"
	"time"

	"github.com/taskbridge/taskbridge/internal/jsonrpc"
	"github.com/taskbridge/taskbridge/sep2663"
	"github.com/taskbridge/taskbridge/store"
)

// CodeTasksRefused is taskbridge's JSON-RPC code (implementation range) for "the operator
// stopped new task creation here": the kill switch or the sunset. error.data.reason says
// which; retrying the same request on this bridge will not help.
const CodeTasksRefused = -32003

// SunsetReplacement names what legacy clients should move to, in the sunset error.
const SunsetReplacement = "the " + sep2663.ExtensionTasks + " extension of MCP 2026-07-28"

// admitTask is the one place new task creation is refused. It runs after the idempotent
// replays in createTask (a repeated request returns the task it made, even now), and
// before the intent record is written, so a refused call never reaches the upstream.
// Existing tasks are never affected: tasks/get, tasks/result, tasks/list and tasks/cancel
// keep working until each task's ttl.
//
// Order: the kill switch and the sunset are permanent refusals (-32003, not retryable
// here); a drain is temporary for the fleet (-32002, retryable on another replica).
func (b *Bridge) admitTask(ctx context.Context, sess *store.Session) error {
	switch {
	case b.cfg.KillSwitch:
		b.cfg.Metrics.TaskRefused("kill_switch")
		return jsonrpc.NewError(CodeTasksRefused,
			"taskbridge is not accepting new tasks (kill switch is on); existing tasks are still served; call the tool without params.task").
			WithData(map[string]any{"reason": "kill_switch", "retryable": false})
	case !b.cfg.Sunset.IsZero() && !b.cfg.Now().Before(b.cfg.Sunset):
		b.cfg.Metrics.TaskRefused("sunset")
		day := b.cfg.Sunset.UTC().Format(time.DateOnly)
		return jsonrpc.NewError(CodeTasksRefused,
			"the experimental tasks API of MCP 2025-11-25 was retired on "+day+
				": new tasks are refused; upgrade the client to "+SunsetReplacement+
				" (existing tasks are served until their ttl)").
			WithData(map[string]any{"reason": "sunset", "retiredOn": day, "retryable": false,
				"replacement": map[string]string{"extension": sep2663.ExtensionTasks, "protocolVersion": "2026-07-28"}})
	case b.cfg.Draining != nil && b.cfg.Draining():
		b.cfg.Metrics.TaskRefused("draining")
		return jsonrpc.NewError(jsonrpc.CodeOverloaded,
			"taskbridge is draining: new tasks are refused; retry on another replica").
			WithData(map[string]any{"reason": "draining", "retryable": true})
	}
	return nil
}
