package forward

import (
	"context"
	"encoding/json"
	"time"

	"github.com/rs/zerolog"
	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/bridge/internal/errmap"
	"github.com/taskbridge/taskbridge/internal/jsonrpc"
	"github.com/taskbridge/taskbridge/internal/metrics"
	"github.com/taskbridge/taskbridge/internal/redact"
	"github.com/taskbridge/taskbridge/legacy"
)

// routeNote carries the route decision of one request from where it is taken (createTask,
// callSync, collapse, the fallback policy) to the request log line and the metrics.
type routeNote struct{ route string }

type routeKey struct{}

// noteRoute records the route decision for the request ctx belongs to. Decisions are the
// fallback vocabulary: translate, host, collapse, passthrough, refuse.
func noteRoute(ctx context.Context, route string) {
	if n, ok := ctx.Value(routeKey{}).(*routeNote); ok {
		n.route = route
	}
}

// observe starts the bookkeeping of one legacy request. The returned func writes the one
// log line per request (method, route, task id, principal, duration_ms, outcome — never
// arguments, results or messages; at info unless the access log is off, at warn for an
// internal error whatever the switch) and the request and fallback metrics.
func (b *Bridge) observe(ctx context.Context, sess *legacy.Session, req *jsonrpc.Message) (context.Context, func(json.RawMessage, error)) {
	start := time.Now()
	note := &routeNote{}
	ctx = context.WithValue(ctx, routeKey{}, note)
	return ctx, func(res json.RawMessage, err error) {
		d := time.Since(start)
		outcome := metrics.Outcome(err)
		b.cfg.Metrics.Request("legacy", req.Method, outcome, d)
		if req.Method == "tools/call" && note.route != "" {
			b.cfg.Metrics.Fallback(note.route)
		}
		lvl := zerolog.InfoLevel
		if err != nil && jsonrpc.AsError(err).Code == jsonrpc.CodeInternalError {
			lvl = zerolog.WarnLevel
		} else if b.cfg.AccessLog != nil && !b.cfg.AccessLog() {
			return
		}
		// Every client-supplied value is clipped (redact.Field): one request cannot make
		// the log carry megabytes.
		ev := b.log.WithLevel(lvl).Str("method", redact.Field(req.Method)).Str("session", redact.Field(sess.ID)).
			Str("id", redact.Field(req.ID.Raw())).Float64("duration_ms", float64(d.Microseconds())/1000).Str("outcome", outcome)
		if note.route != "" {
			ev = ev.Str("route", note.route)
		}
		if sess.Principal != "" {
			ev = ev.Str("principal", redact.Field(sess.Principal))
		}
		if tid := taskIDOf(req, res); tid != "" {
			ev = ev.Str("task", redact.Field(tid))
		}
		if req.Method == "tools/call" {
			ev = ev.Str("tool", redact.Field(gjson.GetBytes(req.Params, "name").Str))
		}
		ev.Int("resBytes", len(res)).Msg("request")
		if cause := errmap.Cause(err); cause != nil {
			// The client was told only the class; the detail (URL redacted) is for debugging.
			b.log.Debug().Str("method", redact.Field(req.Method)).Str("id", redact.Field(req.ID.Raw())).
				Str("cause", redact.Error(cause)).Msg("upstream failure")
		}
	}
}

// taskIDOf finds the bridge task id a request is about: params.taskId, or the task a
// CreateTaskResult announces.
func taskIDOf(req *jsonrpc.Message, res json.RawMessage) string {
	if id := gjson.GetBytes(req.Params, "taskId"); id.Type == gjson.String {
		return id.Str
	}
	if len(res) > 0 {
		if id := gjson.GetBytes(res, "task.taskId"); id.Type == gjson.String {
			return id.Str
		}
	}
	return ""
}

// ActiveTasks counts the non-terminal tasks this process is tracking (a drain waits for
// them). Trackers are copied out of the registry and read after, so its lock is never held
// with a tracker's.
func (b *Bridge) ActiveTasks() int {
	n := 0
	for _, t := range b.reg.allTrackers() {
		if !t.snapshot().Status.Terminal() {
			n++
		}
	}
	return n
}

// UpstreamReady reports whether the upstream has been discovered (a cached discover result
// counts; otherwise it tries now).
func (b *Bridge) UpstreamReady(ctx context.Context) error {
	_, err := b.discovery(ctx)
	return err
}

// CheckUpstream asks the upstream now (server/discover), whatever is cached, and keeps a
// fresh answer for the routes. /readyz uses it, at most once per few seconds.
func (b *Bridge) CheckUpstream(ctx context.Context) error {
	res, err := b.up.Discover(ctx)
	if err != nil {
		return err
	}
	b.disc.Store(&discovery{res: res, fetchedAt: b.cfg.Now()})
	return nil
}
