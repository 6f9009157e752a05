// Acceptance of the reverse route (design §4): SEP-2663 (2026-07-28) clients through
// taskbridge in front of a real 2025-11-25 server (legacy-server.mjs on TS SDK v1 1.32.2).
package interop

import (
	"bufio"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/taskbridge/taskbridge/bridge"
	"github.com/taskbridge/taskbridge/internal/testenv"
	"github.com/taskbridge/taskbridge/legacy"
	"github.com/taskbridge/taskbridge/store/sqlite"
)

// startNodeServer runs a Node MCP server script from interop/ and returns the URL it
// prints on its first stdout line ("listening URL" or a bare URL). It is stopped at cleanup.
func startNodeServer(t *testing.T, node, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command(node, args...)
	cmd.Dir = dir
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %v: %v", args, err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("%v stderr:\n%s", args, stderr.String())
		}
	})
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if l := sc.Text(); strings.Contains(l, "http://") {
				lines <- l
				break
			}
		}
		for sc.Scan() {
		}
	}()
	select {
	case l := <-lines:
		return l[strings.Index(l, "http://"):]
	case <-time.After(30 * time.Second):
		t.Fatalf("%v printed no URL; stderr:\n%s", args, stderr.String())
	}
	return ""
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
	mux := http.NewServeMux()
	mux.Handle("/mcp", b.Handler())
	srv := httptest.NewServer(mux)
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := b.Close(cctx); err != nil {
			t.Errorf("Reverse.Close: %v", err)
		}
	})
	e.url = srv.URL + "/mcp"
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
