package verify

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/internal/jsonrpc"
	"github.com/taskbridge/taskbridge/sep2663"
)

// shortTTLMs is the ttl verify asks for on the 2025-11-25 face: short enough to wait
// out within a run, long enough for the create answer to arrive first.
const shortTTLMs = 1000

// maxWaitTTL is the longest task ttl verify waits out on the 2026-07-28 face (the client
// cannot ask for a ttl there: the upstream's ttlMs is the task's).
const maxWaitTTL = 3 * time.Second

// expiredTTL checks that a task past its ttl answers -32602 on both faces: on the
// 2025-11-25 face verify asks for a 1 s ttl; on the 2026-07-28 face the upstream's ttlMs
// is waited out when it is short, and the check is skipped (with the ttl) otherwise.
func (r *run) expiredTTL(ctx context.Context, lc *legacyClient) (Result, string) {
	t := r.tools.slow
	if t == nil {
		return Skipped, noTaskTool
	}
	res, err := lc.call(ctx, "tools/call", map[string]any{"name": t.Name, "arguments": t.args(), "task": map[string]any{"ttl": shortTTLMs}})
	r.sent(1)
	if err != nil || res.Error != nil {
		return Fail, fmt.Sprintf("tools/call with task.ttl %d: %v %s", shortTTLMs, err, res.errText())
	}
	id := gjson.GetBytes(res.Result, "task.taskId").Str
	ttl := gjson.GetBytes(res.Result, "task.ttl")
	if id == "" {
		return Fail, fmt.Sprintf("tools/call with params.task answered no task: %.120s", res.Result)
	}
	if ttl.Type != gjson.Number || ttl.Int() > shortTTLMs {
		return Skipped, fmt.Sprintf("asked for ttl %d ms, the bridge granted %s", shortTTLMs, ttl.Raw)
	}
	sleepCtx(ctx, time.Duration(ttl.Int())*time.Millisecond+300*time.Millisecond)
	for _, m := range []string{"tasks/get", "tasks/result"} {
		out, err := lc.call(ctx, m, map[string]any{"taskId": id})
		if err != nil {
			return Fail, m + " after the ttl: " + err.Error()
		}
		if out.code() != jsonrpc.CodeInvalidParams {
			return Fail, fmt.Sprintf("%s %d ms after a %d ms ttl answered %.120s%s, want -32602", m, ttl.Int()+300, ttl.Int(), out.Result, out.errText())
		}
	}
	legacyEv := fmt.Sprintf("2025-11-25: ttl %d ms, then tasks/get and tasks/result -32602", ttl.Int())
	res2, ev := r.modernExpiry(ctx, *t)
	if res2 == Fail {
		return Fail, ev
	}
	return Pass, legacyEv + "; 2026-07-28: " + ev
}

// modernExpiry waits out a 2026-07-28 task's ttl when the upstream's is short. It
// returns Pass or Skipped with evidence (the gate passes on the legacy part alone), or
// Fail.
func (r *run) modernExpiry(ctx context.Context, t Tool) (Result, string) {
	mc := newModernClient(r.url, r.hc, r.who[0].header)
	out, err := mc.CallTool(ctx, toolCallParams(t), sep2663.RequestMeta{}, nil)
	r.sent(1)
	if err != nil {
		return Fail, "2026-07-28 tools/call: " + err.Error()
	}
	if out.Kind != sep2663.KindTask {
		return Skipped, "not checked (the tool answered without a task)"
	}
	ttl := out.Task.TTLMs
	if ttl == nil || time.Duration(*ttl)*time.Millisecond > maxWaitTTL {
		v := "no limit"
		if ttl != nil {
			v = fmt.Sprintf("%d ms", *ttl)
		}
		_, _ = waitModern(ctx, mc, out.Task.TaskID, &trail{}) // let it end: later caps count it
		return Skipped, "not checked (the client cannot ask for a ttl; the upstream's ttlMs is " + v + ")"
	}
	sleepCtx(ctx, time.Duration(*ttl)*time.Millisecond+300*time.Millisecond)
	_, err = mc.GetTask(ctx, out.Task.TaskID, sep2663.RequestMeta{})
	var je *jsonrpc.Error
	if !errors.As(err, &je) || je.Code != jsonrpc.CodeInvalidParams {
		return Fail, fmt.Sprintf("2026-07-28 tasks/get after the upstream's %d ms ttl answered %v, want -32602", *ttl, err)
	}
	return Pass, fmt.Sprintf("ttl %d ms, then tasks/get -32602", *ttl)
}

// sleepCtx sleeps for d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
