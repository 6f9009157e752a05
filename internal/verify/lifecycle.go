package verify

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/internal/jsonrpc"
	"github.com/taskbridge/taskbridge/sep2663"
)

const noTaskTool = "no task tool: the plan names no slow tool and no read-only tool may run as a task"

// cancellationGate: the protocol status a client is told and the operation's own outcome
// (the upstream's), reported separately.
func cancellationGate(ctx context.Context, r *run) {
	const g = "cancellation"
	t := r.tools.slow
	r.check(ctx, g, "cancel: protocol status (2025-11-25)", func(ctx context.Context) (Result, string) {
		if t == nil {
			return Skipped, noTaskTool
		}
		c, err := r.legacy(ctx, 0, withTasksCaps)
		if err != nil {
			return Fail, err.Error()
		}
		id, _, res, err := c.createTask(ctx, *t)
		r.sent(1)
		if err != nil || res.Error != nil {
			return Fail, fmt.Sprintf("tools/call: %v %s", err, res.errText())
		}
		ack, err := c.call(ctx, "tasks/cancel", map[string]any{"taskId": id})
		if err != nil {
			return Fail, err.Error()
		}
		tr := &trail{}
		final, err := waitLegacy(ctx, c, id, tr)
		if err != nil {
			return Fail, err.Error()
		}
		if ack.Error != nil {
			if final != "cancelled" && terminal(final) {
				return Pass, fmt.Sprintf("the task ended %s before the cancel (cancel answered %s)", final, ack.errText())
			}
			return Fail, "tasks/cancel of a working task: " + ack.errText()
		}
		if st := gjson.GetBytes(ack.Result, "status").Str; st != "cancelled" || final != "cancelled" {
			return Fail, fmt.Sprintf("cancel acknowledged %q, then tasks/get says %s (%s)", st, final, tr)
		}
		if tr.illegal != "" {
			return Fail, "illegal transition " + tr.illegal
		}
		return Pass, "tasks/cancel answered cancelled; tasks/get stays cancelled"
	})
	r.check(ctx, g, "cancel: operation outcome (2026-07-28)", func(ctx context.Context) (Result, string) {
		if t == nil {
			return Skipped, noTaskTool
		}
		mc := newModernClient(r.url, r.hc, r.who[0].header)
		out, err := mc.CallTool(ctx, toolCallParams(*t), sep2663.RequestMeta{}, nil)
		r.sent(1)
		if err != nil {
			return Fail, "tools/call: " + err.Error()
		}
		if out.Kind != sep2663.KindTask {
			return Skipped, "the tool answered without a task"
		}
		id := out.Task.TaskID
		if err := mc.CancelTask(ctx, id, sep2663.RequestMeta{}); err != nil {
			return Fail, "tasks/cancel: " + err.Error()
		}
		acked := time.Now()
		tr := &trail{}
		var lastWorking time.Time
		for {
			d, err := mc.GetTask(ctx, id, sep2663.RequestMeta{})
			if err != nil {
				return Fail, "tasks/get after the cancel: " + err.Error()
			}
			tr.add(string(d.Status))
			if !terminal(string(d.Status)) {
				lastWorking = time.Now()
			} else {
				break
			}
			select {
			case <-ctx.Done():
				return Fail, fmt.Sprintf("the cancelled task is still %s (%s)", d.Status, tr)
			case <-time.After(100 * time.Millisecond):
			}
		}
		final := tr.seen[len(tr.seen)-1]
		late := lastWorking.Sub(acked)
		switch {
		case final == "cancelled":
			return Pass, fmt.Sprintf("cancel acknowledged; the upstream's task ended cancelled (%s)", tr)
		case late > time.Second:
			return Fail, fmt.Sprintf("cancel ignored: the upstream kept working %s after the acknowledgement and ended %s (%s)", late.Round(100*time.Millisecond), final, tr)
		default:
			return Pass, fmt.Sprintf("cancel acknowledged, but the operation finished anyway: %s (%s)", final, tr)
		}
	})
}

// loadGate: N concurrent tasks within the caps, the refusal past the cap, and how many
// upstream tasks/get the bridge makes for many pollers of one task.
func loadGate(ctx context.Context, r *run) {
	const g = "load"
	t := r.tools.slow
	n := r.plan.Load.Concurrent
	if c := r.o.MaxConcurrentTasks; c > 0 && n > c {
		n = c
	}
	r.check(ctx, g, fmt.Sprintf("%d concurrent tasks", n), func(ctx context.Context) (Result, string) {
		if t == nil {
			return Skipped, noTaskTool
		}
		c, err := r.legacy(ctx, 0, withTasksCaps)
		if err != nil {
			return Fail, err.Error()
		}
		start := time.Now()
		ids := make([]string, n)
		errs := make([]string, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				id, _, res, err := c.createTask(ctx, *t)
				switch {
				case err != nil:
					errs[i] = err.Error()
				case res.Error != nil:
					errs[i] = res.errText()
				default:
					ids[i] = id
				}
			}()
		}
		wg.Wait()
		r.sent(n)
		for _, e := range errs {
			if e != "" {
				return Fail, "a start within the caps was refused: " + e
			}
		}
		ends := map[string]int{}
		for _, id := range ids {
			st, err := waitLegacy(ctx, c, id, &trail{})
			if err != nil {
				return Fail, err.Error()
			}
			ends[st]++
		}
		return Pass, fmt.Sprintf("%d accepted; ended %v in %s", n, ends, time.Since(start).Round(100*time.Millisecond))
	})
	r.check(ctx, g, "backpressure past max_concurrent_tasks", func(ctx context.Context) (Result, string) {
		return r.pastTheCap(ctx, t)
	})
	r.check(ctx, g, "poll amplification", func(ctx context.Context) (Result, string) {
		if t == nil {
			return Skipped, noTaskTool
		}
		c, err := r.legacy(ctx, 0, withTasksCaps)
		if err != nil {
			return Fail, err.Error()
		}
		before := upstreamCount(r.o.Metrics, "tasks/get")
		id, _, res, err := c.createTask(ctx, *t)
		r.sent(1)
		if err != nil || res.Error != nil {
			return Fail, fmt.Sprintf("tools/call: %v %s", err, res.errText())
		}
		var mu sync.Mutex
		gets := 0
		var wg sync.WaitGroup
		for range r.plan.Load.Pollers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for ctx.Err() == nil {
					st, _, err := c.status(ctx, id)
					mu.Lock()
					gets++
					mu.Unlock()
					if err != nil || st == "" || terminal(st) {
						return
					}
					time.Sleep(50 * time.Millisecond)
				}
			}()
		}
		wg.Wait()
		up := upstreamCount(r.o.Metrics, "tasks/get") - before
		if up > gets {
			return Fail, fmt.Sprintf("%d pollers made %d tasks/get; the upstream got %d (amplified)", r.plan.Load.Pollers, gets, up)
		}
		return Pass, fmt.Sprintf("%d pollers made %d tasks/get; the upstream got %d (%.2f per client poll)", r.plan.Load.Pollers, gets, up, float64(up)/float64(max(gets, 1)))
	})
	r.check(ctx, g, "records purged after ttl + retention", func(ctx context.Context) (Result, string) {
		return r.purgeAfterRetention(ctx, r.tools.slow)
	})
}

// pastTheCap starts max_concurrent_tasks + 1 tasks: the last must be refused with the
// work gate's clear -32011 (reason max_concurrent_tasks).
func (r *run) pastTheCap(ctx context.Context, t *Tool) (Result, string) {
	limit := r.o.MaxConcurrentTasks
	switch {
	case t == nil:
		return Skipped, noTaskTool
	case limit <= 0:
		return Skipped, "max_concurrent_tasks is off in this configuration"
	case limit > 32:
		return Skipped, fmt.Sprintf("max_concurrent_tasks %d is more than verify starts (32)", limit)
	}
	c, err := r.legacy(ctx, 1, withTasksCaps)
	if err != nil {
		return Fail, err.Error()
	}
	var ids []string
	defer func() {
		for _, id := range ids {
			_, _ = c.call(ctx, "tasks/cancel", map[string]any{"taskId": id})
		}
	}()
	for range limit {
		id, _, res, err := c.createTask(ctx, *t)
		if err != nil || res.Error != nil {
			return Fail, fmt.Sprintf("a start within the cap: %v %s", err, res.errText())
		}
		r.sent(1)
		ids = append(ids, id)
	}
	for _, id := range ids {
		if st, _, _ := c.status(ctx, id); terminal(st) {
			return Skipped, fmt.Sprintf("%s's tasks end before the cap is reached (%s); name a slower tool in the plan", t.Name, st)
		}
	}
	_, _, res, err := c.createTask(ctx, *t)
	if err != nil {
		return Fail, err.Error()
	}
	if res.Error == nil {
		r.sent(1)
		return Fail, fmt.Sprintf("start %d of a principal capped at %d was accepted", limit+1, limit)
	}
	if res.code() != jsonrpc.CodeOverloaded || gjson.GetBytes(res.Error, "data.reason").Str != "max_concurrent_tasks" {
		return Fail, "past the cap: " + string(res.Error)
	}
	return Pass, "start " + fmt.Sprint(limit+1) + " refused: " + res.errText()
}

// compatibilityGate: peers without the tasks capability get the explicit fallback (a
// synchronous answer or a clear refusal), never a hang.
func compatibilityGate(ctx context.Context, r *run) {
	const g = "compatibility"
	r.check(ctx, g, "2025-11-25 client without tasks", func(ctx context.Context) (Result, string) {
		t := r.tools.slow
		if t == nil {
			t = r.tools.quick
		}
		if t == nil {
			return Skipped, "no tool the plan allows"
		}
		c, err := r.legacy(ctx, 0, `{"elicitation":{"form":{}}}`)
		if err != nil {
			return Fail, err.Error()
		}
		res, err := c.call(ctx, "tools/call", map[string]any{"name": t.Name, "arguments": t.args()})
		r.sent(1)
		if err != nil {
			return Fail, fmt.Sprintf("%s without params.task: %v", t.Name, err)
		}
		if res.Error != nil {
			return Pass, fmt.Sprintf("%s: a clear refusal %s", t.Name, res.errText())
		}
		if gjson.GetBytes(res.Result, "task").Exists() {
			return Fail, "a client that asked for no task got a CreateTaskResult"
		}
		return Pass, fmt.Sprintf("%s answered synchronously (%d bytes)", t.Name, len(res.Result))
	})
	r.check(ctx, g, "2026-07-28 client without the extension", func(ctx context.Context) (Result, string) {
		t := r.tools.slow
		if t == nil {
			t = r.tools.quick
		}
		if t == nil {
			return Skipped, "no tool the plan allows"
		}
		mc := newModernClient(r.url, r.hc, r.who[0].header)
		res, err := mc.Call(ctx, sep2663.MethodToolsCall, toolCallParams(*t), sep2663.RequestMeta{ClientCapabilities: json.RawMessage(`{}`)}, nil)
		r.sent(1)
		if je, ok := err.(*jsonrpc.Error); ok {
			return Pass, fmt.Sprintf("%s: a clear refusal %d %s", t.Name, je.Code, je.Message)
		}
		if err != nil {
			return Fail, err.Error()
		}
		if rt := gjson.GetBytes(res, "resultType").Str; rt == "task" {
			return Fail, "a client without the tasks extension got a task"
		}
		return Pass, fmt.Sprintf("%s answered synchronously (%d bytes)", t.Name, len(res))
	})
	r.check(ctx, g, "sync tool", func(ctx context.Context) (Result, string) {
		t := r.tools.quick
		if t == nil {
			return Skipped, "no sync tool: the plan names no quick tool and no read-only tool is forbidden as a task"
		}
		c, err := r.legacy(ctx, 0, withTasksCaps)
		if err != nil {
			return Fail, err.Error()
		}
		res, err := c.call(ctx, "tools/call", map[string]any{"name": t.Name, "arguments": t.args()})
		r.sent(1)
		if err != nil || res.Error != nil {
			return Fail, fmt.Sprintf("%s: %v %s", t.Name, err, res.errText())
		}
		return Pass, fmt.Sprintf("%s: %d bytes", t.Name, len(res.Result))
	})
}
