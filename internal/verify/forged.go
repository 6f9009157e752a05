package verify

import (
	"bytes"
	"context"
	"fmt"

	"github.com/taskbridge/taskbridge/legacy"
)

// forgedRelatedTask: principal 2 sends 2025-11-25 requests whose related-task _meta names
// principal 1's working task (params.taskId is authoritative; a contradicting related-task
// MUST be ignored). tasks/get and tasks/cancel of an unknown id must answer the unknown-id
// error (code and HTTP status) without a trace of that task and cost the upstream no more
// tasks/cancel or tasks/update than the same request without the _meta, a tools/call must
// cause none; principal 1's task then ends as it does without them.
func (r *run) forgedRelatedTask(ctx context.Context, t Tool) (Result, string) {
	a, err := r.legacy(ctx, 0, withTasksCaps)
	if err != nil {
		return Fail, r.who[0].name + ": " + err.Error()
	}
	b, err := r.legacy(ctx, 1, withTasksCaps)
	if err != nil {
		return Fail, r.who[1].name + ": " + err.Error()
	}
	id, st, res, err := a.createTask(ctx, t)
	r.sent(1)
	if err != nil || res.Error != nil {
		return Fail, fmt.Sprintf("tools/call: %v %s", err, res.errText())
	}
	tr := &trail{}
	tr.add(st)
	forged := map[string]any{legacy.MetaRelatedTask: map[string]any{"taskId": id}}
	// What reaches the upstream is judged against the same request without the _meta: on
	// a pass-through route a cancel of an unknown id goes upstream either way (and is
	// answered not found there); the forged _meta must not add anything to it.
	counts := func() [2]int {
		return [2]int{upstreamCount(r.o.Metrics, "tasks/cancel"), upstreamCount(r.o.Metrics, "tasks/update")}
	}
	for _, m := range []string{"tasks/get", "tasks/cancel"} {
		// a fresh unknown id for each request (an upstream may answer a repeated lookup
		// differently), blanked before comparing as in the second-principal check
		u1, u2 := randomID(), randomID()
		c0 := counts()
		got, err1 := b.call(ctx, m, map[string]any{"taskId": u1, "_meta": forged})
		c1 := counts()
		ref, err2 := b.call(ctx, m, map[string]any{"taskId": u2})
		c2 := counts()
		if err1 != nil || err2 != nil {
			return Fail, fmt.Sprintf("%s: %v %v", m, err1, err2)
		}
		// The code and HTTP status must be the unknown id's and nothing of principal 1's
		// task may show. The message is not compared: the TS SDK v1 server words its
		// unknown-id answers differently from one request to the next.
		if bytes.Contains(got.Error, []byte(id)) || bytes.Contains(got.Result, []byte(id)) {
			return Fail, fmt.Sprintf("%s of an unknown id with a related-task _meta naming %s's task answers about that task (%.100s): the forged _meta reached it", m, r.who[0].name, got.Error)
		}
		if got.Error == nil || got.code() != ref.code() || got.Status != ref.Status {
			return Fail, fmt.Sprintf("%s of an unknown id with a forged related-task answers HTTP %d %.60s%.100s, without it HTTP %d %.100s", m, got.Status, got.Result, got.Error, ref.Status, ref.Error)
		}
		if f, w := [2]int{c1[0] - c0[0], c1[1] - c0[1]}, [2]int{c2[0] - c1[0], c2[1] - c1[1]}; f != w {
			return Fail, fmt.Sprintf("%s with a forged related-task sent the upstream %d tasks/cancel and %d tasks/update, without it %d and %d", m, f[0], f[1], w[0], w[1])
		}
	}
	before := counts()
	if q := r.tools.quick; q != nil {
		p := map[string]any{"name": q.Name, "arguments": q.args(), "_meta": forged}
		_, err := b.call(ctx, "tools/call", p)
		r.sent(1) // principal 2's own call reaches the upstream; only the _meta is forged
		if err != nil {
			return Fail, "tools/call with a forged related-task: " + err.Error()
		}
	}
	if after := counts(); after != before {
		return Fail, fmt.Sprintf("a tools/call with a forged related-task reached the named task upstream: tasks/cancel %d→%d, tasks/update %d→%d", before[0], after[0], before[1], after[1])
	}
	final, err := waitLegacy(ctx, a, id, tr)
	if err != nil {
		return Fail, r.who[0].name + "'s task: " + err.Error()
	}
	if tr.illegal != "" {
		return Fail, "illegal transition " + tr.illegal + " (" + tr.String() + ")"
	}
	if want := r.baseline["legacy"]; want != "" && final != want {
		return Fail, fmt.Sprintf("%s's task ended %s after the forged requests, %s without them", r.who[0].name, final, want)
	}
	return Pass, fmt.Sprintf("get/cancel with a forged related-task answer the unknown-id error and reach the upstream as without it; the task: %s", tr)
}
