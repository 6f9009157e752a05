package verify

import (
	"context"
	"fmt"
	"time"
)

// The recovery gate's input checks: the plan's input tool asks for input as a task
// (input_required); verify cuts the tasks/result stream that carries the question, or
// restarts the bridge, before and after answering. The question must come back with the
// request id it had, and every answer (each sent twice) must reach the upstream once.

// questionGrace is how long a tasks/result stream is read after its first question, for
// the task's other questions, before it is cut.
const questionGrace = 300 * time.Millisecond

// redeliverWait bounds the wait for the questions to come again after a cut or a
// restart: a bridge that kept them sends them as soon as tasks/result is asked again.
const redeliverWait = 5 * time.Second

// maxQuestions bounds the questions one input task may ask verify.
const maxQuestions = 8

// inputChecks runs the input checks of the plan's input tool (recoveryGate).
func (r *run) inputChecks(ctx context.Context, t *Tool) {
	const g = "recovery"
	names := []string{"cut during input_required (2025-11-25)", "input during restart (2025-11-25)"}
	if t == nil {
		for _, n := range names {
			r.check(ctx, g, n, func(context.Context) (Result, string) {
				return Skipped, "the plan names no input tool (tools.input: a tool whose task asks for input)"
			})
		}
		return
	}
	r.check(ctx, g, names[0], func(ctx context.Context) (Result, string) {
		return r.inputAcross(ctx, *t, "cut", func(context.Context) error { return nil }) // questions() cuts the stream
	})
	r.check(ctx, g, names[1], func(ctx context.Context) (Result, string) {
		return r.inputAcross(ctx, *t, "restart", r.restart)
	})
}

// inputAcross starts the input task, reads its questions and cuts the stream, runs
// between (a restart, or nothing: the cut alone), reads them again (the same request
// ids), answers each, runs between again and answers each again, then follows the task
// to its end, answering any later question twice. The upstream must get one tasks/update
// per question (forward route).
func (r *run) inputAcross(ctx context.Context, t Tool, what string, between func(context.Context) error) (Result, string) {
	c, err := r.cutClient(ctx, 0)
	if err != nil {
		return Fail, err.Error()
	}
	defer c.drop()
	before := upstreamCount(r.o.Metrics, "tasks/update")
	id, st, res, err := c.createTask(ctx, t)
	r.sent(1)
	if err != nil || res.Error != nil {
		return Fail, fmt.Sprintf("tools/call %s: %v %s", t.Name, err, res.errText())
	}
	tr := &trail{}
	tr.add(st)
	defer func() { // a task left waiting for input (a failed check) is cancelled
		if len(tr.seen) == 0 || !terminal(tr.seen[len(tr.seen)-1]) {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			_, _ = c.call(cctx, "tasks/cancel", map[string]any{"taskId": id})
		}
	}()
	first, res, err := c.questions(ctx, id)
	if len(first) == 0 {
		return Fail, fmt.Sprintf("%s's task ended without asking for input on tasks/result (an input tool asks as a task, input_required; verify refuses a question before the task exists): %v %s", t.Name, err, res.errText())
	}
	if st, _, _ := c.status(ctx, id); st != "input_required" {
		return Fail, fmt.Sprintf("a question is pending, but tasks/get says %q", st)
	} else {
		tr.add(st)
	}
	if err := between(ctx); err != nil {
		return Fail, err.Error()
	}
	wctx, cancel := context.WithTimeout(ctx, redeliverWait)
	again, _, err := c.questions(wctx, id)
	cancel()
	if len(again) == 0 {
		return Fail, fmt.Sprintf("after the %s the question was not delivered again within %s on tasks/result (%v)", what, redeliverWait, err)
	}
	for _, q := range first {
		if !hasQuestion(again, q.id) {
			return Fail, fmt.Sprintf("after the %s the question came back with another request id (%s, then %s)", what, q.id, again[0].id)
		}
	}
	answered := map[string]bool{}
	if err := c.answerTwice(ctx, again, answered, func(ctx context.Context) error { c.reconnect(); return between(ctx) }); err != nil {
		return Fail, err.Error()
	}
	var final reply
	for {
		qs, res, err := c.questions(ctx, id)
		if len(qs) == 0 {
			if err != nil {
				return Fail, "tasks/result after the answers: " + err.Error()
			}
			final = res
			break
		}
		for _, q := range qs {
			if answered[q.id] {
				return Fail, fmt.Sprintf("after the %s a question already answered was asked again (%s)", what, q.id)
			}
		}
		if len(answered)+len(qs) > maxQuestions {
			return Fail, fmt.Sprintf("%s asked more than %d questions", t.Name, maxQuestions)
		}
		if err := c.answerTwice(ctx, qs, answered, func(context.Context) error { c.reconnect(); return nil }); err != nil {
			return Fail, err.Error()
		}
	}
	end, err := waitLegacy(ctx, c, id, tr)
	if err != nil {
		return Fail, "after the answers: " + err.Error()
	}
	if tr.illegal != "" {
		return Fail, "illegal transition " + tr.illegal + " (" + tr.String() + ")"
	}
	if end == "completed" && final.Error != nil {
		return Fail, "tasks/result of the completed task: " + final.errText()
	}
	n := upstreamCount(r.o.Metrics, "tasks/update") - before
	if r.o.Forward && n != len(answered) {
		return Fail, fmt.Sprintf("%d question(s), each answered twice across a %s: the upstream got %d tasks/update", len(answered), what, n)
	}
	count := fmt.Sprintf("the upstream got %d tasks/update", n)
	if !r.o.Forward {
		count = "the legacy pass-through relays answers as responses (not counted)"
	}
	return Pass, fmt.Sprintf("%d question(s) delivered again after the %s with the same request id; each answered twice (declined); %s; %s",
		len(answered), what, count, tr)
}

// answerTwice answers each question, runs between, and answers each again: the first
// answer must be accepted (202), the second is a duplicate the bridge must drop.
func (c *legacyClient) answerTwice(ctx context.Context, qs []question, answered map[string]bool, between func(context.Context) error) error {
	for _, q := range qs {
		st, err := c.answer(ctx, &q)
		if err != nil || st != 202 {
			return fmt.Errorf("the answer to %s: HTTP %d %v", q.id, st, err)
		}
		answered[q.id] = true
	}
	if err := between(ctx); err != nil {
		return err
	}
	for _, q := range qs {
		if st, err := c.answer(ctx, &q); err != nil || st/100 != 2 {
			return fmt.Errorf("the repeated answer to %s: HTTP %d %v", q.id, st, err)
		}
	}
	return nil
}

func hasQuestion(qs []question, id string) bool {
	for _, q := range qs {
		if q.id == id {
			return true
		}
	}
	return false
}
