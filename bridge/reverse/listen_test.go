package reverse_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/internal/legacyclient"
	"github.com/taskbridge/taskbridge/sep2663"
)

// modernPost sends one 2026-07-28 request or notification (raw JSON body) to url with the
// headers the transport requires.
func modernPost(ctx context.Context, t *testing.T, url, method, name, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", sep2663.ProtocolVersion)
	req.Header.Set("Mcp-Method", method)
	if name != "" {
		req.Header.Set("Mcp-Name", name)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

const listenMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`

// tasksMeta declares the tasks extension (a listen may then name taskIds).
const tasksMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}`

// openListen opens subscriptions/listen with filter and returns the stream's messages, in
// order, on a channel closed when the stream ends. The request declares the tasks extension.
func openListen(ctx context.Context, t *testing.T, url, id, filter string) <-chan gjson.Result {
	t.Helper()
	resp := modernPost(ctx, t, url, "subscriptions/listen", "",
		`{"jsonrpc":"2.0","id":`+id+`,"method":"subscriptions/listen","params":{`+tasksMeta+`,"notifications":`+filter+`}}`)
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || !strings.HasPrefix(ct, "text/event-stream") {
		b, _ := bufio.NewReader(resp.Body).ReadString(0)
		resp.Body.Close()
		t.Fatalf("listen: HTTP %d %s %s", resp.StatusCode, ct, b)
	}
	out := make(chan gjson.Result, 64)
	go func() {
		defer close(out)
		defer resp.Body.Close()
		_ = legacyclient.ReadEvents(resp.Body, func(data []byte) bool {
			out <- gjson.ParseBytes(data)
			return true
		})
	}()
	return out
}

// next returns the next message of the stream within d; ok false on timeout or end.
func next(ch <-chan gjson.Result, d time.Duration) (gjson.Result, bool) {
	select {
	case m, ok := <-ch:
		return m, ok
	case <-time.After(d):
		return gjson.Result{}, false
	}
}

func callTool(t *testing.T, c *sep2663.Client, name, args string) {
	t.Helper()
	if _, err := c.Call(context.Background(), "tools/call", json.RawMessage(`{"name":"`+name+`","arguments":`+args+`}`), sep2663.RequestMeta{}, nil); err != nil {
		t.Fatalf("tools/call %s: %v", name, err)
	}
}

// TestReverseListen (issue 16 item 8, reverse route): a 2026-07-28 client's
// subscriptions/listen is acknowledged first with the honoured subset of its filter (an
// unknown task id left out), then gets, with its subscriptionId, the legacy upstream's
// notifications/tools/list_changed and, after the bridge's legacy resources/subscribe,
// notifications/resources/updated; nothing it did not ask for (resources/list_changed), and
// notifications/cancelled ends the stream with the clean-close result.
func TestReverseListen(t *testing.T) {
	_, url := newReverse(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := sep2663.NewClient(sep2663.ClientOptions{URL: url})
	d, err := c.Discover(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !gjson.GetBytes(d.Capabilities.Tools, "listChanged").Bool() || !gjson.GetBytes(d.Capabilities.Resources, "subscribe").Bool() {
		t.Fatalf("discover capabilities tools=%s resources=%s: listChanged/subscribe not advertised", d.Capabilities.Tools, d.Capabilities.Resources)
	}
	stream := openListen(ctx, t, url, `"listen-1"`, `{"toolsListChanged":true,"taskIds":["not-honoured"],"resourceSubscriptions":["fixture://counter"]}`)
	ack, ok := next(stream, 10*time.Second)
	if !ok || ack.Get("method").Str != sep2663.NotificationAck {
		t.Fatalf("first message %s, want the acknowledgement", ack.Raw)
	}
	if got := ack.Get("params.notifications").Raw; got != `{"toolsListChanged":true,"resourceSubscriptions":["fixture://counter"],"taskIds":[]}` {
		t.Errorf("acknowledged %s, want tools, the counter and no task (an unknown id is left out)", got)
	}
	if id := ack.Get(`params._meta.io\.modelcontextprotocol/subscriptionId`).Str; id != "listen-1" {
		t.Errorf("ack subscriptionId %q", id)
	}

	callTool(t, c, "add_resource", `{"name":"extra"}`) // resources/list_changed: not asked for
	callTool(t, c, "add_tool", `{"name":"added"}`)
	m, ok := next(stream, 10*time.Second)
	if !ok || m.Get("method").Str != sep2663.NotificationToolsListChanged {
		t.Fatalf("got %s, want notifications/tools/list_changed (and nothing unrequested before it)", m.Raw)
	}
	if id := m.Get(`params._meta.io\.modelcontextprotocol/subscriptionId`).Str; id != "listen-1" {
		t.Errorf("list_changed subscriptionId %q: %s", id, m.Raw)
	}
	callTool(t, c, "bump_resource", `{}`)
	m, ok = next(stream, 10*time.Second)
	if !ok || m.Get("method").Str != sep2663.NotificationResourceUpdated || m.Get("params.uri").Str != "fixture://counter" ||
		m.Get(`params._meta.io\.modelcontextprotocol/subscriptionId`).Str != "listen-1" {
		t.Fatalf("got %s, want notifications/resources/updated for fixture://counter with the subscriptionId", m.Raw)
	}

	resp := modernPost(ctx, t, url, "notifications/cancelled", "",
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{`+listenMeta+`,"requestId":"listen-1"}}`)
	resp.Body.Close()
	m, ok = next(stream, 10*time.Second)
	if !ok || m.Get("id").Str != "listen-1" || m.Get("result.resultType").Str != "complete" ||
		m.Get(`result._meta.io\.modelcontextprotocol/subscriptionId`).Str != "listen-1" {
		t.Fatalf("after notifications/cancelled: %s (ok %v), want the clean-close result", m.Raw, ok)
	}
	if _, ok := next(stream, 5*time.Second); ok {
		t.Error("the stream went on after its result")
	}
}

// TestReverseAdvertisedIsDelivered: every listChanged/subscribe the reverse discover
// advertises is delivered on a listen asking for it alone (a capability advertised with no
// way to deliver it fails here), and a listen for something else gets none of it.
func TestReverseAdvertisedIsDelivered(t *testing.T) {
	_, url := newReverse(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := sep2663.NewClient(sep2663.ClientOptions{URL: url})
	d, err := c.Discover(ctx)
	if err != nil {
		t.Fatal(err)
	}
	type check struct {
		filter, tool, args, want string
	}
	checks := map[string]check{
		"tools.listChanged":     {`{"toolsListChanged":true}`, "add_tool", `{"name":"t_%d"}`, sep2663.NotificationToolsListChanged},
		"resources.listChanged": {`{"resourcesListChanged":true}`, "add_resource", `{"name":"r_%d"}`, sep2663.NotificationResourcesListChanged},
		"resources.subscribe":   {`{"resourceSubscriptions":["fixture://counter"]}`, "bump_resource", `{}`, sep2663.NotificationResourceUpdated},
		"prompts.listChanged":   {`{"promptsListChanged":true}`, "test_trigger_prompt_change", `{}`, sep2663.NotificationPromptsListChanged},
	}
	caps, _ := json.Marshal(d.Capabilities)
	n := 0
	for _, key := range []string{"tools.listChanged", "prompts.listChanged", "resources.listChanged", "resources.subscribe"} {
		if !gjson.GetBytes(caps, key).Bool() {
			continue
		}
		ch, ok := checks[key]
		if !ok {
			t.Errorf("discover advertises %s, which this test cannot trigger: is it delivered?", key)
			continue
		}
		n++
		id := `"l` + key + `"`
		stream := openListen(ctx, t, url, id, ch.filter)
		if ack, ok := next(stream, 10*time.Second); !ok || ack.Get("method").Str != sep2663.NotificationAck {
			t.Fatalf("%s: first message %s", key, ack.Raw)
		}
		other := openListen(ctx, t, url, `"other`+key+`"`, `{"resourceSubscriptions":["fixture://untouched"]}`)
		next(other, 10*time.Second) // its ack
		callTool(t, c, ch.tool, strings.Replace(ch.args, "%d", key[:1]+string(rune('0'+n)), 1))
		if m, ok := next(stream, 10*time.Second); !ok || m.Get("method").Str != ch.want {
			t.Errorf("%s advertised, but the listen got %s (ok %v), want %s", key, m.Raw, ok, ch.want)
		}
		if m, ok := next(other, 500*time.Millisecond); ok {
			t.Errorf("%s: a listen that asked for another resource only got %s", key, m.Raw)
		}
	}
	if n == 0 {
		t.Fatal("the reverse discover advertises no listChanged/subscribe: nothing was checked")
	}
}

// TestReverseListenRefusals: a listen without a notifications object is -32602; one with
// taskIds from a caller without the tasks extension is -32021.
func TestReverseListenRefusals(t *testing.T) {
	_, url := newReverse(t)
	ctx := context.Background()
	for body, code := range map[string]int64{
		`{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{` + listenMeta + `}}`:                                               -32602,
		`{"jsonrpc":"2.0","id":2,"method":"subscriptions/listen","params":{` + listenMeta + `,"notifications":{"taskIds":["x"]}}}`:             -32021,
		`{"jsonrpc":"2.0","id":3,"method":"subscriptions/listen","params":{` + listenMeta + `,"notifications":{"resourceSubscriptions":"x"}}}`: -32602,
	} {
		resp := modernPost(ctx, t, url, "subscriptions/listen", "", body)
		var m struct {
			Error struct{ Code int64 } `json:"error"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&m)
		resp.Body.Close()
		if m.Error.Code != code {
			t.Errorf("%s: code %d, want %d", body, m.Error.Code, code)
		}
	}
}
