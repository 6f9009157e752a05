package mapping

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/taskbridge/taskbridge/internal/jsonobj"
	"github.com/taskbridge/taskbridge/legacy"
	"github.com/taskbridge/taskbridge/record"
)

const related = `"io.modelcontextprotocol/related-task":{"taskId":"tb-1"}`

func TestResultForLegacy(t *testing.T) {
	cases := []struct{ name, in, want string }{
		{"resultType stripped, _meta added",
			`{"resultType":"complete","content":[{"type":"text","text":"Deleted f.txt"}]}`,
			`{"content":[{"type":"text","text":"Deleted f.txt"}],"_meta":{` + related + `}}`},
		{"unknown fields keep their bytes and order",
			`{ "zeta" : 1.50E+3 , "content":[ {"type":"text","text":"\u003cb\u003e \"q\" é"} ],"isError":false,"structuredContent":{"answer":42,"nested":{"resultType":"kept"}},"x-vendor":null}`,
			`{"zeta":1.50E+3,"content":[ {"type":"text","text":"\u003cb\u003e \"q\" é"} ],"isError":false,"structuredContent":{"answer":42,"nested":{"resultType":"kept"}},"x-vendor":null,"_meta":{` + related + `}}`},
		{"other _meta keys kept, in place; the 2026-only serverInfo goes (issue 16 item 16)",
			`{"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"s","version":"1"},"trace":"abc"},"content":[]}`,
			`{"_meta":{"trace":"abc",` + related + `},"content":[]}`},
		{"an upstream related-task is replaced, never leaked",
			`{"content":[],"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"UPSTREAM"},"k":1}}`,
			`{"content":[],"_meta":{` + related + `,"k":1}}`},
		{"_meta null is replaced", `{"content":[],"_meta":null}`, `{"content":[],"_meta":{` + related + `}}`},
		{"_meta not an object is replaced", `{"_meta":"x","content":[]}`, `{"_meta":{` + related + `},"content":[]}`},
		{"duplicate resultType all stripped", `{"resultType":"a","content":[],"resultType":"b"}`, `{"content":[],"_meta":{` + related + `}}`},
		{"escaped key is still resultType", `{"result\u0054ype":"complete","content":[]}`, `{"content":[],"_meta":{` + related + `}}`},
		{"ttlMs and cacheScope are tool fields here", `{"content":[],"ttlMs":5,"cacheScope":"x"}`, `{"content":[],"ttlMs":5,"cacheScope":"x","_meta":{` + related + `}}`},
		{"empty object", `{}`, `{"_meta":{` + related + `}}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ResultForLegacy(json.RawMessage(tc.in), "tb-1")
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Fatalf("\n got %s\nwant %s", got, tc.want)
			}
			if !json.Valid(got) {
				t.Fatal("invalid JSON")
			}
		})
	}
	for _, bad := range []string{``, `null`, `[]`, `"s"`, `{"a":1} {}`, `{"a":}`, `{"a":1`} {
		if _, err := ResultForLegacy(json.RawMessage(bad), "tb-1"); err == nil {
			t.Errorf("ResultForLegacy(%q) accepted", bad)
		}
	}
}

func TestResultForLegacyEscapesTaskID(t *testing.T) {
	got, err := ResultForLegacy(json.RawMessage(`{}`), `a"b<`)
	if err != nil || !json.Valid(got) {
		t.Fatalf("%s, %v", got, err)
	}
	var r struct {
		Meta map[string]legacy.RelatedTask `json:"_meta"`
	}
	if json.Unmarshal(got, &r) != nil || r.Meta[legacy.MetaRelatedTask].TaskID != `a"b<` {
		t.Fatalf("got %s", got)
	}
}

func TestStripModern(t *testing.T) {
	got, err := StripModern(json.RawMessage(`{"resultType":"complete","prompts":[ 1 ],"ttlMs":3600000,"cacheScope":"public","nextCursor":"c","_meta":{"ttlMs":1}}`))
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"prompts":[ 1 ],"nextCursor":"c","_meta":{"ttlMs":1}}`; string(got) != want {
		t.Fatalf("got %s\nwant %s", got, want)
	}
	// Issue 16 item 16: the 2026-only _meta serverInfo does not reach a legacy client.
	got, err = StripModern(json.RawMessage(`{"content":[],"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"s","version":"1"},"k":2}}`))
	if want := `{"content":[],"_meta":{"k":2}}`; err != nil || string(got) != want {
		t.Fatalf("got %s, %v\nwant %s", got, err, want)
	}
	if _, err := StripModern(json.RawMessage(`[1]`)); err == nil {
		t.Fatal("array accepted")
	}
}

func TestErrorForLegacy(t *testing.T) {
	cases := []struct {
		name      string
		in        string
		outcome   record.Outcome
		retryable bool
		want      string
	}{
		{"no data: retryable and outcome added", `{"code":-32603,"message":"API rate limit exceeded"}`, record.OutcomeFailed, true,
			`{"code":-32603,"message":"API rate limit exceeded","data":{"retryable":true,"outcome":"failed"}}`},
		{"null data counts as none", `{"code":-32000,"message":"m","data":null}`, record.OutcomeUnknown, false,
			`{"code":-32000,"message":"m","data":{"retryable":false,"outcome":"unknown"}}`},
		{"object data gains the missing keys", `{"code":-32000,"message":"m","data":{"retryAfter":30}}`, record.OutcomeFailed, true,
			`{"code":-32000,"message":"m","data":{"retryAfter":30,"retryable":true,"outcome":"failed"}}`},
		{"existing keys never overwritten", `{"code":-32000,"message":"m","data":{"retryable":false,"outcome":"unknown"}}`, record.OutcomeFailed, true,
			`{"code":-32000,"message":"m","data":{"retryable":false,"outcome":"unknown"}}`},
		{"non-object data left alone", `{"code":-32000,"message":"m","data":"text"}`, record.OutcomeFailed, true,
			`{"code":-32000,"message":"m","data":"text"}`},
		{"missing error object", ``, "", false,
			`{"code":-32603,"message":"upstream task failed without an error object","data":{"retryable":false,"outcome":"failed"}}`},
		{"garbage error object", `[1,2]`, record.OutcomeFailed, false,
			`{"code":-32603,"message":"upstream task failed without an error object","data":{"retryable":false,"outcome":"failed"}}`},
		{"the lost-task error passes unchanged", string(LostTask().Error), record.OutcomeUnknown, true, string(LostTask().Error)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := ErrorForLegacy(json.RawMessage(tc.in), tc.outcome, tc.retryable)
			got, err := json.Marshal(e)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Fatalf("\n got %s\nwant %s", got, tc.want)
			}
		})
	}
}

func TestToolsListForLegacy(t *testing.T) {
	in := `{"resultType":"complete","tools":[` +
		`{"name":"greet","description":"sync","inputSchema":{"type":"object"}},` +
		`{"name":"slow_compute","inputSchema":{"type":"object"},"execution":{"taskSupport":"required","x":1}},` +
		`{"name":"skip","inputSchema":{"type":"object"}}` +
		`],"nextCursor":"n","ttlMs":0,"cacheScope":"private","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"s","version":"1"}}}`
	seen := map[string]string{}
	got, err := ToolsListForLegacy(json.RawMessage(in), func(name string, tool json.RawMessage) string {
		seen[name] = string(tool)
		switch name {
		case "greet":
			return legacy.TaskSupportForbidden
		case "slow_compute":
			return legacy.TaskSupportOptional
		}
		return ""
	})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"tools":[` +
		`{"name":"greet","description":"sync","inputSchema":{"type":"object"},"execution":{"taskSupport":"forbidden"}},` +
		`{"name":"slow_compute","inputSchema":{"type":"object"},"execution":{"taskSupport":"optional","x":1}},` +
		`{"name":"skip","inputSchema":{"type":"object"}}` +
		`],"nextCursor":"n"}` // the 2026-only serverInfo goes, and the _meta it leaves empty
	if string(got) != want {
		t.Fatalf("\n got %s\nwant %s", got, want)
	}
	if seen["greet"] != `{"name":"greet","description":"sync","inputSchema":{"type":"object"}}` {
		t.Fatalf("mode saw %q", seen["greet"])
	}
	for _, bad := range []string{`{"tools":{}}`, `{"tools":[1]}`, `[]`} {
		if _, err := ToolsListForLegacy(json.RawMessage(bad), func(string, json.RawMessage) string { return "optional" }); err == nil {
			t.Errorf("accepted %s", bad)
		}
	}
	got, err = ToolsListForLegacy(json.RawMessage(`{"resultType":"complete"}`), nil)
	if err != nil || string(got) != `{}` {
		t.Fatalf("no tools: %s, %v", got, err)
	}
}

func FuzzResultForLegacy(f *testing.F) {
	f.Add([]byte(`{"resultType":"complete","content":[{"type":"text","text":"x"}]}`))
	f.Add([]byte(`{"content":[],"_meta":{"a":1,"io.modelcontextprotocol/related-task":{"taskId":"u"}},"isError":true}`))
	f.Add([]byte(`{"a":1,"a":2,"_meta":null,"_meta":{"b":[]}}`))
	f.Add([]byte(` { "k" : "\u00e9\ud83d\ude00" , "n" : -0.0e-0 } `))
	f.Add([]byte(`[1]`))
	f.Fuzz(func(t *testing.T, in []byte) {
		out, err := ResultForLegacy(in, "tb-1")
		var before map[string]json.RawMessage
		inErr := json.Unmarshal(in, &before)
		if inErr == nil && before == nil { // null
			inErr = jsonobj.ErrNotObject
		}
		if err != nil {
			if inErr == nil {
				t.Fatalf("rejected a JSON object: %v", err)
			}
			return
		}
		if inErr != nil {
			t.Fatalf("accepted %q, which is not a JSON object", in)
		}
		if !json.Valid(out) {
			t.Fatalf("invalid output %q", out)
		}
		var after map[string]json.RawMessage
		if err := json.Unmarshal(out, &after); err != nil {
			t.Fatal(err)
		}
		if _, ok := after["resultType"]; ok {
			t.Fatal("resultType kept")
		}
		for k, v := range before {
			if k == "resultType" || k == "_meta" {
				continue
			}
			if !bytes.Equal(after[k], v) {
				t.Fatalf("field %q changed: %s → %s", k, v, after[k])
			}
		}
		for k := range after {
			if _, ok := before[k]; !ok && k != "_meta" {
				t.Fatalf("field %q appeared", k)
			}
		}
		var meta map[string]json.RawMessage
		if err := json.Unmarshal(after["_meta"], &meta); err != nil {
			t.Fatalf("_meta: %v", err)
		}
		if string(meta[legacy.MetaRelatedTask]) != `{"taskId":"tb-1"}` {
			t.Fatalf("related-task = %s", meta[legacy.MetaRelatedTask])
		}
		var oldMeta map[string]json.RawMessage
		if json.Unmarshal(before["_meta"], &oldMeta) == nil {
			for k, v := range oldMeta {
				if k != legacy.MetaRelatedTask && !bytes.Equal(meta[k], v) {
					t.Fatalf("_meta[%q] changed: %s → %s", k, v, meta[k])
				}
			}
		}
		if strings.Count(string(out), `"tb-1"`) < 1 {
			t.Fatal("task id missing")
		}
	})
}

// TestWithoutTools: only the named tools go; the rest of the result keeps its bytes, and a
// result with nothing to drop is returned as it came.
func TestWithoutTools(t *testing.T) {
	in := json.RawMessage(`{"tools":[{"name":"a","x":1},{"name":"bad","inputSchema":{}},{"name":"c"}],"nextCursor":"n2"}`)
	got, err := WithoutTools(in, func(name string) bool { return name == "bad" })
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"tools":[{"name":"a","x":1},{"name":"c"}],"nextCursor":"n2"}`; string(got) != want {
		t.Errorf("got %s, want %s", got, want)
	}
	same, err := WithoutTools(in, func(string) bool { return false })
	if err != nil || string(same) != string(in) {
		t.Errorf("nothing dropped: %s, %v", same, err)
	}
	if _, err := WithoutTools(json.RawMessage(`{"tools":{}}`), func(string) bool { return true }); err == nil {
		t.Error("tools not an array: want an error")
	}
}
