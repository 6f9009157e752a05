// Acceptance (issue 4, item 2, second half): with the TS SDK v1 client through a real
// "taskbridge serve --upstream URL" in front of the legacy TS SDK v1 task server
// (legacy-server.mjs), the client's full task flow (create, poll, result, list, cancel)
// passes unchanged: same era on both sides means pass-through.
package interop

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/internal/testenv"
)

func TestLegacyClientPassThroughLegacyServer(t *testing.T) {
	node, dir := testenv.Node22(t), testenv.InteropDir(t)
	up := startNodeServer(t, node, dir, "legacy-server.mjs", "--port", "0")
	e := &env{node: node, dir: dir, url: serveBinary(t, up)}

	t.Run("poll", func(t *testing.T) { // create, tasks/get until terminal, tasks/result
		o := e.run(t, "poll")
		o.checkOK(t)
		if o.str("finalStatus") != "completed" || !strings.HasPrefix(o.text("result"), "long_job done") {
			t.Errorf("final %q, result %q", o.str("finalStatus"), o.text("result"))
		}
		if o.relatedTask("result") != o.str("taskId") {
			t.Errorf("result related-task %q, task %q", o.relatedTask("result"), o.str("taskId"))
		}
	})
	t.Run("stream", func(t *testing.T) { o := e.run(t, "stream"); o.checkOK(t) })
	t.Run("list", func(t *testing.T) {
		o := e.run(t, "list")
		o.checkOK(t)
		if b, _ := o.get("includesBoth").(bool); !b {
			t.Errorf("created %v, listed %v", o.get("createdIds"), o.get("listedIds"))
		}
	})
	t.Run("cancel", func(t *testing.T) {
		o := e.run(t, "cancel")
		o.checkOK(t)
		if o.str("afterStatus") != "cancelled" || o.code("secondCancelError") != -32602 {
			t.Errorf("after cancel %q, second cancel error %d", o.str("afterStatus"), o.code("secondCancelError"))
		}
	})
	t.Run("elicit", func(t *testing.T) { // the server's request rides the tasks/result stream
		o := e.run(t, "elicit")
		o.checkOK(t)
		if !strings.HasPrefix(o.str("resultText"), "Deleted") {
			t.Errorf("result %q", o.str("resultText"))
		}
	})
	t.Run("tool-error", func(t *testing.T) { o := e.run(t, "tool-error"); o.checkOK(t) })
	t.Run("protocol-error", func(t *testing.T) { o := e.run(t, "protocol-error"); o.checkOK(t) })
	t.Run("unknown", func(t *testing.T) { o := e.run(t, "unknown"); o.checkOK(t) })
	t.Run("sync", func(t *testing.T) {
		o := e.run(t, "sync")
		o.checkOK(t)
		if o.text("result") != "Hello, World!" {
			t.Errorf("result %q", o.text("result"))
		}
	})
}

// TestTSStdioClientPassThroughLegacyServer: "taskbridge stdio --upstream URL" detects the
// 2025-11-25 upstream too and passes the TS SDK v1 stdio client's task flows through.
// transports-client.mjs's own "basic" text check is written for the Go fixture ("Result:
// 42"), so the flows are asserted here against legacy-server.mjs's texts.
func TestTSStdioClientPassThroughLegacyServer(t *testing.T) {
	tb, _ := binaries(t)
	node, dir := testenv.Node22(t), testenv.InteropDir(t)
	up := startNodeServer(t, node, dir, "legacy-server.mjs", "--port", "0")
	argv, _ := json.Marshal([]string{tb, "stdio", "--upstream", up, "--poll-floor-ms", "100"})
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	line, stderr, err := nodeLine(ctx, node, dir, "transports-client.mjs", "--stdio", string(argv))
	o := gjson.Parse(line)
	if err != nil || o.Get("crash").Exists() {
		t.Fatalf("transports-client crashed (%v): %s\nstderr: %s", err, line, stderr)
	}
	if o.Get("transport").Str != "stdio" {
		t.Errorf("transport %q", o.Get("transport").Str)
	}
	if o.Get("flows.basic.finalStatus").Str != "completed" || o.Get("flows.basic.resultText").Str != "slow_compute done after 1s: 42" {
		t.Errorf("basic: %s", o.Get("flows.basic").Raw)
	}
	if o.Get("flows.elicit.resultText").Str != "Deleted a.txt" || o.Get("flows.elicit.elicitations").Int() != 1 {
		t.Errorf("elicit: %s", o.Get("flows.elicit").Raw)
	}
	if o.Get("flows.cancel.afterStatus").Str != "cancelled" {
		t.Errorf("cancel: %s", o.Get("flows.cancel").Raw)
	}
}
