package interop

// A 2025-11-25 stdio server as the child of "taskbridge serve --upstream-cmd" (issue 15
// acceptance 4): legacy-stdio-server.mjs (TS SDK v1 StdioServerTransport, the tools of
// legacy-server.mjs). The bridge detects the child's era as for a URL (server/discover
// refused, initialize answered), passes 2025-11-25 clients through to it and translates
// for 2026-07-28 clients (reverse route). Every call runs in the child exactly once.

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/taskbridge/taskbridge/internal/testenv"
)

func TestLegacyStdioChildBehindBridge(t *testing.T) {
	node, dir := testenv.Node22(t), testenv.InteropDir(t)
	statsFile := filepath.Join(t.TempDir(), "stats.json")
	cmd := strings.Join([]string{strconv.Quote(node), strconv.Quote(filepath.Join(dir, "legacy-stdio-server.mjs")),
		"--stats-file", strconv.Quote(statsFile)}, " ")
	bridge := serveWith(t, []string{"--upstream-cmd", cmd})
	e := &env{node: node, dir: dir, url: bridge}

	t.Run("legacy/poll", func(t *testing.T) {
		o := e.run(t, "poll", "--tool", "long_job", "--args", `{"seconds":1}`)
		o.checkOK(t)
		if got := o.text("result"); got != "long_job done after 1s: 42" {
			t.Errorf("result %q", got)
		}
	})
	t.Run("legacy/elicit", func(t *testing.T) {
		o := e.run(t, "elicit", "--tool", "confirm_delete", "--args", `{"filename":"a.txt"}`)
		o.checkOK(t)
		if got := o.str("resultText"); got != "Deleted a.txt" {
			t.Errorf("result %q", got)
		}
	})
	t.Run("legacy/cancel", func(t *testing.T) {
		e.run(t, "cancel", "--tool", "slow_compute", "--args", `{"seconds":30}`).checkOK(t)
	})
	t.Run("modern/settle", func(t *testing.T) {
		out := runExtTasks(t, bridge, "--tool", "long_job", "--args", `{"seconds":1}`)
		if out.Get("outcome.status").Str != "completed" || out.Get("resultText").Str != "long_job done after 1s: 42" {
			t.Errorf("ext-tasks: %s", out.Raw)
		}
	})
	t.Run("modern/elicit", func(t *testing.T) {
		out := runExtTasks(t, bridge, "--tool", "confirm_delete", "--args", `{"filename":"b.txt"}`, "--answer", `{"confirm":true}`)
		if out.Get("outcome.status").Str != "completed" || out.Get("resultText").Str != "Deleted b.txt" {
			t.Errorf("ext-tasks: %s", out.Raw)
		}
		if n := len(out.Get("inputRequests").Array()); n != 1 {
			t.Errorf("%d input requests, want the one elicitation: %s", n, out.Get("inputRequests").Raw)
		}
	})
	t.Run("modern/cancel", func(t *testing.T) {
		out := runExtTasks(t, bridge, "--tool", "slow_compute", "--args", `{"seconds":30}`, "--cancel")
		if got := out.Get("outcome.status").Str; got != "cancelled" {
			t.Errorf("outcome %q: %s", got, out.Raw)
		}
	})
	// Each call ran once in the child: one per client era and tool.
	want := map[string]int{"long_job": 2, "confirm_delete": 2, "slow_compute": 2}
	var got map[string]int
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		b, _ := os.ReadFile(statsFile)
		got = nil
		_ = json.Unmarshal(b, &got)
		if same(got, want) || time.Now().After(deadline) {
			break
		}
	}
	if !same(got, want) {
		t.Errorf("executions in the child %v, want %v", got, want)
	}
}

func same(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range b {
		if a[k] != v {
			return false
		}
	}
	return true
}
