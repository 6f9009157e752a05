// Acceptance (issue 5, item 3): on one running taskbridge ("taskbridge serve --upstream"
// in front of legacy-server.mjs, a 2025-11-25-only TS SDK v1 task server), a 2025-11-25 TS
// SDK v1 client (passed through) and a 2026-07-28 ext-tasks client (reverse-translated) use
// the same /mcp at the same time, and both complete their task flows.
package interop

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/internal/testenv"
)

func TestBothErasOneEndpointConcurrently(t *testing.T) {
	node, dir := testenv.Node22(t), testenv.InteropDir(t)
	up := startNodeServer(t, node, dir, "legacy-server.mjs", "--port", "0")
	url := serveBinary(t, up)

	type run struct {
		name string
		args []string
		line string
		errs string
		err  error
	}
	runs := []*run{
		// 2025-11-25 clients (TS SDK v1): pass-through.
		{name: "v1 poll", args: []string{"legacy-client.mjs", "--url", url, "--flow", "poll", "--timeout", "45000"}},
		{name: "v1 elicit", args: []string{"legacy-client.mjs", "--url", url, "--flow", "elicit", "--timeout", "45000"}},
		{name: "v1 list", args: []string{"legacy-client.mjs", "--url", url, "--flow", "list", "--timeout", "45000"}},
		{name: "v1 cancel", args: []string{"legacy-client.mjs", "--url", url, "--flow", "cancel", "--timeout", "45000"}},
		// 2026-07-28 clients (ext-tasks on client 2.4.0): reverse translation.
		{name: "v2 elicit", args: []string{"ext-tasks-client.mjs", "--url", url, "--tool", "confirm_delete",
			"--args", `{"filename":"b.txt"}`, "--answer", `{"confirm":true}`}},
		{name: "v2 task", args: []string{"ext-tasks-client.mjs", "--url", url, "--tool", "slow_compute",
			"--args", `{"seconds":1}`}},
		{name: "v2 cancel", args: []string{"ext-tasks-client.mjs", "--url", url, "--tool", "slow_compute",
			"--args", `{"seconds":30}`, "--cancel"}},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for _, r := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.line, r.errs, r.err = nodeLine(ctx, node, dir, r.args...)
		}()
	}
	wg.Wait()

	out := map[string]gjson.Result{}
	for _, r := range runs {
		o := gjson.Parse(r.line)
		if r.err != nil || o.Get("crash").Exists() {
			t.Errorf("%s crashed (%v): %s\nstderr: %s", r.name, r.err, r.line, r.errs)
			continue
		}
		if !o.Get("ok").Bool() {
			t.Errorf("%s: client checks failed: %s\nline: %.2000s", r.name, o.Get("failures").Raw, r.line)
		}
		out[r.name] = o
	}

	// What each user notices.
	for _, name := range []string{"v1 poll", "v1 elicit", "v1 list", "v1 cancel"} {
		if v := out[name].Get("protocolVersion").Str; out[name].Exists() && v != "2025-11-25" {
			t.Errorf("%s negotiated %q, want 2025-11-25", name, v)
		}
	}
	if o := out["v1 elicit"]; o.Exists() && !strings.HasPrefix(o.Get("resultText").Str, "Deleted") {
		t.Errorf("v1 elicit: result %q, want Deleted…", o.Get("resultText").Str)
	}
	if o := out["v1 list"]; o.Exists() && !o.Get("includesBoth").Bool() {
		t.Errorf("v1 list: created %s, listed %s", o.Get("createdIds").Raw, o.Get("listedIds").Raw)
	}
	if o := out["v1 cancel"]; o.Exists() && o.Get("afterStatus").Str != "cancelled" {
		t.Errorf("v1 cancel: status after cancel %q", o.Get("afterStatus").Str)
	}
	for _, name := range []string{"v2 elicit", "v2 task", "v2 cancel"} {
		if o := out[name]; o.Exists() && (o.Get("protocolEra").Str != "modern" || o.Get("kind").Str != "task") {
			t.Errorf("%s: era %q kind %q, want a modern task", name, o.Get("protocolEra").Str, o.Get("kind").Str)
		}
	}
	if o := out["v2 elicit"]; o.Exists() {
		if txt := o.Get("resultText").Str; txt != "Deleted b.txt" {
			t.Errorf("v2 elicit: result %q, want Deleted b.txt", txt)
		}
		if n := len(o.Get("inputRequests").Array()); n != 1 {
			t.Errorf("v2 elicit: %d input requests, want 1", n)
		}
	}
	if o := out["v2 task"]; o.Exists() && !strings.HasPrefix(o.Get("resultText").Str, "slow_compute done") {
		t.Errorf("v2 task: result %q", o.Get("resultText").Str)
	}
	if o := out["v2 cancel"]; o.Exists() && o.Get("outcome.status").Str != "cancelled" {
		t.Errorf("v2 cancel: outcome %s", o.Get("outcome").Raw)
	}
}
