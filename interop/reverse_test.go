// Acceptance of the reverse route (design §4): SEP-2663 (2026-07-28) clients through
// taskbridge in front of a real 2025-11-25 server (legacy-server.mjs on TS SDK v1 1.32.2).
package interop

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/rs/zerolog"

	"github.com/taskbridge/taskbridge/bridge"
	"github.com/taskbridge/taskbridge/internal/testenv"
	"github.com/taskbridge/taskbridge/legacy"
	"github.com/taskbridge/taskbridge/store/sqlite"
)

// startNodeServer runs an interop script (see testenv.StartNodeServer) and returns its URL.
func startNodeServer(t *testing.T, _, _ string, args ...string) string {
	return testenv.StartNodeServer(t, args...)
}

// reverseEnv is legacy-server.mjs and a Reverse bridge in front of it.
type reverseEnv struct {
	node, dir string
	upstream  string // legacy server endpoint
	url       string // the bridge's /mcp
	b         *bridge.Reverse
}

func newReverseEnv(t *testing.T, upstreamArgs ...string) *reverseEnv {
	t.Helper()
	e := &reverseEnv{node: testenv.Node22(t), dir: testenv.InteropDir(t)}
	if len(upstreamArgs) == 0 {
		upstreamArgs = []string{"legacy-server.mjs", "--port", "0"}
	}
	e.upstream = startNodeServer(t, e.node, e.dir, upstreamArgs...)
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "bridge.db"))
	if err != nil {
		t.Fatalf("sqlite.Open: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	b, err := bridge.NewReverse(bridge.ReverseConfig{
		Upstream:    legacy.NewClient(legacy.ClientOptions{URL: e.upstream}),
		Store:       st,
		Logger:      zerolog.Nop(),
		PollFloorMs: 100,
	})
	if err != nil {
		t.Fatalf("NewReverse: %v", err)
	}
	if err := b.Start(ctx); err != nil {
		t.Fatalf("Reverse.Start: %v", err)
	}
	e.b = b
	e.url = serveBridge(t, b)
	return e
}

// TestReverseConformance runs the official conformance suite against taskbridge in front
// of the TS SDK v1 legacy server, one scenario per CLI run, and fails on a non-zero exit,
// on any FAILURE or WARNING check, and on a summary line reporting failures (the suite
// also validates every message against the 2026-07-28 schema).
func TestReverseConformance(t *testing.T) {
	e := newReverseEnv(t)
	testenv.RunConformance(t, e.url, testenv.TasksScenarios)
}

// TestReverseConformanceMultiRound runs the suite's multi-round MRTR scenario against the
// reverse route (issue 16 item 4): each input_required round carries a requestState of its
// own, and the retry with the latest one completes the call. legacy-server.mjs has the
// scenario's tool (two elicitations on one tools/call).
func TestReverseConformanceMultiRound(t *testing.T) {
	e := newReverseEnv(t)
	testenv.RunConformance(t, e.url, []string{"input-required-result-multi-round"})
}

// TestReverseConformanceBase runs 2026-07-28 base server scenarios of the suite against the
// reverse route (issue 16 acceptance 2, in part): server-stateless (with the suite's
// test_missing_capability tool in legacy-server.mjs: -32021 for undeclared sampling, item 6;
// no listChanged/subscribe advertised without subscriptions/listen, item 8; initialize with
// 2026-07-28 headers is 404/-32601, item 5) and http-header-validation.
func TestReverseConformanceBase(t *testing.T) {
	e := newReverseEnv(t)
	testenv.RunConformance(t, e.url, []string{"server-stateless", "http-header-validation"})
}
