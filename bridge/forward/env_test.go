package forward_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/tidwall/gjson"

	"strings"

	"github.com/taskbridge/taskbridge/bridge"
	"github.com/taskbridge/taskbridge/bridge/forward"
	"github.com/taskbridge/taskbridge/internal/fixture"
	"github.com/taskbridge/taskbridge/internal/jsonrpc"
	"github.com/taskbridge/taskbridge/internal/legacyclient"
	"github.com/taskbridge/taskbridge/sep2663"
	"github.com/taskbridge/taskbridge/store"
	"github.com/taskbridge/taskbridge/store/sqlite"
)

// env is one fixture upstream and one bridge behind its front door on loopback, with a
// real SQLite store.
type env struct {
	t      testing.TB
	fx     *fixture.Server
	upURL  string
	st     store.Store
	dbPath string
	b      *bridge.Forward
	gate   *bridge.Gate
	door   *bridge.Door
	url    string
}

// envConfig is what a test env configures: the bridge, the front door in front of it, and
// the work gate's policy and drain state (the gate's clock and metrics are the bridge's).
type envConfig struct {
	forward.Config
	Door     bridge.DoorConfig
	Policy   bridge.Policy
	Draining func() bool
	// WrapUpstream, when set, wraps the fixture upstream's handler (to watch what it gets).
	WrapUpstream func(http.Handler) http.Handler
}

type envOpt func(*envConfig, *fixture.Options)

func newEnv(t testing.TB, opts ...envOpt) *env {
	t.Helper()
	fo := fixture.Options{Scale: 0.1, PollIntervalMs: 100}
	cfg := envConfig{Config: forward.Config{Logger: zerolog.Nop(), PollFloorMs: 100, Heartbeat: 200 * time.Millisecond}}
	for _, o := range opts {
		o(&cfg, &fo)
	}
	fx := fixture.New(fo)
	var h http.Handler = fx
	if cfg.WrapUpstream != nil {
		h = cfg.WrapUpstream(h)
	}
	up := httptest.NewServer(h)
	t.Cleanup(func() { up.Close(); fx.Close() })
	e := &env{t: t, fx: fx, upURL: up.URL + "/mcp", dbPath: filepath.Join(t.TempDir(), "tb.db")}
	e.start(cfg)
	return e
}

// start runs a bridge on the env's store file (again, after a restart).
func (e *env) start(cfg envConfig) {
	t := e.t
	ctx := context.Background()
	st, err := sqlite.Open(ctx, e.dbPath)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Store = st
	cfg.Upstream = sep2663.NewClient(sep2663.ClientOptions{URL: e.upURL})
	if cfg.PollFloorMs == 0 {
		cfg.PollFloorMs = 100
	}
	if cfg.Heartbeat == 0 {
		cfg.Heartbeat = 200 * time.Millisecond
	}
	e.gate = bridge.NewGate(bridge.GateConfig{Policy: cfg.Policy, Draining: cfg.Draining, Now: cfg.Now, Metrics: cfg.Metrics})
	cfg.Gate = e.gate
	b, err := bridge.NewForward(cfg.Config)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(ctx); err != nil {
		t.Fatal(err)
	}
	e.door = mustDoor(t, cfg.Door, b)
	mux := http.NewServeMux()
	mux.Handle("/mcp", e.door)
	srv := httptest.NewServer(mux)
	e.st, e.b, e.url = st, b, srv.URL+"/mcp"
	t.Cleanup(func() {
		srv.Close()
		b.Close(context.Background())
		st.Close()
	})
}

// client opens an initialized legacy session.
func (e *env) client() *legacyclient.Client {
	e.t.Helper()
	c := legacyclient.New(e.url)
	if _, err := c.Initialize(context.Background()); err != nil {
		e.t.Fatalf("initialize: %v", err)
	}
	return c
}

func call(t *testing.T, c *legacyclient.Client, method string, params any) gjson.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := c.Call(ctx, method, params)
	if err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	return gjson.ParseBytes(res)
}

func callErr(t *testing.T, c *legacyclient.Client, method string, params any) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := c.Call(ctx, method, params)
	if err == nil {
		t.Fatalf("%s: want an error, got success", method)
	}
	return err
}

func raw(s string) json.RawMessage { return json.RawMessage(s) }

func id(taskID string) map[string]string { return map[string]string{"taskId": taskID} }

// clientT is a legacy test client.
type clientT struct{ *legacyclient.Client }

func newClientT(url string) *clientT { return &clientT{legacyclient.New(url)} }

// newEnvAt runs a bridge in front of an arbitrary upstream URL (e.g. a closed port).
func newEnvAt(t *testing.T, upstreamURL string) *env {
	e := &env{t: t, upURL: upstreamURL, dbPath: filepath.Join(t.TempDir(), "tb.db")}
	e.start(envConfig{Config: forward.Config{Logger: zerolog.Nop()}})
	return e
}

// mustDoor is the front door in front of an engine (logger off unless cfg has one).
func mustDoor(t testing.TB, cfg bridge.DoorConfig, e bridge.Engine) *bridge.Door {
	t.Helper()
	d, err := bridge.NewDoor(cfg, e)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// fixtureProtocolError is the JSON-RPC error the fixture's protocol_error_job ends with.
func fixtureProtocolError(t *testing.T, _ *env) *jsonrpc.Error {
	return jsonrpc.NewError(jsonrpc.CodeInternalError, "Internal error: simulated protocol failure")
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
