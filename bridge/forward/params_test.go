package forward_test

import (
	"strings"
	"testing"

	"github.com/taskbridge/taskbridge/internal/fixture"
	"github.com/taskbridge/taskbridge/internal/jsonrpc"
)

// withInvalidHeaderTool gives the fixture its bad_header_tool.
func withInvalidHeaderTool(_ *envConfig, fo *fixture.Options) { fo.InvalidHeaderTool = true }

// TestParamHeaderToolThroughForward (issue 16 item 1, acceptance 3): a legacy client calls
// the fixture's region_lookup, which rejects any call without a matching Mcp-Param-Region
// (-32020), synchronously and as a task, with and without listing the tools first; the
// bridge mirrors the argument (a non-ASCII one in the Base64 form).
func TestParamHeaderToolThroughForward(t *testing.T) {
	e := newEnv(t)
	c := e.client()
	// No tools/list first: the bridge lists the upstream's tools itself.
	res := call(t, c, "tools/call", raw(`{"name":"region_lookup","arguments":{"region":"Zürich","query":"fondue"}}`))
	if got := res.Get("content.0.text").Str; got != `Lookup of "fondue" in Zürich done.` {
		t.Errorf("sync result = %s", res.Raw)
	}
	created := call(t, c, "tools/call", raw(`{"name":"region_lookup","arguments":{"region":"us-west1","query":"q"},"task":{}}`))
	tid := created.Get("task.taskId").Str
	if tid == "" {
		t.Fatalf("CreateTaskResult = %s", created.Raw)
	}
	res = call(t, c, "tasks/result", id(tid))
	if got := res.Get("content.0.text").Str; got != `Lookup of "q" in us-west1 done.` {
		t.Errorf("task result = %s", res.Raw)
	}
	if n := e.fx.Stats().Executions["region_lookup"]; n != 2 {
		t.Errorf("executions = %d, want 2", n)
	}
	// The header was on the first try of each: no call was rejected and resent.
	if n := e.fx.Stats().Methods["tools/call"]; n != 2 {
		t.Errorf("upstream tools/call = %d, want 2 (a -32020 and a resend are more)", n)
	}
}

// TestInvalidHeaderToolLeftOut: a tool whose x-mcp-header annotation is invalid is absent
// from the legacy client's tools/list, and a call to it is refused without reaching the
// upstream; the other tools stay.
func TestInvalidHeaderToolLeftOut(t *testing.T) {
	e := newEnv(t, withInvalidHeaderTool)
	c := e.client()
	list := call(t, c, "tools/list", raw(`{}`))
	names := map[string]bool{}
	for _, tl := range list.Get("tools").Array() {
		names[tl.Get("name").Str] = true
	}
	if names["bad_header_tool"] {
		t.Error("bad_header_tool is in the legacy tools/list")
	}
	if !names["region_lookup"] || !names["greet"] {
		t.Errorf("valid tools missing: %v", names)
	}
	err := callErr(t, c, "tools/call", raw(`{"name":"bad_header_tool","arguments":{"ratio":0.5}}`))
	if je := asRPC(t, err); je.Code != jsonrpc.CodeInvalidParams || !strings.Contains(je.Message, "x-mcp-header") {
		t.Errorf("error = %v, want -32602 naming x-mcp-header", je)
	}
	if n := e.fx.Stats().Executions["bad_header_tool"]; n != 0 {
		t.Errorf("bad_header_tool ran %d times", n)
	}
}
