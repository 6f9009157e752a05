package sep2663

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
)

func TestParamHeadersValid(t *testing.T) {
	cases := []struct {
		name, schema string
		want         []string // "Name@a.b"
	}{
		{"none", `{"type":"object","properties":{"q":{"type":"string"}}}`, nil},
		{"no schema", ``, nil},
		{"spec example", `{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"},"query":{"type":"string"}}}`,
			[]string{"Region@region"}},
		{"nested through properties", `{"type":"object","properties":{"target":{"type":"object","properties":{"zone":{"type":"integer","x-mcp-header":"Zone"}}},"dry":{"type":"boolean","x-mcp-header":"Dry-Run"}}}`,
			[]string{"Zone@target.zone", "Dry-Run@dry"}},
		{"token punctuation", `{"properties":{"a":{"type":"string","x-mcp-header":"X!#$%&'*+-.^_|~1"}}}`, []string{"X!#$%&'*+-.^_|~1@a"}},
		{"a property named x-mcp-header", `{"properties":{"x-mcp-header":{"type":"string"}}}`, nil},
		{"annotation-like data in const", `{"properties":{"a":{"type":"object","const":{"x-mcp-header":"A"}}}}`, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			hs, err := ParamHeaders(json.RawMessage(tc.schema))
			if err != nil {
				t.Fatalf("ParamHeaders: %v", err)
			}
			var got []string
			for _, h := range hs {
				got = append(got, h.Name+"@"+strings.Join(h.Path, "."))
			}
			if strings.Join(got, " ") != strings.Join(tc.want, " ") {
				// properties are walked in document order
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestParamHeadersInvalid(t *testing.T) {
	cases := map[string]string{
		"empty":                   `{"properties":{"a":{"type":"string","x-mcp-header":""}}}`,
		"not a string":            `{"properties":{"a":{"type":"string","x-mcp-header":7}}}`,
		"space":                   `{"properties":{"a":{"type":"string","x-mcp-header":"My Region"}}}`,
		"colon":                   `{"properties":{"a":{"type":"string","x-mcp-header":"A:B"}}}`,
		"CRLF":                    `{"properties":{"a":{"type":"string","x-mcp-header":"A\r\nX-Evil: 1"}}}`,
		"non-ASCII":               `{"properties":{"a":{"type":"string","x-mcp-header":"Régión"}}}`,
		"duplicate":               `{"properties":{"a":{"type":"string","x-mcp-header":"Region"},"b":{"type":"string","x-mcp-header":"REGION"}}}`,
		"number":                  `{"properties":{"a":{"type":"number","x-mcp-header":"A"}}}`,
		"object":                  `{"properties":{"a":{"type":"object","x-mcp-header":"A"}}}`,
		"no type":                 `{"properties":{"a":{"x-mcp-header":"A"}}}`,
		"type list":               `{"properties":{"a":{"type":["string","null"],"x-mcp-header":"A"}}}`,
		"on the root":             `{"type":"string","x-mcp-header":"A"}`,
		"under items":             `{"properties":{"l":{"type":"array","items":{"type":"string","x-mcp-header":"A"}}}}`,
		"under oneOf":             `{"oneOf":[{"properties":{"a":{"type":"string","x-mcp-header":"A"}}}]}`,
		"under anyOf":             `{"properties":{"a":{"anyOf":[{"type":"string","x-mcp-header":"A"}]}}}`,
		"under not":               `{"not":{"properties":{"a":{"type":"string","x-mcp-header":"A"}}}}`,
		"under if/then":           `{"if":{"type":"object"},"then":{"properties":{"a":{"type":"string","x-mcp-header":"A"}}}}`,
		"under $defs":             `{"$defs":{"r":{"type":"string","x-mcp-header":"A"}},"properties":{"a":{"$ref":"#/$defs/r"}}}`,
		"under additional":        `{"additionalProperties":{"type":"string","x-mcp-header":"A"}}`,
		"under patternProperties": `{"patternProperties":{"^a":{"type":"string","x-mcp-header":"A"}}}`,
	}
	for name, schema := range cases {
		t.Run(name, func(t *testing.T) {
			hs, err := ParamHeaders(json.RawMessage(schema))
			if !errors.Is(err, ErrInvalidParamHeader) {
				t.Fatalf("ParamHeaders = %v, %v; want ErrInvalidParamHeader", hs, err)
			}
		})
	}
}

// TestParamHeaderValues pins the spec's encoding table and type conversions.
func TestParamHeaderValues(t *testing.T) {
	hs := []ParamHeader{{Name: "V", Path: []string{"v"}}}
	cases := []struct {
		args string
		want string // "" means no header
	}{
		{`{"v":"us-west1"}`, "us-west1"},
		{`{"v":"Hello, 世界"}`, "=?base64?SGVsbG8sIOS4lueVjA==?="},
		{`{"v":" padded "}`, "=?base64?IHBhZGRlZCA=?="},
		{`{"v":"line1\nline2"}`, "=?base64?bGluZTEKbGluZTI=?="},
		{`{"v":"=?base64?literal?="}`, "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?="},
		{`{"v":42}`, "42"},
		{`{"v":-7}`, "-7"},
		{`{"v":42.0}`, "42"},
		{`{"v":true}`, "true"},
		{`{"v":false}`, "false"},
		{`{"v":null}`, ""},
		{`{}`, ""},
		{`{"v.x":"dotted key is another key"}`, ""},
	}
	for _, tc := range cases {
		h := ParamHeaderValues(hs, json.RawMessage(tc.args))
		got, has := h["Mcp-Param-V"]
		switch {
		case tc.want == "" && has:
			t.Errorf("%s: header %q, want none", tc.args, got)
		case tc.want != "" && (len(got) != 1 || got[0] != tc.want):
			t.Errorf("%s: header %q, want %q", tc.args, got, tc.want)
		}
	}
	nested := []ParamHeader{{Name: "Zone", Path: []string{"target", "zone"}}}
	if got := ParamHeaderValues(nested, json.RawMessage(`{"target":{"zone":3}}`)).Get("Mcp-Param-Zone"); got != "3" {
		t.Errorf("nested: %q, want 3", got)
	}
	if h := ParamHeaderValues(nested, json.RawMessage(`{"target":"flat"}`)); h != nil {
		t.Errorf("path through a non-object: %v, want no header", h)
	}
}

// TestCallPerRequestHeader: RequestMeta.Header reaches the upstream on that request only,
// and never replaces a protocol header.
func TestCallPerRequestHeader(t *testing.T) {
	u := newUpstream(t, result(`{"resultType":"complete"}`))
	c := NewClient(ClientOptions{URL: u.URL + "/mcp"})
	meta := RequestMeta{Header: http.Header{"Mcp-Param-Region": {"us-west1"}, "Mcp-Name": {"forged"}}}
	if _, err := c.Call(context.Background(), MethodToolsCall, json.RawMessage(`{"name":"t","arguments":{}}`), meta, nil); err != nil {
		t.Fatal(err)
	}
	s := u.last(t)
	if got := s.header.Get("Mcp-Param-Region"); got != "us-west1" {
		t.Errorf("Mcp-Param-Region = %q", got)
	}
	if got := s.header.Values("Mcp-Name"); len(got) != 1 || got[0] != "t" {
		t.Errorf("Mcp-Name = %q, want the body's name only", got)
	}
	if _, err := c.Call(context.Background(), MethodToolsCall, json.RawMessage(`{"name":"t","arguments":{}}`), RequestMeta{}, nil); err != nil {
		t.Fatal(err)
	}
	if got := u.last(t).header.Get("Mcp-Param-Region"); got != "" {
		t.Errorf("the next request carries Mcp-Param-Region %q", got)
	}
}
