package sep2663

import (
	"errors"
	"net/http"
	"testing"

	"github.com/taskbridge/taskbridge/internal/jsonrpc"
)

// TestCheckParamHeaders pins the server's Mcp-Param-* validation (the conformance
// scenario http-custom-header-server-validation's cases): valid Base64 decodes and
// matches, invalid padding or characters are refused, a value without both sentinel ends
// is literal, a missing header for a present argument is refused, integers and booleans
// compare in their header form.
func TestCheckParamHeaders(t *testing.T) {
	hs := []ParamHeader{{Name: "Region", Path: []string{"region"}}, {Name: "Priority", Path: []string{"priority"}},
		{Name: "Verbose", Path: []string{"opts", "verbose"}}}
	for _, c := range []struct {
		name, args string
		headers    map[string]string
		ok         bool
	}{
		{"plain", `{"region":"us-east1","priority":3}`, map[string]string{"Mcp-Param-Region": "us-east1", "Mcp-Param-Priority": "3"}, true},
		{"base64", `{"region":"Hello"}`, map[string]string{"Mcp-Param-Region": "=?base64?SGVsbG8=?="}, true},
		{"bad padding", `{"region":"Hello"}`, map[string]string{"Mcp-Param-Region": "=?base64?SGVsbG8?="}, false},
		{"bad chars", `{"region":"Hello"}`, map[string]string{"Mcp-Param-Region": "=?base64?SGVs!!!bG8=?="}, false},
		{"literal without prefix", `{"region":"SGVsbG8="}`, map[string]string{"Mcp-Param-Region": "SGVsbG8="}, true},
		{"literal without suffix", `{"region":"=?base64?SGVsbG8="}`, map[string]string{"Mcp-Param-Region": "=?base64?SGVsbG8="}, true},
		{"missing", `{"region":"x"}`, nil, false},
		{"mismatch", `{"region":"x"}`, map[string]string{"Mcp-Param-Region": "y"}, false},
		{"null argument needs no header", `{"region":null}`, nil, true},
		{"nested boolean", `{"opts":{"verbose":true}}`, map[string]string{"Mcp-Param-Verbose": "true"}, true},
		{"integer form", `{"priority":42.0}`, map[string]string{"Mcp-Param-Priority": "42"}, true},
	} {
		h := http.Header{}
		for k, v := range c.headers {
			h.Set(k, v)
		}
		err := CheckParamHeaders(h, hs, []byte(c.args))
		var je *jsonrpc.Error
		switch {
		case c.ok && err != nil:
			t.Errorf("%s: refused: %v", c.name, err)
		case !c.ok && (!errors.As(err, &je) || je.Code != jsonrpc.CodeHeaderMismatch):
			t.Errorf("%s: got %v, want -32020", c.name, err)
		}
	}
	if err := CheckParamHeaders(http.Header{}, nil, []byte(`{"region":"x"}`)); err != nil {
		t.Errorf("a tool without annotations: %v", err)
	}
}
