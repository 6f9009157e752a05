package verify

import (
	"context"
	"fmt"

	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/sep2663"
)

// recoveryGate restarts the bridge on its store between the steps of a task's life: the
// task survives with only legal transitions, ends as it would have without the restart,
// and the upstream never gets the initial tools/call again.
func recoveryGate(ctx context.Context, r *run) {
	const g = "recovery"
	t := r.tools.slow
	skip := func(name string) {
		r.check(ctx, g, name, func(context.Context) (Result, string) { return Skipped, noTaskTool })
	}
	if t == nil {
		for _, n := range []string{"restart while working (2025-11-25)", "restart before tasks/result", "restart after cancel", "restart while working (2026-07-28)",
			"cut before CreateTaskResult (2025-11-25)", "cut after CreateTaskResult (2025-11-25)", "cut between completion and tasks/result",
			"cut after CreateTaskResult (2026-07-28)", "cut after cancel (2025-11-25)"} {
			skip(n)
		}
	} else {
		r.check(ctx, g, "restart while working (2025-11-25)", func(ctx context.Context) (Result, string) {
			c, id, err := r.startLegacy(ctx, *t)
			if err != nil {
				return Fail, err.Error()
			}
			if err := r.restart(ctx); err != nil {
				return Fail, err.Error()
			}
			tr := &trail{}
			final, err := waitLegacy(ctx, c, id, tr)
			if err != nil {
				return Fail, "after the restart: " + err.Error()
			}
			return r.sameEnd(final, tr, "legacy")
		})
		r.check(ctx, g, "restart before tasks/result", func(ctx context.Context) (Result, string) {
			c, id, err := r.startLegacy(ctx, *t)
			if err != nil {
				return Fail, err.Error()
			}
			tr := &trail{}
			final, err := waitLegacy(ctx, c, id, tr)
			if err != nil {
				return Fail, err.Error()
			}
			if err := r.restart(ctx); err != nil {
				return Fail, err.Error()
			}
			res, err := c.call(ctx, "tasks/result", map[string]any{"taskId": id})
			if err != nil {
				return Fail, "tasks/result after the restart: " + err.Error()
			}
			if final == "completed" && res.Error != nil {
				return Fail, "tasks/result of a completed task after the restart: " + res.errText()
			}
			st, _, _ := c.status(ctx, id)
			tr.add(st)
			if tr.illegal != "" {
				return Fail, "illegal transition " + tr.illegal + " (" + tr.String() + ")"
			}
			return Pass, fmt.Sprintf("%s before the restart; tasks/result after it: %d bytes; %s", final, len(res.Result), tr)
		})
		r.check(ctx, g, "restart after cancel", func(ctx context.Context) (Result, string) {
			c, id, err := r.startLegacy(ctx, *t)
			if err != nil {
				return Fail, err.Error()
			}
			ack, err := c.call(ctx, "tasks/cancel", map[string]any{"taskId": id})
			if err != nil {
				return Fail, err.Error()
			}
			if err := r.restart(ctx); err != nil {
				return Fail, err.Error()
			}
			tr := &trail{}
			if ack.Error == nil {
				tr.add(gjson.GetBytes(ack.Result, "status").Str)
			}
			final, err := waitLegacy(ctx, c, id, tr)
			if err != nil {
				return Fail, "after the restart: " + err.Error()
			}
			if tr.illegal != "" {
				return Fail, "illegal transition " + tr.illegal + " (" + tr.String() + ")"
			}
			if ack.Error == nil && final != "cancelled" {
				return Fail, "cancelled before the restart, " + final + " after it"
			}
			return Pass, "cancelled before the restart, " + final + " after it"
		})
		r.check(ctx, g, "restart while working (2026-07-28)", func(ctx context.Context) (Result, string) {
			mc := newModernClient(r.url, r.hc, r.who[0].header)
			out, err := mc.CallTool(ctx, toolCallParams(*t), sep2663.RequestMeta{}, nil)
			r.sent(1)
			if err != nil {
				return Fail, "tools/call: " + err.Error()
			}
			if out.Kind != sep2663.KindTask {
				return Skipped, "the tool answered without a task"
			}
			if err := r.restart(ctx); err != nil {
				return Fail, err.Error()
			}
			tr := &trail{}
			tr.add(string(out.Task.Status))
			d, err := waitModern(ctx, mc, out.Task.TaskID, tr)
			if err != nil {
				return Fail, fmt.Sprintf("the task after the restart: %v (lost)", err)
			}
			return r.sameEnd(string(d.Status), tr, "modern")
		})
		r.cutChecks(ctx, t)
	}
	r.inputChecks(ctx, r.tools.input)
	r.check(ctx, g, "initial call never repeated", func(context.Context) (Result, string) {
		r.mu.Lock()
		sent := r.created
		r.mu.Unlock()
		got := upstreamCount(r.o.Metrics, "tools/call")
		if got != sent {
			return Fail, fmt.Sprintf("verify sent %d tools/call; the upstream got %d", sent, got)
		}
		return Pass, fmt.Sprintf("verify sent %d tools/call; the upstream got %d (bridge restarted %d times)", sent, got, r.restarts)
	})
}

// startLegacy starts one legacy task for principal 1 and waits until the upstream has it.
func (r *run) startLegacy(ctx context.Context, t Tool) (*legacyClient, string, error) {
	c, err := r.legacy(ctx, 0, withTasksCaps)
	if err != nil {
		return nil, "", err
	}
	id, _, res, err := c.createTask(ctx, t)
	r.sent(1)
	if err != nil || res.Error != nil {
		return nil, "", fmt.Errorf("tools/call: %v %s", err, res.errText())
	}
	return c, id, nil
}

// sameEnd compares a restarted task's end with the same tool's end without a restart
// (the contract gate's lifecycle).
func (r *run) sameEnd(final string, tr *trail, face string) (Result, string) {
	if tr.illegal != "" {
		return Fail, "illegal transition " + tr.illegal + " (" + tr.String() + ")"
	}
	want := r.baseline[face]
	if want != "" && final != want {
		return Fail, fmt.Sprintf("ended %s after the restart; %s without one (%s)", final, want, tr)
	}
	return Pass, fmt.Sprintf("%s across the restart", tr)
}
