package reverse_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/bridge/reverse"
	"github.com/taskbridge/taskbridge/sep2663"
)

// observed is what legacy-server.mjs saw of its clients (GET /observed).
func observed(t *testing.T, upstreamURL string) gjson.Result {
	t.Helper()
	resp, err := http.Get(strings.TrimSuffix(upstreamURL, "/mcp") + "/observed")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return gjson.ParseBytes(b)
}

// TestReverseDeclaresEachCallersCapabilities pins issue 16 item 6 (1): the upstream session
// a modern request runs in was initialized with the input capabilities that request
// declared, so two callers with different capabilities reach the 2025-11-25 upstream
// (the TS SDK v1 fixture) through sessions whose initialize differ, and never through one
// that claims more (the bridge used to declare elicitation, sampling and roots for all).
func TestReverseDeclaresEachCallersCapabilities(t *testing.T) {
	r, url := newReverse(t)
	ctx := context.Background()
	mc := sep2663.NewClient(sep2663.ClientOptions{URL: url})
	for _, caps := range []string{`{"elicitation":{"url":{}}}`, `{"sampling":{},"roots":{"listChanged":true}}`, `{"elicitation":{"url":{}}}`} {
		if _, err := mc.Call(ctx, "tools/list", json.RawMessage(`{}`), sep2663.RequestMeta{ClientCapabilities: json.RawMessage(caps)}, nil); err != nil {
			t.Fatalf("tools/list with %s: %v", caps, err)
		}
	}
	got := map[string]int{}
	for _, c := range observed(t, reverse.UpstreamURL(r.Reverse)).Get("initializes").Array() {
		got[c.Raw]++
	}
	want := map[string]int{`{}`: 1, `{"elicitation":{"url":{}}}`: 1, `{"roots":{},"sampling":{}}`: 1}
	if len(got) != len(want) {
		t.Fatalf("upstream initializes %v, want %v", got, want)
	}
	for k, n := range want {
		if got[k] != n {
			t.Errorf("upstream initializes %v, want %v", got, want)
		}
	}
}

// TestReverseUndeclaredTaskInputFailsTask pins issue 16 item 6 (2): a task whose upstream
// asks for input of a kind the task's creator did not declare (confirm_delete elicits; the
// caller declared no elicitation; the TS SDK v1 server sends it anyway) is failed with a
// statusMessage and a -32021 naming the capability, the request is never relayed as an
// input request, and the upstream gets a JSON-RPC error for it.
func TestReverseUndeclaredTaskInputFailsTask(t *testing.T) {
	r, url := newReverse(t)
	ctx := context.Background()
	mc := sep2663.NewClient(sep2663.ClientOptions{URL: url})
	out, err := mc.CallTool(ctx, json.RawMessage(`{"name":"confirm_delete","arguments":{"filename":"x.txt"}}`),
		sep2663.RequestMeta{ClientCapabilities: json.RawMessage(`{"sampling":{}}`)}, nil)
	if err != nil || out.Kind != sep2663.KindTask {
		t.Fatalf("tools/call: %v %+v", err, out)
	}
	if got := reverse.ClientCaps(r.Reverse, out.Task.TaskID); got != `{"sampling":{}}` {
		t.Errorf("recorded capability set %q, want the caller's (an adopted session is checked against it)", got)
	}
	dt := pollModern(t, mc, out.Task.TaskID, func(d *sep2663.DetailedTask) bool {
		if len(d.InputRequests) > 0 {
			t.Errorf("undeclared input relayed: %+v", d.InputRequests)
		}
		return d.Status.IsTerminal()
	})
	if dt.Status != sep2663.StatusFailed || !strings.Contains(dt.StatusMessage, "elicitation/create") ||
		!strings.Contains(dt.StatusMessage, "client capability elicitation") {
		t.Errorf("task %s %q, want failed naming the elicitation capability", dt.Status, dt.StatusMessage)
	}
	if dt.Error == nil || dt.Error.Code != sep2663.ErrMissingCapability.Code || !gjson.GetBytes(dt.Error.Data, "requiredCapabilities.elicitation").IsObject() {
		t.Errorf("task error %+v, want -32021 with requiredCapabilities.elicitation", dt.Error)
	}
	var refusal gjson.Result
	for deadline := 0; deadline < 50 && !refusal.Exists(); deadline++ {
		refusal = observed(t, reverse.UpstreamURL(r.Reverse)).Get(`inputErrors.#(tool=="confirm_delete")`)
		if !refusal.Exists() {
			time.Sleep(100 * time.Millisecond)
		}
	}
	if refusal.Get("code").Int() != -32601 || !strings.Contains(refusal.Get("message").Str, "did not declare the elicitation capability") {
		t.Errorf("upstream's view of its elicitation: %s, want a -32601 saying elicitation was not declared", refusal.Raw)
	}
}
