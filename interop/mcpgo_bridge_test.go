// The forward route with a real mcp-go v1.2.1 client: mcpgo-client (MCP 2025-11-25 tasks)
// through today's "taskbridge serve" (built from this tree) and through "taskbridge stdio",
// both in front of the Go SEP-2663 fixture (internal/fixture, in-process). Issue 15 will
// change how the bridge picks routes; these tests pin what a user of mcp-go's client sees
// on the forward route now.
package interop

import (
	"encoding/json"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/internal/fixture"
)

// bridgeFlow is one mcpgo-client flow through the bridge, checked against the fixture's
// answers translated to 2025-11-25 (the same texts interop_test.go asserts for TS SDK v1).
type bridgeFlow struct {
	name  string
	args  []string
	check func(t *testing.T, o gjson.Result, transport string, fx *fixture.Server)
}

// wantExecutions asserts the fixture ran tool exactly n times.
func wantExecutions(t *testing.T, fx *fixture.Server, tool string, n int) {
	t.Helper()
	if got := fx.Stats().Executions[tool]; got != n {
		t.Errorf("upstream ran %s %d times, want %d", tool, got, n)
	}
}

var mcpgoBridgeFlows = []bridgeFlow{
	{name: "sync", check: func(t *testing.T, o gjson.Result, _ string, fx *fixture.Server) {
		wantStr(t, o, "resultText", "Hello, World!")
		wantExecutions(t, fx, "greet", 1)
	}},
	{name: "create_poll_result", check: func(t *testing.T, o gjson.Result, _ string, fx *fixture.Server) {
		wantStr(t, o, "createdStatus", "working")
		wantStr(t, o, "finalStatus", "completed")
		wantStr(t, o, "resultText", "Computation mcpgo completed after 1s. Result: 42.")
		wantTrue(t, o, "resultRelatedTaskMatches")
		if id := o.Get("taskId").Str; !bridgeTaskID.MatchString(id) {
			t.Errorf("task id %q is not a bridge id", id)
		}
		wantExecutions(t, fx, "slow_compute", 1)
	}},
	{name: "list", check: func(t *testing.T, o gjson.Result, _ string, fx *fixture.Server) {
		wantTrue(t, o, "includesAll")
		if n := len(o.Get("listedIds").Array()); n != 3 {
			t.Errorf("tasks/list returned %d tasks, want this session's 3", n)
		}
		wantExecutions(t, fx, "slow_compute", 3)
	}},
	{name: "cancel", check: func(t *testing.T, o gjson.Result, _ string, fx *fixture.Server) {
		wantStr(t, o, "cancelStatus", "cancelled")
		wantStr(t, o, "afterStatus", "cancelled")
		wantInt(t, o, "secondCancelError.code", -32602)
		if n := fx.Stats().Cancels; n != 1 {
			t.Errorf("upstream tasks/cancel count %d, want 1", n)
		}
	}},
	{name: "tool_error", check: func(t *testing.T, o gjson.Result, _ string, fx *fixture.Server) {
		wantStr(t, o, "finalStatus", "failed")
		wantTrue(t, o, "resultIsError")
		wantStr(t, o, "resultText", mcpgoToolErrorText)
		wantTrue(t, o, "resultRelatedTaskMatches")
		wantExecutions(t, fx, "failing_job", 1)
	}},
	{name: "protocol_error", check: func(t *testing.T, o gjson.Result, _ string, _ *fixture.Server) {
		wantStr(t, o, "finalStatus", "failed")
		wantInt(t, o, "resultError.code", fixtureProtocolErrorCode)
		wantStr(t, o, "resultError.message", fixtureProtocolErrorMessage)
	}},
	{name: "unknown_id", check: func(t *testing.T, o gjson.Result, _ string, _ *fixture.Server) {
		for _, k := range []string{"getTaskError", "taskResultError", "cancelTaskError"} {
			wantInt(t, o, k+".code", -32602)
		}
	}},
	{name: "elicit", check: func(t *testing.T, o gjson.Result, transport string, fx *fixture.Server) {
		// mcp-go's client only polls tasks/get; the elicitation must come to it unasked: over
		// HTTP on the standalone GET stream, with the related-task _meta of its task.
		wantStr(t, o, "finalStatus", "completed")
		wantStr(t, o, "resultText", "Deleted a.txt")
		if st := o.Get("statuses").Array(); len(st) == 0 || !slices.ContainsFunc(st, func(r gjson.Result) bool { return r.Str == "input_required" }) {
			t.Errorf("statuses %s, want input_required seen", o.Get("statuses").Raw)
		}
		reqs := o.Get("serverRequests").Array()
		if len(reqs) != 1 || reqs[0].Get("method").Str != "elicitation/create" ||
			reqs[0].Get(`params._meta.io\.modelcontextprotocol/related-task.taskId`).Str != o.Get("taskId").Str {
			t.Errorf("server requests %s, want one elicitation/create with the task's related-task", o.Get("serverRequests").Raw)
		}
		if transport == "http" {
			if got := wireMethods(o, "GET"); !slices.Equal(got, []string{"elicitation/create"}) {
				t.Errorf("on the GET stream: %v (wire %s)", got, o.Get("wire").Raw)
			}
		}
		wantExecutions(t, fx, "confirm_delete", 1)
	}},
	// mcp-go's default negotiation (no pinned version) tries server/discover first. Through
	// the bridge it still ends on 2025-11-25 (over HTTP its GET stream option forces that),
	// and its tasks work.
	{name: "create_poll_result", args: []string{"-version", ""}, check: func(t *testing.T, o gjson.Result, transport string, _ *fixture.Server) {
		t.Logf("mcp-go default negotiation over %s through the bridge: protocolVersion %s", transport, o.Get("protocolVersion").Str)
		wantStr(t, o, "protocolVersion", "2025-11-25")
		wantStr(t, o, "finalStatus", "completed")
		wantStr(t, o, "resultText", "Computation mcpgo completed after 1s. Result: 42.")
	}},
}

// TestMcpgoClientThroughBridge: every flow, over "taskbridge serve" (HTTP) and over
// "taskbridge stdio" (the client launches it), one fixture and one bridge per flow so the
// upstream's counters belong to that flow alone.
func TestMcpgoClientThroughBridge(t *testing.T) {
	_, cliBin := mcpgoBinaries(t)
	tb, _ := binaries(t)
	for _, transport := range []string{"http", "stdio"} {
		t.Run(transport, func(t *testing.T) {
			for _, f := range mcpgoBridgeFlows {
				name := f.name
				if len(f.args) > 0 {
					name += "/default-negotiation"
				}
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					fx := fixture.New(fixture.Options{Name: "mcpgo-upstream", Scale: 0.2})
					up := httptest.NewServer(fx)
					t.Cleanup(func() { up.Close(); fx.Close() })
					var target []string
					if transport == "http" {
						target = []string{"-url", serveBinary(t, up.URL+"/mcp", "--drain-quiet", "100ms")}
					} else {
						argv, _ := json.Marshal([]string{tb, "stdio", "--upstream", up.URL + "/mcp", "--poll-floor-ms", "100",
							"--store", "sqlite:" + filepath.Join(t.TempDir(), "tasks.db")})
						target = []string{"-stdio", string(argv)}
					}
					o := runMcpgo(t, cliBin, append(append(target, "-flow", f.name), f.args...)...)
					if len(f.args) == 0 {
						wantStr(t, o, "protocolVersion", "2025-11-25")
					}
					f.check(t, o, transport, fx)
				})
			}
		})
	}
}
