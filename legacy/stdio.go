package legacy

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"sync"
	"time"

	"github.com/taskbridge/taskbridge/internal/auth"
	"github.com/taskbridge/taskbridge/internal/jsonrpc"
	"github.com/taskbridge/taskbridge/internal/redact"
	"github.com/taskbridge/taskbridge/internal/trace"
)

// This file holds the message-connection engine shared by the stdio and WebSocket faces,
// and the stdio transport itself (2025-11-25 §Transports/stdio: UTF-8 JSON-RPC, one message
// per line, no embedded newlines; stdout carries only MCP messages).
//
// A connection is one session. Its first request must be initialize (ping is answered
// before it); the session is created in the store exactly as the HTTP face does
// (newSession, Handler.Initialize, SessionStore.CreateSession) and closed (CloseSession,
// Handler.Closed) when the connection ends. Requests are served concurrently, each on its
// own goroutine, so a blocking tasks/result does not hold up the tasks/get beside it. A
// request's Stream writes on the connection; Server.Push to the session writes there too,
// so notifications/tasks/status and relayed input requests reach stdio and WebSocket
// clients the same way they reach an HTTP client's GET stream.

// admissionKey is the context key of a message connection's per-message admission.
type admissionKey struct{}

// WithAdmission returns ctx carrying admit, the front door's check for each message of a
// message connection (stdio, WebSocket): the door admits the connection once (the
// WebSocket upgrade, the stdio process), but a connection carries many messages, each of
// which must pass the same per-principal limits as a POST. A request admit refuses is
// answered with its error; a refused notification is dropped; responses (answers to the
// bridge's own requests) are never refused, so no asked-for answer is lost.
func WithAdmission(ctx context.Context, admit func(context.Context) error) context.Context {
	return context.WithValue(ctx, admissionKey{}, admit)
}

// admit applies the connection's admission (if any) to one inbound message.
func admit(ctx context.Context, msg *jsonrpc.Message) error {
	fn, _ := ctx.Value(admissionKey{}).(func(context.Context) error)
	if fn == nil || msg.IsResponse() {
		return nil
	}
	return fn(ctx)
}

// errNotInitialized answers a request sent on a connection before initialize.
var errNotInitialized = jsonrpc.NewError(jsonrpc.CodeInvalidRequest, "Bad Request: send initialize first")

// errAlreadyInitialized answers a second initialize on one connection.
var errAlreadyInitialized = jsonrpc.NewError(jsonrpc.CodeInvalidRequest, "Bad Request: the connection is already initialized")

// connQueue is how many encoded messages may wait for a slow connection writer. Stream.Send
// and responses block when it is full; Push reports false instead.
const connQueue = 256

// closeSessionTimeout bounds the store write that closes a connection's session.
const closeSessionTimeout = 5 * time.Second

// msgConn is one transport connection carrying whole JSON-RPC messages: a line of stdio or
// a WebSocket text frame. ReadMessage is called from one goroutine, WriteMessage from
// another (the connection's writer); Close may be called from any goroutine, more than
// once, and makes a blocked ReadMessage return when the transport allows it.
type msgConn interface {
	ReadMessage() ([]byte, error)
	WriteMessage([]byte) error
	Close() error
}

// conn is the server side of one message connection.
//
// Concurrency: sess is written once by the read goroutine (during initialize) before any
// other goroutine can see the conn (register publishes it under Server.mu); out and done
// are channels; stopOnce guards closing done.
type conn struct {
	s         *Server
	mc        msgConn
	transport string

	sess *Session

	out      chan []byte
	done     chan struct{} // closed by stop: the conn takes nothing more
	stopOnce sync.Once
}

// stop tells every goroutine of the conn to finish; serveConn then closes the transport.
func (c *conn) stop() {
	c.stopOnce.Do(func() { close(c.done) })
}

// enqueue queues one encoded message, waiting while the queue is full; false once the conn
// has stopped.
func (c *conn) enqueue(b []byte) bool {
	select {
	case <-c.done:
		return false
	default:
	}
	select {
	case c.out <- b:
		return true
	case <-c.done:
		return false
	}
}

// offer queues one encoded message without waiting (Server.Push).
func (c *conn) offer(b []byte) bool {
	select {
	case <-c.done:
		return false
	default:
	}
	select {
	case c.out <- b:
		return true
	default:
		return false
	}
}

// writeLoop is the only caller of WriteMessage. It ends when the conn stops (after
// writing what is already queued, best effort) or a write fails.
func (c *conn) writeLoop(wg *sync.WaitGroup) {
	defer wg.Done()
	for {
		select {
		case b := <-c.out:
			if err := c.mc.WriteMessage(b); err != nil {
				c.stop()
				return
			}
		case <-c.done:
			for {
				select {
				case b := <-c.out:
					if c.mc.WriteMessage(b) != nil {
						return
					}
				default:
					return
				}
			}
		}
	}
}

// connStream is the Stream of one request served on a conn. After the request is answered
// it refuses everything (ErrStreamClosed), like a POST stream.
type connStream struct {
	c    *conn
	mu   sync.Mutex
	done bool
}

// Send implements Stream.
func (st *connStream) Send(msg *jsonrpc.Message) error {
	if msg.IsResponse() {
		return ErrNotRequestOrNotification
	}
	b, err := encodeMessage(msg)
	if err != nil {
		return err
	}
	st.mu.Lock()
	defer st.mu.Unlock() // held while queueing, so nothing is sent after close returns
	if st.done || !st.c.enqueue(b) {
		return ErrStreamClosed
	}
	return nil
}

// KeepAlive implements Stream. A message connection has its own liveness (WebSocket
// pings; a stdio pipe needs none), so there is nothing to write.
func (st *connStream) KeepAlive() error {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.done {
		return ErrStreamClosed
	}
	select {
	case <-st.c.done:
		return ErrStreamClosed
	default:
		return nil
	}
}

func (st *connStream) close() {
	st.mu.Lock()
	st.done = true
	st.mu.Unlock()
}

// inbound is one read result handed from the read goroutine to the serve loop.
type inbound struct {
	b   []byte
	err error
}

// serveConn serves one message connection until the peer closes it, ctx ends, or the
// Server closes. It returns nil for a normal end (EOF or close) and the read error
// otherwise.
func (s *Server) serveConn(ctx context.Context, mc msgConn, transport string) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stopBase := context.AfterFunc(s.base, cancel)
	defer stopBase()
	c := &conn{s: s, mc: mc, transport: transport, out: make(chan []byte, connQueue), done: make(chan struct{})}

	var writers sync.WaitGroup
	writers.Add(1)
	go c.writeLoop(&writers)

	// The reader may stay blocked after we return (a stdio read cannot always be
	// interrupted); it owns nothing but its channel, which is buffered so it never leaks
	// blocked on a send.
	in := make(chan inbound, 1)
	go func() {
		for {
			b, err := mc.ReadMessage()
			select {
			case in <- inbound{b, err}:
			case <-c.done:
				return
			}
			if err != nil {
				return
			}
		}
	}()

	var handlers sync.WaitGroup
	var readErr error
loop:
	for {
		var m inbound
		select {
		case <-ctx.Done():
			break loop
		case <-c.done:
			break loop
		case m = <-in:
		}
		if m.err != nil {
			if !errors.Is(m.err, io.EOF) && !errors.Is(m.err, errConnClosed) {
				readErr = m.err
			}
			break loop
		}
		c.handle(ctx, m.b, &handlers)
	}
	cancel()
	handlers.Wait()
	c.stop()
	// The writer flushes what is queued; a peer that no longer reads must not hold us, so
	// after a grace period the transport is closed under it.
	flushed := make(chan struct{})
	go func() { writers.Wait(); close(flushed) }()
	select {
	case <-flushed:
	case <-time.After(connFlushWait):
	}
	_ = mc.Close()
	<-flushed
	s.endConn(c)
	return readErr
}

// connFlushWait bounds how long a finished connection waits for its queued messages to be
// written before closing the transport.
const connFlushWait = 2 * time.Second

// handle routes one inbound message. Requests after initialize run on their own goroutine
// (counted in handlers); everything else is handled in order on the read goroutine.
func (c *conn) handle(ctx context.Context, b []byte, handlers *sync.WaitGroup) {
	if len(bytes.TrimSpace(b)) == 0 {
		return
	}
	s := c.s
	msg, err := jsonrpc.Decode(b)
	if err != nil {
		c.respond(jsonrpc.ID{}, nil, err)
		return
	}
	if err := admit(ctx, msg); err != nil {
		if msg.IsRequest() {
			c.respond(msg.ID, nil, err)
		}
		return
	}
	ctx, end := trace.StartRequest(ctx, nil, b) // one span per message (WebSocket, stdio)
	async := false                              // a request served on its own goroutine ends its span there
	defer func() {
		if !async {
			end(nil)
		}
	}()
	switch {
	case msg.Method == "initialize" && msg.IsRequest():
		if c.sess != nil {
			c.respond(msg.ID, nil, errAlreadyInitialized)
			return
		}
		c.initialize(ctx, msg)
	case msg.Method == "ping" && msg.IsRequest():
		c.respond(msg.ID, nil, nil)
	case c.sess == nil:
		if msg.IsRequest() {
			c.respond(msg.ID, nil, errNotInitialized)
		}
	case msg.IsResponse():
		s.h.Respond(ctx, c.sess, msg)
	case idlessRequest(msg):
		s.log.Info().Str("session", c.sess.ID).Str("method", redact.Field(msg.Method)).Msg("legacy: a request method without an id dropped")
	case msg.IsNotification():
		s.h.Notify(ctx, c.sess, msg)
	default:
		s.touch(ctx, c.sess)
		handlers.Add(1)
		async = true
		go func() {
			defer handlers.Done()
			defer end(nil)
			c.serve(ctx, msg)
		}()
	}
}

// serve answers one request through Handler.Serve, as the HTTP face's serve does.
func (c *conn) serve(ctx context.Context, msg *jsonrpc.Message) {
	st := &connStream{c: c}
	defer st.close() // also when Serve panics
	res, err := c.s.h.Serve(ctx, c.sess, msg, st)
	st.close()
	if b := c.s.encodeResponse(msg.ID, res, err); b != nil { // nil: cancelled, no response
		c.enqueue(b)
	}
}

// respond queues the response to id (a zero id becomes null).
func (c *conn) respond(id jsonrpc.ID, res []byte, err error) {
	c.enqueue(c.s.encodeResponse(id, res, err))
}

// initialize opens the connection's session: Handler.Initialize, then the store, then the
// reply; then the conn is registered so Server.Push reaches it.
func (c *conn) initialize(ctx context.Context, msg *jsonrpc.Message) {
	s := c.s
	sess, err := s.newSession(msg.Params)
	if err != nil {
		c.respond(msg.ID, nil, err)
		return
	}
	sess.Principal = auth.KeyFrom(ctx) // the connection's principal, fixed when it was admitted
	res, err := s.h.Initialize(ctx, sess, msg.Params)
	if err != nil {
		c.respond(msg.ID, nil, err)
		return
	}
	if err := s.store.CreateSession(ctx, sess); err != nil {
		s.log.Error().Err(err).Str("session", sess.ID).Msg("legacy: storing session failed")
		c.respond(msg.ID, nil, jsonrpc.ErrInternal)
		return
	}
	c.sess = sess
	s.registerConn(c)
	s.onPush()
	s.log.Info().Str("session", sess.ID).Str("transport", c.transport).Str("protocolVersion", sess.ProtocolVersion).Msg("legacy: session opened")
	c.respond(msg.ID, res, nil)
}

// registerConn makes the conn the session's push target in this process.
func (s *Server) registerConn(c *conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conns == nil {
		s.conns = make(map[string]*conn)
	}
	s.conns[c.sess.ID] = c
	if s.closed {
		c.stop()
	}
}

// conn returns the message connection holding the session in this process, if any.
func (s *Server) conn(sessionID string) *conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conns[sessionID]
}

// endConn unregisters a finished conn and closes its session: a stdio or WebSocket
// session lives exactly as long as its connection.
func (s *Server) endConn(c *conn) {
	if c.sess == nil {
		return
	}
	s.mu.Lock()
	if s.conns[c.sess.ID] == c {
		delete(s.conns, c.sess.ID)
	}
	s.mu.Unlock()
	s.onPush()
	ctx, cancel := context.WithTimeout(context.Background(), closeSessionTimeout)
	defer cancel()
	s.sessions.forget(c.sess.ID)
	if err := s.store.CloseSession(ctx, c.sess.ID); err != nil && !errors.Is(err, ErrNoSession) {
		s.log.Warn().Err(err).Str("session", c.sess.ID).Msg("legacy: closing session failed")
	}
	s.forgetTouched(c.sess.ID)
	c.sess.Closed = true
	s.h.Closed(ctx, c.sess)
	s.log.Info().Str("session", c.sess.ID).Str("transport", c.transport).Msg("legacy: session closed")
}

// pushConn offers msg to the session's message connection; ok reports whether one exists
// here, queued whether the message was taken.
func (s *Server) pushConn(sessionID string, msg *jsonrpc.Message) (queued, ok bool) {
	c := s.conn(sessionID)
	if c == nil {
		return false, false
	}
	b, err := encodeMessage(msg)
	if err != nil {
		return false, true
	}
	return c.offer(b), true
}

// stopConns ends every message connection (Server.Close).
func (s *Server) stopConnsLocked() {
	for _, c := range s.conns {
		c.stop()
	}
}

// errConnClosed is what a stdio read returns after Close.
var errConnClosed = errors.New("legacy: connection closed")

// StdioOptions configure ServeStdio.
type StdioOptions struct {
	// MaxLineBytes caps one inbound line (default: the Server's MaxBodyBytes). A longer
	// line ends the connection: newline framing cannot resynchronise inside it.
	MaxLineBytes int
}

// ServeStdio serves one legacy client over newline-delimited JSON-RPC: messages are read
// from r, one per line, and written to w, one per line. It returns when r reaches EOF
// (the client closed its end), ctx ends, or the Server closes; the session is then closed.
// Nothing but MCP messages is ever written to w.
func (s *Server) ServeStdio(ctx context.Context, r io.Reader, w io.Writer, o StdioOptions) error {
	if !s.begin() {
		return errors.New("legacy: server is closed")
	}
	defer s.end()
	limit := o.MaxLineBytes
	if limit <= 0 {
		limit = int(s.maxBody)
	}
	return s.serveConn(ctx, newStdioConn(r, w, limit), "stdio")
}

// stdioConn frames messages as lines.
type stdioConn struct {
	br    *bufio.Reader
	limit int
	w     io.Writer
	rc    io.Closer // r, when it can be closed to interrupt a read
	wc    io.Closer // w, when it can be closed to interrupt a write
	once  sync.Once
	done  chan struct{}
}

func newStdioConn(r io.Reader, w io.Writer, limit int) *stdioConn {
	sc := &stdioConn{br: bufio.NewReaderSize(r, 64<<10), limit: limit, w: w, done: make(chan struct{})}
	sc.rc, _ = r.(io.Closer)
	sc.wc, _ = w.(io.Closer)
	return sc
}

// errLineTooLong ends a stdio connection whose peer sent a line above the limit.
var errLineTooLong = errors.New("legacy: stdio line longer than the size cap")

// ReadMessage returns the next line without its line ending.
func (sc *stdioConn) ReadMessage() ([]byte, error) {
	var line []byte
	for {
		chunk, err := sc.br.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > sc.limit+2 {
			return nil, errLineTooLong
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err != nil {
			if errors.Is(err, io.EOF) && len(bytes.TrimSpace(line)) > 0 {
				return line, nil // an unterminated last line is still a message
			}
			select {
			case <-sc.done:
				return nil, errConnClosed
			default:
			}
			return nil, err
		}
		return bytes.TrimRight(line, "\r\n"), nil
	}
}

// WriteMessage writes b and a newline in one Write. encodeMessage never emits a raw
// newline (JSON escapes it inside strings), so the framing holds.
func (sc *stdioConn) WriteMessage(b []byte) error {
	buf := make([]byte, 0, len(b)+1)
	buf = append(append(buf, b...), '\n')
	_, err := sc.w.Write(buf)
	return err
}

// Close closes r and w when they are closable, so blocked reads and writes return; a read
// blocked on a descriptor that cannot be interrupted may not (serveConn does not wait for
// it).
func (sc *stdioConn) Close() error {
	sc.once.Do(func() {
		close(sc.done)
		if sc.rc != nil {
			_ = sc.rc.Close()
		}
		if sc.wc != nil {
			_ = sc.wc.Close()
		}
	})
	return nil
}
