package verify

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/tidwall/gjson"
)

// The canary in input answers (security gate): the plan's input tool runs as a task on the
// 2025-11-25 face, and every input request the bridge relays (elicitation/create) gets
// verify's decline with a canary secret in its _meta. The task must end, and the canary
// must appear nowhere in the bridge's log, debug level included: an answer is a payload,
// and payloads are never logged.

// answerCanary runs the check.
func (r *run) answerCanary(ctx context.Context) (Result, string) {
	t := r.plan.Tools.Input
	if t == nil {
		return Skipped, "the plan names no input tool (tools.input)"
	}
	if r.o.Logs == nil {
		return Skipped, "the bridge's log is not available"
	}
	c, err := r.legacy(ctx, 0, withTasksCaps)
	if err != nil {
		return Fail, r.who[0].name + ": " + err.Error()
	}
	secret := canary("answer")
	answered := 0
	answer := func(m gjson.Result) json.RawMessage {
		res := canaryAnswer(m, secret)
		if res != nil {
			answered++
		}
		return res
	}
	calls := upstreamCount(r.o.Metrics, "tools/call")
	res, err := c.answering(ctx, "tools/call", map[string]any{"name": t.Name, "arguments": t.args(), "task": map[string]any{}}, answer)
	// Input asked before the task exists (MRTR rounds) makes the bridge call again with the
	// answers: those calls are verify's too.
	if n := upstreamCount(r.o.Metrics, "tools/call") - calls; answered > 0 && n > 1 {
		r.sent(n)
	} else {
		r.sent(1)
	}
	if err != nil || res.Error != nil {
		return Fail, fmt.Sprintf("tools/call %s with params.task: %v %s", t.Name, err, res.errText())
	}
	id := gjson.GetBytes(res.Result, "task.taskId").Str
	if id == "" {
		return Fail, fmt.Sprintf("tools/call %s with params.task answered no task: %.120s", t.Name, res.Result)
	}
	res, err = c.answering(ctx, "tasks/result", map[string]any{"taskId": id}, answer)
	if err != nil {
		return Fail, "tasks/result: " + err.Error()
	}
	ended := "a result"
	if res.Error != nil {
		ended = "the error " + res.errText() // declined: the tool may fail; the task ended
	}
	if answered == 0 {
		return Fail, "the plan's input tool " + t.Name + " asked for no input (elicitation/create): name a tool that does"
	}
	logs := r.o.Logs()
	if bytes.Contains(logs, []byte(secret)) {
		return Fail, "a canary from an input answer appears in the bridge's log"
	}
	return Pass, fmt.Sprintf("%d input answers carried a canary; tasks/result gave %s; not in %d bytes of debug log", answered, ended, len(logs))
}

// canaryAnswer is verify's answer to an elicitation/create (nil for anything else): the
// decline verify always sends (it never confirms what a tool asks), with the secret in the
// answer's _meta, which the bridge carries on like any other member of the answer.
func canaryAnswer(m gjson.Result, secret string) json.RawMessage {
	if m.Get("method").Str != "elicitation/create" {
		return nil
	}
	out, _ := json.Marshal(map[string]any{"action": "decline", "_meta": map[string]any{"taskbridge/verify-canary": secret}})
	return out
}

// answering sends method and reads its answer (the client's exchange), answering every
// server→client request on its stream with answer on the way (nil: refused with -32601).
func (c *legacyClient) answering(ctx context.Context, method string, params any, answer func(gjson.Result) json.RawMessage) (reply, error) {
	p, err := json.Marshal(params)
	if err != nil {
		return reply{}, err
	}
	return c.exchange(ctx, requestBody(c.nextID.Add(1), method, p), func(m gjson.Result) {
		res := answer(m)
		if res == nil {
			c.refuse(ctx, m.Get("id").Raw)
			return
		}
		_, _ = c.send(context.WithoutCancel(ctx), []byte(`{"jsonrpc":"2.0","id":`+m.Get("id").Raw+`,"result":`+string(res)+`}`))
	})
}
