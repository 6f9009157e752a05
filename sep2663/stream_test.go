package sep2663

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/taskbridge/taskbridge/internal/jsonrpc"
)

func TestReadResponseTooLarge(t *testing.T) {
	big := strings.NewReader(`{"jsonrpc":"2.0","id":1,"result":"` + strings.Repeat("a", maxBody) + `"}`)
	_, _, err := readResponse("application/json", 200, big, jsonrpc.IntID(1), nil)
	if !errors.Is(err, ErrInvalidReply) || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("err = %v", err)
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
// hides a *jsonrpc.Error (it becomes an UpstreamError).
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
