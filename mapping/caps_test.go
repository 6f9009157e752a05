package mapping

import (
	"encoding/json"
	"testing"

	"github.com/taskbridge/taskbridge/sep2663"
)

func TestClientCapsToModern(t *testing.T) {
	cases := []struct {
		name      string
		in        string
		withTasks bool
		want      string
	}{
		{"empty, with tasks", `{}`, true, `{"extensions":{"io.modelcontextprotocol/tasks":{}}}`},
		{"absent", ``, false, `{}`},
		{"null", `null`, true, `{"extensions":{"io.modelcontextprotocol/tasks":{}}}`},
		{"2025-06-18 elicitation {} means form", `{"elicitation":{}}`, false, `{"elicitation":{"form":{}}}`},
		{"2025-11-25 form and url kept", `{"elicitation":{"url":{},"form":{"x":1}}}`, false, `{"elicitation":{"form":{"x":1},"url":{}}}`},
		{"url only", `{"elicitation":{"url":{}}}`, false, `{"elicitation":{"url":{}}}`},
		{"sampling, roots, experimental carried as written", `{"roots":{"listChanged":true},"sampling":{"context":{},"tools":{}},"experimental":{"x":{"y":1}}}`, false,
			`{"experimental":{"x":{"y":1}},"roots":{"listChanged":true},"sampling":{"context":{},"tools":{}}}`},
		{"legacy tasks dropped", `{"tasks":{"list":{},"cancel":{},"requests":{"elicitation":{"create":{}},"sampling":{"createMessage":{}}}},"elicitation":{}}`, true,
			`{"elicitation":{"form":{}},"extensions":{"io.modelcontextprotocol/tasks":{}}}`},
		{"client extensions kept, tasks only when asked", `{"extensions":{"io.modelcontextprotocol/ui":{"v":1},"io.modelcontextprotocol/tasks":{}}}`, false,
			`{"extensions":{"io.modelcontextprotocol/ui":{"v":1}}}`},
		{"boolean leaves dropped", `{"sampling":true,"roots":null,"elicitation":false,"unknown":{}}`, false, `{}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ClientCapsToModern(json.RawMessage(tc.in), tc.withTasks)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Fatalf("\n got %s\nwant %s", got, tc.want)
			}
			var caps sep2663.ClientCapabilities
			if err := json.Unmarshal(got, &caps); err != nil {
				t.Fatalf("not a sep2663.ClientCapabilities: %v", err)
			}
			if caps.HasExtension(sep2663.ExtensionTasks) != tc.withTasks {
				t.Fatalf("tasks extension = %v, want %v", !tc.withTasks, tc.withTasks)
			}
		})
	}
	if _, err := ClientCapsToModern(json.RawMessage(`[]`), true); err == nil {
		t.Fatal("array accepted")
	}
}

func TestServerCapsToLegacy(t *testing.T) {
	var discover sep2663.DiscoverResult
	raw := `{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{"tools":{"listChanged":true},"resources":{"subscribe":true},"prompts":{},"logging":{},"completions":{},"experimental":{"e":{}},"extensions":{"io.modelcontextprotocol/tasks":{}}},"ttlMs":0,"cacheScope":"private"}`
	if err := json.Unmarshal([]byte(raw), &discover); err != nil {
		t.Fatal(err)
	}
	got, err := ServerCapsToLegacy(discover.Capabilities, true)
	if err != nil {
		t.Fatal(err)
	}
	// Issue 16 item 8: listChanged and subscribe are not relayed to a legacy session, so
	// they are not advertised; logging is (setLevel becomes the per-request logLevel).
	want := `{"experimental":{"e":{}},"logging":{},"completions":{},"prompts":{},"resources":{},"tools":{},"tasks":{"list":{},"cancel":{},"requests":{"tools":{"call":{}}}}}`
	if string(got) != want {
		t.Fatalf("\n got %s\nwant %s", got, want)
	}
	// A route that relays the change notifications advertises exactly what the upstream
	// offers.
	got, err = ServerCapsToLegacyRelayed(discover.Capabilities, true)
	want = `{"experimental":{"e":{}},"logging":{},"completions":{},"prompts":{},"resources":{"subscribe":true},"tools":{"listChanged":true},"tasks":{"list":{},"cancel":{},"requests":{"tools":{"call":{}}}}}`
	if err != nil || string(got) != want {
		t.Fatalf("relayed:\n got %s\nwant %s (%v)", got, want, err)
	}
	got, err = ServerCapsToLegacy(sep2663.ServerCapabilities{Tools: json.RawMessage(`{}`)}, false)
	if err != nil || string(got) != `{"tools":{}}` {
		t.Fatalf("without tasks: %s, %v", got, err)
	}
	if _, err := ServerCapsToLegacy(sep2663.ServerCapabilities{Tools: json.RawMessage(`{`)}, false); err == nil {
		t.Fatal("invalid JSON accepted")
	}
}

func TestWithoutTasksExtension(t *testing.T) {
	const tasks = `"io.modelcontextprotocol/tasks":{}`
	for _, c := range []struct{ in, want string }{
		{`{"extensions":{` + tasks + `}}`, `{}`},
		{`{"sampling":{},"extensions":{"x/y":{"a":1},` + tasks + `}}`, `{"sampling":{},"extensions":{"x/y":{"a":1}}}`},
		{`{"elicitation":{"form":{}}}`, `{"elicitation":{"form":{}}}`},
		{`{"extensions":{"x/y":{}}}`, `{"extensions":{"x/y":{}}}`},
		{`{}`, `{}`},
	} {
		got, err := WithoutTasksExtension(json.RawMessage(c.in))
		if err != nil || string(got) != c.want {
			t.Errorf("WithoutTasksExtension(%s) = %s, %v; want %s", c.in, got, err, c.want)
		}
	}
	if _, err := WithoutTasksExtension(json.RawMessage(`[1]`)); err == nil {
		t.Error("an array: want an error")
	}
}
