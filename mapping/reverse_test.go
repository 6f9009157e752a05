package mapping

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/taskbridge/taskbridge/sep2663"
)

func TestServerCapsToModern(t *testing.T) {
	legacyCaps := json.RawMessage(`{"tools":{"listChanged":true},"resources":{"subscribe":true,"listChanged":true,"x":1},"tasks":{"list":{},"requests":{"tools":{"call":{}}}},"logging":{}}`)
	c, err := ServerCapsToModern(legacyCaps, true)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(c)
	// Issue 16 item 8: the reverse route has no subscriptions/listen and sends no log
	// notifications, so listChanged, subscribe and logging are not advertised.
	want := `{"resources":{"x":1},"tools":{},"extensions":{"io.modelcontextprotocol/tasks":{}}}`
	if !jsonEq(t, got, []byte(want)) {
		t.Errorf("with tasks: %s, want %s (legacy tasks dropped, extension added, undelivered capabilities dropped)", got, want)
	}
	// A route that serves subscriptions/listen keeps listChanged and subscribe as sent.
	c, err = ServerCapsToModernRelayed(legacyCaps, true)
	got, _ = json.Marshal(c)
	want = `{"resources":{"subscribe":true,"listChanged":true,"x":1},"tools":{"listChanged":true},"extensions":{"io.modelcontextprotocol/tasks":{}}}`
	if err != nil || !jsonEq(t, got, []byte(want)) {
		t.Errorf("relayed: %s, want %s (%v)", got, want, err)
	}
	c, _ = ServerCapsToModern(legacyCaps, false)
	if c.HasExtension(sep2663.ExtensionTasks) {
		t.Error("extension advertised for an upstream that cannot run tasks")
	}
	if _, err := ServerCapsToModern(json.RawMessage(`[1]`), true); err == nil {
		t.Error("non-object capabilities accepted")
	}
}

func TestReverseResultShapes(t *testing.T) {
	tests := []struct {
		name string
		fn   func(json.RawMessage) (json.RawMessage, error)
		in   string
		want string
	}{
		{"result stamped, related-task dropped", ResultForModern,
			`{"content":[{"type":"text","text":"hi"}],"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"x"}}}`,
			`{"content":[{"type":"text","text":"hi"}],"resultType":"complete"}`},
		{"other _meta kept", ResultForModern,
			`{"content":[],"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"x"},"k":1}}`,
			`{"content":[],"_meta":{"k":1},"resultType":"complete"}`},
		{"cache hints added", WithCacheHints, `{"prompts":[]}`, `{"prompts":[],"ttlMs":0,"cacheScope":"private"}`},
		{"cache hints kept", WithCacheHints, `{"prompts":[],"ttlMs":5,"cacheScope":"public"}`, `{"prompts":[],"ttlMs":5,"cacheScope":"public"}`},
		{"taskSupport dropped", ToolsListForModern,
			`{"tools":[{"name":"a","execution":{"taskSupport":"required"}},{"name":"b","execution":{"taskSupport":"optional","x":1}}]}`,
			`{"tools":[{"name":"a"},{"name":"b","execution":{"x":1}}]}`},
	}
	for _, tt := range tests {
		got, err := tt.fn(json.RawMessage(tt.in))
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if string(got) != tt.want { // members keep their order and bytes (internal/jsonobj)
			t.Errorf("%s: %s, want %s", tt.name, got, tt.want)
		}
	}
	if _, err := ResultForModern(json.RawMessage(`"text"`)); err == nil {
		t.Error("a non-object result accepted")
	}
}

func TestInputParamsForModern(t *testing.T) {
	in := `{"mode":"url","message":"Sign in","url":"https://x","elicitationId":"e1","_meta":{"io.modelcontextprotocol/related-task":{"taskId":"t"}}}`
	got := InputParamsForModern(json.RawMessage(in))
	if want := `{"mode":"url","message":"Sign in","url":"https://x"}`; string(got) != want {
		t.Errorf("got %s, want %s (no elicitationId, no related-task in 2026-07-28)", got, want)
	}
	hinted := `{"message":"m","_meta":{"dev.taskbridge/inputKey":"user_name","x":1}}`
	if got, want := string(InputParamsForModern(json.RawMessage(hinted))), `{"message":"m","_meta":{"x":1}}`; got != want {
		t.Errorf("got %s, want %s (the input-key hint is the bridge's, not the client's)", got, want)
	}
}

func TestInputKeyHint(t *testing.T) {
	for in, want := range map[string]string{
		`{"_meta":{"dev.taskbridge/inputKey":"user_name"}}`:                       "user_name",
		`{"_meta":{"dev.taskbridge/inputKey":"a.b-c_9"}}`:                         "a.b-c_9",
		`{"_meta":{"dev.taskbridge/inputKey":""}}`:                                "",
		`{"_meta":{"dev.taskbridge/inputKey":"has space"}}`:                       "",
		`{"_meta":{"dev.taskbridge/inputKey":7}}`:                                 "",
		`{"_meta":{"dev.taskbridge/inputKey":"` + strings.Repeat("k", 65) + `"}}`: "",
		`{"message":"no hint"}`:                                                   "",
	} {
		if got := InputKeyHint(json.RawMessage(in)); got != want {
			t.Errorf("InputKeyHint(%s) = %q, want %q", in, got, want)
		}
	}
}

func TestLegacyParams(t *testing.T) {
	in := `{"name":"t","arguments":{"a":[1,2]},"task":{},"inputResponses":{},"requestState":"s",
		"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"progressToken":7}}`
	p, err := LegacyParams(json.RawMessage(in))
	if err != nil {
		t.Fatal(err)
	}
	got := p.Encode()
	if want := `{"name":"t","arguments":{"a":[1,2]},"_meta":{"progressToken":7}}`; string(got) != want {
		t.Errorf("got %s, want %s (modern-only fields and envelope removed, progressToken kept)", got, want)
	}
	if _, err := LegacyParams(json.RawMessage(`[]`)); err == nil {
		t.Error("array params accepted")
	}
}

func jsonEq(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatalf("%s: %v", a, err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return string(xa) == string(ya)
}
