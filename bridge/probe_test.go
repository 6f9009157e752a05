package bridge_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/taskbridge/taskbridge/bridge"
	"github.com/taskbridge/taskbridge/internal/fixture"
	"github.com/taskbridge/taskbridge/legacy"
	"github.com/taskbridge/taskbridge/sep2663"
)

func probe(t *testing.T, h http.Handler) {
	t.Helper()
	hs := httptest.NewServer(h)
	t.Cleanup(hs.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	shape, err := bridge.Probe(ctx, bridge.ProbeClients{
		Modern: sep2663.NewClient(sep2663.ClientOptions{URL: hs.URL}),
		Legacy: legacy.NewClient(legacy.ClientOptions{URL: hs.URL}),
	})
	if err != nil {
		t.Fatalf("probe: %v", err)
	}
	if shape.Modern == nil || shape.Legacy != nil {
		t.Fatalf("shape: modern %v, legacy %v; want the modern face only", shape.Modern, shape.Legacy)
	}
}

// TestProbeSendsNoInitializeToAModernOnlyUpstream: an upstream whose discover lists
// 2026-07-28 alone gets no 2025-11-25 initialize from the probe, even without the tasks
// extension: it said it speaks no 2025 revision, and a 2026-07-28 client sends
// MCP-Protocol-Version and _meta on every POST (conformance client scenario
// request-metadata).
func TestProbeSendsNoInitializeToAModernOnlyUpstream(t *testing.T) {
	fx := fixture.New(fixture.Options{NoTasksExtension: true})
	t.Cleanup(fx.Close)
	probe(t, fx)
	if n := fx.Stats().Methods["initialize"]; n != 0 {
		t.Errorf("the probe sent %d initialize to a 2026-07-28-only upstream", n)
	}
}

// TestProbeRetriesDiscoverRefusedWithItsOwnVersion: a discover refused with -32022 whose
// data.supported lists 2026-07-28 (the version it was sent with) is asked once more, so
// the capabilities are read instead of left unknown (conformance request-metadata:
// "client retries with a supported version when first choice is rejected").
func TestProbeRetriesDiscoverRefusedWithItsOwnVersion(t *testing.T) {
	fx := fixture.New(fixture.Options{})
	t.Cleanup(fx.Close)
	var refused atomic.Bool
	probe(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Mcp-Method") == "server/discover" && refused.CompareAndSwap(false, true) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			w.Write([]byte(`{"jsonrpc":"2.0","id":1,"error":{"code":-32022,"message":"Unsupported protocol version","data":{"supported":["2026-07-28"],"requested":"2026-07-28"}}}`))
			return
		}
		fx.ServeHTTP(w, r)
	}))
	if !refused.Load() {
		t.Fatal("the refusal was never sent")
	}
	if n := fx.Stats().Methods["server/discover"]; n != 1 {
		t.Errorf("discover reached the upstream %d times after the refusal, want 1 retry", n)
	}
	if n := fx.Stats().Methods["tools/list"]; n == 0 {
		t.Error("no tools/list: the capabilities stayed unknown")
	}
}
