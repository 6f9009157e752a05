package legacy

import (
	"bytes"
	"context"
	"net/http"
	"sync"
	"time"
)

// Resuming on another replica (issue 14). With Options.Events set, the events of every
// resumable POST stream are also written where every replica reads them (the route
// adapts its shared store to EventStore; this package never sees a store). A resume
// reaching a process that does not hold the stream is then served from there:
//
//   - the holder writes each event (the priming one, every message, the response) before
//     it goes to the client, in order, and marks the stream active on keep-alives;
//   - the other replica replays the events after the client's Last-Event-ID, then follows
//     the stream (re-reading it every followPoll) until the response, as the holder would
//     have sent it, exactly once and in order; it tells the store it follows the stream,
//     and the holder, whose client is away, keeps the handler running past the resume
//     window while the stream is followed;
//   - a stream whose kept copy is incomplete (a gap in the sequence: an event the holder
//     could not write, or a stream that outgrew storeMaxBytes and was deleted) gets 410,
//     as a local resume of a stream that lost events does.
//
// Bounds: a stream keeps at most storeMaxBytes in the store (beyond, its copy is deleted:
// it stays resumable on its holder only); the holder deletes it when it forgets the
// stream (the resume window after the response, or when the process's replay budget drops
// it), so the store keeps no more than every replica's MaxReplayBytes together; the
// route's purge deletes what a dead holder left once the window passed.
//
// The standalone GET stream is not kept: its messages are advisory, and a resume of it on
// another replica gets a fresh stream, as before.

// EventStore keeps resumable streams' events for every replica (Options.Events).
// Implementations are safe for concurrent use.
type EventStore interface {
	// PutEvent keeps one event (the SSE frame as written) of the session's stream, creating
	// the stream on its first event, and marks the stream active; last marks the response.
	PutEvent(ctx context.Context, sessionID, streamID string, seq uint64, frame []byte, last bool) error
	// Events returns the kept events of the session's stream after seq, oldest first;
	// found is false when no such stream of that session is kept.
	Events(ctx context.Context, sessionID, streamID string, after uint64) (events []StoredEvent, found bool, err error)
	// Touch marks the stream active (its holder is alive).
	Touch(ctx context.Context, streamID string) error
	// Follow says another replica serves the stream's client, which has every event up to
	// acked.
	Follow(ctx context.Context, streamID string, acked uint64) error
	// Activity reports how long ago the holder and a follower were last active (followed
	// negative when none ever was); found false for an unknown stream.
	Activity(ctx context.Context, streamID string) (active, followed time.Duration, found bool, err error)
	// Delete forgets the stream and its events.
	Delete(ctx context.Context, streamID string) error
}

// StoredEvent is one kept event of a resumable stream.
type StoredEvent struct {
	Seq   uint64
	Frame []byte
	Last  bool
}

const (
	// storeMaxBytes bounds one stream's events in the EventStore.
	storeMaxBytes = 1 << 20
	// storeTimeout bounds one EventStore call.
	storeTimeout = 2 * time.Second
	// followPoll is how often a replica serving a resumed stream it does not hold reads
	// the stream's new events; followMark, how often it says it follows it.
	followPoll = 200 * time.Millisecond
	followMark = time.Second
)

// keptStream is the holder's side of a stream's copy in the EventStore.
type keptStream struct {
	mu      sync.Mutex
	bytes   int
	off     bool // not kept (any more): outgrew storeMaxBytes, a write failed, or deleted
	touched time.Time
}

// put writes one event of rs; past the bound or after a failed write the copy is deleted
// and nothing more is written. Called under rs.mu, in event order.
func (rs *resumableStream) put(seq uint64, frame []byte, last bool) {
	ev := rs.s.events
	if ev == nil {
		return
	}
	k := &rs.kept
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.off {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	k.bytes += len(frame)
	if k.bytes > storeMaxBytes {
		k.off = true
		_ = ev.Delete(ctx, rs.id)
		return
	}
	if err := ev.PutEvent(ctx, rs.sessionID, rs.id, seq, frame, last); err != nil {
		rs.s.log.Warn().Err(err).Str("stream", rs.id).Msg("legacy: stream event not kept for other replicas; it resumes here only")
		k.off = true
		_ = ev.Delete(ctx, rs.id)
		return
	}
	k.touched = rs.s.now()
}

// touch marks the kept stream active, at most once a second (keep-alives).
func (rs *resumableStream) touch() {
	ev := rs.s.events
	if ev == nil {
		return
	}
	k := &rs.kept
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.off || k.bytes == 0 || rs.s.now().Sub(k.touched) < time.Second {
		return
	}
	k.touched = rs.s.now()
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	_ = ev.Touch(ctx, rs.id)
}

// unkeep deletes the stream's copy (the holder forgot the stream).
func (rs *resumableStream) unkeep() {
	ev := rs.s.events
	if ev == nil {
		return
	}
	k := &rs.kept
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.off || k.bytes == 0 {
		k.off = true
		return
	}
	k.off = true
	go func() { // not under the stream's lock; the purge takes what this misses
		ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
		defer cancel()
		_ = ev.Delete(ctx, rs.id)
	}()
}

// followedElsewhere reports whether another replica served the stream's client within
// the resume window: the holder then keeps waiting rather than giving the stream up.
func (rs *resumableStream) followedElsewhere() bool {
	ev := rs.s.events
	if ev == nil {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	_, followed, found, err := ev.Activity(ctx, rs.id)
	return err == nil && found && followed >= 0 && followed < rs.s.resumeWindow
}

// resumeElsewhere serves a resume of a stream another replica holds from the EventStore;
// false when the store keeps no such stream of the session (the caller answers 410).
func (s *Server) resumeElsewhere(w http.ResponseWriter, r *http.Request, sess *Session, streamID string, n uint64) bool {
	if s.events == nil {
		return false
	}
	// From event n itself when there is one: if it is the response, the client has it all.
	from := n
	if n > 0 {
		from = n - 1
	}
	evs, ok := s.readKept(r.Context(), sess.ID, streamID, from)
	if !ok {
		return false
	}
	if n > 0 {
		if len(evs) == 0 || evs[0].Seq != n {
			return false // event n is not kept: the copy is not exact
		}
		if evs[0].Last {
			w.WriteHeader(http.StatusNoContent)
			return true
		}
		evs = evs[1:]
	}
	sseHeaders(w.Header())
	w.WriteHeader(http.StatusOK)
	c := newSSEConn(w)
	s.log.Debug().Str("session", sess.ID).Str("stream", streamID).Uint64("after", n).Msg("legacy: stream resumed from another replica's events")
	s.follow(r.Context(), c, sess.ID, streamID, n, evs)
	return true
}

// readKept reads the kept events after seq; false for an unknown stream or a failed read.
func (s *Server) readKept(ctx context.Context, sessionID, streamID string, after uint64) ([]StoredEvent, bool) {
	ctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	evs, found, err := s.events.Events(ctx, sessionID, streamID, after)
	if err != nil {
		s.log.Warn().Err(err).Str("stream", streamID).Msg("legacy: reading a stream's kept events failed")
		return nil, false
	}
	return evs, found
}

// follow writes the kept events after acked to c, in order and once each, and keeps
// reading new ones until the response, the client leaving, the Server closing, a gap
// (the copy is not exact: the connection ends and the client's next resume gets 410), or
// the holder being silent for the resume window.
func (s *Server) follow(ctx context.Context, c *sseConn, sessionID, streamID string, acked uint64, evs []StoredEvent) {
	poll := time.NewTicker(followPoll)
	defer poll.Stop()
	var keepAlive <-chan time.Time
	if s.keepAlive > 0 {
		t := time.NewTicker(s.keepAlive)
		defer t.Stop()
		keepAlive = t.C
	}
	marked := time.Time{}
	for {
		var buf bytes.Buffer
		for _, e := range evs {
			if e.Seq != acked+1 {
				s.log.Info().Str("stream", streamID).Msg("legacy: a resumed stream's kept copy has a gap; ending it")
				_ = c.write(buf.Bytes())
				return
			}
			buf.Write(e.Frame)
			acked = e.Seq
			if e.Last {
				_ = c.write(buf.Bytes())
				return
			}
		}
		if buf.Len() > 0 || marked.IsZero() {
			if err := c.write(buf.Bytes()); err != nil {
				return
			}
		}
		if time.Since(marked) >= followMark {
			if !s.markFollowed(ctx, streamID, acked) {
				return
			}
			marked = time.Now()
		}
		select {
		case <-ctx.Done():
			return
		case <-s.base.Done():
			return
		case <-keepAlive:
			if err := c.write(keepAliveComment); err != nil {
				return
			}
		case <-poll.C:
		}
		var ok bool
		if evs, ok = s.readKept(ctx, sessionID, streamID, acked); !ok && ctx.Err() == nil {
			return // deleted by its holder (it forgot the stream) or the purge
		}
	}
}

// markFollowed tells the holder this replica serves the client; false when the holder
// was silent for the resume window (it died: nothing more will come).
func (s *Server) markFollowed(ctx context.Context, streamID string, acked uint64) bool {
	ctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	_ = s.events.Follow(ctx, streamID, acked)
	active, _, found, err := s.events.Activity(ctx, streamID)
	return err != nil || (found && active < s.resumeWindow)
}
