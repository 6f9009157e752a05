package legacy

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"
	"go.uber.org/goleak"

	"github.com/taskbridge/taskbridge/internal/jsonrpc"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// memStore is an in-memory SessionStore.
type memStore struct {
	mu       sync.Mutex
	sessions map[string]Session
	touches  []string // session ids, in TouchSession order
	getErr   error    // returned by GetSession when set
	// touchDelay slows TouchSession down, widening the window in which a concurrent
	// request still reads the old LastSeenAt.
	touchDelay time.Duration
}

func newMemStore() *memStore { return &memStore{sessions: map[string]Session{}} }

func (m *memStore) CreateSession(_ context.Context, s *Session) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.sessions[s.ID]; ok {
		return errors.New("memStore: session exists")
	}
	m.sessions[s.ID] = *s
	return nil
}

func (m *memStore) GetSession(_ context.Context, id string) (*Session, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.getErr != nil {
		return nil, m.getErr
	}
	s, ok := m.sessions[id]
	if !ok {
		return nil, ErrNoSession
	}
	return &s, nil
}

func (m *memStore) TouchSession(_ context.Context, id string, at time.Time) error {
	m.mu.Lock()
	delay := m.touchDelay
	m.mu.Unlock()
	time.Sleep(delay)
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.sessions[id]
	if !ok {
		return ErrNoSession
	}
	s.LastSeenAt = at
	m.sessions[id] = s
	m.touches = append(m.touches, id)
	return nil
}

func (m *memStore) CloseSession(_ context.Context, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.sessions[id]
	if !ok || s.Closed {
		return ErrNoSession
	}
	s.Closed = true
	m.sessions[id] = s
	return nil
}

func (m *memStore) session(id string) (Session, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.sessions[id]
	return s, ok
}

func (m *memStore) touchCount() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.touches)
}

// fakeHandler is a Handler whose behaviour is set per test through function fields; nil
// fields get a default answer. It also records notifications, responses and closes.
type fakeHandler struct {
	InitializeFunc func(ctx context.Context, sess *Session, params json.RawMessage) (json.RawMessage, error)
	ServeFunc      func(ctx context.Context, sess *Session, req *jsonrpc.Message, out Stream) (json.RawMessage, error)

	mu        sync.Mutex
	notified  []string // methods
	responded []string // raw ids
	closed    []string // session ids
	served    []string // methods
}

func (h *fakeHandler) Initialize(ctx context.Context, sess *Session, params json.RawMessage) (json.RawMessage, error) {
	if h.InitializeFunc != nil {
		return h.InitializeFunc(ctx, sess, params)
	}
	return json.RawMessage(`{"protocolVersion":"` + sess.ProtocolVersion + `","capabilities":{},"serverInfo":{"name":"fake","version":"1"}}`), nil
}

func (h *fakeHandler) Serve(ctx context.Context, sess *Session, req *jsonrpc.Message, out Stream) (json.RawMessage, error) {
	h.mu.Lock()
	h.served = append(h.served, req.Method)
	h.mu.Unlock()
	if h.ServeFunc != nil {
		return h.ServeFunc(ctx, sess, req, out)
	}
	return json.RawMessage(`{"ok":true}`), nil
}

func (h *fakeHandler) Notify(_ context.Context, _ *Session, msg *jsonrpc.Message) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.notified = append(h.notified, msg.Method)
}

func (h *fakeHandler) Respond(_ context.Context, _ *Session, msg *jsonrpc.Message) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.responded = append(h.responded, msg.ID.Raw())
}

func (h *fakeHandler) Closed(_ context.Context, sess *Session) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = append(h.closed, sess.ID)
}

func (h *fakeHandler) snapshot() (notified, responded, closed, served []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.notified...), append([]string(nil), h.responded...),
		append([]string(nil), h.closed...), append([]string(nil), h.served...)
}

// fakeClock is a settable Options.Now.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// env is one Server behind an httptest.Server.
type env struct {
	t     *testing.T
	srv   *Server
	ts    *httptest.Server
	st    *memStore
	h     *fakeHandler
	clock *fakeClock
}

func newEnv(t *testing.T, mod func(*Options)) *env {
	t.Helper()
	e := &env{
		t:     t,
		st:    newMemStore(),
		h:     &fakeHandler{},
		clock: &fakeClock{t: time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)},
	}
	// The tests of the plain wire (exact bytes, first event) run without event ids;
	// resume_test.go turns resumability on with its own ResumeWindow.
	o := Options{Store: e.st, Handler: e.h, Now: e.clock.Now, ResumeWindow: -1}
	if mod != nil {
		mod(&o)
	}
	e.srv = NewServer(o)
	mux := http.NewServeMux()
	mux.Handle("/mcp", e.srv)
	e.ts = httptest.NewServer(mux)
	t.Cleanup(e.ts.Close) // runs last: after Close ended the GET streams
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := e.srv.Close(ctx); err != nil {
			t.Errorf("Server.Close: %v", err)
		}
	})
	return e
}

// request builds a request to /mcp with the headers a well-behaved 2025-11-25 client sends.
func (e *env) request(ctx context.Context, method, sessionID, body string) *http.Request {
	e.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, e.ts.URL+"/mcp", rd)
	if err != nil {
		e.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if method == http.MethodGet {
		req.Header.Set("Accept", "text/event-stream")
	} else {
		req.Header.Set("Accept", "application/json, text/event-stream")
	}
	if sessionID != "" {
		req.Header.Set("Mcp-Session-Id", sessionID)
		req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	}
	return req
}

func (e *env) do(req *http.Request) *http.Response {
	e.t.Helper()
	resp, err := e.ts.Client().Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	return resp
}

// post sends one message and returns the response with its body read.
func (e *env) post(sessionID, body string, hdr ...string) (*http.Response, string) {
	e.t.Helper()
	req := e.request(context.Background(), http.MethodPost, sessionID, body)
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i+1] == "" {
			req.Header.Del(hdr[i])
		} else {
			req.Header.Set(hdr[i], hdr[i+1])
		}
	}
	resp := e.do(req)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return resp, string(b)
}

const initBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{"form":{}}},"clientInfo":{"name":"curl","version":"8"}}}`

// initSession opens a session and returns its id.
func (e *env) initSession() string {
	e.t.Helper()
	resp, body := e.post("", initBody)
	if resp.StatusCode != http.StatusOK {
		e.t.Fatalf("initialize: %d %s", resp.StatusCode, body)
	}
	id := resp.Header.Get("Mcp-Session-Id")
	if id == "" {
		e.t.Fatalf("initialize: no Mcp-Session-Id header")
	}
	return id
}

// wantRPCError checks an HTTP error answer: status, JSON body with id null and the code.
func wantRPCError(t *testing.T, resp *http.Response, body string, status int, code int64) {
	t.Helper()
	if resp.StatusCode != status {
		t.Fatalf("status = %d, want %d (body %s)", resp.StatusCode, status, body)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q, want application/json", ct)
	}
	if got := gjson.Get(body, "error.code").Int(); got != code {
		t.Errorf("error.code = %d, want %d (body %s)", got, code, body)
	}
	if id := gjson.Get(body, "id"); id.Type != gjson.Null || !id.Exists() {
		t.Errorf("id = %s, want null (body %s)", id.Raw, body)
	}
	if gjson.Get(body, "jsonrpc").Str != "2.0" {
		t.Errorf("body is not JSON-RPC 2.0: %s", body)
	}
}

// sseReader parses a text/event-stream body incrementally.
type sseReader struct{ br *bufio.Reader }

// sseEvent is one parsed event, or a comment block when comment is set. id is the
// event's own "id:" field ("" when it has none).
type sseEvent struct {
	event, data, comment, id string
}

// next reads up to the next blank line. Fields other than event, data, id and comments are
// an error: this face sends no retry fields.
func (r *sseReader) next() (sseEvent, error) {
	var ev sseEvent
	var data []string
	seen := false
	for {
		line, err := r.br.ReadString('\n')
		if err != nil {
			if err == io.EOF && seen {
				return ev, io.ErrUnexpectedEOF
			}
			return ev, err
		}
		line = strings.TrimSuffix(line, "\n")
		if line == "" {
			if !seen {
				continue
			}
			ev.data = strings.Join(data, "\n")
			return ev, nil
		}
		seen = true
		switch {
		case strings.HasPrefix(line, ":"):
			ev.comment = strings.TrimSpace(line[1:])
		case strings.HasPrefix(line, "event: "):
			ev.event = line[len("event: "):]
		case strings.HasPrefix(line, "data: "):
			data = append(data, line[len("data: "):])
		case strings.HasPrefix(line, "id: "):
			ev.id = line[len("id: "):]
		default:
			return ev, errors.New("unexpected SSE line " + line)
		}
	}
}

func readAllSSE(t *testing.T, body string) []sseEvent {
	t.Helper()
	r := &sseReader{br: bufio.NewReader(strings.NewReader(body))}
	var out []sseEvent
	for {
		ev, err := r.next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("SSE: %v in %q", err, body)
		}
		out = append(out, ev)
	}
}

func readBody(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// readCloser hides the concrete reader so net/http cannot learn the length.
type readCloser struct{ io.Reader }

func (readCloser) Close() error { return nil }
