package mapping

import (
	"encoding/json"
	"errors"
	"regexp"
	"testing"

	"github.com/taskbridge/taskbridge/sep2663"
)

func TestInputToLegacy(t *testing.T) {
	urlID := ElicitationID("tb-1", "k")
	cases := []struct {
		name, method, params string
		wantParams           string
	}{
		{"form elicitation", "elicitation/create",
			`{"mode":"form","message":"Delete f.txt?","requestedSchema":{"type":"object","properties":{"confirm":{"type":"boolean"}},"required":["confirm"]}}`,
			`{"mode":"form","message":"Delete f.txt?","requestedSchema":{"type":"object","properties":{"confirm":{"type":"boolean"}},"required":["confirm"]},"_meta":{` + related + `}}`},
		{"url elicitation gains elicitationId", "elicitation/create",
			`{"mode":"url","message":"Sign in","url":"https://example.com/auth"}`,
			`{"mode":"url","message":"Sign in","url":"https://example.com/auth","elicitationId":"` + urlID + `","_meta":{` + related + `}}`},
		{"an upstream elicitationId is replaced", "elicitation/create",
			`{"mode":"url","elicitationId":"up","message":"m","url":"u"}`,
			`{"mode":"url","elicitationId":"` + urlID + `","message":"m","url":"u","_meta":{` + related + `}}`},
		{"sampling keeps other _meta", "sampling/createMessage",
			`{"messages":[{"role":"user","content":{"type":"text","text":"What is the capital of France?"}}],"maxTokens":100,"_meta":{"progressToken":7}}`,
			`{"messages":[{"role":"user","content":{"type":"text","text":"What is the capital of France?"}}],"maxTokens":100,"_meta":{"progressToken":7,` + related + `}}`},
		{"roots without params", "roots/list", ``, `{"_meta":{` + related + `}}`},
		{"roots with null params", "roots/list", `null`, `{"_meta":{` + related + `}}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m, p, err := InputToLegacy("tb-1", "k", sep2663.InputRequest{Method: tc.method, Params: json.RawMessage(tc.params)})
			if err != nil {
				t.Fatal(err)
			}
			if m != tc.method || string(p) != tc.wantParams {
				t.Fatalf("\n got %s %s\nwant %s %s", m, p, tc.method, tc.wantParams)
			}
		})
	}
	for _, method := range []string{"tools/call", "ping", "", "elicitation/complete"} {
		if _, _, err := InputToLegacy("tb-1", "k", sep2663.InputRequest{Method: method}); !errors.Is(err, ErrUnsupportedInput) {
			t.Errorf("method %q: err %v", method, err)
		}
	}
	if _, _, err := InputToLegacy("tb-1", "k", sep2663.InputRequest{Method: "roots/list", Params: json.RawMessage(`[1]`)}); err == nil {
		t.Error("array params accepted")
	}
}

func TestElicitationID(t *testing.T) {
	id := ElicitationID("tb-1", "k")
	if !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(id) {
		t.Fatalf("id %q", id)
	}
	if ElicitationID("tb-1", "k") != id {
		t.Fatal("not stable")
	}
	for _, other := range [][2]string{{"tb-1", "k2"}, {"tb-2", "k"}, {"tb-1k", ""}, {"tb-", "1k"}} {
		if ElicitationID(other[0], other[1]) == id {
			t.Fatalf("collision with %v", other)
		}
	}
}

func TestInputResponseToModern(t *testing.T) {
	cases := []struct{ name, in, want string }{
		{"elicit result", `{"action":"accept","content":{"confirm":true},"_meta":{` + related + `}}`, `{"action":"accept","content":{"confirm":true}}`},
		{"other _meta kept", `{"_meta":{"x":1,` + related + `},"roots":[{"uri":"file:///a"}]}`, `{"_meta":{"x":1},"roots":[{"uri":"file:///a"}]}`},
		{"no _meta", `{"role":"assistant","content":{"type":"text","text":"Paris."},"model":"m","stopReason":"endTurn"}`, `{"role":"assistant","content":{"type":"text","text":"Paris."},"model":"m","stopReason":"endTurn"}`},
		{"_meta null dropped", `{"action":"decline","_meta":null}`, `{"action":"decline"}`},
	}
	for _, tc := range cases {
		got, err := InputResponseToModern(json.RawMessage(tc.in))
		if err != nil || string(got) != tc.want {
			t.Errorf("%s: got %s, %v\nwant %s", tc.name, got, err, tc.want)
		}
	}
	if _, err := InputResponseToModern(json.RawMessage(`"x"`)); err == nil {
		t.Error("string accepted")
	}
}
