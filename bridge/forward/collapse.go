package forward

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/bridge/internal/errmap"
	"github.com/taskbridge/taskbridge/internal/jsonrpc"
	"github.com/taskbridge/taskbridge/legacy"
	"github.com/taskbridge/taskbridge/mapping"
	"github.com/taskbridge/taskbridge/sep2663"
)

// callSync serves tools/call without params.task. An upstream task is polled to its end and
// answered synchronously ("sync collapse"), with heartbeats so the request is never a
// silent long wait. notifications/cancelled for the call becomes an upstream tasks/cancel
// (also when it lands during a poll), and the cancelled request gets no response
// (legacy.ErrCancelled: 2025-11-25 receivers SHOULD NOT answer a cancelled request).
func (b *Bridge) callSync(ctx context.Context, sess *legacy.Session, req *jsonrpc.Message, out legacy.Stream) (res json.RawMessage, err error) {
	release, err := b.upstreamSlot() // held for the upstream call; a collapse's polls are not
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	defer b.trackInflight(sess, req.ID, func() { cancel(legacy.ErrCancelled) })()
	defer func() {
		if errors.Is(context.Cause(ctx), legacy.ErrCancelled) {
			res, err = nil, legacy.ErrCancelled
		}
	}()
	cctx, cancelCall := context.WithTimeout(ctx, b.cfg.CallTimeout)
	stop := b.keepAlive(out)
	oc, err := b.callTool(cctx, sess, "", req.Params, out, 0)
	stop()
	cancelCall()
	release()
	if err != nil {
		return nil, errmap.FromModernForLegacy(err)
	}
	if oc.Kind != sep2663.KindTask {
		noteRoute(ctx, "passthrough")
		return mapping.StripModern(oc.Result)
	}
	noteRoute(ctx, "collapse")
	return b.collapse(ctx, sess, req, out, oc.Task)
}

// collapse polls an upstream task to its end on behalf of a synchronous caller.
func (b *Bridge) collapse(ctx context.Context, sess *legacy.Session, req *jsonrpc.Message, out legacy.Stream, task *sep2663.Task) (json.RawMessage, error) {
	c := collapser{b: b, sess: sess, out: out, upID: task.TaskID,
		token: gjson.GetBytes(req.Params, "_meta.progressToken"), asked: map[string]bool{}}
	interval := time.Duration(b.cfg.PollFloorMs) * time.Millisecond
	if task.PollIntervalMs != nil {
		interval = max(interval, time.Duration(*task.PollIntervalMs)*time.Millisecond)
	}
	poll := time.NewTimer(interval)
	defer poll.Stop()
	hb := time.NewTicker(b.cfg.Heartbeat)
	defer hb.Stop()
	for {
		select {
		case <-ctx.Done():
			c.cancelUpstream()
			return nil, ctx.Err()
		case <-hb.C:
			c.heartbeat()
		case <-poll.C:
			res, done, err := c.step(ctx)
			if ctx.Err() != nil { // cancelled while polling: the upstream task must end too
				c.cancelUpstream()
				return nil, ctx.Err()
			}
			if done || err != nil {
				return res, err
			}
			poll.Reset(interval)
		}
	}
}

// collapser is the state of one sync-collapsed call; used by one goroutine only.
type collapser struct {
	b        *Bridge
	sess     *legacy.Session
	out      legacy.Stream
	upID     string
	token    gjson.Result
	progress int
	message  string
	failures int
	asked    map[string]bool // input keys already answered
	// cancelled: tasks/cancel was sent upstream (a cancel during an input wait and the
	// poll loop's own check must not send two).
	cancelled bool
}

// step polls once; done reports a final answer (res or err).
func (c *collapser) step(ctx context.Context) (res json.RawMessage, done bool, err error) {
	pctx, cancel := context.WithTimeout(ctx, c.b.cfg.StatusTimeout)
	dt, err := c.b.up.GetTask(pctx, c.upID, c.b.meta(c.sess))
	cancel()
	if err != nil {
		var je *jsonrpc.Error
		if errors.As(err, &je) && je.Code == jsonrpc.CodeInvalidParams {
			return nil, true, unknownOutcome("the upstream lost the task")
		}
		if c.failures++; c.failures >= c.b.cfg.PollFaultBudget || ctx.Err() != nil {
			return nil, true, unknownOutcome("the upstream stopped answering tasks/get")
		}
		return nil, false, nil
	}
	c.message = dt.StatusMessage
	status, ok := mapping.NormalizeStatus(string(dt.Status))
	if !ok { // an upstream fault: an unknown status counts against the budget
		if c.failures++; c.failures >= c.b.cfg.PollFaultBudget {
			return nil, true, unknownOutcome("the upstream kept answering tasks/get with an unknown status")
		}
		return nil, false, nil
	}
	c.failures = 0
	switch status {
	case sep2663.StatusCompleted:
		res, err := mapping.StripModern(dt.Result)
		return res, true, err
	case sep2663.StatusFailed:
		if dt.Error != nil {
			return nil, true, dt.Error
		}
		return nil, true, jsonrpc.NewError(jsonrpc.CodeInternalError, orDefault(dt.StatusMessage, "upstream task failed"))
	case sep2663.StatusCancelled:
		return nil, true, jsonrpc.NewError(jsonrpc.CodeInternalError, "the upstream cancelled the task")
	case sep2663.StatusInputRequired:
		return nil, false, c.answerInputs(ctx, dt.InputRequests)
	}
	return nil, false, nil
}

// answerInputs relays the not-yet-answered inputs on the open stream and forwards answers.
func (c *collapser) answerInputs(ctx context.Context, reqs sep2663.InputRequests) error {
	todo := sep2663.InputRequests{}
	for k, v := range reqs {
		if !c.asked[k] {
			todo[k] = v
		}
	}
	if len(todo) == 0 {
		return nil
	}
	answers, err := c.b.askClient(ctx, c.sess, "", todo, c.out)
	if err != nil {
		c.cancelUpstream()
		return err
	}
	for k := range answers {
		c.asked[k] = true
	}
	uctx, cancel := context.WithTimeout(ctx, c.b.cfg.CancelTimeout)
	defer cancel()
	return errmap.FromModernForLegacy(c.b.up.UpdateTask(uctx, c.upID, answers, c.b.meta(c.sess)))
}

// heartbeat keeps the caller's stream alive: progress when it gave a progressToken, an SSE
// comment otherwise.
func (c *collapser) heartbeat() {
	if !c.token.Exists() {
		_ = c.out.KeepAlive()
		return
	}
	c.progress++
	p := map[string]any{"progressToken": json.RawMessage(c.token.Raw), "progress": c.progress}
	if c.message != "" {
		p["message"] = c.message
	}
	if m, err := jsonrpc.NewNotification("notifications/progress", p); err == nil {
		_ = c.out.Send(m)
	}
}

// cancelUpstream sends tasks/cancel for the upstream task, once.
func (c *collapser) cancelUpstream() {
	if c.cancelled {
		return
	}
	c.cancelled = true
	ctx, cancel := context.WithTimeout(context.Background(), c.b.cfg.CancelTimeout)
	defer cancel()
	if err := c.b.up.CancelTask(ctx, c.upID, c.b.meta(c.sess)); err != nil {
		c.b.log.Warn().Err(err).Msg("upstream tasks/cancel for a cancelled synchronous call failed")
	}
}

func unknownOutcome(why string) *jsonrpc.Error {
	return jsonrpc.NewError(jsonrpc.CodeUpstream, why+"; the outcome of the call is unknown").
		WithData(map[string]any{"retryable": false, "outcome": "unknown"})
}
