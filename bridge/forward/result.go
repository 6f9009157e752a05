package forward

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/taskbridge/taskbridge/internal/jsonrpc"
	"github.com/taskbridge/taskbridge/legacy"
	"github.com/taskbridge/taskbridge/mapping"
	"github.com/taskbridge/taskbridge/record"
)

// resultStream is a blocked tasks/result call on this process: the stream input requests
// for its task are delivered on. mu guards delivered.
type resultStream struct {
	out       legacy.Stream
	mu        sync.Mutex
	delivered map[string]time.Time // input key → when it was sent on this stream
}

// tasksResult blocks until the task is terminal, relaying the task's input requests on this
// stream meanwhile, then answers with the stored payload.
func (b *Bridge) tasksResult(ctx context.Context, sess *legacy.Session, req *jsonrpc.Message, out legacy.Stream) (json.RawMessage, error) {
	id, err := taskIDParam(req)
	if err != nil {
		return nil, err
	}
	rec, err := b.load(ctx, sess, id)
	if err != nil {
		return nil, err
	}
	if rec.Status.Terminal() {
		return b.terminalPayload(ctx, rec) // terminal.go: cached records carry no payload
	}
	t := b.track(rec)
	if t == nil {
		return b.awaitStored(ctx, rec, out)
	}
	rs := &resultStream{out: out, delivered: map[string]time.Time{}}
	t.addStream(rs)
	defer func() {
		t.removeStream(rs)
		// Replicas: the inputs this stream carried go to the client's next stream at once.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), b.cfg.StatusTimeout)
		b.keepClaims(cctx, t)
		cancel()
	}()
	b.deliverInputs(ctx, t)
	t.nudge()

	hb := time.NewTicker(b.cfg.Heartbeat)
	defer hb.Stop()
	for {
		t.mu.Lock()
		changed, cur := t.changed, *t.rec
		t.mu.Unlock()
		if cur.Status.Terminal() {
			return b.payload(&cur)
		}
		if rs.overdue(b.cfg.InputTimeout) {
			return nil, jsonrpc.NewError(jsonrpc.CodeInputTimeout,
				"input request unanswered for "+b.cfg.InputTimeout.String()+"; the task is still input_required: call tasks/result again to continue").
				WithData(map[string]any{"taskId": cur.ID, "retryable": true})
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-changed:
		case <-hb.C:
			_ = out.KeepAlive()
			b.keepClaims(ctx, t)
		}
	}
}

// awaitStored waits for a record no tracker here watches (another process or a hosted
// task owns it) by re-reading the store.
func (b *Bridge) awaitStored(ctx context.Context, rec *record.Task, out legacy.Stream) (json.RawMessage, error) {
	tick := time.NewTicker(time.Duration(b.cfg.PollFloorMs) * time.Millisecond)
	defer tick.Stop()
	last := time.Now()
	done := b.hostDone(rec.ID) // a hosted task run here wakes us at once (host.go)
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-tick.C:
		case <-done:
			done = nil
		}
		cur, err := b.reg.get(ctx, rec.ID)
		if err != nil {
			return nil, err
		}
		if cur.Status.Terminal() {
			return b.payload(cur)
		}
		if time.Since(last) >= b.cfg.Heartbeat {
			_ = out.KeepAlive()
			last = time.Now()
		}
	}
}

// payload is what tasks/result answers for a terminal record (design §3 table).
func (b *Bridge) payload(rec *record.Task) (json.RawMessage, error) {
	switch {
	case rec.Status == record.StatusCompleted, rec.Status == record.StatusFailed && len(rec.Result) > 0:
		// completed, or failed by a tool error: the CallToolResult (isError:true) as a success.
		return mapping.ResultForLegacy(rec.Result, rec.ID)
	case rec.Status == record.StatusFailed && len(rec.Error) > 0:
		return nil, mapping.ErrorForLegacy(rec.Error, rec.Outcome, false)
	case rec.Status == record.StatusFailed:
		return nil, jsonrpc.NewError(jsonrpc.CodeInternalError, orDefault(rec.StatusMessage, "task failed")).
			WithData(map[string]any{"retryable": false, "outcome": string(rec.Outcome)})
	default: // cancelled: 2025-11-25 leaves the answer open (spec issue #1956)
		return nil, jsonrpc.NewError(jsonrpc.CodeInternalError, "Task was cancelled; it has no result").
			WithData(map[string]any{"taskId": rec.ID, "status": "cancelled", "outcome": string(rec.Outcome)})
	}
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

func (t *tracker) addStream(rs *resultStream) {
	t.mu.Lock()
	t.streams = append(t.streams, rs)
	t.waiters++
	t.mu.Unlock()
}

func (t *tracker) removeStream(rs *resultStream) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i, s := range t.streams {
		if s == rs {
			t.streams = append(t.streams[:i], t.streams[i+1:]...)
			t.waiters--
			return
		}
	}
}

// overdue reports whether an input request sent on this stream has waited longer than d.
func (rs *resultStream) overdue(d time.Duration) bool {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	for _, at := range rs.delivered {
		if time.Since(at) > d {
			return true
		}
	}
	return false
}

// send delivers one input request on this stream unless it already carried that key.
func (rs *resultStream) send(key string, msg *jsonrpc.Message) {
	rs.mu.Lock()
	_, done := rs.delivered[key]
	if !done {
		rs.delivered[key] = time.Now()
	}
	rs.mu.Unlock()
	if !done {
		_ = rs.out.Send(msg)
	}
}

// answered forgets a key once its answer arrived (it no longer counts for the timeout).
func (rs *resultStream) answered(key string) {
	rs.mu.Lock()
	delete(rs.delivered, key)
	rs.mu.Unlock()
}
