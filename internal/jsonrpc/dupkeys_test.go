package jsonrpc

import (
	"errors"
	"strings"
	"testing"
)

// TestDecodeRefusesDuplicateKeys (issue 12, acceptance 7): a message that names a member
// twice — the tool, the task id, anything at any depth, or the envelope itself — is
// refused with -32600, so the tool the bridge checks is the tool that runs.
func TestDecodeRefusesDuplicateKeys(t *testing.T) {
	refused := map[string]string{
		"tool name twice":           `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"search","arguments":{},"name":"delete"}}`,
		"method twice":              `{"jsonrpc":"2.0","id":1,"method":"tools/list","method":"tools/call","params":{}}`,
		"id twice":                  `{"jsonrpc":"2.0","id":1,"id":2,"method":"ping"}`,
		"params twice":              `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a"},"params":{"name":"b"}}`,
		"taskId twice":              `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"mine","taskId":"yours"}}`,
		"deep in arguments":         `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","arguments":{"q":{"x":[{"k":1,"k":2}]}}}}`,
		"in _meta":                  `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","_meta":{"progressToken":1,"progressToken":2}}}`,
		"escaped spelling":          `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"search","n\u0061me":"delete"}}`,
		"case-folded envelope":      `{"jsonrpc":"2.0","id":1,"method":"tools/list","Method":"tools/call"}`,
		"envelope in another case":  `{"jsonrpc":"2.0","id":1,"METHOD":"tools/call"}`,
		"case-folded params member": `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"mine","TaskID":"yours"}}`,
		"response result":           `{"jsonrpc":"2.0","id":1,"result":{"taskId":"a","taskId":"b"}}`,
		"notification":              `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1,"requestId":2}}`,
	}
	for name, body := range refused {
		m, err := Decode([]byte(body))
		var je *Error
		if !errors.As(err, &je) || je.Code != CodeInvalidRequest {
			t.Errorf("%s: Decode = %+v, %v; want -32600", name, m, err)
		}
	}
	// A large object (past the linear check) with its duplicate at the end.
	var b strings.Builder
	b.WriteString(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{`)
	for i := range 500 {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`"k` + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + itoa(i) + `":1`)
	}
	b.WriteString(`,"ka0":2}}}`)
	if _, err := Decode([]byte(b.String())); err == nil || !strings.Contains(err.Error(), `"ka0" given twice in params.arguments`) {
		t.Errorf("500-member object with a late duplicate: %v", err)
	}

	accepted := []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","arguments":{"name":"same name at another level","x":{"name":1}}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","arguments":{"Name":1,"name":2}}}`, // case differs below the top of params
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","arguments":[{"k":1},{"k":2}]}}`,
		`{"jsonrpc":"2.0","id":"x\"y","method":"ping","params":{"a\\":"b\"","a\\\\":1}}`,
		`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"{\"k\":1,\"k\":2}"}]}}`, // a string that looks like JSON
		` { "jsonrpc" : "2.0" , "id" : 1 , "method" : "ping" , "params" : { } } `,
	}
	for _, body := range accepted {
		if _, err := Decode([]byte(body)); err != nil {
			t.Errorf("Decode(%s) = %v, want accepted", body, err)
		}
	}
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var d []byte
	for ; i > 0; i /= 10 {
		d = append([]byte{byte('0' + i%10)}, d...)
	}
	return string(d)
}

// FuzzDuplicateKeys: the scanner never panics on text encoding/json accepts, and agrees
// with a decode into a map about exact duplicates at the top level.
func FuzzDuplicateKeys(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"a","params":{"x":1,"x":2}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"method":"a","params":{"x":[1,{"y":"\""}]}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = Decode(b)
	})
}
