package legacy

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/taskbridge/taskbridge/internal/auth"
	"github.com/taskbridge/taskbridge/internal/defaults"
	"github.com/taskbridge/taskbridge/internal/jsonrpc"
)

// Handler is implemented by the bridge; the Server calls it for every message a legacy
// client sends. Methods are called concurrently, from the HTTP handler goroutines, with a
// ctx that ends when the client disconnects or the Server is closed for good. (Serve on a
// resumable stream runs in a goroutine of its own and outlives a disconnect for the
// resume window once its reply is SSE: see resume.go.)
type Handler interface {
	// Initialize answers initialize for a new session. sess is filled in: ID minted by the
	// face (crypto/rand, visible ASCII), ProtocolVersion negotiated (the client's if
	// supported, else the newest), ClientInfo and ClientCapabilities raw from params,
	// CreatedAt and LastSeenAt. It returns the InitializeResult to send; the face then
	// stores the session (SessionStore.CreateSession) before replying with the Mcp-Session-Id
	// header. On error nothing is stored and the error goes back as a JSON-RPC error.
	Initialize(ctx context.Context, sess *Session, params json.RawMessage) (json.RawMessage, error)
	// Serve answers one request of an established session (never initialize or ping).
	// Messages sent on out before Serve returns travel on this request's response stream,
	// which becomes SSE on first use; after Serve returns, out refuses everything. Return
	// a result (nil means {}), or an error (mapped to the wire with jsonrpc.AsError).
	Serve(ctx context.Context, sess *Session, req *jsonrpc.Message, out Stream) (json.RawMessage, error)
	// Notify receives a client notification (notifications/initialized,
	// notifications/cancelled, …). The POST is answered 202 after Notify returns.
	Notify(ctx context.Context, sess *Session, msg *jsonrpc.Message)
	// Respond receives a client's JSON-RPC response to a server→client request the bridge
	// sent. It may arrive on any replica. The POST is answered 202 after Respond returns.
	Respond(ctx context.Context, sess *Session, msg *jsonrpc.Message)
	// Closed is called after DELETE ended a session (SessionStore.CloseSession succeeded). Two
	// racing DELETEs may both get here if the store accepts both.
	Closed(ctx context.Context, sess *Session)
}

// Stream carries server→client messages related to one request: a POST's SSE stream here,
// stdio or WebSocket elsewhere. Implementations are safe for concurrent use.
type Stream interface {
	// Send writes a request or notification; the first call switches the reply to SSE.
	// It fails with ErrNoEventStream when the client does not accept SSE, and with
	// ErrStreamClosed once the request is answered or the client is gone.
	Send(msg *jsonrpc.Message) error
	// KeepAlive writes an SSE comment line (": keep-alive"); it switches to SSE too.
	KeepAlive() error
}

// DefaultKeepAlive is the default of Options.KeepAlive. The other defaults are
// internal/defaults'.
const DefaultKeepAlive = 15 * time.Second

// Options configure a Server. Store and Handler are required.
type Options struct {
	Store   SessionStore
	Handler Handler
	// MaxBodyBytes caps a POST body (default: internal/defaults); larger bodies get 413.
	MaxBodyBytes int64
	// KeepAlive is the interval of SSE comments on the GET stream (default
	// DefaultKeepAlive; negative disables them).
	KeepAlive time.Duration
	// Logger receives ids, methods and errors, never payloads. Nil disables logging.
	Logger *zerolog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
	// ResumeWindow is how long an SSE stream whose client disconnected stays resumable with
	// GET + Last-Event-ID (resume.go); a POSTed request's handler keeps running that long
	// without a client. Default DefaultResumeWindow; negative disables event ids and
	// resumption (a disconnect then cancels the handler at once).
	ResumeWindow time.Duration
	// MaxReplayBytes bounds the events all of this Server's resumable streams keep for
	// replay together (default: internal/defaults); beyond it the oldest streams stop
	// being resumable (replays.go).
	MaxReplayBytes int64
	// MaxSessionInfoBytes bounds the clientInfo and capabilities stored with a session
	// (default: internal/defaults): a larger clientInfo is kept as its name,
	// version and title; larger capabilities refuse initialize with -32602 (session.go).
	MaxSessionInfoBytes int
	// Events, when set, keeps resumable POST streams' events where other replicas read
	// them, so a Last-Event-ID resume may reach any replica (resume_shared.go). Nil: a
	// resume must reach the process holding the stream.
	Events EventStore
	// OnPushChannel, when set, is called (without the Server's lock, on the goroutine that
	// changed it) each time a session's push channel opens or closes: a GET stream or a
	// stdio/WebSocket connection (push.go). It must not block.
	OnPushChannel func()
}

// The face does not authenticate, check Origin or rate-limit: the front door in front of
// it does (bridge.Door), and hands the caller's principal over in the request context
// (auth.WithPrincipal). A session is bound to the principal that opened it: a request
// carrying its id under another principal gets the same 404 as an unknown session.

// idempotencyKeyKey is the context key of the Idempotency-Key header.
type idempotencyKeyKey struct{}

// IdempotencyKeyFrom returns the request's Idempotency-Key header ("" when absent).
func IdempotencyKeyFrom(ctx context.Context) string {
	k, _ := ctx.Value(idempotencyKeyKey{}).(string)
	return k
}

// WithIdempotencyKey returns ctx carrying an idempotency key, as the face sets it from the
// Idempotency-Key header (for other faces and tests).
func WithIdempotencyKey(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, idempotencyKeyKey{}, key)
}

// Server is the 2025-11-25 Streamable HTTP face. Mount it at the MCP endpoint (/mcp).
type Server struct {
	store     SessionStore
	h         Handler
	maxBody   int64
	keepAlive time.Duration
	log       zerolog.Logger
	now       func() time.Time

	// base ends every handler ctx; Close cancels it after draining (or giving up).
	base   context.Context
	cancel context.CancelFunc

	mu        sync.Mutex // guards closed, inflight, idle, streams and conns
	closed    bool
	inflight  int                     // HTTP requests inside ServeHTTP past the closed check
	idle      chan struct{}           // closed once closed && inflight == 0
	streams   map[string][]*getStream // session id → this process's GET streams, oldest first
	streamSeq uint64                  // GET streams attached so far (getStream.seq)
	conns     map[string]*conn        // session id → its stdio/WebSocket connection (stdio.go); nil until the first

	sessions *sessions // read-through cache of session records
	maxInfo  int       // Options.MaxSessionInfoBytes (session.go)

	resumeWindow time.Duration // Options.ResumeWindow; <= 0: streams carry no event ids
	replays      *replays      // this process's resumable SSE streams (resume.go)
	events       EventStore    // Options.Events; nil: streams resume on their holder only
	onPush       func()        // Options.OnPushChannel; never nil

	touchMu   sync.Mutex // guards touched and lastSweep
	touched   map[string]time.Time
	lastSweep time.Time
}

// NewServer returns a Server; it panics without a Store or a Handler.
func NewServer(o Options) *Server {
	if o.Store == nil || o.Handler == nil {
		panic("legacy: NewServer needs Options.Store and Options.Handler")
	}
	s := &Server{
		store:     o.Store,
		h:         o.Handler,
		maxBody:   o.MaxBodyBytes,
		keepAlive: o.KeepAlive,
		log:       zerolog.Nop(),
		now:       o.Now,
		idle:      make(chan struct{}),
		streams:   make(map[string][]*getStream),
		touched:   make(map[string]time.Time),
		sessions:  newSessions(o.Store),
		replays:   newReplays(o.MaxReplayBytes),
		events:    o.Events,
		maxInfo:   o.MaxSessionInfoBytes,
		onPush:    o.OnPushChannel,
	}
	if s.onPush == nil {
		s.onPush = func() {}
	}
	switch s.resumeWindow = o.ResumeWindow; {
	case s.resumeWindow == 0:
		s.resumeWindow = DefaultResumeWindow
	case s.resumeWindow < 0:
		s.resumeWindow = 0
	}
	if s.maxBody <= 0 {
		s.maxBody = defaults.Defaults.MaxBodyBytes
	}
	if s.keepAlive == 0 {
		s.keepAlive = DefaultKeepAlive
	}
	if o.Logger != nil {
		s.log = *o.Logger
	}
	if s.now == nil {
		s.now = time.Now
	}
	s.base, s.cancel = context.WithCancel(context.Background())
	return s
}

// HTTP-level errors, sent with id null.
var (
	errMethodNotAllowed = jsonrpc.NewError(jsonrpc.CodeInvalidRequest, "Method not allowed")
	errMediaType        = jsonrpc.NewError(jsonrpc.CodeInvalidRequest, "Unsupported Media Type: Content-Type must be application/json")
	errBodyTooLarge     = jsonrpc.NewError(jsonrpc.CodeInvalidRequest, "Request body too large")
	errNotAcceptable    = jsonrpc.NewError(jsonrpc.CodeInvalidRequest, "Not Acceptable: Client must accept text/event-stream")
	errPostNotAccept    = jsonrpc.NewError(jsonrpc.CodeInvalidRequest, "Not Acceptable: Client must accept both application/json and text/event-stream")
	errIDlessRequest    = jsonrpc.NewError(jsonrpc.CodeInvalidRequest, "Bad Request: a message without an id is a notification, and notifications/* are the only notification methods")
	errShuttingDown     = jsonrpc.NewError(jsonrpc.CodeInternalError, "Service unavailable: server is shutting down")
)

const allowHeader = "GET, POST, DELETE"

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if IsWebSocketUpgrade(r) {
		s.serveWebSocket(w, r) // ws.go: same endpoint, one WebSocket connection per session
		return
	}
	switch r.Method {
	case http.MethodGet, http.MethodPost, http.MethodDelete:
	default:
		w.Header().Set("Allow", allowHeader)
		s.httpError(w, http.StatusMethodNotAllowed, errMethodNotAllowed)
		return
	}
	if !s.begin() {
		s.httpError(w, http.StatusServiceUnavailable, errShuttingDown)
		return
	}
	defer s.end()
	switch r.Method {
	case http.MethodPost:
		s.handlePost(w, r)
	case http.MethodGet:
		s.handleGet(w, r)
	case http.MethodDelete:
		s.handleDelete(w, r)
	}
}

// handlePost serves one POSTed JSON-RPC message.
func (s *Server) handlePost(w http.ResponseWriter, r *http.Request) {
	if !isJSONContentType(r.Header.Get("Content-Type")) {
		s.httpError(w, http.StatusUnsupportedMediaType, errMediaType)
		return
	}
	body, ok := s.readBody(w, r)
	if !ok {
		return
	}
	acc := parseAccept(r.Header.Values("Accept"))
	if !acc.json || !acc.sse {
		// 2025-11-25 §Transports: every POST MUST list both; the face can then choose
		// either reply form.
		s.httpError(w, http.StatusNotAcceptable, errPostNotAccept)
		return
	}
	msg, err := jsonrpc.Decode(body)
	if err != nil {
		s.httpError(w, http.StatusBadRequest, jsonrpc.AsError(err))
		return
	}
	if idlessRequest(msg) {
		s.httpError(w, http.StatusBadRequest, errIDlessRequest.Wrapf("%q needs an id", msg.Method))
		return
	}
	if msg.Method == "initialize" {
		s.initialize(w, r, msg, acc)
		return
	}
	sess := s.session(w, r)
	if sess == nil {
		return
	}
	ctx, cancel := s.handlerContext(r)
	defer cancel()
	switch {
	case msg.IsResponse():
		s.h.Respond(ctx, sess, msg)
		w.WriteHeader(http.StatusAccepted)
	case msg.IsNotification():
		s.h.Notify(ctx, sess, msg)
		w.WriteHeader(http.StatusAccepted)
	case msg.Method != "ping" && acc.sse && s.resumable(sess):
		s.serveResumable(w, r, sess, msg, acc) // resume.go: SSE event ids, survives a disconnect
	default:
		s.serve(ctx, w, sess, msg, acc)
	}
}

// readBody reads a POST body of at most maxBody bytes; on failure it has answered.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	if r.ContentLength > s.maxBody {
		s.httpError(w, http.StatusRequestEntityTooLarge, errBodyTooLarge.Wrapf("limit is %d bytes", s.maxBody))
		return nil, false
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.maxBody))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		s.httpError(w, http.StatusRequestEntityTooLarge, errBodyTooLarge.Wrapf("limit is %d bytes", s.maxBody))
		return nil, false
	case err != nil:
		s.httpError(w, http.StatusBadRequest, jsonrpc.ErrParse.Wrapf("reading body failed"))
		return nil, false
	}
	return body, true
}

// initialize opens a session: Handler.Initialize, then the store, then the reply.
func (s *Server) initialize(w http.ResponseWriter, r *http.Request, msg *jsonrpc.Message, acc accepts) {
	if r.Header.Get(headerSessionID) != "" {
		s.httpError(w, http.StatusBadRequest, errInitWithSession)
		return
	}
	if !msg.IsRequest() {
		s.httpError(w, http.StatusBadRequest, jsonrpc.ErrInvalidRequest.Wrapf("initialize must be a request"))
		return
	}
	ctx, cancel := s.handlerContext(r)
	defer cancel()
	p := newPostStream(w, acc)
	defer p.close()
	sess, err := s.newSession(msg.Params)
	if err != nil {
		p.finish(s.encodeResponse(msg.ID, nil, err))
		return
	}
	sess.Principal = auth.KeyFrom(r.Context())
	res, err := s.h.Initialize(ctx, sess, msg.Params)
	if err != nil {
		p.finish(s.encodeResponse(msg.ID, nil, err))
		return
	}
	if err := s.store.CreateSession(ctx, sess); err != nil {
		s.log.Error().Err(err).Str("session", sess.ID).Msg("legacy: storing session failed")
		p.finish(s.encodeResponse(msg.ID, nil, jsonrpc.ErrInternal))
		return
	}
	s.log.Info().Str("session", sess.ID).Str("protocolVersion", sess.ProtocolVersion).Msg("legacy: session opened")
	w.Header().Set(headerSessionID, sess.ID)
	p.finish(s.encodeResponse(msg.ID, res, nil))
}

// serve answers a request: ping locally, everything else through Handler.Serve.
func (s *Server) serve(ctx context.Context, w http.ResponseWriter, sess *Session, msg *jsonrpc.Message, acc accepts) {
	p := newPostStream(w, acc)
	defer p.close() // also when Serve panics: the bridge must not write after we return
	if msg.Method == "ping" {
		p.finish(s.encodeResponse(msg.ID, nil, nil))
		return
	}
	res, err := s.h.Serve(ctx, sess, msg, p)
	p.finish(s.encodeResponse(msg.ID, res, err))
}

// encodeResponse builds the wire response to request id. A result that does not encode
// (invalid JSON from the handler) becomes -32603. ErrCancelled gives nil: no response.
func (s *Server) encodeResponse(id jsonrpc.ID, res json.RawMessage, err error) []byte {
	if errors.Is(err, ErrCancelled) {
		return nil
	}
	m := &jsonrpc.Message{ID: id, Result: res}
	if err != nil {
		m = jsonrpc.NewErrorResponse(id, err)
	} else if len(res) == 0 {
		m.Result = json.RawMessage("{}")
	}
	b, encErr := encodeMessage(m)
	if encErr != nil {
		s.log.Error().Err(encErr).Str("id", id.String()).Msg("legacy: response does not encode")
		b, _ = encodeMessage(jsonrpc.NewErrorResponse(id, jsonrpc.ErrInternal))
	}
	return b
}

// handleGet holds one of the session's standalone SSE streams open until the client leaves,
// the session is deleted, the Server closes, or maxGetStreams newer ones replaced it.
func (s *Server) handleGet(w http.ResponseWriter, r *http.Request) {
	if !parseAccept(r.Header.Values("Accept")).sse {
		s.httpError(w, http.StatusNotAcceptable, errNotAcceptable)
		return
	}
	sess := s.session(w, r)
	if sess == nil {
		return
	}
	last := r.Header.Get("Last-Event-ID")
	if kind, streamID, n, ok := parseEventID(last); ok && kind == kindPost && s.resumable(sess) {
		s.resumePost(w, r, sess, streamID, n) // resume.go: the rest of a POST's stream
		return
	}
	g, first := s.openGetStream(sess, last) // resume.go: fresh, or resumed with its missed events
	s.attachGetStream(g)
	s.onPush()
	defer s.onPush()
	defer s.detachGetStream(g)
	sseHeaders(w.Header())
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	if _, err := w.Write(first); err != nil || rc.Flush() != nil {
		return
	}
	var tick <-chan time.Time
	if s.keepAlive > 0 {
		t := time.NewTicker(s.keepAlive)
		defer t.Stop()
		tick = t.C
	}
	for {
		var chunk []byte
		select {
		case chunk = <-g.ch:
		case <-tick:
			chunk = keepAliveComment
		case <-g.done:
			return
		case <-r.Context().Done():
			return
		}
		if _, err := w.Write(chunk); err != nil || rc.Flush() != nil {
			return
		}
	}
}

// maxGetStreams bounds the GET streams one session holds open in this process. 2025-11-25
// lets a client hold several; a new one beyond the bound ends the oldest, so a client that
// reconnects after half-open connections is still served at once.
const maxGetStreams = 4

// attachGetStream registers a new GET stream for a session beside the ones it has; only
// beyond maxGetStreams does the oldest end.
func (s *Server) attachGetStream(g *getStream) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.streamSeq++
	g.seq = s.streamSeq
	list := append(s.streams[g.sessionID], g)
	if len(list) > maxGetStreams {
		list[0].stop()
		list = list[1:]
	}
	s.streams[g.sessionID] = list
	if s.closed {
		g.stop() // Close ran between begin and here: end at once
	}
}

// detachGetStream unregisters g.
func (s *Server) detachGetStream(g *getStream) {
	g.stop()
	if g.log != nil {
		g.log.detach(g) // resumable for the window (resume.go)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	list := slices.DeleteFunc(s.streams[g.sessionID], func(o *getStream) bool { return o == g })
	if len(list) == 0 {
		delete(s.streams, g.sessionID)
		return
	}
	s.streams[g.sessionID] = list
}

// stopGetStream ends the session's GET streams in this process, if any.
func (s *Server) stopGetStream(sessionID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, g := range s.streams[sessionID] {
		g.stop()
	}
}

// handleDelete ends a session.
func (s *Server) handleDelete(w http.ResponseWriter, r *http.Request) {
	sess := s.session(w, r)
	if sess == nil {
		return
	}
	ctx, cancel := s.handlerContext(r)
	defer cancel()
	s.sessions.forget(sess.ID)
	if err := s.store.CloseSession(ctx, sess.ID); err != nil {
		if errors.Is(err, ErrNoSession) {
			s.httpError(w, http.StatusNotFound, errSessionNotFound)
			return
		}
		s.log.Error().Err(err).Str("session", sess.ID).Msg("legacy: closing session failed")
		s.httpError(w, http.StatusInternalServerError, jsonrpc.ErrInternal)
		return
	}
	s.stopGetStream(sess.ID)
	s.dropReplays(sess.ID)
	s.forgetTouched(sess.ID)
	sess.Closed = true
	s.h.Closed(ctx, sess)
	s.log.Info().Str("session", sess.ID).Msg("legacy: session closed")
	w.WriteHeader(http.StatusOK)
}

// Push delivers msg (a request or notification) on one of the session's standalone GET
// streams held by this process (the newest that takes it: each message travels on one
// stream). It returns false when none is open, when msg is a response (the GET stream
// carries none), or when every stream's buffer is full because the client reads too
// slowly; it never blocks. true means queued: a client that disconnects at that moment
// still loses the message, as with any SSE write.
func (s *Server) Push(sessionID string, msg *jsonrpc.Message) bool {
	_, ok := s.PushOn(sessionID, msg)
	return ok
}

// PushOn is Push that also names the GET stream that took msg (NewestGetStream's number;
// 0 for a stdio/WebSocket connection), so a caller that pushes again when the client opens
// another stream compares with the stream that really carried msg, not with whichever was
// newest a moment later.
func (s *Server) PushOn(sessionID string, msg *jsonrpc.Message) (uint64, bool) {
	if msg.IsResponse() {
		return 0, false
	}
	if queued, ok := s.pushConn(sessionID, msg); ok {
		return 0, queued // a stdio/WebSocket session: its connection is its push channel
	}
	s.mu.Lock()
	list := slices.Clone(s.streams[sessionID])
	s.mu.Unlock()
	if len(list) == 0 {
		return 0, false
	}
	b, err := encodeMessage(msg)
	if err != nil {
		return 0, false
	}
	for i := len(list) - 1; i >= 0; i-- {
		if list[i].push(b) {
			return list[i].seq, true
		}
	}
	return 0, false
}

// HasGetStream reports whether this process holds an open GET stream for the session, or
// the session's stdio/WebSocket connection (which carries pushed messages the same way).
func (s *Server) HasGetStream(sessionID string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.streams[sessionID]) > 0 || s.conns[sessionID] != nil
}

// Close stops accepting requests (503), ends the GET streams, and waits for in-flight
// handlers to return. If ctx ends first it cancels their contexts and returns ctx.Err()
// without waiting further. It is safe to call more than once.
func (s *Server) Close(ctx context.Context) error {
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		for _, list := range s.streams {
			for _, g := range list {
				g.stop()
			}
		}
		s.stopConnsLocked()
		if s.inflight == 0 {
			close(s.idle)
		}
	}
	s.mu.Unlock()
	s.dropReplays("") // a closing server takes no resume: streams with no client end now
	defer s.cancel()
	select {
	case <-s.idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// begin counts a request in; false once Close has started.
func (s *Server) begin() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.inflight++
	return true
}

// end counts a request out and wakes Close when it was the last one.
func (s *Server) end() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.inflight--
	if s.closed && s.inflight == 0 {
		close(s.idle)
	}
}

// handlerContext is the ctx handed to the Handler: it ends when the client disconnects
// (r.Context) or when Close gives up waiting (s.base).
func (s *Server) handlerContext(r *http.Request) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(r.Context())
	if k := r.Header.Get("Idempotency-Key"); k != "" {
		ctx = WithIdempotencyKey(ctx, k)
	}
	stop := context.AfterFunc(s.base, cancel)
	return ctx, func() { stop(); cancel() }
}

// httpError answers with an HTTP error status and a JSON-RPC error body with id null.
func (s *Server) httpError(w http.ResponseWriter, status int, e *jsonrpc.Error) {
	b, _ := encodeMessage(jsonrpc.NewErrorResponse(jsonrpc.ID{}, e))
	w.Header().Set("Content-Type", contentTypeJSON)
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// idlessRequest reports whether msg has no id but a method that is not a notification's:
// "tools/call" or "tasks/cancel" sent as a notification. Every MCP notification method is
// notifications/*; anything else without an id would reach a route as a notification no
// record, owner check or gate ever saw, so the face refuses it (HTTP 400) or drops it
// (stdio, WebSocket: a notification gets no reply) and never hands it on.
func idlessRequest(msg *jsonrpc.Message) bool {
	return msg.IsNotification() && !strings.HasPrefix(msg.Method, "notifications/")
}

// EndSession ends a session from the route's side, as a DELETE from the client would
// (without Handler.Closed): the record is closed, this process forgets it at once and its
// GET streams stop, so the client's next request gets 404 -32001 and it re-initializes.
// For a session whose upstream counterpart is gone (the legacy pass-through after a
// restart). ErrSessionEnded is the answer to give the request that found out.
func (s *Server) EndSession(ctx context.Context, id string) error {
	s.sessions.forget(id)
	err := s.store.CloseSession(ctx, id)
	s.stopGetStream(id)
	s.dropReplays(id)
	s.forgetTouched(id)
	if err != nil && !errors.Is(err, ErrNoSession) {
		return err
	}
	return nil
}

// ErrSessionEnded is the error of a request whose session the route ended (EndSession):
// the same -32001 "Session not found" an unknown session gets.
var ErrSessionEnded = errSessionNotFound
