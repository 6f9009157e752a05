package legacy

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/taskbridge/taskbridge/internal/jsonrpc"
	"github.com/taskbridge/taskbridge/internal/redact"
	"github.com/taskbridge/taskbridge/internal/sse"
)

// SSE resumability (2025-11-25 §Transports "Resumability and Redelivery").
//
// Every SSE stream of a session that negotiated 2025-11-25 or newer gets a stream id: "p"
// (a POSTed request's stream) or "g" (the standalone GET stream) followed by 26 random
// base32 characters. Its events carry "id: <streamID>-<seq>", seq counting from 1; the
// stream opens with a priming event "id: <streamID>-0" and empty data. A client that lost
// the connection GETs the endpoint with "Last-Event-ID: <streamID>-<n>" and receives the
// events after n of that stream only, then the stream continues live.
//
// The events of each stream are kept in a bounded replay buffer in the process that holds
// the stream (replayMaxEvents, replayMaxBytes; all streams together Options.MaxReplayBytes,
// see replays.go). With Options.Events (replicas), POST streams' events are also kept in
// the shared store, and a resume reaching another process is served from there
// (resume_shared.go); without it a resume must reach the process holding the stream.

const (
	// DefaultResumeWindow is how long a stream whose client went away waits for a resume
	// (Options.ResumeWindow). A POST stream's handler keeps running meanwhile; when the
	// window passes without a resume, its ctx is cancelled as on a plain disconnect.
	DefaultResumeWindow = 5 * time.Minute
	// replayMaxEvents and replayMaxBytes bound one stream's replay buffer: the oldest
	// events are dropped beyond them.
	replayMaxEvents = 256
	replayMaxBytes  = 4 << 20
	// maxReplayStreams bounds the streams kept for resumption per process. Beyond it the
	// longest-idle ended or disconnected streams are forgotten first (live ones never).
	maxReplayStreams = 4096
	// minResumableVersion: priming events carry empty data, which clients of earlier
	// revisions may not handle; their sessions get streams without ids, as before.
	minResumableVersion = "2025-11-25"
)

const (
	kindPost = 'p'
	kindGet  = 'g'
)

var errStreamGone = jsonrpc.NewError(jsonrpc.CodeInvalidRequest,
	"Gone: this stream cannot be resumed here (it ended, expired, lost events, or is held by another server); send the request again")

// resumable reports whether sess gets SSE event ids and resumption.
func (s *Server) resumable(sess *Session) bool {
	return s.resumeWindow > 0 && sess.ProtocolVersion >= minResumableVersion
}

func newStreamID(kind byte) string { return string(kind) + rand.Text() }

// parseEventID splits "<streamID>-<seq>" into the stream's kind, id and sequence number.
func parseEventID(s string) (kind byte, streamID string, seq uint64, ok bool) {
	i := strings.LastIndexByte(s, '-')
	if i < 2 || i > maxSessionIDLen {
		return 0, "", 0, false
	}
	n, err := strconv.ParseUint(s[i+1:], 10, 64)
	if err != nil {
		return 0, "", 0, false
	}
	streamID = s[:i]
	if streamID[0] != kindPost && streamID[0] != kindGet {
		return 0, "", 0, false
	}
	return streamID[0], streamID, n, true
}

// primingEvent is the first event of a resumable stream: an id and empty data, so the
// client holds a Last-Event-ID before any message arrives.
func primingEvent(streamID string) []byte {
	return sse.AppendEvent(nil, sse.SeqID(streamID, 0), "", nil)
}

func (s *Server) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// ---- one connection ---------------------------------------------------------------

// sseConn is one HTTP response an SSE stream is written to. Writes happen under the
// owning stream's lock; gone is closed when the stream lets go of it, after which nothing
// writes to w: a resume's handler (resumePost) returns then, a POST's when its Serve does.
type sseConn struct {
	w    http.ResponseWriter
	rc   *http.ResponseController
	gone chan struct{}
	once sync.Once
}

func newSSEConn(w http.ResponseWriter) *sseConn {
	return &sseConn{w: w, rc: http.NewResponseController(w), gone: make(chan struct{})}
}

func (c *sseConn) release() { c.once.Do(func() { close(c.gone) }) }

func (c *sseConn) write(chunk []byte) error {
	if _, err := c.w.Write(chunk); err != nil {
		return err
	}
	return c.rc.Flush()
}

// ---- resumable POST stream ------------------------------------------------------------

// resumableStream is the Stream of a POSTed request on a session with resumable streams.
// Like postStream it starts as a plain JSON reply and becomes SSE on the first Send or
// KeepAlive; from then on every event is numbered and kept for replay, and the handler's
// ctx survives the client's disconnect for the resume window. A GET with Last-Event-ID
// re-attaches the stream to a new connection (resume), which then receives the missed
// events and everything after, up to the response.
type resumableStream struct {
	s         *Server
	id        string
	sessionID string
	acc       accepts
	cancel    context.CancelFunc // ends the handler's ctx

	mu     sync.Mutex
	conn   *sseConn // where events go now; nil while the client is away
	sse    bool     // SSE headers and priming event written (the stream is registered)
	seq    uint64   // last event number issued
	ring   ring
	done   bool // the response was appended (or the handler returned without one)
	lost   bool // cannot be resumed any more; the handler's ctx is cancelled
	orphan bool // its session ended or the Server is closing: no resume will come
	// unreplayable: the process's replay budget dropped the stream (replays.go); its
	// events are no longer kept, and it ends when its client leaves.
	unreplayable bool
	evictions    []*replayEntry // evicted by the registry while mu was held; see unlock
	timer        *time.Timer
	gen          uint64     // invalidates a pending timer
	kept         keptStream // its copy for other replicas (resume_shared.go)
}

// unlock releases mu, then drops the streams the registry evicted meanwhile (their locks
// may not be taken under this one).
func (rs *resumableStream) unlock() {
	ev := rs.evictions
	rs.evictions = nil
	rs.mu.Unlock()
	dropEntries(ev)
}

// pushLocked keeps an event for replay and accounts it to the process budget; dropped
// reports whether the stream's own bounds dropped an older event.
func (rs *resumableStream) pushLocked(frame []byte) (dropped bool) {
	if rs.unreplayable {
		return false
	}
	before := rs.ring.bytes
	dropped = rs.ring.push(rs.seq, frame)
	rs.evictions = append(rs.evictions, rs.s.replays.grow(rs.id, rs, nil, rs.ring.bytes-before)...)
	return dropped
}

// evicted runs when the process's replay budget dropped this stream: its buffer goes, a
// resume gets 410. An ended stream or one whose client is away is given up now (the
// handler's ctx ends, as when its own buffer overflows); a connected one carries on live.
func (rs *resumableStream) evicted() {
	rs.mu.Lock()
	defer rs.unlock()
	if rs.lost || rs.unreplayable {
		return
	}
	rs.unreplayable = true
	rs.ring = ring{}
	rs.unkeep()
	switch {
	case rs.done:
		rs.lost = true
		rs.disarmLocked()
	case rs.conn == nil:
		rs.s.log.Info().Str("session", rs.sessionID).Str("stream", rs.id).Msg("legacy: replay budget full; giving up a stream whose client is away")
		rs.loseLocked()
	}
}

func (s *Server) newResumableStream(sessionID string, acc accepts, cancel context.CancelFunc, c *sseConn) *resumableStream {
	return &resumableStream{s: s, id: newStreamID(kindPost), sessionID: sessionID, acc: acc, cancel: cancel, conn: c}
}

// serveResumable answers a request through Handler.Serve on a resumable stream, on the
// HTTP server's goroutine: a reply that stays plain JSON (most) costs no goroutine, no
// channel and no replay buffer. The resumable machinery starts only when the reply turns
// into a stream (the first Send or KeepAlive, startSSELocked): then its events are
// numbered and kept. Serve's ctx is not tied to the connection: before the reply is a
// stream a disconnect cancels it (clientLeft, as on the plain face); once it is one, the
// handler goes on until it produced its response, the resume window passes with no
// client, or the Server closes, and a resume re-attaches the stream to another
// connection. Meanwhile this HTTP request stays open, writing nothing once its connection
// was let go (every write to w happens under rs.mu while c is the stream's connection),
// and returns with the handler.
func (s *Server) serveResumable(w http.ResponseWriter, r *http.Request, sess *Session, msg *jsonrpc.Message, acc accepts) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	defer cancel()
	if k := r.Header.Get("Idempotency-Key"); k != "" {
		ctx = WithIdempotencyKey(ctx, k)
	}
	stopBase := context.AfterFunc(s.base, cancel)
	defer stopBase()
	c := newSSEConn(w)
	rs := s.newResumableStream(sess.ID, acc, cancel, c)
	// A callback, not a watching goroutine: it runs only if the client goes away.
	stopLeft := context.AfterFunc(r.Context(), func() { rs.clientLeft(c) })
	defer stopLeft()
	defer rs.close()
	res, err := s.serveSafely(ctx, sess, msg, rs)
	rs.finish(s.encodeResponse(msg.ID, res, err))
}

// serveSafely calls Handler.Serve, turning a panic into -32603 so that the client gets
// an answer and the stream's state (registry, timers) is released as after any reply.
func (s *Server) serveSafely(ctx context.Context, sess *Session, msg *jsonrpc.Message, out Stream) (res json.RawMessage, err error) {
	defer func() {
		if p := recover(); p != nil {
			s.log.Error().Str("session", sess.ID).Str("method", redact.Field(msg.Method)).Str("stack", string(debug.Stack())).Msg("legacy: handler panicked")
			res, err = nil, jsonrpc.ErrInternal
		}
	}()
	return s.h.Serve(ctx, sess, msg, out)
}

// Send implements Stream. While the client is away the message is kept for replay and
// Send succeeds; it fails with ErrStreamClosed once the stream cannot be resumed.
func (rs *resumableStream) Send(msg *jsonrpc.Message) error {
	if msg.IsResponse() {
		return ErrNotRequestOrNotification
	}
	b, err := encodeMessage(msg)
	if err != nil {
		return err
	}
	rs.mu.Lock()
	defer rs.unlock()
	if err := rs.openLocked(); err != nil {
		return err
	}
	rs.seq++
	frame := sse.AppendMessage(nil, sse.SeqID(rs.id, rs.seq), b)
	rs.put(rs.seq, frame, false)
	if rs.pushLocked(frame) && rs.conn == nil {
		// An event the client never saw was dropped: the stream cannot be replayed
		// exactly any more. The bridge's fallback is a new tasks/result.
		rs.loseLocked()
		return ErrStreamClosed
	}
	rs.writeLocked(frame)
	return nil
}

// KeepAlive implements Stream; with no client connected it does nothing.
func (rs *resumableStream) KeepAlive() error {
	rs.mu.Lock()
	defer rs.unlock()
	if err := rs.openLocked(); err != nil {
		return err
	}
	rs.writeLocked(keepAliveComment)
	rs.touch()
	return nil
}

// openLocked checks that the stream takes events and switches it to SSE.
func (rs *resumableStream) openLocked() error {
	if rs.done || rs.lost {
		return ErrStreamClosed
	}
	if !rs.acc.sse {
		return ErrNoEventStream
	}
	if !rs.sse {
		if rs.conn == nil {
			return ErrStreamClosed // the client left before the reply became a stream
		}
		rs.startSSELocked()
	}
	return nil
}

// startSSELocked writes the SSE headers and the priming event on the POST's response and
// registers the stream for resumption.
func (rs *resumableStream) startSSELocked() {
	rs.sse = true
	sseHeaders(rs.conn.w.Header())
	rs.conn.w.WriteHeader(http.StatusOK)
	rs.evictions = append(rs.evictions, rs.s.replays.add(rs.id, &replayEntry{sessionID: rs.sessionID, post: rs})...)
	rs.put(0, primingEvent(rs.id), false)
	rs.writeLocked(primingEvent(rs.id))
}

// writeLocked writes to the connected client, if any; a failed write lets go of it.
func (rs *resumableStream) writeLocked(chunk []byte) {
	if rs.conn == nil {
		return
	}
	if err := rs.conn.write(chunk); err != nil {
		rs.detachLocked(rs.conn)
	}
}

// detachLocked lets go of c. A stream still waiting for its response then waits for a
// resume for the window; on a closing Server, nobody can resume, so it is abandoned.
func (rs *resumableStream) detachLocked(c *sseConn) {
	if rs.conn != c || c == nil {
		return
	}
	rs.conn = nil
	c.release()
	if rs.done || rs.lost {
		return
	}
	if rs.orphan || rs.unreplayable || rs.s.isClosed() {
		rs.loseLocked()
		return
	}
	rs.armLocked(rs.s.resumeWindow, rs.windowPassed)
}

// windowPassed gives up a stream whose client stayed away for the resume window, unless
// another replica serves that client from the stream's kept events (resume_shared.go):
// then it waits another window.
func (rs *resumableStream) windowPassed() {
	followed := rs.followedElsewhere()
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.conn == nil && !rs.done && !rs.lost {
		if followed {
			rs.armLocked(rs.s.resumeWindow, rs.windowPassed)
			return
		}
		rs.s.log.Info().Str("session", rs.sessionID).Str("stream", rs.id).Msg("legacy: resume window passed; cancelling the request")
		rs.loseLocked()
	}
}

// armLocked (re)starts the stream's timer; a superseded timer does nothing when it fires.
func (rs *resumableStream) armLocked(d time.Duration, f func()) {
	rs.disarmLocked()
	gen := rs.gen
	rs.timer = time.AfterFunc(d, func() {
		rs.mu.Lock()
		stale := rs.gen != gen
		rs.mu.Unlock()
		if !stale {
			f()
		}
	})
}

func (rs *resumableStream) disarmLocked() {
	rs.gen++
	if rs.timer != nil {
		rs.timer.Stop()
		rs.timer = nil
	}
}

// loseLocked gives the stream up: the handler's ctx ends and a resume gets 410.
func (rs *resumableStream) loseLocked() {
	rs.lost = true
	rs.disarmLocked()
	rs.cancel()
	rs.s.replays.remove(rs.id, rs, nil)
	rs.ring = ring{}
	rs.unkeep()
}

// clientLeft runs when the POST's connection ends. Before the reply became a stream the
// client holds no event id, so this is a plain disconnect: the handler's ctx ends.
func (rs *resumableStream) clientLeft(c *sseConn) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.conn != c {
		return
	}
	if !rs.sse {
		rs.conn = nil
		c.release()
		rs.cancel()
		return
	}
	rs.detachLocked(c)
}

// orphaned marks a stream nobody can resume any more (its session ended, or the Server is
// closing): it ends now if its client is away, else as soon as the client leaves.
func (rs *resumableStream) orphaned() {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rs.orphan = true
	if rs.conn == nil && rs.sse && !rs.done && !rs.lost {
		rs.loseLocked()
	}
}

// finish appends the response and ends the stream: as the last SSE event when the reply
// is already a stream (or the client accepts only SSE), else as one JSON object.
func (rs *resumableStream) finish(resp []byte) {
	rs.mu.Lock()
	defer rs.unlock()
	if rs.done {
		return
	}
	rs.done = true
	if rs.lost {
		return
	}
	if resp == nil { // cancelled (ErrCancelled): no response, nothing to replay
		if c := rs.conn; c != nil {
			if !rs.sse {
				sseHeaders(c.w.Header())
				c.w.WriteHeader(http.StatusOK)
			}
			rs.conn = nil
			c.release()
		}
		if rs.sse {
			rs.s.replays.remove(rs.id, rs, nil)
		}
		return
	}
	if !rs.sse {
		c := rs.conn
		if c == nil {
			return
		}
		if !rs.acc.json && rs.acc.sse {
			rs.startSSELocked()
		} else {
			c.w.Header().Set("Content-Type", contentTypeJSON)
			c.w.WriteHeader(http.StatusOK)
			_, _ = c.w.Write(resp)
			rs.conn = nil
			c.release()
			return
		}
	}
	rs.seq++
	frame := sse.AppendMessage(nil, sse.SeqID(rs.id, rs.seq), resp)
	rs.put(rs.seq, frame, true)
	rs.pushLocked(frame)
	rs.writeLocked(frame)
	if c := rs.conn; c != nil {
		rs.conn = nil
		c.release()
	}
	if rs.unreplayable {
		return // dropped by the budget: nothing to keep
	}
	// Kept for the window, so a client that lost the end of the stream can still get it
	// (on a closing Server, from the store only: another replica serves it).
	if rs.s.isClosed() {
		rs.s.replays.remove(rs.id, rs, nil)
		return
	}
	rs.s.replays.setIdle(rs.id, rs.s.now())
	rs.armLocked(rs.s.resumeWindow, func() {
		rs.s.replays.remove(rs.id, rs, nil)
		rs.unkeep()
	})
}

// close runs when the POST's handler returns: the stream takes nothing more and lets go
// of any connection (after a panic in Serve there is no response to send).
func (rs *resumableStream) close() {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if !rs.done {
		rs.done = true
		rs.disarmLocked()
		rs.s.replays.remove(rs.id, rs, nil)
		rs.unkeep() // no response: nothing to resume anywhere
	}
	if c := rs.conn; c != nil {
		rs.conn = nil
		c.release()
	}
}

// resumeResult says how a resume was answered.
type resumeResult int

const (
	resumeGone     resumeResult = iota // 410: nothing can be replayed exactly
	resumeNothing                      // 204: the stream ended and the client has it all
	resumeEnded                        // 200: replayed up to the response; the stream ended
	resumeAttached                     // 200: replayed; c now receives the live events
)

// resume attaches c after the client's event n: it writes the SSE headers and the events
// after n, then (unless the stream already ended) makes c the stream's connection. An
// older connection still attached is let go (the client has evidently left it).
func (rs *resumableStream) resume(c *sseConn, n uint64) resumeResult {
	rs.mu.Lock()
	defer rs.unlock()
	if rs.lost || !rs.sse || rs.unreplayable {
		return resumeGone
	}
	frames, complete := rs.ring.after(n, rs.seq)
	if !complete {
		return resumeGone
	}
	if rs.done && len(frames) == 0 {
		return resumeNothing
	}
	if old := rs.conn; old != nil {
		rs.conn = nil
		old.release()
	}
	sseHeaders(c.w.Header())
	c.w.WriteHeader(http.StatusOK)
	var buf bytes.Buffer
	for _, f := range frames {
		buf.Write(f)
	}
	before := rs.ring.bytes
	rs.ring.ack(n)
	rs.evictions = append(rs.evictions, rs.s.replays.grow(rs.id, rs, nil, rs.ring.bytes-before)...)
	if rs.done {
		_ = c.write(buf.Bytes())
		return resumeEnded
	}
	rs.disarmLocked()
	rs.conn = c
	rs.s.replays.setIdle(rs.id, time.Time{})
	if buf.Len() == 0 {
		rs.writeLocked(nil) // headers out now
	} else {
		rs.writeLocked(buf.Bytes())
	}
	if rs.conn != c {
		return resumeEnded // the write failed; detachLocked re-armed the window
	}
	return resumeAttached
}

// detach lets go of c if it is still the stream's connection (its client left).
func (rs *resumableStream) detach(c *sseConn) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rs.detachLocked(c)
}

// keepAliveOn writes an SSE comment to c if c is still the stream's connection.
func (rs *resumableStream) keepAliveOn(c *sseConn) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.conn == c {
		rs.writeLocked(keepAliveComment)
	}
}

// ---- resuming ------------------------------------------------------------------------

// resumePost serves a GET whose Last-Event-ID names a POST stream: 410 when the stream is
// unknown here or cannot be replayed exactly, 204 when it ended and the client has all of
// it, else the missed events followed by the live ones up to the response.
func (s *Server) resumePost(w http.ResponseWriter, r *http.Request, sess *Session, streamID string, n uint64) {
	e := s.replays.get(streamID, sess.ID)
	if e == nil || e.post == nil {
		if s.resumeElsewhere(w, r, sess, streamID, n) {
			return
		}
		s.log.Info().Str("session", sess.ID).Str("stream", streamID).Msg("legacy: resume of an unknown stream")
		s.httpError(w, http.StatusGone, errStreamGone)
		return
	}
	rs := e.post
	c := newSSEConn(w)
	switch rs.resume(c, n) {
	case resumeGone:
		s.log.Info().Str("session", sess.ID).Str("stream", streamID).Msg("legacy: stream cannot be resumed")
		s.httpError(w, http.StatusGone, errStreamGone)
		return
	case resumeNothing:
		w.WriteHeader(http.StatusNoContent)
		return
	case resumeEnded:
		return
	}
	s.log.Debug().Str("session", sess.ID).Str("stream", streamID).Uint64("after", n).Msg("legacy: stream resumed")
	var tick <-chan time.Time
	if s.keepAlive > 0 {
		t := time.NewTicker(s.keepAlive)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-c.gone:
			return
		case <-tick:
			rs.keepAliveOn(c)
		case <-r.Context().Done():
			rs.detach(c)
			return
		case <-s.base.Done():
			rs.detach(c)
			return
		}
	}
}

// ---- the standalone GET stream's ids ----------------------------------------------------

// eventLog gives a session's standalone GET stream its id and replay buffer. It outlives
// the connection (getStream) for the resume window: a GET with Last-Event-ID naming it
// re-attaches it under a new getStream, replaying what the old connection may have lost.
type eventLog struct {
	s         *Server
	id        string
	sessionID string

	mu    sync.Mutex
	seq   uint64
	ring  ring
	cur   *getStream // the connection events go to; nil while the client is away
	timer *time.Timer
	gone  bool // forgotten by the registry: a resume starts a fresh stream instead

	evictions []*replayEntry // evicted by the registry while mu was held; see unlock
}

// unlock releases mu, then drops the streams the registry evicted meanwhile.
func (lg *eventLog) unlock() {
	ev := lg.evictions
	lg.evictions = nil
	lg.mu.Unlock()
	dropEntries(ev)
}

// accountLocked reports the ring's change since before to the process budget.
func (lg *eventLog) accountLocked(before int) {
	lg.evictions = append(lg.evictions, lg.s.replays.grow(lg.id, nil, lg, lg.ring.bytes-before)...)
}

// openGetStream builds the session's new GET stream and the bytes to write first: the
// priming event of a fresh stream, or the events a resumed one missed. A Last-Event-ID
// naming a GET stream this process does not know (another replica's, or expired) gets a
// fresh stream, as a GET without it would.
func (s *Server) openGetStream(sess *Session, lastEventID string) (*getStream, []byte) {
	g := newGetStream(sess.ID)
	if !s.resumable(sess) {
		return g, nil
	}
	if kind, id, n, ok := parseEventID(lastEventID); ok && kind == kindGet {
		if e := s.replays.get(id, sess.ID); e != nil && e.log != nil {
			if first, ok := e.log.resume(g, n); ok {
				return g, first
			}
		}
	}
	lg := &eventLog{s: s, id: newStreamID(kindGet), sessionID: sess.ID, cur: g}
	g.log = lg
	dropEntries(s.replays.add(lg.id, &replayEntry{sessionID: sess.ID, log: lg}))
	return g, primingEvent(lg.id)
}

// resume makes g the log's connection and returns the events after n, or false when n
// is not an event of this log. Best effort: the GET stream carries no responses and its
// messages are advisory, so whatever is still buffered after n is replayed.
func (lg *eventLog) resume(g *getStream, n uint64) ([]byte, bool) {
	lg.mu.Lock()
	defer lg.unlock()
	if n > lg.seq || lg.gone {
		return nil, false
	}
	if lg.timer != nil {
		lg.timer.Stop()
		lg.timer = nil
	}
	frames, _ := lg.ring.after(n, lg.seq)
	var first []byte
	for _, f := range frames {
		first = append(first, f...)
	}
	before := lg.ring.bytes
	lg.ring.ack(n)
	lg.accountLocked(before)
	g.log = lg
	lg.cur = g
	lg.s.replays.setIdle(lg.id, time.Time{})
	return first, true
}

// offer queues one message on g with the next event id; false when g is not the log's
// connection any more, is stopping, or its buffer is full (then no id is used up).
func (lg *eventLog) offer(g *getStream, data []byte) bool {
	lg.mu.Lock()
	defer lg.unlock()
	if lg.cur != g {
		return false
	}
	select {
	case <-g.done:
		return false
	default:
	}
	frame := sse.AppendMessage(nil, sse.SeqID(lg.id, lg.seq+1), data)
	select {
	case g.ch <- frame:
		lg.seq++
		if !lg.gone { // a log the budget dropped streams live only
			before := lg.ring.bytes
			lg.ring.push(lg.seq, frame)
			lg.accountLocked(before)
		}
		return true
	default:
		return false
	}
}

// detach runs when g's handler returns: the log waits for a resume for the window.
func (lg *eventLog) detach(g *getStream) {
	lg.mu.Lock()
	defer lg.mu.Unlock()
	if lg.cur != g {
		return
	}
	lg.cur = nil
	if lg.gone {
		return // dropped by the registry: nothing to resume
	}
	if lg.s.isClosed() {
		lg.gone = true
		lg.s.replays.remove(lg.id, nil, lg)
		return
	}
	lg.s.replays.setIdle(lg.id, lg.s.now())
	if lg.timer != nil {
		lg.timer.Stop()
	}
	var t *time.Timer
	t = time.AfterFunc(lg.s.resumeWindow, func() {
		lg.mu.Lock()
		defer lg.mu.Unlock()
		if lg.timer == t && lg.cur == nil {
			lg.gone = true
			lg.s.replays.remove(lg.id, nil, lg)
		}
	})
	lg.timer = t
}

// forget marks the log forgotten by the registry (taken with its session, or evicted by
// the budget), stops its timer and lets go of its buffer; a live connection carries on.
func (lg *eventLog) forget() {
	lg.mu.Lock()
	defer lg.mu.Unlock()
	lg.gone = true
	lg.ring = ring{}
	if lg.timer != nil {
		lg.timer.Stop()
		lg.timer = nil
	}
}
