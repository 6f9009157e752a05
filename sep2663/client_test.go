package sep2663

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"
	"go.uber.org/goleak"

	"github.com/taskbridge/taskbridge/internal/hop"
	"github.com/taskbridge/taskbridge/internal/jsonrpc"
	"github.com/taskbridge/taskbridge/internal/upstream"
)

func TestMain(m *testing.M) {
	code := m.Run()
	defaultHTTPClient().CloseIdleConnections()
	if code == 0 {
		// fasthttp's server (BenchmarkClientCall's upstream) keeps one process-wide
		// goroutine that refreshes its Date header; it is not the client's.
		if err := goleak.Find(goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.updateServerDate.func1")); err != nil {
			fmt.Fprintln(os.Stderr, "goroutine leak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// seen is one request as the fake upstream received it.
type seen struct {
	header http.Header
	body   []byte
	msg    *jsonrpc.Message
}

// fakeUpstream is a fake 2026-07-28 server: it records each POST and lets handle answer it.
type fakeUpstream struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []seen
}

func newUpstream(t *testing.T, handle func(w http.ResponseWriter, m *jsonrpc.Message)) *fakeUpstream {
	t.Helper()
	u := &fakeUpstream{}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		m, err := jsonrpc.Decode(body)
		if err != nil {
			t.Errorf("upstream got an invalid message %s: %v", body, err)
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		u.mu.Lock()
		u.reqs = append(u.reqs, seen{header: r.Header.Clone(), body: body, msg: m})
		u.mu.Unlock()
		handle(w, m)
	}))
	t.Cleanup(u.Close)
	return u
}

func (u *fakeUpstream) last(t *testing.T) seen {
	t.Helper()
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.reqs) == 0 {
		t.Fatal("upstream saw no request")
	}
	return u.reqs[len(u.reqs)-1]
}

func (u *fakeUpstream) client() *Client { return NewClient(ClientOptions{URL: u.URL + "/mcp"}) }

// replyJSON answers m with result (raw JSON) as application/json.
func replyJSON(w http.ResponseWriter, m *jsonrpc.Message, result string) {
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":%s}`, m.ID.Raw(), result)
}

// replyStatus answers with an HTTP status and a raw body.
func replyStatus(status int, ctype, body string) func(http.ResponseWriter, *jsonrpc.Message) {
	return func(w http.ResponseWriter, _ *jsonrpc.Message) {
		if ctype != "" {
			w.Header().Set("Content-Type", ctype)
		}
		w.WriteHeader(status)
		io.WriteString(w, body)
	}
}

func result(s string) func(http.ResponseWriter, *jsonrpc.Message) {
	return func(w http.ResponseWriter, m *jsonrpc.Message) { replyJSON(w, m, s) }
}

func TestCallHeaders(t *testing.T) {
	u := newUpstream(t, result(`{"resultType":"complete"}`))
	c := NewClient(ClientOptions{URL: u.URL + "/mcp", Header: http.Header{"Authorization": {"Bearer up"}}})
	cases := []struct {
		method, params string
		name           string // "" means no Mcp-Name header
	}{
		{"tools/call", `{"name":"hello_world","arguments":{}}`, "hello_world"},
		{"tools/call", `{"name":"héllo","arguments":{}}`, "=?base64?aMOpbGxv?="},
		{"tools/call", `{"name":" lead"}`, "=?base64?IGxlYWQ=?="},
		{"tools/call", `{"name":"trail "}`, "=?base64?dHJhaWwg?="},
		{"tools/call", `{"name":"=?base64?abc?="}`, "=?base64?PT9iYXNlNjQ/YWJjPz0=?="},
		{"tools/call", `{"name":"a\nb"}`, "=?base64?YQpi?="},
		{"prompts/get", `{"name":"greeting"}`, "greeting"},
		{"resources/read", `{"uri":"file:///tmp/a b.txt"}`, "file:///tmp/a b.txt"},
		{"tasks/get", `{"taskId":"786512e2-9e0d"}`, "786512e2-9e0d"},
		{"tasks/update", `{"taskId":"t-1","inputResponses":{}}`, "t-1"},
		{"tasks/cancel", `{"taskId":"t-2"}`, "t-2"},
		{"server/discover", ``, ""},
		{"tools/list", `{}`, ""},
	}
	for _, tc := range cases {
		t.Run(tc.method+"/"+tc.name, func(t *testing.T) {
			if _, err := c.Call(context.Background(), tc.method, json.RawMessage(tc.params), RequestMeta{}, nil); err != nil {
				t.Fatal(err)
			}
			s := u.last(t)
			want := map[string]string{
				"MCP-Protocol-Version": "2026-07-28",
				"Mcp-Method":           tc.method,
				"Accept":               "application/json, text/event-stream",
				"Content-Type":         "application/json",
				"Authorization":        "Bearer up",
			}
			for k, v := range want {
				if got := s.header.Get(k); got != v {
					t.Errorf("%s = %q, want %q", k, got, v)
				}
			}
			got, has := s.header["Mcp-Name"]
			switch {
			case tc.name == "" && has:
				t.Errorf("Mcp-Name = %q, want none", got)
			case tc.name != "" && (len(got) != 1 || got[0] != tc.name):
				t.Errorf("Mcp-Name = %q, want %q", got, tc.name)
			}
			if v := gjson.GetBytes(s.msg.Params, `_meta.io\.modelcontextprotocol/protocolVersion`).Str; v != ProtocolVersion {
				t.Errorf("_meta protocolVersion = %q", v)
			}
		})
	}
}

func TestHeaderValueRoundTrip(t *testing.T) {
	for _, v := range []string{"plain", "héllo wörld", " x", "x ", "=?base64?", "tab\there", "", "日本"} {
		enc := EncodeHeaderValue(v)
		for i := 0; i < len(enc); i++ {
			if enc[i] < 0x20 || enc[i] > 0x7e {
				t.Fatalf("EncodeHeaderValue(%q) = %q is not printable ASCII", v, enc)
			}
		}
		if dec, ok := DecodeHeaderValue(enc); !ok || dec != v {
			t.Fatalf("round trip of %q: %q, %v", v, dec, ok)
		}
	}
	if _, ok := DecodeHeaderValue("=?base64?!!!?="); ok {
		t.Fatal("malformed sentinel decoded")
	}
}

func TestCallMergesMeta(t *testing.T) {
	u := newUpstream(t, result(`{"content":[]}`))
	c := NewClient(ClientOptions{URL: u.URL, ClientInfo: Implementation{Name: "tb", Version: "1.2"}})
	params := `{"name":"t","arguments":{"html":"<b>&amp;</b>","n": 1.50},"_meta":{"progressToken":"p-1","x":{"k":[1, 2]}}}`
	caps := `{"elicitation":{"form":{}}}`
	if _, err := c.Call(context.Background(), "tools/call", json.RawMessage(params), RequestMeta{ClientCapabilities: json.RawMessage(caps)}, nil); err != nil {
		t.Fatal(err)
	}
	body := string(u.last(t).body)
	for _, want := range []string{
		`"arguments":{"html":"<b>&amp;</b>","n": 1.50}`, // untouched bytes: no re-encoding
		`"progressToken":"p-1"`,
		`"x":{"k":[1, 2]}`,
		`"io.modelcontextprotocol/protocolVersion":"2026-07-28"`,
		`"io.modelcontextprotocol/clientCapabilities":{"elicitation":{"form":{}}}`,
		`"io.modelcontextprotocol/clientInfo":{"name":"tb","version":"1.2"}`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("body lacks %s\nbody: %s", want, body)
		}
	}

	// With an empty RequestMeta, envelope keys already in _meta are kept (pass-through of a
	// modern client's envelope), except the version, which must match the header.
	params = `{"_meta":{"io.modelcontextprotocol/protocolVersion":"2025-01-01","io.modelcontextprotocol/clientCapabilities":{"roots":{}},"io.modelcontextprotocol/clientInfo":{"name":"orig","version":"9"}}}`
	if _, err := c.Call(context.Background(), "tools/list", json.RawMessage(params), RequestMeta{}, nil); err != nil {
		t.Fatal(err)
	}
	meta := gjson.GetBytes(u.last(t).msg.Params, "_meta")
	if got := meta.Get(`io\.modelcontextprotocol/protocolVersion`).Str; got != ProtocolVersion {
		t.Errorf("protocolVersion = %q", got)
	}
	if got := meta.Get(`io\.modelcontextprotocol/clientCapabilities`).Raw; got != `{"roots":{}}` {
		t.Errorf("clientCapabilities = %s", got)
	}
	if got := meta.Get(`io\.modelcontextprotocol/clientInfo.name`).Str; got != "orig" {
		t.Errorf("clientInfo.name = %q", got)
	}

	// No params at all: a params object holding only _meta, with the defaults.
	if _, err := c.Call(context.Background(), "server/discover", nil, RequestMeta{}, nil); err != nil {
		t.Fatal(err)
	}
	meta = gjson.GetBytes(u.last(t).msg.Params, "_meta")
	if got := meta.Get(`io\.modelcontextprotocol/clientCapabilities`).Raw; got != `{}` {
		t.Errorf("default clientCapabilities = %s", got)
	}

	for _, bad := range []string{`[1]`, `"s"`, `{"_meta":[]}`, `{"a":`} {
		_, err := c.Call(context.Background(), "tools/list", json.RawMessage(bad), RequestMeta{}, nil)
		if err == nil {
			t.Errorf("params %s accepted", bad)
		}
	}
	if _, err := c.Call(context.Background(), "tools/list", nil, RequestMeta{ClientCapabilities: json.RawMessage(`[]`)}, nil); err == nil {
		t.Error("ClientCapabilities [] accepted")
	}
}

func TestCallJSONReply(t *testing.T) {
	u := newUpstream(t, result(`{"resultType":"complete","content":[{"type":"text","text":"<hi>"}]}`))
	res, err := u.client().Call(context.Background(), "tools/call", json.RawMessage(`{"name":"x"}`), RequestMeta{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if string(res) != `{"resultType":"complete","content":[{"type":"text","text":"<hi>"}]}` {
		t.Fatalf("result = %s", res)
	}
	// JSON-RPC ids are increasing numbers.
	if _, err := u.client().Call(context.Background(), "tools/list", nil, RequestMeta{}, nil); err != nil {
		t.Fatal(err)
	}
	if id := u.last(t).msg.ID.Raw(); id != "1" {
		t.Fatalf("first id of a new client = %s, want 1", id)
	}
}

func sseReply(events ...string) func(http.ResponseWriter, *jsonrpc.Message) {
	return func(w http.ResponseWriter, m *jsonrpc.Message) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		for _, e := range events {
			io.WriteString(w, strings.ReplaceAll(e, "$ID", m.ID.Raw()))
			w.(http.Flusher).Flush()
		}
	}
}

func TestCallSSE(t *testing.T) {
	u := newUpstream(t, sseReply(
		": keep-alive\n\n",
		"event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":\"p\",\"progress\":1}}\n\n",
		":ping\r\n\r\n",
		"event: ping\ndata: not json\n\n",
		"data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\r\ndata: \"params\":{\"level\":\"info\"}}\r\n\r\n",
		"data: {\"jsonrpc\":\"2.0\",\"id\":999,\"result\":{}}\n\n", // someone else's response: ignored
		"id: 1\nretry: 10\ndata: {\"jsonrpc\":\"2.0\",\"id\":$ID,\"result\":{\"resultType\":\"complete\",\"ok\":true}}\n\n",
		"data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/late\"}\n\n",
	))
	var got []string
	res, err := u.client().Call(context.Background(), "tools/call", json.RawMessage(`{"name":"x","_meta":{"progressToken":"p"}}`), RequestMeta{},
		func(m *jsonrpc.Message) { got = append(got, m.Method+" "+string(m.Params)) })
	if err != nil {
		t.Fatal(err)
	}
	if string(res) != `{"resultType":"complete","ok":true}` {
		t.Fatalf("result = %s", res)
	}
	want := []string{
		`notifications/progress {"progressToken":"p","progress":1}`,
		`notifications/message {"level":"info"}`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("notifications:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestCallSSEErrors(t *testing.T) {
	cases := map[string][]string{
		"ends without response": {": hi\n\n", "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}\n\n"},
		"not JSON-RPC":          {"data: <html>\n\n"},
		"empty stream":          {},
	}
	for name, events := range cases {
		t.Run(name, func(t *testing.T) {
			u := newUpstream(t, sseReply(events...))
			_, err := u.client().Call(context.Background(), "tools/call", json.RawMessage(`{"name":"x"}`), RequestMeta{}, nil)
			var ue *upstream.Error
			if !errors.As(err, &ue) || ue.Status != 200 {
				t.Fatalf("err = %v (%T), want *upstream.Error with status 200", err, err)
			}
		})
	}
}

func TestCallSSEJSONRPCError(t *testing.T) {
	u := newUpstream(t, sseReply("data: {\"jsonrpc\":\"2.0\",\"id\":$ID,\"error\":{\"code\":-32602,\"message\":\"Failed to retrieve task: Task not found\"}}\n\n"))
	_, err := u.client().Call(context.Background(), "tasks/get", json.RawMessage(`{"taskId":"x"}`), RequestMeta{}, nil)
	var re *jsonrpc.Error
	if !errors.As(err, &re) || re.Code != -32602 || re.Message != "Failed to retrieve task: Task not found" {
		t.Fatalf("err = %v", err)
	}
}

func TestCallJSONRPCErrorPassthrough(t *testing.T) {
	const body = `{"jsonrpc":"2.0","id":1,"error":{"code":-32021,"message":"Tool failing_job requires the io.modelcontextprotocol/tasks extension","data":{"requiredCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}}}`
	for _, status := range []int{200, 400} {
		u := newUpstream(t, replyStatus(status, "application/json", body))
		_, err := u.client().Call(context.Background(), "tools/call", json.RawMessage(`{"name":"failing_job"}`), RequestMeta{}, nil)
		var re *jsonrpc.Error
		if !errors.As(err, &re) {
			t.Fatalf("status %d: err = %v (%T), want *jsonrpc.Error", status, err, err)
		}
		if re.Code != -32021 || re.Message != "Tool failing_job requires the io.modelcontextprotocol/tasks extension" ||
			string(re.Data) != `{"requiredCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}` {
			t.Fatalf("status %d: error changed: %+v data=%s", status, re, re.Data)
		}
	}
	// 404 + -32601 for a removed method, with a null id.
	u := newUpstream(t, replyStatus(404, "application/json", `{"jsonrpc":"2.0","id":null,"error":{"code":-32601,"message":"Method not found"}}`))
	_, err := u.client().Call(context.Background(), "tasks/result", json.RawMessage(`{"taskId":"x"}`), RequestMeta{}, nil)
	var re *jsonrpc.Error
	if !errors.As(err, &re) || re.Code != -32601 {
		t.Fatalf("err = %v", err)
	}
}

func TestCallUpstreamErrors(t *testing.T) {
	cases := []struct {
		name   string
		handle func(http.ResponseWriter, *jsonrpc.Message)
		status int
		msg    string
	}{
		{"500 empty", replyStatus(500, "", ""), 500, "HTTP 500: no JSON-RPC body"},
		{"502 html", replyStatus(502, "text/html", "<html>bad gateway</html>"), 502, "HTTP 502"},
		{"200 not json", replyStatus(200, "application/json", "hello"), 200, "invalid upstream reply"},
		{"200 empty", replyStatus(200, "application/json", ""), 200, "invalid upstream reply: empty body"},
		{"202 for a request", replyStatus(202, "", ""), 202, "invalid upstream reply"},
		{"wrong id", replyStatus(200, "application/json", `{"jsonrpc":"2.0","id":12345,"result":{}}`), 200, "response id 12345"},
		{"a request instead", replyStatus(200, "application/json", `{"jsonrpc":"2.0","id":1,"method":"sampling/createMessage"}`), 200, "expected a response"},
		{"500 with result", func(w http.ResponseWriter, m *jsonrpc.Message) {
			w.WriteHeader(500)
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{}}`, m.ID.Raw())
		}, 500, "non-2xx"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			u := newUpstream(t, tc.handle)
			_, err := u.client().Call(context.Background(), "tools/call", json.RawMessage(`{"name":"x"}`), RequestMeta{}, nil)
			var ue *upstream.Error
			if !errors.As(err, &ue) {
				t.Fatalf("err = %v (%T), want *upstream.Error", err, err)
			}
			var re *jsonrpc.Error
			if errors.As(err, &re) {
				t.Fatalf("upstream.Error wraps a *jsonrpc.Error: %v", err)
			}
			if ue.Status != tc.status || !strings.Contains(err.Error(), tc.msg) ||
				!strings.Contains(err.Error(), "upstream "+u.URL+"/mcp: tools/call: ") {
				t.Fatalf("err = %q status %d, want status %d and %q", err, ue.Status, tc.status, tc.msg)
			}
		})
	}
}

func TestCallConnectionRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String() + "/mcp"
	ln.Close()
	_, err = NewClient(ClientOptions{URL: url}).Call(context.Background(), "tools/call", json.RawMessage(`{"name":"x"}`), RequestMeta{}, nil)
	var ue *upstream.Error
	if !errors.As(err, &ue) || ue.URL != url || ue.Method != "tools/call" || ue.Status != 0 {
		t.Fatalf("err = %#v", err)
	}
	want := "upstream " + url + ": tools/call: "
	if !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("err = %q, want prefix %q and 'connection refused'", err, want)
	}
	if ue.Timeout() {
		t.Fatal("connection refused reported as a timeout")
	}
}

func TestCallTimeout(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		<-r.Context().Done() // the stream stays open until the client gives up
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := NewClient(ClientOptions{URL: srv.URL}).Call(ctx, "tools/call", json.RawMessage(`{"name":"slow"}`), RequestMeta{}, nil)
	var ue *upstream.Error
	if !errors.As(err, &ue) || !ue.Timeout() || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want a timeout upstream.Error", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("Call returned after %v, want about the 100ms deadline", d)
	}
}

func TestNotify(t *testing.T) {
	u := newUpstream(t, replyStatus(202, "", ""))
	if err := u.client().Notify(context.Background(), "notifications/cancelled", json.RawMessage(`{"requestId":3}`), RequestMeta{}); err != nil {
		t.Fatal(err)
	}
	s := u.last(t)
	if !s.msg.IsNotification() || s.header.Get("Mcp-Method") != "notifications/cancelled" {
		t.Fatalf("sent %s", s.body)
	}
	u = newUpstream(t, replyStatus(400, "application/json", `{"jsonrpc":"2.0","id":null,"error":{"code":-32020,"message":"Header mismatch"}}`))
	var re *jsonrpc.Error
	if err := u.client().Notify(context.Background(), "notifications/x", nil, RequestMeta{}); !errors.As(err, &re) || re.Code != -32020 {
		t.Fatalf("err = %v", err)
	}
	u = newUpstream(t, replyStatus(500, "", ""))
	var ue *upstream.Error
	if err := u.client().Notify(context.Background(), "notifications/x", nil, RequestMeta{}); !errors.As(err, &ue) || ue.Status != 500 {
		t.Fatalf("err = %v", err)
	}
}

func TestDiscover(t *testing.T) {
	u := newUpstream(t, result(`{"supportedVersions":["2026-07-28"],"capabilities":{"tools":{},"extensions":{"io.modelcontextprotocol/tasks":{}}},"resultType":"complete","ttlMs":0,"cacheScope":"private","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"sep2663-server","version":"0.1.0"}}}`))
	d, err := u.client().Discover(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	info, _ := d.ServerInfo()
	if d.SupportedVersions[0] != ProtocolVersion || !d.Capabilities.HasExtension(ExtensionTasks) || info.Name != "sep2663-server" || d.CacheScope != "private" {
		t.Fatalf("discover = %+v", d)
	}
	if s := u.last(t); s.header.Get("Mcp-Method") != "server/discover" || string(s.msg.Params) == "" {
		t.Fatalf("request %s", s.body)
	}
	u = newUpstream(t, result(`{"resultType":"task","taskId":"x"}`))
	if _, err := u.client().Discover(context.Background()); !errors.Is(err, ErrInvalidReply) {
		t.Fatalf("discover with resultType task: err = %v", err)
	}
}

func TestCallTool(t *testing.T) {
	cases := []struct {
		name   string
		result string
		kind   ResultKind
		check  func(t *testing.T, o *CallToolOutcome)
		errMsg string
	}{
		{name: "no resultType", result: `{"content":[]}`, kind: KindComplete},
		{name: "complete", result: `{"resultType":"complete","content":[],"isError":true}`, kind: KindComplete},
		{name: "task (TS v2 adds content)", kind: KindTask,
			result: `{"content":[],"resultType":"task","taskId":"b9bc943d","status":"working","createdAt":"2026-11-29T07:25:58.396Z","lastUpdatedAt":"2026-11-29T07:25:58.396Z","ttlMs":300000,"pollIntervalMs":200,"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"s","version":"1"}}}`,
			check: func(t *testing.T, o *CallToolOutcome) {
				if o.Task.TaskID != "b9bc943d" || o.Task.Status != StatusWorking || *o.Task.TTLMs != 300000 || *o.Task.PollIntervalMs != 200 {
					t.Fatalf("task = %+v", o.Task)
				}
			}},
		{name: "task ttlMs null", kind: KindTask,
			result: `{"resultType":"task","taskId":"t","status":"working","createdAt":"a","lastUpdatedAt":"a","ttlMs":null}`,
			check: func(t *testing.T, o *CallToolOutcome) {
				if o.Task.TTLMs != nil || o.Task.PollIntervalMs != nil {
					t.Fatalf("ttlMs = %v, pollIntervalMs = %v, want nil", o.Task.TTLMs, o.Task.PollIntervalMs)
				}
			}},
		{name: "input_required", kind: KindInputRequired,
			result: `{"resultType":"input_required","inputRequests":{"user_name":{"method":"elicitation/create","params":{"mode":"form","message":"Name?"}}},"requestState":"st-1"}`,
			check: func(t *testing.T, o *CallToolOutcome) {
				if o.Input.RequestState != "st-1" || o.Input.InputRequests["user_name"].Method != "elicitation/create" ||
					string(o.Input.InputRequests["user_name"].Params) != `{"mode":"form","message":"Name?"}` {
					t.Fatalf("input = %+v", o.Input)
				}
			}},
		{name: "unknown resultType", result: `{"resultType":"x"}`, errMsg: `invalid upstream reply: unknown resultType "x"`},
		{name: "task without taskId", result: `{"resultType":"task","status":"working"}`, errMsg: "invalid upstream reply: task without taskId"},
		{name: "task with bad field", result: `{"resultType":"task","taskId":"t","ttlMs":"soon"}`, errMsg: "invalid upstream reply"},
		{name: "empty input_required", result: `{"resultType":"input_required"}`, errMsg: "invalid upstream reply"},
		{name: "result not an object", result: `[1]`, errMsg: "invalid upstream reply"},
		{name: "resultType not a string", result: `{"resultType":7}`, errMsg: "invalid upstream reply"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			u := newUpstream(t, result(tc.result))
			o, err := u.client().CallTool(context.Background(), json.RawMessage(`{"name":"slow_compute","arguments":{"seconds":1}}`),
				RequestMeta{ClientCapabilities: json.RawMessage(`{"elicitation":{"form":{}}}`)}, nil)
			if tc.errMsg != "" {
				var ue *upstream.Error
				if !errors.As(err, &ue) || !errors.Is(err, ErrInvalidReply) || !strings.Contains(err.Error(), tc.errMsg) {
					t.Fatalf("err = %v, want an upstream.Error containing %q", err, tc.errMsg)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if o.Kind != tc.kind || string(o.Result) != tc.result {
				t.Fatalf("outcome kind %v result %s", o.Kind, o.Result)
			}
			if (o.Task != nil) != (tc.kind == KindTask) || (o.Input != nil) != (tc.kind == KindInputRequired) {
				t.Fatalf("outcome fields do not match kind: %+v", o)
			}
			if tc.check != nil {
				tc.check(t, o)
			}
			// The tasks extension is declared, merged into the caller's capabilities.
			caps := gjson.GetBytes(u.last(t).msg.Params, `_meta.io\.modelcontextprotocol/clientCapabilities`).Raw
			if caps != `{"elicitation":{"form":{}},"extensions":{"io.modelcontextprotocol/tasks":{}}}` {
				t.Fatalf("clientCapabilities = %s", caps)
			}
		})
	}
}

func TestWithTasksExtension(t *testing.T) {
	for in, want := range map[string]string{
		``:                             `{"extensions":{"io.modelcontextprotocol/tasks":{}}}`,
		`{}`:                           `{"extensions":{"io.modelcontextprotocol/tasks":{}}}`,
		`{"extensions":{"a":{"x":1}}}`: `{"extensions":{"a":{"x":1},"io.modelcontextprotocol/tasks":{}}}`,
		`{"extensions":{"io.modelcontextprotocol/tasks":{ }},"roots":{}}`: `{"extensions":{"io.modelcontextprotocol/tasks":{ }},"roots":{}}`,
	} {
		got, err := withTasksExtension(json.RawMessage(in))
		if err != nil || string(got) != want {
			t.Errorf("withTasksExtension(%s) = %s, %v; want %s", in, got, err, want)
		}
	}
	if _, err := withTasksExtension(json.RawMessage(`{"extensions":[]}`)); err == nil {
		t.Error("extensions [] accepted")
	}
}

func TestGetTask(t *testing.T) {
	const fields = `"taskId":"8266","status":"input_required","createdAt":"a","lastUpdatedAt":"b","ttlMs":300000,"pollIntervalMs":200,"inputRequests":{"in-1":{"method":"elicitation/create","params":{"mode":"form","message":"Delete f.txt?"}}}`
	for _, rt := range []string{`"resultType":"complete",`, `"resultType":"task",`, ``} {
		u := newUpstream(t, result(`{`+rt+fields+`}`))
		task, err := u.client().GetTask(context.Background(), "8266", RequestMeta{})
		if err != nil {
			t.Fatalf("%s: %v", rt, err)
		}
		if task.TaskID != "8266" || task.Status != StatusInputRequired || task.InputRequests["in-1"].Method != "elicitation/create" {
			t.Fatalf("%s: task = %+v", rt, task)
		}
		s := u.last(t)
		if s.header.Get("Mcp-Name") != "8266" || s.header.Get("Mcp-Method") != "tasks/get" ||
			gjson.GetBytes(s.msg.Params, "taskId").Str != "8266" ||
			!gjson.GetBytes(s.msg.Params, `_meta.io\.modelcontextprotocol/clientCapabilities.extensions.io\.modelcontextprotocol/tasks`).Exists() {
			t.Fatalf("request headers %v body %s", s.header, s.body)
		}
	}
	u := newUpstream(t, result(`{"resultType":"complete","taskId":"f","status":"failed","createdAt":"a","lastUpdatedAt":"b","ttlMs":null,"error":{"code":-32603,"message":"API rate limit exceeded"}}`))
	task, err := u.client().GetTask(context.Background(), "f", RequestMeta{})
	if err != nil || task.Error == nil || task.Error.Code != -32603 || task.TTLMs != nil {
		t.Fatalf("failed task = %+v, %v", task, err)
	}
	u = newUpstream(t, result(`{"resultType":"input_required","requestState":"x"}`))
	if _, err := u.client().GetTask(context.Background(), "f", RequestMeta{}); !errors.Is(err, ErrInvalidReply) {
		t.Fatalf("err = %v", err)
	}
}

func TestUpdateAndCancelTask(t *testing.T) {
	u := newUpstream(t, result(`{"resultType":"complete"}`))
	c := u.client()
	resp := InputResponses{"in-1": json.RawMessage(`{"action":"accept","content":{"confirm":true}}`)}
	if err := c.UpdateTask(context.Background(), "t 1", resp, RequestMeta{}); err != nil {
		t.Fatal(err)
	}
	s := u.last(t)
	if s.header.Get("Mcp-Name") != "t 1" || s.header.Get("Mcp-Method") != "tasks/update" ||
		gjson.GetBytes(s.msg.Params, "inputResponses.in-1").Raw != `{"action":"accept","content":{"confirm":true}}` {
		t.Fatalf("update sent %v %s", s.header, s.body)
	}
	if err := c.CancelTask(context.Background(), "ü", RequestMeta{}); err != nil {
		t.Fatal(err)
	}
	s = u.last(t)
	if s.header.Get("Mcp-Name") != "=?base64?w7w=?=" || s.header.Get("Mcp-Method") != "tasks/cancel" ||
		gjson.GetBytes(s.msg.Params, "taskId").Str != "ü" {
		t.Fatalf("cancel sent %v %s", s.header, s.body)
	}
	u = newUpstream(t, replyStatus(200, "application/json", `{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"Task not found"}}`))
	var re *jsonrpc.Error
	if err := u.client().CancelTask(context.Background(), "gone", RequestMeta{}); !errors.As(err, &re) || re.Code != -32602 {
		t.Fatalf("err = %v", err)
	}
}

func TestConcurrentCalls(t *testing.T) {
	u := newUpstream(t, func(w http.ResponseWriter, m *jsonrpc.Message) {
		n := gjson.GetBytes(m.Params, "arguments.n").Int()
		if n%2 == 0 {
			sseReply(fmt.Sprintf("data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"n\":%d}}\n\n", n),
				fmt.Sprintf("data: {\"jsonrpc\":\"2.0\",\"id\":$ID,\"result\":{\"n\":%d}}\n\n", n))(w, m)
			return
		}
		replyJSON(w, m, fmt.Sprintf(`{"n":%d}`, n))
	})
	c := u.client()
	var wg sync.WaitGroup
	errs := make(chan error, 50)
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var notes int
			o, err := c.CallTool(context.Background(), json.RawMessage(fmt.Sprintf(`{"name":"echo","arguments":{"n":%d}}`, i)), RequestMeta{},
				func(*jsonrpc.Message) { notes++ })
			switch {
			case err != nil:
				errs <- err
			case gjson.GetBytes(o.Result, "n").Int() != int64(i):
				errs <- fmt.Errorf("call %d got %s", i, o.Result)
			case (i%2 == 0) != (notes == 1):
				errs <- fmt.Errorf("call %d got %d notifications", i, notes)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	ids := map[string]bool{}
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, s := range u.reqs {
		if ids[s.msg.ID.Raw()] {
			t.Fatalf("id %s used twice", s.msg.ID.Raw())
		}
		ids[s.msg.ID.Raw()] = true
	}
}

func TestDefaultHTTPClientPool(t *testing.T) {
	c := NewClient(ClientOptions{URL: "http://x/mcp"})
	tr, ok := c.http.Transport.(*hop.Transport) // internal/hop since issue 20
	if !ok || tr.Settings().MaxIdleConnsPerHost < 256 {
		t.Fatalf("default transport %T keeps too few idle connections per host, want >= 256", c.http.Transport)
	}
	if c.URL() != "http://x/mcp" || c.info.Name != "taskbridge" {
		t.Fatalf("defaults: %q %+v", c.URL(), c.info)
	}
}

// TestGetTaskAboutAnotherTask (issue 12, acceptance 7): an upstream tasks/get answer whose
// taskId is not the one asked for is an invalid reply, never a task.
func TestGetTaskAboutAnotherTask(t *testing.T) {
	u := newUpstream(t, result(`{"resultType":"complete","taskId":"someone-elses","status":"completed","createdAt":"a","lastUpdatedAt":"b","ttlMs":null,"result":{"content":[]}}`))
	task, err := u.client().GetTask(context.Background(), "mine", RequestMeta{})
	if task != nil || !errors.Is(err, ErrInvalidReply) {
		t.Fatalf("GetTask(mine) answered for someone-elses = %+v, %v; want ErrInvalidReply", task, err)
	}
}
