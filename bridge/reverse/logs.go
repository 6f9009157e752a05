package reverse

// Log messages on the reverse route (issue 16 item 8). A 2026-07-28 request asks for the
// server's log messages with _meta logLevel (without it the server MUST NOT send any for it);
// a 2025-11-25 server has one level per session (logging/setLevel) and sends
// notifications/message on the stream of the request they relate to, or on its GET stream.
//
//   - The pooled upstream session's level is the most verbose one of the requests with a
//     logLevel in flight on it: set with logging/setLevel before such a request is forwarded
//     when it is more verbose than the session's, and raised again (in the background) when
//     the most verbose request ends and others remain. Nothing is sent for requests without a
//     logLevel, and a session nobody asks logs of keeps the level it had.
//   - A notifications/message on a forwarded request's own upstream stream goes to that
//     request's SSE reply only, and only at its logLevel or above (the bridge filters each
//     request: the session's level serves the most verbose one). Its bytes are unchanged.
//   - Messages on the GET stream or on a task's tasks/result stream belong to no waiting
//     request; they are dropped, never guessed onto one (another caller, or the same
//     caller's other request, would get what is not theirs).
//   - Only when the upstream declares logging: otherwise nothing is asked upstream and
//     discover advertises no logging.

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/internal/jsonrpc"
	"github.com/taskbridge/taskbridge/legacy"
	"github.com/taskbridge/taskbridge/sep2663"
)

// logSeverity is the LoggingLevel order, most verbose first (RFC 5424 severities).
var logSeverity = map[string]int{"debug": 0, "info": 1, "notice": 2, "warning": 3, "error": 4,
	"critical": 5, "alert": 6, "emergency": 7}

var logLevelNames = [...]string{"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"}

const methodLogMessage = "notifications/message"

// logRelay is the route's log state: the reply streams that take log messages, with their
// request's level, and the upstream sessions' levels. mu guards both maps; each session's
// setMu orders its logging/setLevel calls.
type logRelay struct {
	mu       sync.Mutex
	streams  map[*sep2663.Stream]int
	sessions map[string]*logSession // upstream Mcp-Session-Id → level state
}

// logSession is one upstream session's level: the requests in flight per level and the
// level last set upstream (-1: none yet).
type logSession struct {
	setMu  sync.Mutex
	counts [len(logLevelNames)]int
	set    int
}

// target is the most verbose level a request in flight wants, or -1. Called with mu held.
func (ls *logSession) target() int {
	for lvl, n := range ls.counts {
		if n > 0 {
			return lvl
		}
	}
	return -1
}

// requestLogLevel is the request's _meta logLevel as a severity; -1 when absent. An unknown
// level is a -32602.
func requestLogLevel(req *sep2663.Request) (int, error) {
	v := gjson.GetBytes(req.Params, "_meta."+gjson.Escape(sep2663.MetaLogLevel))
	if !v.Exists() {
		return -1, nil
	}
	lvl, ok := logSeverity[v.Str]
	if v.Type != gjson.String || !ok {
		return -1, jsonrpc.ErrInvalidParams.Wrapf("_meta %s must be one of debug, info, notice, warning, error, critical, alert, emergency", sep2663.MetaLogLevel)
	}
	return lvl, nil
}

// upstreamLogs reports whether the upstream declared the logging capability.
func (r *Reverse) upstreamLogs(ctx context.Context) bool {
	in, err := r.upstream(ctx)
	return err == nil && gjson.GetBytes(in.init.Capabilities, "logging").Exists()
}

// loggingCap is discover's logging capability: the upstream's, when it declared one (this
// file delivers it), else none.
func loggingCap(in *upstreamInfo) json.RawMessage {
	if v := gjson.GetBytes(in.init.Capabilities, "logging"); v.IsObject() {
		return json.RawMessage(v.Raw)
	}
	return nil
}

// logScope is called for every modern request before it is served: a request with a
// logLevel gets its reply stream registered for log messages at that level, and its
// upstream session's level lowered to it when needed. The returned func ends the scope.
func (r *Reverse) logScope(ctx context.Context, req *sep2663.Request) (func(), error) {
	lvl, err := requestLogLevel(req)
	if err != nil || lvl < 0 || req.Method == sep2663.MethodSubscriptionsListen || !r.upstreamLogs(ctx) {
		return func() {}, err
	}
	s, err := r.pool.Get(ctx, r.poolKey(req))
	if err != nil {
		return func() {}, nil // the request itself meets the same failure and reports it
	}
	stream := req.Stream()
	ls := r.logs.want(s.ID(), stream, lvl)
	r.applyLevel(ctx, s, ls)
	return func() { r.logsDone(s, ls, stream, lvl) }, nil
}

// want registers stream at lvl and counts lvl on session id's state.
func (l *logRelay) want(id string, stream *sep2663.Stream, lvl int) *logSession {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.sessions == nil {
		l.sessions, l.streams = map[string]*logSession{}, map[*sep2663.Stream]int{}
	}
	ls := l.sessions[id]
	if ls == nil {
		ls = &logSession{set: -1}
		l.sessions[id] = ls
	}
	ls.counts[lvl]++
	if stream != nil {
		l.streams[stream] = lvl
	}
	return ls
}

// logsDone ends a request's log scope; the session's level is raised in the background
// when the most verbose request ended and others remain (a session nobody asks is
// forgotten, keeping its level upstream).
func (r *Reverse) logsDone(s *legacy.UpstreamSession, ls *logSession, stream *sep2663.Stream, lvl int) {
	r.logs.mu.Lock()
	delete(r.logs.streams, stream)
	ls.counts[lvl]--
	t := ls.target()
	if t < 0 {
		if r.logs.sessions[s.ID()] == ls {
			delete(r.logs.sessions, s.ID())
		}
	}
	raise := t >= 0 && t != ls.set
	r.logs.mu.Unlock()
	if !raise {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		r.applyLevel(r.ctx, s, ls)
	}()
}

// applyLevel sets session s's level upstream to the most verbose one its requests in
// flight want, when that differs from the level set. A refused setLevel is logged; the
// per-request filter still holds, so a request may miss messages but never gets others.
func (r *Reverse) applyLevel(ctx context.Context, s *legacy.UpstreamSession, ls *logSession) {
	ls.setMu.Lock()
	defer ls.setMu.Unlock()
	r.logs.mu.Lock()
	t, cur := ls.target(), ls.set
	r.logs.mu.Unlock()
	if t < 0 || t == cur {
		return
	}
	cctx, cancel := context.WithTimeout(ctx, r.cfg.StatusTimeout)
	defer cancel()
	params, _ := json.Marshal(map[string]string{"level": logLevelNames[t]})
	if _, err := s.Call(cctx, "logging/setLevel", params, legacy.CallOptions{}); err != nil {
		r.log.Debug().Err(err).Msg("reverse: upstream logging/setLevel failed")
		return
	}
	r.logs.mu.Lock()
	ls.set = t
	r.logs.mu.Unlock()
}

// sendLog relays an upstream notifications/message to stream when stream's request asked
// for logs at the message's level or below; it reports whether m was a log message.
func (l *logRelay) sendLog(stream *sep2663.Stream, m *jsonrpc.Message) bool {
	if m.Method != methodLogMessage {
		return false
	}
	if stream == nil {
		return true
	}
	sev, ok := logSeverity[gjson.GetBytes(m.Params, "level").Str]
	l.mu.Lock()
	min, asked := l.streams[stream]
	l.mu.Unlock()
	if ok && asked && sev >= min {
		stream.Send(m)
	}
	return true
}

// callNotify is the OnNotify of a held call's upstream stream: log messages go to the
// waiting request's reply by its level (none between rounds); the rest to hc.relay.
func (r *Reverse) callNotify(hc *heldCall) func(*jsonrpc.Message) {
	return func(m *jsonrpc.Message) {
		if !r.logs.sendLog(hc.stream.Load(), m) {
			hc.relay(m)
		}
	}
}

// logNotify is the OnNotify of a forwarded request's upstream stream: its log messages to
// its own reply stream, by its level.
func (r *Reverse) logNotify(stream *sep2663.Stream) func(*jsonrpc.Message) {
	return func(m *jsonrpc.Message) { r.logs.sendLog(stream, m) }
}
