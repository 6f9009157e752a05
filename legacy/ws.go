package legacy

import (
	"errors"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"github.com/taskbridge/taskbridge/internal/jsonrpc"
)

// The WebSocket face serves the same endpoint as the Streamable HTTP face: a GET carrying
// "Upgrade: websocket" and the subprotocol "mcp" (what the TypeScript SDK's
// WebSocketClientTransport sends) becomes one connection, which is one session. Each text
// frame carries exactly one JSON-RPC message, in both directions. The server pings every
// Options.KeepAlive (default 15 s) and drops a peer that has not answered (pong or any
// frame) within two intervals. Authentication, the Origin check (the DNS-rebinding
// defence) and the rate limit are the front door's (bridge.Door), as for every HTTP
// request: the upgrade request passes it first, and the door hands each message of the
// connection to its rate limit through WithAdmission.
//
// Decisions the spec leaves open: a handshake without the "mcp" subprotocol is refused
// with 400 (a peer that did not ask for MCP framing would misread it); binary frames are
// refused by closing the connection with 1003 (unsupported data).

// Subprotocol is the WebSocket subprotocol of MCP.
const Subprotocol = "mcp"

// wsWriteTimeout bounds one frame write; a peer that stops reading is dropped.
const wsWriteTimeout = 10 * time.Second

var errWSSubprotocol = jsonrpc.NewError(jsonrpc.CodeInvalidRequest, `Bad Request: WebSocket handshake must offer the "mcp" subprotocol`)

// IsWebSocketUpgrade reports whether r asks to become a WebSocket.
func IsWebSocketUpgrade(r *http.Request) bool {
	return r.Method == http.MethodGet && websocket.IsWebSocketUpgrade(r)
}

// serveWebSocket upgrades r and serves the connection until either side closes it.
func (s *Server) serveWebSocket(w http.ResponseWriter, r *http.Request) {
	if !slices.Contains(websocket.Subprotocols(r), Subprotocol) {
		s.httpError(w, http.StatusBadRequest, errWSSubprotocol)
		return
	}
	if !s.begin() {
		s.httpError(w, http.StatusServiceUnavailable, errShuttingDown)
		return
	}
	defer s.end()
	up := websocket.Upgrader{
		Subprotocols: []string{Subprotocol},
		// Origin was checked by the front door, with the one rule for every face.
		CheckOrigin: func(*http.Request) bool { return true },
	}
	ws, err := up.Upgrade(w, r, nil)
	if err != nil {
		return // the upgrader has answered with an HTTP error
	}
	wc := newWSConn(ws, s.maxBody, s.keepAlive)
	defer wc.Close()
	go wc.pingLoop()
	if err := s.serveConn(r.Context(), wc, "websocket"); err != nil {
		s.log.Info().Err(err).Msg("legacy: websocket connection ended")
	}
}

// wsConn adapts a gorilla connection to msgConn. gorilla allows one concurrent reader
// (serveConn's read goroutine), one concurrent writer (the conn's writer goroutine), and
// WriteControl and Close from anywhere.
type wsConn struct {
	ws        *websocket.Conn
	keepAlive time.Duration
	once      sync.Once
	done      chan struct{}
}

func newWSConn(ws *websocket.Conn, maxBody int64, keepAlive time.Duration) *wsConn {
	wc := &wsConn{ws: ws, keepAlive: keepAlive, done: make(chan struct{})}
	ws.SetReadLimit(maxBody)
	if keepAlive > 0 {
		_ = ws.SetReadDeadline(time.Now().Add(2 * keepAlive))
		ws.SetPongHandler(func(string) error {
			return ws.SetReadDeadline(time.Now().Add(2 * keepAlive))
		})
	}
	return wc
}

// errBinaryFrame ends a connection whose peer sent a binary frame.
var errBinaryFrame = errors.New("legacy: websocket binary frames are not MCP messages")

// ReadMessage returns the payload of the next text frame. A close frame from the peer is
// a normal end (io.EOF-like: errConnClosed).
func (wc *wsConn) ReadMessage() ([]byte, error) {
	typ, b, err := wc.ws.ReadMessage()
	if err != nil {
		if websocket.IsCloseError(err, websocket.CloseNormalClosure, websocket.CloseGoingAway, websocket.CloseNoStatusReceived) {
			return nil, errConnClosed
		}
		select {
		case <-wc.done:
			return nil, errConnClosed
		default:
		}
		return nil, err
	}
	if wc.keepAlive > 0 {
		_ = wc.ws.SetReadDeadline(time.Now().Add(2 * wc.keepAlive))
	}
	if typ != websocket.TextMessage {
		_ = wc.ws.WriteControl(websocket.CloseMessage,
			websocket.FormatCloseMessage(websocket.CloseUnsupportedData, "text frames only"), time.Now().Add(time.Second))
		return nil, errBinaryFrame
	}
	return b, nil
}

// WriteMessage sends b as one text frame.
func (wc *wsConn) WriteMessage(b []byte) error {
	_ = wc.ws.SetWriteDeadline(time.Now().Add(wsWriteTimeout))
	return wc.ws.WriteMessage(websocket.TextMessage, b)
}

// pingLoop pings the peer every keepAlive until the connection closes.
func (wc *wsConn) pingLoop() {
	if wc.keepAlive <= 0 {
		return
	}
	t := time.NewTicker(wc.keepAlive)
	defer t.Stop()
	for {
		select {
		case <-wc.done:
			return
		case <-t.C:
			if err := wc.ws.WriteControl(websocket.PingMessage, nil, time.Now().Add(wsWriteTimeout)); err != nil {
				_ = wc.Close()
				return
			}
		}
	}
}

// Close sends a normal close frame (best effort) and closes the socket; safe to call
// more than once.
func (wc *wsConn) Close() error {
	wc.once.Do(func() {
		close(wc.done)
		_ = wc.ws.WriteControl(websocket.CloseMessage,
			websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
		_ = wc.ws.Close()
	})
	return nil
}
