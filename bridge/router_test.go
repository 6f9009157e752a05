package bridge_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/taskbridge/taskbridge/bridge"
	"github.com/taskbridge/taskbridge/bridge/forward"
	"github.com/taskbridge/taskbridge/bridge/internal/sessions"
	"github.com/taskbridge/taskbridge/fallback"
	"github.com/taskbridge/taskbridge/internal/fixture"
	"github.com/taskbridge/taskbridge/legacy"
	"github.com/taskbridge/taskbridge/sep2663"
)

// swappable serves whichever upstream is current: the upstream "upgraded in place".
type swappable struct{ h atomic.Pointer[http.Handler] }

func (s *swappable) set(h http.Handler) { s.h.Store(&h) }

func (s *swappable) ServeHTTP(w http.ResponseWriter, r *http.Request) { (*s.h.Load()).ServeHTTP(w, r) }

// lockedBuffer is a log sink safe for the router's goroutine and the test.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }

// TestRouterFollowsTheUpstream: the era router serves a 2026-07-28 upstream by the forward
// route and the modern pass-through; when the upstream is replaced in place by a 2025-11-25
// server, readiness sees discover refused the legacy way (fallback.AnswerMismatch), the
// router probes again by itself and the door dispatches each client era to the new routes
// without a restart; the change is logged. An operator Reprobe with nothing changed
// changes nothing.
func TestRouterFollowsTheUpstream(t *testing.T) {
	fx := fixture.New(fixture.Options{Scale: 0.1, PollIntervalMs: 100})
	lu := &tableUpstream{tasks: map[string]*legacy.Task{}, done: map[string]chan struct{}{}}
	legacyFace := legacy.NewServer(legacy.Options{Store: sessions.New(openStore(t)), Handler: lu, ResumeWindow: -1})
	up := &swappable{}
	up.set(fx)
	srv := httptest.NewServer(up)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.CloseClientConnections()
		srv.Close()
		legacyFace.Close(ctx)
		fx.Close()
	})
	var logs lockedBuffer
	log := zerolog.New(&logs)
	st := openStore(t)
	g := bridge.NewGate(bridge.GateConfig{})
	var rt *bridge.Router
	observe := func(e fallback.Era) func(string, error) {
		return func(m string, err error) {
			if rt != nil {
				rt.Observe(e, m, err)
			}
		}
	}
	rt, err := bridge.NewRouter(bridge.RouterConfig{
		Forward: forward.Config{Store: st, Logger: log, PollFloorMs: 100, Gate: g, NoUpstreamPush: true,
			Upstream: sep2663.NewClient(sep2663.ClientOptions{URL: srv.URL, OnError: observe(fallback.EraModern)})},
		Reverse: bridge.ReverseConfig{Store: st, Logger: log, PollFloorMs: 100, Gate: g,
			Upstream: legacy.NewClient(legacy.ClientOptions{URL: srv.URL, OnError: observe(fallback.EraLegacy)})},
		Logger: log, Describe: "test", RetryMin: 50 * time.Millisecond, RetryMax: 200 * time.Millisecond,
		MismatchDebounce: 10 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	rt.Start()
	t.Cleanup(func() { rt.Close(context.Background()) })
	door := mustDoor(t, bridge.DoorConfig{Logger: zerolog.Nop()}, rt)
	mux := http.NewServeMux()
	mux.Handle("/mcp", door)
	front := httptest.NewServer(mux)
	t.Cleanup(front.Close)

	routes := func() string {
		_, r, ok := rt.Shape()
		if !ok {
			return ""
		}
		return string(r.Legacy.Face) + "/" + string(r.Modern.Face)
	}
	waitUntil(t, "the first probe", func() bool { return routes() != "" })
	if got := routes(); got != "2026-07-28/2026-07-28" {
		t.Fatalf("routes in front of a 2026-07-28 upstream: %s", got)
	}
	modernTools := func() string {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		res, err := sep2663.NewClient(sep2663.ClientOptions{URL: front.URL + "/mcp"}).Call(ctx, "tools/list", json.RawMessage(`{}`), sep2663.RequestMeta{}, nil)
		if err != nil {
			t.Fatalf("tools/list through the door: %v", err)
		}
		return string(res)
	}
	if got := modernTools(); !strings.Contains(got, "slow_compute") {
		t.Fatalf("modern tools/list in front of the fixture: %s", got)
	}

	rt.Reprobe("operator")
	time.Sleep(300 * time.Millisecond)
	if strings.Contains(logs.String(), "upstream changed") {
		t.Error("a re-probe of an unchanged upstream logged a change")
	}

	up.set(legacyFace) // upgraded (here: downgraded) in place
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := rt.CheckUpstream(ctx); err == nil {
		t.Fatal("readiness passed against a 2025-11-25 server on the recorded 2026-07-28 face")
	}
	waitUntil(t, "the routes to follow the upstream", func() bool { return routes() == "legacy/legacy" })
	if !strings.Contains(logs.String(), "upstream changed: routes chosen again") {
		t.Errorf("the change was not logged:\n%s", logs.String())
	}
	// The door now sends 2026-07-28 clients through the reverse route to the legacy tools.
	if got := modernTools(); !strings.Contains(got, `"long"`) {
		t.Errorf("modern tools/list after the change: %s", got)
	}
	if err := rt.CheckUpstream(ctx); err != nil {
		t.Errorf("readiness after the change: %v", err)
	}
}

func waitUntil(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(15 * time.Second); !ok(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}
