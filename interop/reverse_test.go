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
