package verify

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/sep2663"
)

// The recovery gate's transport cuts: verify's own clients close their TCP connection at
// each point of a task's life (the request cancelled in flight, or its answer left
// unread), then carry on over a new connection as a client that lost its network would.
// The upstream counters prove that nothing ran twice.

// cutChecks runs the cut checks of the slow tool (recoveryGate).
func (r *run) cutChecks(ctx context.Context, t *Tool) {
	const g = "recovery"
	r.check(ctx, g, "cut before CreateTaskResult (2025-11-25)", func(ctx context.Context) (Result, string) {
		return r.cutBeforeCreate(ctx, *t)
	})
	var done *cutTask // the next check takes up the task this one saw end
	r.check(ctx, g, "cut after CreateTaskResult (2025-11-25)", func(ctx context.Context) (Result, string) {
		res, ev, ct := r.cutAfterCreate(ctx, *t)
		done = ct
		return res, ev
	})
	r.check(ctx, g, "cut between completion and tasks/result", func(ctx context.Context) (Result, string) {
		if done == nil {
			return Skipped, "the previous check's task did not end"
		}
		defer done.c.drop()
		return r.cutBeforeResult(ctx, done)
	})
	r.check(ctx, g, "cut after CreateTaskResult (2026-07-28)", func(ctx context.Context) (Result, string) {
		return r.cutModern(ctx, *t)
	})
	r.check(ctx, g, "cut after cancel (2025-11-25)", func(ctx context.Context) (Result, string) {
		return r.cutAfterCancel(ctx, *t)
	})
}

// cutTask is a finished task a cut check hands to the next.
type cutTask struct {
	c     *legacyClient
	id    string
	final string
	tr    *trail
}

// cutBeforeCreate cuts the task-augmented tools/call once the upstream has answered it
// (the CreateTaskResult never read), then finds the task in tasks/list on a new
// connection and, on the forward route, retries the same request id: the same task comes
// back and the upstream got the call once.
func (r *run) cutBeforeCreate(ctx context.Context, t Tool) (Result, string) {
	c, err := r.cutClient(ctx, 0)
	if err != nil {
		return Fail, err.Error()
	}
	defer c.drop()
	known, err := listIDs(ctx, c)
	if err != nil {
		return Fail, "tasks/list before the call: " + err.Error()
	}
	before := upstreamCount(r.o.Metrics, "tools/call")
	params := map[string]any{"name": t.Name, "arguments": t.args(), "task": map[string]any{}}
	id := c.nextID.Add(1)
	where, err := c.cutRequest(ctx, id, "tools/call", params, func() bool { return upstreamCount(r.o.Metrics, "tools/call") > before })
	r.sent(1)
	if err != nil {
		return Fail, "tools/call: " + err.Error()
	}
	var taskID string
	for end := time.Now().Add(3 * time.Second); taskID == "" && time.Now().Before(end); sleepCtx(ctx, 100*time.Millisecond) {
		ids, err := listIDs(ctx, c)
		if err != nil {
			return Fail, "tasks/list after the cut: " + err.Error()
		}
		var fresh []string
		for _, x := range ids {
			if !slices.Contains(known, x) {
				fresh = append(fresh, x)
			}
		}
		if len(fresh) > 1 {
			return Fail, fmt.Sprintf("one call cut %s: tasks/list shows %d new tasks", where, len(fresh))
		}
		if len(fresh) == 1 {
			taskID = fresh[0]
		}
	}
	if taskID == "" {
		return Fail, fmt.Sprintf("the call cut %s: its task is not in tasks/list on a new connection", where)
	}
	tr := &trail{}
	how := "found in tasks/list"
	if r.o.Forward {
		res, err := c.callID(ctx, id, "tools/call", params) // the client's retry, same request id
		if err != nil || res.Error != nil {
			return Fail, fmt.Sprintf("the retry with the same request id: %v %s", err, res.errText())
		}
		if got := gjson.GetBytes(res.Result, "task.taskId").Str; got != taskID {
			return Fail, fmt.Sprintf("the retry with the same request id answered task %s; tasks/list shows %s", short(got), short(taskID))
		}
		tr.add(gjson.GetBytes(res.Result, "task.status").Str)
		how += "; the retry with the same request id answered the same task"
	} else {
		how += " (the legacy pass-through forwards a repeated request id: no retry)"
	}
	final, err := waitLegacy(ctx, c, taskID, tr)
	if err != nil {
		return Fail, "after the cut: " + err.Error()
	}
	if n := upstreamCount(r.o.Metrics, "tools/call") - before; n != 1 {
		return Fail, fmt.Sprintf("one call cut %s: the upstream got %d tools/call (%s)", where, n, how)
	}
	res, ev := r.sameEnd(final, tr, "legacy")
	if res != Pass {
		return res, ev
	}
	return Pass, fmt.Sprintf("cut %s; %s; the upstream got 1 tools/call; %s", where, how, tr)
}

// cutAfterCreate reads the CreateTaskResult, closes the connection, and follows the task
// with tasks/get on a new one to its end.
func (r *run) cutAfterCreate(ctx context.Context, t Tool) (Result, string, *cutTask) {
	c, err := r.cutClient(ctx, 0)
	if err != nil {
		return Fail, err.Error(), nil
	}
	id, st, res, err := c.createTask(ctx, t)
	r.sent(1)
	if err != nil || res.Error != nil {
		c.drop()
		return Fail, fmt.Sprintf("tools/call: %v %s", err, res.errText()), nil
	}
	c.reconnect()
	tr := &trail{}
	tr.add(st)
	final, err := waitLegacy(ctx, c, id, tr)
	if err != nil {
		c.drop()
		return Fail, "tasks/get on a new connection: " + err.Error(), nil
	}
	res2, ev := r.sameEnd(final, tr, "legacy")
	if res2 != Pass {
		c.drop()
		return res2, ev, nil
	}
	return Pass, "tasks/get on a new connection: " + tr.String(), &cutTask{c: c, id: id, final: final, tr: tr}
}

// cutBeforeResult asks tasks/result of a finished task and cuts the connection once the
// answer's headers arrived (the result unread); tasks/result on a new connection still
// gives the result.
func (r *run) cutBeforeResult(ctx context.Context, ct *cutTask) (Result, string) {
	c := ct.c
	where, err := c.cutRequest(ctx, c.nextID.Add(1), "tasks/result", map[string]any{"taskId": ct.id}, nil)
	if err != nil {
		return Fail, "tasks/result: " + err.Error()
	}
	res, err := c.call(ctx, "tasks/result", map[string]any{"taskId": ct.id})
	if err != nil {
		return Fail, "tasks/result on a new connection: " + err.Error()
	}
	if ct.final == "completed" && res.Error != nil {
		return Fail, "tasks/result of a completed task on a new connection: " + res.errText()
	}
	if res.Error == nil {
		if rel := gjson.GetBytes(res.Result, `_meta.io\.modelcontextprotocol/related-task.taskId`).Str; rel != ct.id {
			return Fail, fmt.Sprintf("tasks/result on a new connection carries related-task %q, want the task's id", rel)
		}
	}
	st, _, _ := c.status(ctx, ct.id)
	ct.tr.add(st)
	if ct.tr.illegal != "" {
		return Fail, "illegal transition " + ct.tr.illegal + " (" + ct.tr.String() + ")"
	}
	return Pass, fmt.Sprintf("%s; the first tasks/result cut %s; on a new connection: %d bytes%s", ct.final, where, len(res.Result), res.errText())
}

// cutModern is the cut after the CreateTaskResult on the 2026-07-28 face: the task is
// followed to its end by another client on a new connection, and after the end a third
// one (a cut between completion and retrieval) still reads its result from tasks/get.
// (A cut before the CreateTaskResult has no recovery on this face: 2026-07-28 has no
// tasks/list, and a repeated tools/call is a new call.)
func (r *run) cutModern(ctx context.Context, t Tool) (Result, string) {
	hc := freshHTTP()
	out, err := newModernClient(r.url, hc, r.who[0].header).CallTool(ctx, toolCallParams(t), sep2663.RequestMeta{}, nil)
	hc.CloseIdleConnections()
	r.sent(1)
	if err != nil {
		return Fail, "tools/call: " + err.Error()
	}
	if out.Kind != sep2663.KindTask {
		return Skipped, "the tool answered without a task"
	}
	hc2 := freshHTTP()
	tr := &trail{}
	tr.add(string(out.Task.Status))
	d, err := waitModern(ctx, newModernClient(r.url, hc2, r.who[0].header), out.Task.TaskID, tr)
	hc2.CloseIdleConnections()
	if err != nil {
		return Fail, fmt.Sprintf("tasks/get on a new connection: %v (%s)", err, tr)
	}
	hc3 := freshHTTP()
	defer hc3.CloseIdleConnections()
	again, err := newModernClient(r.url, hc3, r.who[0].header).GetTask(ctx, out.Task.TaskID, sep2663.RequestMeta{})
	if err != nil {
		return Fail, "tasks/get after the end on a new connection: " + err.Error()
	}
	tr.add(string(again.Status))
	if d.Status == sep2663.TaskStatus("completed") && len(again.Result) == 0 {
		return Fail, "completed, but tasks/get on a new connection after the end carries no result"
	}
	res, ev := r.sameEnd(string(again.Status), tr, "modern")
	if res != Pass {
		return res, ev
	}
	return Pass, fmt.Sprintf("tasks/get on new connections: %s; result %d bytes after the end", tr, len(again.Result))
}

// cutAfterCancel cuts tasks/cancel once the upstream has it, then on a new connection the
// task is cancelled, a repeated cancel changes nothing, and (forward route) the upstream
// got one tasks/cancel.
func (r *run) cutAfterCancel(ctx context.Context, t Tool) (Result, string) {
	c, err := r.cutClient(ctx, 0)
	if err != nil {
		return Fail, err.Error()
	}
	defer c.drop()
	id, st, res, err := c.createTask(ctx, t)
	r.sent(1)
	if err != nil || res.Error != nil {
		return Fail, fmt.Sprintf("tools/call: %v %s", err, res.errText())
	}
	tr := &trail{}
	tr.add(st)
	before := upstreamCount(r.o.Metrics, "tasks/cancel")
	where, err := c.cutRequest(ctx, c.nextID.Add(1), "tasks/cancel", map[string]any{"taskId": id},
		func() bool { return upstreamCount(r.o.Metrics, "tasks/cancel") > before })
	if err != nil {
		return Fail, "tasks/cancel: " + err.Error()
	}
	final, err := waitLegacy(ctx, c, id, tr)
	if err != nil {
		return Fail, "tasks/get on a new connection: " + err.Error()
	}
	if final != "cancelled" {
		return Fail, fmt.Sprintf("tasks/cancel cut %s, then the task ended %s (%s)", where, final, tr)
	}
	retry, err := c.call(ctx, "tasks/cancel", map[string]any{"taskId": id})
	if err != nil {
		return Fail, "the repeated tasks/cancel: " + err.Error()
	}
	if retry.Error == nil {
		tr.add(gjson.GetBytes(retry.Result, "status").Str)
	}
	sleepCtx(ctx, 300*time.Millisecond)
	if again, _, _ := c.status(ctx, id); again != "" {
		tr.add(again)
	}
	if tr.illegal != "" {
		return Fail, "illegal transition " + tr.illegal + " (" + tr.String() + ")"
	}
	n := upstreamCount(r.o.Metrics, "tasks/cancel") - before
	if r.o.Forward && n != 1 {
		return Fail, fmt.Sprintf("one cancel cut %s and repeated: the upstream got %d tasks/cancel", where, n)
	}
	ans := "cancelled"
	if retry.Error != nil {
		ans = retry.errText()
	}
	return Pass, fmt.Sprintf("cut %s; %s; the repeated cancel answered %s; the upstream got %d tasks/cancel", where, tr, ans, n)
}

// listIDs follows tasks/list's cursors and returns every task id listed.
func listIDs(ctx context.Context, c *legacyClient) ([]string, error) {
	var ids []string
	cursor := ""
	for range 1000 {
		p := map[string]any{}
		if cursor != "" {
			p["cursor"] = cursor
		}
		res, err := c.call(ctx, "tasks/list", p)
		if err != nil {
			return nil, err
		}
		if res.Error != nil {
			return nil, fmt.Errorf("%s", res.errText())
		}
		for _, tk := range gjson.GetBytes(res.Result, "tasks").Array() {
			ids = append(ids, tk.Get("taskId").Str)
		}
		if cursor = gjson.GetBytes(res.Result, "nextCursor").Str; cursor == "" {
			break
		}
	}
	return ids, nil
}
