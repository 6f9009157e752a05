package sep2663

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/taskbridge/taskbridge/internal/jsonrpc"
)

func TestReadResponseTooLarge(t *testing.T) {
	defer func(n int) { maxBody = n }(maxBody)
	maxBody = 1 << 10
	payload := strings.Repeat("a", maxBody)
	for name, tc := range map[string]struct{ ctype, body string }{
		"json":      {"application/json", `{"jsonrpc":"2.0","id":1,"result":"` + payload + `"}`},
		"sse line":  {"text/event-stream", `data: {"jsonrpc":"2.0","id":1,"result":"` + payload + "\"}\n\n"},
		"sse event": {"text/event-stream", strings.Repeat("data: "+payload[:100]+"\n", 20) + "\n"},
	} {
		_, _, err := readResponse(tc.ctype, 200, strings.NewReader(tc.body), jsonrpc.IntID(1), nil)
		if !errors.Is(err, ErrInvalidReply) || !strings.Contains(err.Error(), "size cap") {
			t.Errorf("%s: err = %v", name, err)
		}
	}
	// Many events that are each under the cap are fine: only one event is held at a time.
	var b strings.Builder
	for range 50 {
		b.WriteString(`data: {"jsonrpc":"2.0","method":"notifications/progress","params":{"p":"` + payload[:500] + "\"}}\n\n")
	}
	b.WriteString(`data: {"jsonrpc":"2.0","id":1,"result":{}}` + "\n\n")
	if res, _, err := readResponse("text/event-stream", 200, strings.NewReader(b.String()), jsonrpc.IntID(1), nil); err != nil || string(res) != `{}` {
		t.Fatalf("long stream: %s, %v", res, err)
	}
}

func TestReadResponseUnterminatedLastEvent(t *testing.T) {
	res, rpcErr, err := readResponse("text/event-stream; charset=utf-8", 200,
		strings.NewReader(`data: {"jsonrpc":"2.0","id":"1","result":{"a":1}}`), jsonrpc.IntID(1), nil)
	if err != nil || rpcErr != nil || string(res) != `{"a":1}` {
		t.Fatalf("res=%s rpcErr=%v err=%v", res, rpcErr, err)
	}
}

// FuzzReadResponse checks the reply reader's contract on arbitrary bodies: no panic, and
// exactly one of result, JSON-RPC error and error, where result is valid JSON and err never
// hides a *jsonrpc.Error (it becomes an upstream.Error).
func FuzzReadResponse(f *testing.F) {
	seeds := []struct {
		sse  bool
		body string
	}{
		{false, `{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete"}}`},
		{false, `{"jsonrpc":"2.0","id":1,"error":{"code":-32021,"message":"m","data":{}}}`},
		{false, `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"m"}}`},
		{false, `[{"jsonrpc":"2.0","id":1,"result":{}}]`},
		{false, ``},
		{true, ": keep-alive\n\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}\n\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n"},
		{true, "event: ping\ndata: x\n\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\r\ndata: \"result\":1}\r\n\r\n"},
		{true, "data: {\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{}}\n\n"},
		{true, "data"},
	}
	for _, s := range seeds {
		f.Add(s.sse, 200, []byte(s.body))
	}
	f.Add(false, 500, []byte(`{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"x"}}`))
	f.Fuzz(func(t *testing.T, isSSE bool, status int, body []byte) {
		ctype := "application/json"
		if isSSE {
			ctype = "text/event-stream"
		}
		res, rpcErr, err := readResponse(ctype, status, strings.NewReader(string(body)), jsonrpc.IntID(1),
			func(m *jsonrpc.Message) {
				if !m.IsNotification() {
					t.Fatalf("onMessage got a non-notification %+v", m)
				}
			})
		set := 0
		for _, b := range []bool{res != nil, rpcErr != nil, err != nil} {
			if b {
				set++
			}
		}
		if set != 1 {
			t.Fatalf("res=%s rpcErr=%v err=%v: want exactly one", res, rpcErr, err)
		}
		if res != nil && !json.Valid(res) {
			t.Fatalf("result %q is not valid JSON", res)
		}
		var je *jsonrpc.Error
		if errors.As(err, &je) {
			t.Fatalf("err %v hides a *jsonrpc.Error", err)
		}
	})
}
