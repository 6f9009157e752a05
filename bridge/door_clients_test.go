package bridge_test

// Harnesses for the front-door table test (door_table_test.go): for each route, a real
// upstream on loopback that counts what reaches it, the engine, the door with API keys, and
// a client for each transport.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/rs/zerolog"
	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/bridge"
	"github.com/taskbridge/taskbridge/bridge/forward"
	"github.com/taskbridge/taskbridge/bridge/internal/sessions"
	"github.com/taskbridge/taskbridge/internal/fixture"
	"github.com/taskbridge/taskbridge/internal/jsonrpc"
	"github.com/taskbridge/taskbridge/internal/legacyclient"
	"github.com/taskbridge/taskbridge/legacy"
	"github.com/taskbridge/taskbridge/sep2663"
	"github.com/taskbridge/taskbridge/store"
	"github.com/taskbridge/taskbridge/store/sqlite"
)

// counting counts every HTTP request that reaches an upstream, and keeps the bodies.
type counting struct {
	h http.Handler
	n atomic.Int64

	mu     sync.Mutex
	bodies []string
}

// ServeHTTP counts every request but the standalone GET streams the bridge holds open to
// its own upstream sessions (re-opened in the background, on no client's behalf).
func (c *counting) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		c.n.Add(1)
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(strings.NewReader(string(body)))
		c.mu.Lock()
		c.bodies = append(c.bodies, string(body))
		c.mu.Unlock()
	}
	c.h.ServeHTTP(w, r)
}

// saw reports whether one request body the upstream received contains every sub.
func (c *counting) saw(subs ...string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, b := range c.bodies {
		all := true
		for _, sub := range subs {
			all = all && strings.Contains(b, sub)
		}
		if all {
			return true
		}
	}
	return false
}

// tableUpstream is a 2025-11-25 server (the legacy face of this repository, run as an
// upstream) with one task-required tool "long" whose tasks stay working until cancelled,
// and one synchronous tool "quick". It counts the tasks it creates.
type tableUpstream struct {
	mu      sync.Mutex
	created int
	tasks   map[string]*legacy.Task
	done    map[string]chan struct{}
}

func (u *tableUpstream) Initialize(context.Context, *legacy.Session, json.RawMessage) (json.RawMessage, error) {
	return json.RawMessage(`{"protocolVersion":"2025-11-25","serverInfo":{"name":"table-legacy","version":"1"},` +
		`"capabilities":{"tools":{},"tasks":{"list":{},"cancel":{},"requests":{"tools":{"call":{}}}}}}`), nil
}

func (u *tableUpstream) Serve(ctx context.Context, _ *legacy.Session, req *jsonrpc.Message, _ legacy.Stream) (json.RawMessage, error) {
	id := gjson.GetBytes(req.Params, "taskId").Str
	switch req.Method {
	case "tools/list":
		return json.RawMessage(`{"tools":[{"name":"long","inputSchema":{"type":"object"},"execution":{"taskSupport":"required"}},` +
			`{"name":"quick","inputSchema":{"type":"object"}}]}`), nil
	case "tools/call":
		if !gjson.GetBytes(req.Params, "task").Exists() {
			return json.RawMessage(`{"content":[{"type":"text","text":"quick"}]}`), nil
		}
		return u.create()
	case "tasks/get", "tasks/cancel":
		u.mu.Lock()
		defer u.mu.Unlock()
		t := u.tasks[id]
		if t == nil {
			return nil, jsonrpc.ErrInvalidParams.Wrapf("Task not found")
		}
		if req.Method == "tasks/cancel" && !t.Status.Terminal() {
			t.Status = legacy.StatusCancelled
			close(u.done[id])
		}
		return json.Marshal(t)
	case "tasks/result":
		u.mu.Lock()
		done := u.done[id]
		u.mu.Unlock()
		if done == nil {
			return nil, jsonrpc.ErrInvalidParams.Wrapf("Task not found")
		}
		select {
		case <-done:
			return json.RawMessage(`{"content":[],"isError":true}`), nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	case "tasks/list":
		u.mu.Lock()
		defer u.mu.Unlock()
		out := legacy.ListTasksResult{Tasks: []legacy.Task{}}
		for _, t := range u.tasks {
			out.Tasks = append(out.Tasks, *t)
		}
		return json.Marshal(out)
	}
	return nil, jsonrpc.ErrMethodNotFound.Wrapf("%s", req.Method)
}

func (u *tableUpstream) create() (json.RawMessage, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.created++
	ttl, poll := int64(600_000), int64(100)
	now := time.Now().UTC().Format(time.RFC3339Nano)
	t := &legacy.Task{TaskID: fmt.Sprintf("up-%d", u.created), Status: legacy.StatusWorking, CreatedAt: now,
		LastUpdatedAt: now, TTL: &ttl, PollInterval: &poll}
	u.tasks[t.TaskID], u.done[t.TaskID] = t, make(chan struct{})
	return json.Marshal(map[string]any{"task": t})
}

func (u *tableUpstream) count() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.created
}

func (u *tableUpstream) Notify(context.Context, *legacy.Session, *jsonrpc.Message)  {}
func (u *tableUpstream) Respond(context.Context, *legacy.Session, *jsonrpc.Message) {}
func (u *tableUpstream) Closed(context.Context, *legacy.Session)                    {}

// tableOpts are a harness's settings.
type tableOpts struct {
	policy bridge.Policy
	rate   float64
	burst  int
}

// harness is one route's upstream, engine and door, and how to reach it.
type harness struct {
	t        *testing.T
	url      string // http://…/mcp
	door     *bridge.Door
	gate     *bridge.Gate
	draining *atomic.Bool
	upReqs   func() int64         // HTTP requests the upstream received
	upTasks  func() int           // tasks the upstream started
	upSaw    func(...string) bool // whether one request body the upstream received contains every string
	quick    string               // a synchronous tool
	taskTool string               // a task-only tool and its arguments
	taskArgs string
}

func openStore(t *testing.T) store.Store {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "tb.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// doorCfg is the table's front door: alice and bob (tenant acme), the rate of o.
func doorCfg(t *testing.T, o tableOpts) bridge.DoorConfig {
	var c envConfig
	withAuth(t)(&c, nil)
	return bridge.DoorConfig{Auth: c.Door.Auth, RequestRate: o.rate, RequestBurst: o.burst, StdioPrincipal: "local", Logger: zerolog.Nop()}
}

// serve mounts the door at /mcp on loopback.
func (h *harness) serve(engine bridge.Engine, o tableOpts) {
	h.door = mustDoor(h.t, doorCfg(h.t, o), engine)
	mux := http.NewServeMux()
	mux.Handle("/mcp", h.door)
	srv := httptest.NewServer(mux)
	h.t.Cleanup(func() { srv.CloseClientConnections(); srv.Close() })
	h.url = srv.URL + "/mcp"
}

func newGate(o tableOpts) (*bridge.Gate, *atomic.Bool) {
	draining := &atomic.Bool{}
	return bridge.NewGate(bridge.GateConfig{Policy: o.policy, Draining: draining.Load}), draining
}

// forwardHarness: the Go SEP-2663 fixture upstream, the forward engine (legacy clients
// translated; modern clients passed through).
func forwardHarness(t *testing.T, o tableOpts) *harness {
	fx := fixture.New(fixture.Options{Scale: 0.1, PollIntervalMs: 100})
	up := &counting{h: fx}
	upSrv := httptest.NewServer(up)
	t.Cleanup(func() { upSrv.Close(); fx.Close() })
	g, draining := newGate(o)
	b, err := bridge.NewForward(forward.Config{Store: openStore(t), Logger: zerolog.Nop(), PollFloorMs: 100, Gate: g,
		Heartbeat: 200 * time.Millisecond, NoUpstreamPush: true,
		Upstream: sep2663.NewClient(sep2663.ClientOptions{URL: upSrv.URL + "/mcp"})})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close(context.Background()) })
	h := &harness{t: t, gate: g, draining: draining, upReqs: up.n.Load, taskTool: "long_job", taskArgs: `{"seconds":600}`,
		upTasks: func() int { return fx.Stats().Executions["long_job"] }, upSaw: up.saw, quick: "greet"}
	h.serve(b, o)
	return h
}

// reverseHarness: the Go 2025-11-25 upstream, the reverse engine (modern clients
// translated; legacy clients passed through).
func reverseHarness(t *testing.T, o tableOpts) *harness {
	u := &tableUpstream{tasks: map[string]*legacy.Task{}, done: map[string]chan struct{}{}}
	upFace := legacy.NewServer(legacy.Options{Store: sessions.New(openStore(t)), Handler: u, ResumeWindow: -1})
	up := &counting{h: upFace}
	upSrv := httptest.NewServer(up)
	g, draining := newGate(o)
	r, err := bridge.NewReverse(bridge.ReverseConfig{Upstream: legacy.NewClient(legacy.ClientOptions{URL: upSrv.URL}),
		Store: openStore(t), Logger: zerolog.Nop(), PollFloorMs: 100, Gate: g})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		r.Close(ctx)
		upSrv.CloseClientConnections()
		upSrv.Close()
		upFace.Close(ctx)
	})
	h := &harness{t: t, gate: g, draining: draining, upReqs: up.n.Load, upTasks: u.count, taskTool: "long", taskArgs: `{}`,
		upSaw: up.saw, quick: "quick"}
	h.serve(r, o)
	return h
}

// tableClient is one client of one transport.
type tableClient interface {
	// call sends one request and returns its result, or the JSON-RPC error it got.
	call(ctx context.Context, method string, params string) (json.RawMessage, error)
	// startTask asks for one new task of the harness's task-only tool.
	startTask(ctx context.Context) error
	// cheap sends one request that starts no work.
	cheap(ctx context.Context) error
}

// legacyHTTP is a 2025-11-25 client over Streamable HTTP.
type legacyHTTP struct {
	h *harness
	c *legacyclient.Client
}

func (l *legacyHTTP) call(ctx context.Context, method, params string) (json.RawMessage, error) {
	return l.c.Call(ctx, method, json.RawMessage(params))
}

func (l *legacyHTTP) startTask(ctx context.Context) error {
	return legacyStart(ctx, l, l.h)
}

func (l *legacyHTTP) cheap(ctx context.Context) error {
	_, err := l.call(ctx, "ping", `{}`)
	return err
}

// legacyStart creates a 2025-11-25 task (params.task) of the harness's tool.
func legacyStart(ctx context.Context, c tableClient, h *harness) error {
	res, err := c.call(ctx, "tools/call", fmt.Sprintf(`{"name":%q,"arguments":%s,"task":{}}`, h.taskTool, h.taskArgs))
	if err == nil && gjson.GetBytes(res, "task.taskId").Str == "" {
		return fmt.Errorf("no task in %s", res)
	}
	return err
}

func dialLegacyHTTP(h *harness, key string) (tableClient, error) {
	c := legacyclient.New(h.url)
	if key != "" {
		c.Header = http.Header{"Authorization": {"Bearer " + key}}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := c.Initialize(ctx); err != nil {
		return nil, err
	}
	return &legacyHTTP{h: h, c: c}, nil
}

// modernHTTP is a 2026-07-28 client (tasks extension declared on tools/call).
type modernHTTP struct {
	h *harness
	c *sep2663.Client
}

func dialModern(h *harness, key string) (tableClient, error) {
	o := sep2663.ClientOptions{URL: h.url}
	if key != "" {
		o.Header = http.Header{"Authorization": {"Bearer " + key}}
	}
	return &modernHTTP{h: h, c: sep2663.NewClient(o)}, nil
}

func (m *modernHTTP) call(ctx context.Context, method, params string) (json.RawMessage, error) {
	return m.c.Call(ctx, method, json.RawMessage(params), sep2663.RequestMeta{}, nil)
}

func (m *modernHTTP) startTask(ctx context.Context) error {
	out, err := m.c.CallTool(ctx, json.RawMessage(fmt.Sprintf(`{"name":%q,"arguments":%s}`, m.h.taskTool, m.h.taskArgs)), sep2663.RequestMeta{}, nil)
	if err == nil && out.Kind != sep2663.KindTask {
		return fmt.Errorf("no task: %s", out.Result)
	}
	return err
}

func (m *modernHTTP) cheap(ctx context.Context) error {
	_, err := m.call(ctx, sep2663.MethodDiscover, `{}`)
	return err
}

// msgClient is a 2025-11-25 client over a message connection (WebSocket or stdio): one
// JSON-RPC message per frame or line.
type msgClient struct {
	h    *harness
	send func([]byte) error
	in   chan []byte
	mu   sync.Mutex
	next int64
}

func (c *msgClient) call(ctx context.Context, method, params string) (json.RawMessage, error) {
	c.mu.Lock()
	c.next++
	id := c.next
	c.mu.Unlock()
	b, _ := jsonrpc.Encode(&jsonrpc.Message{JSONRPC: jsonrpc.Version, ID: jsonrpc.IntID(id), Method: method, Params: json.RawMessage(params)})
	if err := c.send(b); err != nil {
		return nil, err
	}
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case f, ok := <-c.in:
			if !ok {
				return nil, io.EOF
			}
			m, err := jsonrpc.Decode(f)
			if err != nil || !m.IsResponse() || m.ID.Raw() != fmt.Sprint(id) {
				continue // notifications, or answers to others
			}
			if m.Error != nil {
				return nil, m.Error
			}
			return m.Result, nil
		}
	}
}

func (c *msgClient) startTask(ctx context.Context) error { return legacyStart(ctx, c, c.h) }

func (c *msgClient) cheap(ctx context.Context) error { _, err := c.call(ctx, "ping", `{}`); return err }

// initialize opens the connection's session.
func (c *msgClient) initialize() error {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := c.call(ctx, "initialize", `{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"table","version":"1"}}`)
	if err != nil {
		return err
	}
	return c.send([]byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`))
}

// dialWebSocket upgrades /mcp; a refused handshake returns an error naming the HTTP status.
func dialWebSocket(h *harness, key string) (tableClient, error) {
	hdr := http.Header{}
	if key != "" {
		hdr.Set("Authorization", "Bearer "+key)
	}
	d := websocket.Dialer{Subprotocols: []string{legacy.Subprotocol}, HandshakeTimeout: 10 * time.Second}
	ws, resp, err := d.Dial("ws"+strings.TrimPrefix(h.url, "http"), hdr)
	if err != nil {
		if resp != nil {
			return nil, &legacyclient.HTTPError{Status: resp.StatusCode}
		}
		return nil, err
	}
	h.t.Cleanup(func() { ws.Close() })
	c := &msgClient{h: h, in: make(chan []byte, 64)}
	var wmu sync.Mutex
	c.send = func(b []byte) error {
		wmu.Lock()
		defer wmu.Unlock()
		return ws.WriteMessage(websocket.TextMessage, b)
	}
	go func() {
		defer close(c.in)
		for {
			_, b, err := ws.ReadMessage()
			if err != nil {
				return
			}
			c.in <- b
		}
	}()
	return c, c.initialize()
}

// dialStdio serves a session through Door.ServeStdio on a pair of pipes (a stdio process
// has no credentials; key is ignored).
func dialStdio(h *harness, _ string) (tableClient, error) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = h.door.ServeStdio(context.Background(), inR, outW)
		outW.Close()
	}()
	h.t.Cleanup(func() {
		inW.Close()
		select {
		case <-served:
		case <-time.After(10 * time.Second):
			h.t.Error("ServeStdio did not return after stdin closed")
		}
	})
	c := &msgClient{h: h, in: make(chan []byte, 64)}
	var wmu sync.Mutex
	c.send = func(b []byte) error {
		wmu.Lock()
		defer wmu.Unlock()
		_, err := inW.Write(append(append([]byte(nil), b...), '\n'))
		return err
	}
	go func() {
		defer close(c.in)
		sc := bufio.NewScanner(outR)
		sc.Buffer(make([]byte, 64<<10), 8<<20)
		for sc.Scan() {
			c.in <- append([]byte(nil), sc.Bytes()...)
		}
	}()
	return c, c.initialize()
}
