package forward_test

import (
	"strings"
	"testing"
)

// TestDuplicateKeyParamsRefused (issue 12, acceptance 7): a tools/call whose params name
// the tool twice (or carry any member twice, at any depth) is refused with -32600 at the
// face, before any record or upstream call: the tool the bridge would check is never a
// different one from the tool that would run.
func TestDuplicateKeyParamsRefused(t *testing.T) {
	e := newEnv(t)
	c := e.client()
	bodies := []string{
		`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"slow_compute","arguments":{"seconds":0},"task":{},"name":"echo"}}`,
		`{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"echo","arguments":{"text":"a","text":"b"}}}`,
		`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"text":"a"},"Name":"slow_compute"}}`,
		`{"jsonrpc":"2.0","id":8,"method":"tools/call","method":"tools/list","params":{"name":"echo","arguments":{"text":"a"}}}`,
	}
	for _, body := range bodies {
		_, reply := post(t, e.url, c.SessionID(), "", body)
		if !strings.Contains(reply, `"code":-32600`) {
			t.Errorf("%s\n  answered %s, want -32600", body, reply)
		}
	}
	if n := len(call(t, c, "tasks/list", map[string]any{}).Get("tasks").Array()); n != 0 {
		t.Errorf("%d task records after refused calls, want none", n)
	}
	st := e.fx.Stats()
	if st.Executions["slow_compute"] != 0 || st.Executions["echo"] != 0 {
		t.Errorf("the upstream ran tools for refused calls: %v", st.Executions)
	}
}
