package interop

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// postModern sends one raw 2026-07-28 request to the bridge (params without _meta, plus the
// extra _meta members in meta, e.g. `"progressToken":"p"`) and returns the HTTP status and
// every JSON-RPC message of the reply (one for a JSON reply, each event of an SSE one).
func postModern(t *testing.T, url, method, name, params, meta string) (int, [][]byte) {
	t.Helper()
	if meta != "" {
		meta += ","
	}
	meta = `{` + meta + `"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{},"sampling":{},"roots":{}}}`
	var p map[string]json.RawMessage
	if err := json.Unmarshal([]byte(params), &p); err != nil {
		t.Fatal(err)
	}
	p["_meta"] = json.RawMessage(meta)
	pb, _ := json.Marshal(p)
	body := `{"jsonrpc":"2.0","id":1,"method":"` + method + `","params":` + string(pb) + `}`
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", method)
	req.Header.Set("Mcp-Name", name)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		return resp.StatusCode, [][]byte{raw}
	}
	var msgs [][]byte
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			msgs = append(msgs, []byte(d))
		}
	}
	return resp.StatusCode, msgs
}

// TestReverseMRTRKeysMethodsAndProgress pins the reverse route's MRTR details the
// conformance run relies on: the key a legacy server names (user_name) is the
// inputRequests key, without the hint; a requestState resumes only the method that made it
// (a prompts/get with a tools/call's state is -32602, and the tools/call is still held); the
// tools/call retry completes; and a tool's progress reaches the caller on the reply's SSE
// stream, with the client's progressToken, before the result.
func TestReverseMRTRKeysMethodsAndProgress(t *testing.T) {
	e := newReverseEnv(t)
	_, m := postModern(t, e.url, "tools/call", "test_input_required_result_elicitation", `{"name":"test_input_required_result_elicitation","arguments":{}}`, "")
	r1 := m[len(m)-1]
	state := gjson.GetBytes(r1, "result.requestState").Str
	in := gjson.GetBytes(r1, "result.inputRequests.user_name")
	if gjson.GetBytes(r1, "result.resultType").Str != "input_required" || !in.Exists() || state == "" {
		t.Fatalf("round 1: %s, want input_required with inputRequests.user_name and a requestState", r1)
	}
	if strings.Contains(in.Raw, "dev.taskbridge/inputKey") {
		t.Errorf("the key hint reached the client: %s", in.Raw)
	}
	status, m := postModern(t, e.url, "prompts/get", "test_input_required_result_prompt",
		`{"name":"test_input_required_result_prompt","inputResponses":{"user_name":{"action":"accept","content":{"name":"Mallory"}}},"requestState":"`+state+`"}`, "")
	if code := gjson.GetBytes(m[len(m)-1], "error.code").Int(); code != -32602 {
		t.Errorf("prompts/get with a tools/call's requestState: HTTP %d %s, want -32602", status, m[len(m)-1])
	}
	_, m = postModern(t, e.url, "tools/call", "test_input_required_result_elicitation",
		`{"name":"test_input_required_result_elicitation","arguments":{},"inputResponses":{"user_name":{"action":"accept","content":{"name":"Alice"}}},"requestState":"`+state+`"}`, "")
	if got := gjson.GetBytes(m[len(m)-1], "result.content.0.text").Str; got != "Hello, Alice!" {
		t.Errorf("retry: %s, want Hello, Alice!", m[len(m)-1])
	}

	_, m = postModern(t, e.url, "tools/call", "test_tool_with_progress", `{"name":"test_tool_with_progress","arguments":{}}`, `"progressToken":"p-9"`)
	if len(m) != 4 {
		t.Fatalf("progress call: %d messages %q, want 3 progress notifications and the result", len(m), m)
	}
	for i, n := range m[:3] {
		if gjson.GetBytes(n, "method").Str != "notifications/progress" || gjson.GetBytes(n, "params.progressToken").Str != "p-9" ||
			gjson.GetBytes(n, "params.progress").Int() != int64(i*50) {
			t.Errorf("event %d: %s, want progress %d for token p-9", i, n, i*50)
		}
	}
	if gjson.GetBytes(m[3], "result.resultType").Str != "complete" {
		t.Errorf("last event: %s, want the complete result", m[3])
	}
}
