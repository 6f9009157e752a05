package relatedtask

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/taskbridge/taskbridge/internal/jsonrpc"
	"github.com/taskbridge/taskbridge/legacy"
)

// TestScreen: what passes and what loses its related-task, bytes compared exactly.
func TestScreen(t *testing.T) {
	owns := func(_ context.Context, _ *legacy.Session, id string) bool { return id == "mine" }
	const rt = `"io.modelcontextprotocol/related-task"`
	cases := []struct {
		name, method, in, want string
	}{
		{"get, matching", "tasks/get", `{"taskId":"x","_meta":{` + rt + `:{"taskId":"x"}}}`, ""},
		{"get, contradicting", "tasks/get", `{"taskId":"x", "_meta":{"k":1,` + rt + `:{"taskId":"mine"}}}`, `{"taskId":"x","_meta":{"k":1}}`},
		{"cancel, contradicting, only key", "tasks/cancel", `{"_meta":{` + rt + `:{"taskId":"y"}},"taskId":"x"}`, `{"taskId":"x"}`},
		{"result, no taskId", "tasks/result", `{"_meta":{` + rt + `:{"taskId":"mine"}}}`, `{}`},
		{"call, owned", "tools/call", `{"name":"t","_meta":{` + rt + `:{"taskId":"mine"}}}`, ""},
		{"call, foreign", "tools/call", `{"name":"t","arguments":{"a": 1},"_meta":{"progressToken":7,` + rt + `:{"taskId":"theirs"}}}`, `{"name":"t","arguments":{"a": 1},"_meta":{"progressToken":7}}`},
		{"call, escaped key", "tools/call", `{"name":"t","_meta":{"io.modelcontextprotocol/related\u002dtask":{"taskId":"theirs"}}}`, `{"name":"t"}`},
		{"call, malformed", "tools/call", `{"name":"t","_meta":{` + rt + `:"mine"}}`, `{"name":"t"}`},
		{"call, duplicate taskId: the last counts", "tools/call", `{"_meta":{` + rt + `:{"taskId":"mine","taskId":"theirs"}}}`, `{}`},
		{"call, no meta", "tools/call", `{"name":"related-task"}`, ""},
		{"response, owned", "", `{"action":"accept","_meta":{` + rt + `:{"taskId":"mine"}}}`, ""},
		{"response, foreign", "", `{"action":"accept","_meta":{` + rt + `:{"taskId":"theirs"}}}`, `{"action":"accept"}`},
	}
	for _, c := range cases {
		msg := &jsonrpc.Message{JSONRPC: jsonrpc.Version, Method: c.method, ID: jsonrpc.IntID(1), Params: json.RawMessage(c.in)}
		if c.method == "" {
			msg = &jsonrpc.Message{JSONRPC: jsonrpc.Version, ID: jsonrpc.IntID(1), Result: json.RawMessage(c.in)}
		}
		got := Screen(context.Background(), &legacy.Session{}, msg, owns)
		member, orig := got.Params, msg.Params
		if c.method == "" {
			member, orig = got.Result, msg.Result
		}
		want := c.want
		if want == "" {
			want = c.in
			if got != msg {
				t.Errorf("%s: the message was copied although nothing changed", c.name)
			}
		}
		if string(member) != want {
			t.Errorf("%s: %s, want %s", c.name, member, want)
		}
		if string(orig) != c.in {
			t.Errorf("%s: the original message was modified", c.name)
		}
	}
}
