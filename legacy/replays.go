package legacy

import (
	"sync"
	"time"

	"github.com/taskbridge/taskbridge/internal/defaults"
)

// The replay buffers of resumable SSE streams (resume.go) and the process-wide registry
// that bounds them.
//
// Three bounds hold at once: one stream keeps at most replayMaxEvents events and
// replayMaxBytes bytes (the oldest events go first); the process keeps at most
// maxReplayStreams streams; and all streams together keep at most Options.MaxReplayBytes
// bytes (internal/defaults). Past the last one whole streams are dropped, oldest first:
// the streams whose client went away or that ended, longest idle first, then live ones,
// first registered first. A dropped stream is no longer resumable: resuming a POST stream
// answers 410 Gone (a POST stream still waiting for its client is given up, as when its own
// buffer overflows), resuming a GET stream opens a fresh one. A live connection of a dropped
// stream keeps receiving its events; it just cannot be resumed when it breaks.

// ---- replay buffer ----------------------------------------------------------------

type ringEvent struct {
	seq   uint64
	frame []byte
}

// ring holds the most recent events of one stream, in seq order.
type ring struct {
	evs   []ringEvent
	bytes int
}

// push appends an event and drops the oldest beyond the bounds; dropped reports whether
// any event was dropped.
func (r *ring) push(seq uint64, frame []byte) (dropped bool) {
	r.evs = append(r.evs, ringEvent{seq, frame})
	r.bytes += len(frame)
	for len(r.evs) > 1 && (len(r.evs) > replayMaxEvents || r.bytes > replayMaxBytes) {
		r.bytes -= len(r.evs[0].frame)
		r.evs[0] = ringEvent{}
		r.evs = r.evs[1:]
		dropped = true
	}
	return dropped
}

// after returns the frames of the events after n, last being the newest seq issued;
// complete is false when some of them were dropped (or n is beyond last).
func (r *ring) after(n, last uint64) (frames [][]byte, complete bool) {
	if n > last {
		return nil, false
	}
	if n == last {
		return nil, true
	}
	if len(r.evs) == 0 || r.evs[0].seq > n+1 {
		complete = false
	} else {
		complete = true
	}
	for _, ev := range r.evs {
		if ev.seq > n {
			frames = append(frames, ev.frame)
		}
	}
	return frames, complete
}

// ack forgets the events up to n: the client's Last-Event-ID says it has them.
func (r *ring) ack(n uint64) {
	i := 0
	for i < len(r.evs) && r.evs[i].seq <= n {
		r.bytes -= len(r.evs[i].frame)
		i++
	}
	r.evs = append(r.evs[:0:0], r.evs[i:]...)
}

// ---- registry -----------------------------------------------------------------------

// replayEntry is one resumable stream of this process. idleSince is zero while a client
// is connected to it or, for a POST stream, while its handler still runs with no client.
// bytes is what its ring holds as last reported (grow); order is its registration number.
type replayEntry struct {
	sessionID string
	post      *resumableStream
	log       *eventLog
	idleSince time.Time
	bytes     int
	order     uint64
}

// drop tells the entry's stream that the registry let go of it (evicted or taken).
func (e *replayEntry) drop() {
	if e.post != nil {
		e.post.evicted()
	}
	if e.log != nil {
		e.log.forget()
	}
}

// dropEntries drops entries the registry let go of. Call it holding no stream's lock:
// it takes each entry's own.
func dropEntries(es []*replayEntry) {
	for _, e := range es {
		e.drop()
	}
}

// replays is the process's registry of resumable streams, by stream id, and the keeper
// of the total byte budget. Its lock is taken after a stream's own lock, never before;
// so the registry never calls into a stream: the entries it evicts are handed back to the
// caller, which drops them (dropEntries) once it has released its own lock.
type replays struct {
	mu       sync.Mutex
	m        map[string]*replayEntry
	maxBytes int64 // budget of all rings together
	total    int64 // sum of the entries' bytes
	next     uint64
}

func newReplays(maxBytes int64) *replays {
	if maxBytes <= 0 {
		maxBytes = defaults.Defaults.MaxReplayBytes
	}
	return &replays{m: map[string]*replayEntry{}, maxBytes: maxBytes}
}

// add registers a stream and returns the entries evicted to make room (at most
// maxReplayStreams streams: the longest-idle one goes; live ones never do by count).
func (rp *replays) add(id string, e *replayEntry) []*replayEntry {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	rp.next++
	e.order = rp.next
	rp.m[id] = e
	if len(rp.m) <= maxReplayStreams {
		return nil
	}
	if victim := rp.oldestLocked(true, false); victim != "" {
		return []*replayEntry{rp.deleteLocked(victim)}
	}
	return nil
}

// grow records that the ring of stream id (owned by post or log) changed by delta bytes,
// and returns the entries evicted to bring the total back under the budget (possibly the
// stream itself). A stream no longer registered is not counted.
func (rp *replays) grow(id string, post *resumableStream, log *eventLog, delta int) []*replayEntry {
	if delta == 0 {
		return nil
	}
	rp.mu.Lock()
	defer rp.mu.Unlock()
	e := rp.m[id]
	if e == nil || e.post != post || e.log != log {
		return nil
	}
	e.bytes += delta
	rp.total += int64(delta)
	var out []*replayEntry
	for rp.total > rp.maxBytes {
		victim := rp.oldestLocked(true, true)
		if victim == "" {
			victim = rp.oldestLocked(false, true)
		}
		if victim == "" {
			break
		}
		out = append(out, rp.deleteLocked(victim))
	}
	return out
}

// oldestLocked returns the id of the longest-idle stream (idle true) or of the
// first-registered live one (idle false), among those holding events when withBytes; ""
// when there is none.
func (rp *replays) oldestLocked(idle, withBytes bool) string {
	var (
		victim string
		best   *replayEntry
	)
	for k, v := range rp.m {
		if v.idleSince.IsZero() == idle || (withBytes && v.bytes == 0) {
			continue
		}
		if best == nil || (idle && v.idleSince.Before(best.idleSince)) || (!idle && v.order < best.order) {
			victim, best = k, v
		}
	}
	return victim
}

// deleteLocked removes an entry and its bytes from the budget.
func (rp *replays) deleteLocked(id string) *replayEntry {
	e := rp.m[id]
	delete(rp.m, id)
	rp.total -= int64(e.bytes)
	return e
}

func (rp *replays) get(id, sessionID string) *replayEntry {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	e := rp.m[id]
	if e == nil || e.sessionID != sessionID {
		return nil
	}
	c := *e
	return &c
}

// setIdle marks the stream idle (evictable) since at, or live with a zero at.
func (rp *replays) setIdle(id string, at time.Time) {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	if e := rp.m[id]; e != nil {
		e.idleSince = at
	}
}

// remove forgets id if it still names the stream owning it (post or log).
func (rp *replays) remove(id string, post *resumableStream, log *eventLog) {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	if e := rp.m[id]; e != nil && e.post == post && e.log == log {
		rp.deleteLocked(id)
	}
}

// take removes and returns the entries of one session ("" for all).
func (rp *replays) take(sessionID string) []*replayEntry {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	var out []*replayEntry
	for k, e := range rp.m {
		if sessionID == "" || e.sessionID == sessionID {
			out = append(out, rp.deleteLocked(k))
		}
	}
	return out
}

// bytes returns the total the registry accounts (tests).
func (rp *replays) bytes() int64 {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	return rp.total
}

// dropReplays forgets the resumable streams of a session (or all with ""), cancelling the
// handlers of POST streams that wait for a client to come back: none can any more.
func (s *Server) dropReplays(sessionID string) {
	for _, e := range s.replays.take(sessionID) {
		if e.post != nil {
			e.post.orphaned()
		}
		if e.log != nil {
			e.log.forget()
		}
	}
}

// len is the number of streams kept for resumption.
func (rp *replays) len() int {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	return len(rp.m)
}
