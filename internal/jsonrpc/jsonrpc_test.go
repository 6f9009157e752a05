package jsonrpc

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
)

func TestDecodeKinds(t *testing.T) {
	tests := []struct {
		in               string
		req, notif, resp bool
		id               string
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"ping"}`, true, false, false, `1`},
		{`{"jsonrpc":"2.0","id":"a-1","method":"tools/call","params":{"name":"x"}}`, true, false, false, `"a-1"`},
		{`{"jsonrpc":"2.0","method":"notifications/initialized"}`, false, true, false, ``},
		{`{"jsonrpc":"2.0","id":7,"result":{}}`, false, false, true, `7`},
		{`{"jsonrpc":"2.0","id":"x","error":{"code":-32602,"message":"bad"}}`, false, false, true, `"x"`},
		{`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}`, false, false, true, `null`},
	}
	for _, tt := range tests {
		m, err := Decode([]byte(tt.in))
		if err != nil {
			t.Fatalf("%s: %v", tt.in, err)
		}
		if m.IsRequest() != tt.req || m.IsNotification() != tt.notif || m.IsResponse() != tt.resp {
			t.Errorf("%s: kinds req=%v notif=%v resp=%v", tt.in, m.IsRequest(), m.IsNotification(), m.IsResponse())
		}
		if m.ID.Raw() != tt.id {
			t.Errorf("%s: id %q, want %q", tt.in, m.ID.Raw(), tt.id)
		}
		out, err := Encode(m)
		if err != nil {
			t.Fatal(err)
		}
		if !jsonEqual(t, out, []byte(tt.in)) {
			t.Errorf("round trip %s → %s", tt.in, out)
		}
	}
}

func TestDecodeRejects(t *testing.T) {
	tests := []struct {
		in   string
		code int64
	}{
		{``, CodeParseError},
		{`{"jsonrpc":"2.0",`, CodeParseError},
		{`"hello"`, CodeParseError},
		{`[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, CodeInvalidRequest},
		{`{"jsonrpc":"1.0","id":1,"method":"ping"}`, CodeInvalidRequest},
		{`{"id":1,"method":"ping"}`, CodeInvalidRequest},
		{`{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}`, CodeInvalidRequest},
		{`{"jsonrpc":"2.0","id":null,"method":"ping"}`, CodeInvalidRequest},
		{`{"jsonrpc":"2.0","id":1,"method":"x","params":[1,2]}`, CodeInvalidRequest},
		{`{"jsonrpc":"2.0","id":1}`, CodeInvalidRequest},
		{`{"jsonrpc":"2.0","id":1,"result":{},"error":{"code":1,"message":"m"}}`, CodeInvalidRequest},
		{`{"jsonrpc":"2.0"}`, CodeInvalidRequest},
	}
	for _, tt := range tests {
		_, err := Decode([]byte(tt.in))
		var e *Error
		if !errors.As(err, &e) || e.Code != tt.code {
			t.Errorf("%q: err = %v, want code %d", tt.in, err, tt.code)
		}
	}
}

func TestOmitsAbsentID(t *testing.T) {
	m, _ := NewNotification("notifications/progress", map[string]int{"progress": 1})
	b, _ := Encode(m)
	if want := `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}`; string(b) != want {
		t.Errorf("got %s, want %s", b, want)
	}
}

func TestErrorResponseWithoutIDHasNullID(t *testing.T) {
	b, _ := Encode(NewErrorResponse(ID{}, ErrParse))
	if want := `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}`; string(b) != want {
		t.Errorf("got %s", b)
	}
}

func TestAsErrorHidesInternalDetails(t *testing.T) {
	if got := AsError(errors.New("db password is hunter2")); got != ErrInternal {
		t.Errorf("plain error mapped to %v", got)
	}
	coded := ErrInvalidParams.Wrapf("taskId missing")
	if got := AsError(fmt.Errorf("wrapped: %w", coded)); got.Message != "Invalid params: taskId missing" {
		t.Errorf("wrapped coded error lost: %v", got)
	}
	if !errors.Is(fmt.Errorf("x: %w", ErrMethodNotFound), ErrMethodNotFound) {
		t.Error("errors.Is on a sentinel failed")
	}
}

func TestIDString(t *testing.T) {
	if StringID("tb-1").String() != "tb-1" || IntID(42).String() != "42" {
		t.Error("ID.String")
	}
}

func FuzzDecode(f *testing.F) {
	for _, s := range []string{`{"jsonrpc":"2.0","id":1,"method":"ping"}`, `{"jsonrpc":"2.0","id":"x","result":{}}`,
		`{"jsonrpc":"2.0","method":"n","params":{}}`, `[]`, `{`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := Decode(b)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("uncoded error %v", err)
			}
			return
		}
		if m.IsRequest() == m.IsNotification() && m.IsRequest() == m.IsResponse() {
			t.Fatalf("message of no kind: %s", b)
		}
		out, err := Encode(m)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Decode(out); err != nil {
			t.Fatalf("re-decode of %s: %v", out, err)
		}
	})
}

func jsonEqual(t *testing.T, a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return string(xa) == string(ya)
}
