package bridge_test

// The door tests' environment: the forward route (a copy of bridge/forward's test env,
// trimmed to what the door tests use) behind the front door.

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

	"github.com/taskbridge/taskbridge/bridge"
	"github.com/taskbridge/taskbridge/bridge/forward"
	"github.com/taskbridge/taskbridge/internal/auth"
	"github.com/taskbridge/taskbridge/internal/fixture"
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
	up := httptest.NewServer(fx)
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

func raw(s string) json.RawMessage { return json.RawMessage(s) }

func id(taskID string) map[string]string { return map[string]string{"taskId": taskID} }

// mustDoor is the front door in front of an engine (logger off unless cfg has one).
func mustDoor(t testing.TB, cfg bridge.DoorConfig, e bridge.Engine) *bridge.Door {
	t.Helper()
	d, err := bridge.NewDoor(cfg, e)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// API keys of the door tests' principals: alice and bob share tenant acme, eve is another
// tenant's alice.
const (
	aliceKey = "alice-key-7f3a9c2e41d8"
	bobKey   = "bob-key-0c9e8d7f6a5b4"
	eveKey   = "eve-key-other-tenant-01"
)

// withAuth turns on API-key authentication at the door.
func withAuth(t testing.TB) envOpt {
	a, err := auth.NewAPIKeys([]auth.APIKey{
		{Key: aliceKey, Principal: "alice", Tenant: "acme"},
		{Key: bobKey, Principal: "bob", Tenant: "acme"},
		{Key: eveKey, Principal: "alice", Tenant: "other"}, // same name, other tenant
	})
	if err != nil {
		t.Fatal(err)
	}
	return func(c *envConfig, _ *fixture.Options) { c.Door.Auth = a }
}

// authOf is the door tests' authenticator (withAuth's).
func authOf(t *testing.T) auth.Authenticator {
	var c envConfig
	withAuth(t)(&c, nil)
	return c.Door.Auth
}

// keyed opens an initialized session under an API key.
func (e *env) keyed(key string) *legacyclient.Client {
	e.t.Helper()
	c := legacyclient.New(e.url)
	c.Header = http.Header{"Authorization": {"Bearer " + key}}
	if _, err := c.Initialize(context.Background()); err != nil {
		e.t.Fatalf("initialize as %s: %v", key[:5], err)
	}
	return c
}

// createTask starts a task of tool and returns its id.
func createTask(t testing.TB, c *legacyclient.Client, tool string, args map[string]any) string {
	t.Helper()
	res := call(t.(*testing.T), c, "tools/call", map[string]any{"name": tool, "arguments": args, "task": map[string]any{}})
	id := res.Get("task.taskId").Str
	if id == "" {
		t.Fatalf("tools/call %s: no task id in %s", tool, res.Raw)
	}
	return id
}
