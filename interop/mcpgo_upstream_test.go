package interop

// mcp-go v1.2.1's task server as the upstream of "taskbridge serve" (issue 15 acceptance
// 1): in its default dual-era mode (discover answered, tasks only on its 2025-11-25 face)
// and in legacy-only mode (discover refused with -32022 listing only 2025 versions). The
// era router probes both faces: 2025-11-25 clients are passed through to the legacy face,
// 2026-07-28 clients get reverse translation to it, so both eras keep the server's tasks.

import (
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/tidwall/gjson"

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

// TestMcpgoAskClientBehindBridge (issue 15 acceptance 3): mcp-go's ask_client task sends
// sampling/createMessage, roots/list and elicitation/create on the upstream session's
// standalone GET stream, with no related-task _meta, and waits for each answer. The bridge
// holds that stream open: the modern client (ext-tasks, reverse route) gets the three as
// inputRequests, the 2025-11-25 client (mcp-go's own, legacy pass-through) as requests on
// its GET stream; the answers reach the upstream and the task completes.
func TestMcpgoAskClientBehindBridge(t *testing.T) {
	srvBin, cliBin := mcpgoBinaries(t)
	for _, mode := range []string{"dual", "legacy"} {
		t.Run(mode, func(t *testing.T) {
			counts := filepath.Join(t.TempDir(), "counts.json")
			up := startMcpgoServer(t, srvBin, "-mode", mode, "-scale", "0.2", "-count-file", counts)
			bridge := serveBinary(t, up)
			t.Run("modern-client", func(t *testing.T) {
				start := time.Now()
				out := runExtTasks(t, bridge, "--tool", "ask_client", "--args", `{"timeout":20}`, "--answer", `{"confirm":true}`,
					"--caps", `{"elicitation":{"form":{}},"sampling":{},"roots":{}}`) // ask_client asks for all three
				t.Logf("ask_client through the reverse route took %s", time.Since(start).Round(time.Millisecond))
				if got := out.Get("outcome.status").Str; got != "completed" {
					t.Fatalf("outcome %q, want completed: %s", got, out.Raw)
				}
				var kinds []string
				for _, r := range out.Get("inputRequests").Array() {
					kinds = append(kinds, r.Get("kind").Str)
				}
				if want := []string{"sampling", "roots", "elicitation"}; !slices.Equal(kinds, want) {
					t.Errorf("inputRequests %v, want %v", kinds, want)
				}
				sc := out.Get("outcome.result.structuredContent")
				if got := sc.Get("sampling.text").Str; got != "pong from ext-tasks-client" {
					t.Errorf("the upstream got sampling answer %q (%s)", got, sc.Raw)
				}
				if got := sc.Get("elicitation.action").Str; got != "accept" {
					t.Errorf("the upstream got elicitation action %q (%s)", got, sc.Raw)
				}
			})
			t.Run("legacy-client", func(t *testing.T) {
				start := time.Now()
				o := runMcpgo(t, cliBin, "-url", bridge, "-flow", "ask_client")
				t.Logf("ask_client through the legacy pass-through took %s", time.Since(start).Round(time.Millisecond))
				wantStr(t, o, "finalStatus", "completed")
				wantTrue(t, o, "resultRelatedTaskMatches")
				checkAskClient(t, o, "http", "result", "GET")
			})
			wantRuns(t, counts, "ask_client", mcpgoCounts{2, 2, 0})
		})
	}
}

// TestProbeMcpgoFaces: "taskbridge probe" in front of mcp-go shows both faces (dual: a
// 2026-07-28 face without the tasks extension and a 2025-11-25 face with tasks; legacy-only:
// the 2025-11-25 face alone) and the route per client era.
func TestProbeMcpgoFaces(t *testing.T) {
	srvBin, _ := mcpgoBinaries(t)
	bin, _ := binaries(t)
	for _, mode := range []string{"dual", "legacy"} {
		t.Run(mode, func(t *testing.T) {
			up := startMcpgoServer(t, srvBin, "-mode", mode)
			out, err := exec.Command(bin, "probe", up, "--json").Output()
			if err != nil {
				t.Fatalf("probe: %v\n%s", err, out)
			}
			r := gjson.ParseBytes(out)
			if got := r.Get("faces.modern").Exists() && r.Get("faces.modern").Type != gjson.Null; got != (mode == "dual") {
				t.Errorf("modern face present %v in %s mode: %s", got, mode, r.Get("faces").Raw)
			}
			if mode == "dual" && r.Get("faces.modern.tasks").Bool() {
				t.Errorf("mcp-go's modern face shown with tasks: %s", r.Get("faces.modern").Raw)
			}
			if !r.Get("faces.legacy.tasks").Bool() {
				t.Errorf("mcp-go's 2025-11-25 face shown without tasks: %s", r.Get("faces.legacy").Raw)
			}
			if got := r.Get("routes.client-2025-11-25.route").Str + "/" + r.Get("routes.client-2026-07-28.route").Str; got != "legacy-passthrough/reverse" {
				t.Errorf("routes %s, want legacy-passthrough/reverse", got)
			}
			for _, d := range r.Get("decisions").Array() {
				if d.Get("tool").Str == "slow_compute" && d.Get("client-2026-07-28.task.decision").Str != "translate" {
					t.Errorf("slow_compute for a 2026-07-28 client: %s", d.Raw)
				}
			}
		})
	}
}
