package legacy

import (
	"bytes"
	"encoding/json"
	"errors"
	"mime"
	"net/http"
	"strings"
	"sync"

	"github.com/taskbridge/taskbridge/internal/jsonrpc"
	"github.com/taskbridge/taskbridge/internal/sse"
)

// Errors a Stream returns. The bridge can fall back (for example to the GET stream via
// Server.Push) when it sees them.
var (
	// ErrStreamClosed: the request's response has been written (Serve returned), or an
	// earlier write to the client failed.
	ErrStreamClosed = errors.New("legacy: stream closed")
	// ErrNoEventStream: the client's Accept header excludes text/event-stream, so the
	// reply cannot become an SSE stream.
	ErrNoEventStream = errors.New("legacy: client does not accept text/event-stream")
	// ErrNotRequestOrNotification: Send was given a response; the response to the
	// request is the face's to write, from Serve's return values.
	ErrNotRequestOrNotification = errors.New("legacy: Stream.Send takes requests and notifications only")
	// ErrCancelled is what a Handler returns from Serve for a request the client cancelled
	// with notifications/cancelled: the face then sends no response (2025-11-25
	// §Cancellation: receivers SHOULD NOT respond to a cancelled request); an HTTP reply
	// not yet started becomes an empty event stream.
	ErrCancelled = errors.New("legacy: request cancelled by the client")
)

const (
	contentTypeJSON = "application/json"
	contentTypeSSE  = "text/event-stream"
)

// accepts is what a request's Accept header allows. A missing header allows both (clients
// MUST send both types, but some omit the header and we stay lenient).
type accepts struct {
	present bool
	json    bool
	sse     bool
}

func parseAccept(h []string) accepts {
	var a accepts
	for _, line := range h {
		for part := range strings.SplitSeq(line, ",") {
			mt, _, _ := strings.Cut(part, ";")
			mt = strings.ToLower(strings.TrimSpace(mt))
			if mt == "" {
				continue
			}
			a.present = true
			switch mt {
			case "*/*":
				a.json, a.sse = true, true
			case contentTypeJSON, "application/*":
				a.json = true
			case contentTypeSSE, "text/*":
				a.sse = true
			}
		}
	}
	if !a.present {
		a.json, a.sse = true, true
	}
	return a
}

// isJSONContentType reports whether a Content-Type header names application/json
// (parameters such as charset are allowed).
func isJSONContentType(h string) bool {
	mt, _, err := mime.ParseMediaType(h)
	return err == nil && mt == contentTypeJSON
}

// encodeMessage returns the wire form of m without touching the caller's value and without
// HTML-escaping, so raw params and results keep their bytes (json compacts whitespace only).
func encodeMessage(m *jsonrpc.Message) ([]byte, error) {
	c := *m
	c.JSONRPC = jsonrpc.Version
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(&c); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// sseHeaders sets the headers of an SSE reply. X-Accel-Buffering stops nginx from
// buffering the stream.
func sseHeaders(h http.Header) {
	h.Set("Content-Type", contentTypeSSE)
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
}

// keepAliveComment is an SSE comment line; clients ignore it, proxies see traffic.
var keepAliveComment = sse.Comment("keep-alive")

// postStream is the Stream of one POSTed request. It starts as a plain JSON reply and
// switches to SSE on the first Send or KeepAlive. All fields below mu are guarded by it;
// the handler goroutine and any goroutine of the bridge may call Send concurrently.
type postStream struct {
	w   http.ResponseWriter
	rc  *http.ResponseController
	acc accepts

	mu   sync.Mutex
	sse  bool  // headers for SSE written
	done bool  // the final response was written; the stream takes nothing more
	err  error // first write error; later calls return ErrStreamClosed
}

func newPostStream(w http.ResponseWriter, acc accepts) *postStream {
	return &postStream{w: w, rc: http.NewResponseController(w), acc: acc}
}

// Send implements Stream.
func (p *postStream) Send(msg *jsonrpc.Message) error {
	if msg.IsResponse() {
		return ErrNotRequestOrNotification
	}
	b, err := encodeMessage(msg)
	if err != nil {
		return err
	}
	return p.write(sse.AppendMessage(nil, "", b))
}

// KeepAlive implements Stream.
func (p *postStream) KeepAlive() error { return p.write(keepAliveComment) }

// write switches to SSE if needed and writes one framed chunk, flushing it.
func (p *postStream) write(chunk []byte) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done || p.err != nil {
		return ErrStreamClosed
	}
	if !p.acc.sse {
		return ErrNoEventStream
	}
	p.startSSELocked()
	return p.writeLocked(chunk)
}

func (p *postStream) startSSELocked() {
	if p.sse {
		return
	}
	p.sse = true
	sseHeaders(p.w.Header())
	p.w.WriteHeader(http.StatusOK)
}

func (p *postStream) writeLocked(chunk []byte) error {
	if _, err := p.w.Write(chunk); err != nil {
		p.err = err
		return err
	}
	if err := p.rc.Flush(); err != nil {
		p.err = err
		return err
	}
	return nil
}

// finish writes the response to the request and closes the stream: as the last SSE event
// when the reply is already a stream (or the client accepts only SSE), else as one JSON
// object. Later Sends fail with ErrStreamClosed.
func (p *postStream) finish(resp []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done {
		return
	}
	p.done = true
	if p.err != nil {
		return
	}
	if resp == nil { // cancelled (ErrCancelled): end the stream without a response
		if p.acc.sse {
			p.startSSELocked()
		} else {
			p.w.WriteHeader(http.StatusAccepted)
		}
		return
	}
	if p.sse || (!p.acc.json && p.acc.sse) {
		p.startSSELocked()
		_ = p.writeLocked(sse.AppendMessage(nil, "", resp))
		return
	}
	p.w.Header().Set("Content-Type", contentTypeJSON)
	p.w.WriteHeader(http.StatusOK)
	_, _ = p.w.Write(resp)
}

// close marks the stream answered without writing anything (a no-op after finish), so a
// bridge goroutine that still holds it cannot write after the HTTP handler returned.
func (p *postStream) close() {
	p.mu.Lock()
	p.done = true
	p.mu.Unlock()
}

// getStreamBuffer is how many pushed messages may wait for a slow GET stream before Push
// reports false rather than blocking the caller.
const getStreamBuffer = 64

// getStream is a session's standalone GET stream in this process. Its HTTP handler
// goroutine owns the ResponseWriter and is the only writer; Push hands it encoded events
// through ch. done is closed (once, via stop) when the stream is replaced by a newer GET,
// the session is deleted, or the server closes.
type getStream struct {
	sessionID string
	log       *eventLog // event ids and replay buffer (resume.go); nil when not resumable
	ch        chan []byte
	done      chan struct{}
	once      sync.Once
	seq       uint64 // order of attachment in this Server (NewestGetStream), set under Server.mu
}

func newGetStream(sessionID string) *getStream {
	return &getStream{sessionID: sessionID, ch: make(chan []byte, getStreamBuffer), done: make(chan struct{})}
}

func (g *getStream) stop() { g.once.Do(func() { close(g.done) }) }

// push frames an encoded message as the stream's next event (with an id when the stream
// is resumable) and queues it without blocking; false when the stream is stopping or its
// buffer is full.
func (g *getStream) push(data []byte) bool {
	if g.log != nil {
		return g.log.offer(g, data)
	}
	return g.offer(sse.AppendMessage(nil, "", data))
}

// offer queues an encoded event without blocking; false when the stream is stopping or
// its buffer is full.
func (g *getStream) offer(event []byte) bool {
	select {
	case <-g.done:
		return false
	default:
	}
	select {
	case g.ch <- event:
		return true
	default:
		return false
	}
}
