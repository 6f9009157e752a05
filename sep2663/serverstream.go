package sep2663

import (
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/taskbridge/taskbridge/internal/jsonrpc"
	"github.com/taskbridge/taskbridge/internal/sse"
)

// Stream lets a Handler answer one request with an SSE stream instead of a JSON body:
// every Send writes one event (a notification related to the request) at once, and the
// result or error the Handler returns is the last event. The first Send commits the
// response (HTTP 200, text/event-stream); until then nothing is written, so a Handler that
// never sends answers with JSON as before. While the stream is open the face writes a
// keep-alive comment every KeepAlive, so proxies and clients do not time it out.
//
// Concurrency: Send is safe for concurrent use; mu guards every field below it.
type Stream struct {
	w         http.ResponseWriter
	accepts   bool // the client's Accept allows text/event-stream
	keepAlive time.Duration

	mu      sync.Mutex
	started bool
	closed  bool
	stop    chan struct{} // closed by finish: ends the keep-alive goroutine
	wg      sync.WaitGroup
}

func newStream(w http.ResponseWriter, r *http.Request, keepAlive time.Duration) *Stream {
	return &Stream{w: w, accepts: strings.Contains(r.Header.Get("Accept"), "text/event-stream"), keepAlive: keepAlive}
}

// Stream returns the request's SSE stream; nil for a request the face did not build (a
// Handler called directly), whose Send is then a no-op.
func (r *Request) Stream() *Stream { return r.stream }

// Send writes m (a JSON-RPC notification) as one SSE event and flushes it. It reports
// false when the message could not go: the client does not accept SSE, the stream is
// finished, or the write failed (the client went away).
func (s *Stream) Send(m *jsonrpc.Message) bool {
	if s == nil || !s.accepts {
		return false
	}
	b, err := jsonrpc.Encode(m)
	if err != nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	if !s.started {
		s.start()
	}
	return s.write(sse.AppendMessage(nil, "", b))
}

// start commits the SSE response and starts the keep-alives. Called with mu held.
func (s *Stream) start() {
	s.started = true
	h := s.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	s.w.WriteHeader(http.StatusOK)
	if s.keepAlive <= 0 {
		return
	}
	s.stop = make(chan struct{})
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t := time.NewTicker(s.keepAlive)
		defer t.Stop()
		for {
			select {
			case <-s.stop:
				return
			case <-t.C:
				s.mu.Lock()
				if !s.closed {
					s.write(sse.Comment("keep-alive"))
				}
				s.mu.Unlock()
			}
		}
	}()
}

// write writes and flushes b. Called with mu held.
func (s *Stream) write(b []byte) bool {
	if _, err := s.w.Write(b); err != nil {
		return false
	}
	return http.NewResponseController(s.w).Flush() == nil
}

// finish ends the stream with the final message when it was started (and reports true),
// else leaves the response to the caller. The keep-alive goroutine has ended when it
// returns.
func (s *Stream) finish(final *jsonrpc.Message) bool {
	s.mu.Lock()
	started := s.started
	s.closed = true
	if started {
		if b, err := jsonrpc.Encode(final); err == nil {
			s.write(sse.AppendMessage(nil, "", b))
		}
	}
	if s.stop != nil {
		close(s.stop)
	}
	s.mu.Unlock()
	s.wg.Wait()
	return started
}
