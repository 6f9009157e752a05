package sep2663

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// echoHandler answers every request with {"method": M} (no resultType, so the face must
// stamp one), and tools/call of "boom" with -32601.
func newTestServer(t *testing.T) string {
	t.Helper()
	s := NewServer(ServerOptions{Handler: HandlerFunc(func(_ context.Context, r *Request) (json.RawMessage, error) {
		if gjson.GetBytes(r.Params, "name").Str == "boom" {
			return nil, MissingTasksError("boom needs tasks")
		}
		b, _ := json.Marshal(map[string]any{"method": r.Method, "tasks": r.Tasks()})
		return b, nil
	})})
	hs := httptest.NewServer(s)
	t.Cleanup(hs.Close)
	return hs.URL
}

const plainMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
const extMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}`

func TestServerEnvelope(t *testing.T) {
	url := newTestServer(t)
	with := func(kv ...string) map[string]string {
		h := map[string]string{"MCP-Protocol-Version": "2026-07-28"}
		for i := 0; i+1 < len(kv); i += 2 {
			if kv[i+1] == "" {
				delete(h, kv[i])
			} else {
				h[kv[i]] = kv[i+1]
			}
		}
		return h
	}
	cases := []struct {
		name       string
		method     string
		params     string
		headers    map[string]string
		wantStatus int
		wantCode   int64 // 0: success
		check      func(t *testing.T, res gjson.Result)
	}{
		{"discover ok, resultType stamped", "server/discover", `{` + plainMeta + `}`, with("Mcp-Method", "server/discover"), 200, 0,
			func(t *testing.T, res gjson.Result) {
				if res.Get("resultType").Str != "complete" || res.Get("method").Str != "server/discover" {
					t.Errorf("result %s", res.Raw)
				}
			}},
		{"missing version header", "server/discover", `{` + plainMeta + `}`, map[string]string{"Mcp-Method": "server/discover"}, 400, -32020, nil},
		{"missing _meta", "server/discover", `{}`, with("Mcp-Method", "server/discover"), 400, -32602, nil},
		{"header and _meta disagree", "server/discover", `{` + plainMeta + `}`, with("MCP-Protocol-Version", "2026-12-01", "Mcp-Method", "server/discover"), 400, -32020, nil},
		{"unsupported version", "server/discover", `{"_meta":{"io.modelcontextprotocol/protocolVersion":"2099-01-01","io.modelcontextprotocol/clientCapabilities":{}}}`,
			with("MCP-Protocol-Version", "2099-01-01", "Mcp-Method", "server/discover"), 400, -32022,
			nil},
		{"Mcp-Method mismatch", "tools/call", `{"name":"greet",` + plainMeta + `}`, with("Mcp-Method", "tasks/get", "Mcp-Name", "greet"), 400, -32020, nil},
		{"tasks/result removed", "tasks/result", `{"taskId":"x",` + extMeta + `}`, with("Mcp-Method", "tasks/result", "Mcp-Name", "x"), 404, -32601, nil},
		{"tasks/list removed", "tasks/list", `{` + extMeta + `}`, with("Mcp-Method", "tasks/list"), 404, -32601, nil},
		{"Mcp-Name must equal taskId", "tasks/get", `{"taskId":"abc",` + extMeta + `}`, with("Mcp-Method", "tasks/get", "Mcp-Name", "other"), 400, -32020, nil},
		{"Mcp-Name missing on tools/call", "tools/call", `{"name":"greet",` + plainMeta + `}`, with("Mcp-Method", "tools/call"), 400, -32020, nil},
		{"Mcp-Name base64 sentinel", "tools/call", `{"name":"grüß",` + plainMeta + `}`, with("Mcp-Method", "tools/call", "Mcp-Name", EncodeHeaderValue("grüß")), 200, 0, nil},
		{"tasks/get without extension", "tasks/get", `{"taskId":"abc",` + plainMeta + `}`, with("Mcp-Method", "tasks/get", "Mcp-Name", "abc"), 400, -32021,
			nil},
		{"tasks/get with extension", "tasks/get", `{"taskId":"abc",` + extMeta + `}`, with("Mcp-Method", "tasks/get", "Mcp-Name", "abc"), 200, 0,
			func(t *testing.T, res gjson.Result) {
				if !res.Get("tasks").Bool() {
					t.Errorf("handler did not see the extension: %s", res.Raw)
				}
			}},
		{"handler -32021 is a 400 with data", "tools/call", `{"name":"boom",` + plainMeta + `}`, with("Mcp-Method", "tools/call", "Mcp-Name", "boom"), 400, -32021, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			body := `{"jsonrpc":"2.0","id":1,"method":"` + c.method + `","params":` + c.params + `}`
			req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			for k, v := range c.headers {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != c.wantStatus {
				t.Errorf("status %d, want %d (%s)", resp.StatusCode, c.wantStatus, b)
			}
			got := gjson.GetBytes(b, "error.code").Int()
			if got != c.wantCode {
				t.Errorf("error code %d, want %d (%s)", got, c.wantCode, b)
			}
			if c.wantCode == -32021 && !gjson.GetBytes(b, `error.data.requiredCapabilities.extensions.io\.modelcontextprotocol/tasks`).Exists() {
				t.Errorf("-32021 without data.requiredCapabilities: %s", b)
			}
			if c.wantCode == -32022 && gjson.GetBytes(b, "error.data.supported.0").Str != ProtocolVersion {
				t.Errorf("-32022 without data.supported: %s", b)
			}
			if c.check != nil {
				c.check(t, gjson.GetBytes(b, "result"))
			}
		})
	}
}

func TestServerTransportRules(t *testing.T) {
	url := newTestServer(t)
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET: %d, want 405", resp.StatusCode)
	}
	// A notification is accepted without a body.
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{}}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Errorf("notification: %d, want 202", resp.StatusCode)
	}
}
