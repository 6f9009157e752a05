package interop

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// TestReverseUndeclaredInputIsMissingCapability pins issue 16 item 6 on the MRTR path: a
// legacy tool that asks for sampling (test_missing_capability in legacy-server.mjs, the
// conformance suite's diagnostic tool) called by a 2026-07-28 client that did not declare
// sampling gets -32021 (HTTP 400) with requiredCapabilities {"sampling":{}}, never an
// input request it cannot answer; one that declared sampling gets the input_required round.
func TestReverseUndeclaredInputIsMissingCapability(t *testing.T) {
	e := newReverseEnv(t)
	call := func(caps string) (int, []byte) {
		body := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"test_missing_capability","arguments":{},` +
			`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":` + caps + `}}}`
		req, _ := http.NewRequest(http.MethodPost, e.url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("MCP-Protocol-Version", "2026-07-28")
		req.Header.Set("Mcp-Method", "tools/call")
		req.Header.Set("Mcp-Name", "test_missing_capability")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	status, b := call(`{"elicitation":{}}`)
	if status != 400 || gjson.GetBytes(b, "error.code").Int() != -32021 || !gjson.GetBytes(b, "error.data.requiredCapabilities.sampling").IsObject() {
		t.Errorf("without sampling: HTTP %d %s, want 400, -32021, requiredCapabilities.sampling", status, b)
	}
	status, b = call(`{"sampling":{}}`)
	if status != 200 || gjson.GetBytes(b, "result.resultType").Str != "input_required" ||
		!strings.Contains(gjson.GetBytes(b, "result.inputRequests").Raw, "sampling/createMessage") {
		t.Errorf("with sampling: HTTP %d %s, want an input_required round asking for sampling", status, b)
	}
}
