package interop

// mcp-go v1.2.1's task server as the upstream of "taskbridge serve" (issue 15 acceptance
// 1): in its default dual-era mode (discover answered, tasks only on its 2025-11-25 face)
// and in legacy-only mode (discover refused with -32022 listing only 2025 versions). The
// era router probes both faces: 2025-11-25 clients are passed through to the legacy face,
// 2026-07-28 clients get reverse translation to it, so both eras keep the server's tasks.

import (
	"testing"

	"github.com/taskbridge/taskbridge/internal/testenv"
)

func TestMcpgoServerBehindBridge(t *testing.T) {
	srvBin, _ := mcpgoBinaries(t)
	node, dir := testenv.Node22(t), testenv.InteropDir(t)
	for _, mode := range []string{"dual", "legacy"} {
		t.Run(mode, func(t *testing.T) {
			up := startMcpgoServer(t, srvBin, "-mode", mode, "-scale", "0.2")
			bridge := serveBinary(t, up)
			e := &env{node: node, dir: dir, url: bridge}
			t.Run("ts-v1/poll", func(t *testing.T) {
				o := e.run(t, "poll", "--tool", "slow_compute", "--args", `{"seconds":1}`)
				o.checkOK(t)
				if got := o.text("result"); got != "Computation default completed after 1s. Result: 42." {
					t.Errorf("result %q", got)
				}
				if o.relatedTask("result") != o.str("taskId") {
					t.Errorf("result related-task %q, task %q", o.relatedTask("result"), o.str("taskId"))
				}
			})
			t.Run("ts-v1/cancel", func(t *testing.T) {
				e.run(t, "cancel", "--tool", "slow_compute", "--args", `{"seconds":30}`).checkOK(t)
			})
			t.Run("ext-tasks/settle", func(t *testing.T) {
				out := runExtTasks(t, bridge, "--tool", "slow_compute", "--args", `{"seconds":1}`)
				if !out.Get("ok").Bool() {
					t.Errorf("ext-tasks: %s", out.Raw)
				}
				if got := out.Get("kind").Str; got != "task" {
					t.Errorf("kind %q, want task (%s)", got, out.Raw)
				}
				if got := out.Get("outcome.status").Str; got != "completed" {
					t.Errorf("outcome %q (%s)", got, out.Raw)
				}
			})
		})
	}
}
