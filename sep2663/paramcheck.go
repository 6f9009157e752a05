package sep2663

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/tidwall/gjson"
)

// CheckParamHeaders is the server side of custom headers from tool parameters: for each
// annotation of the tool (ParamHeaders) whose argument is present and not null, the request
// must carry exactly one Mcp-Param-{Name} header whose value, decoded (DecodeHeaderValue:
// a malformed =?base64?…?= is refused, a value without both sentinel ends is literal),
// equals the argument's header string (ParamHeaderValues' form). Anything else is -32020
// (ErrHeaderMismatch, HTTP 400), so nothing routed on the header can disagree with the body.
// A header for an absent or null argument is ignored. No annotations: nil.
func CheckParamHeaders(h http.Header, headers []ParamHeader, arguments json.RawMessage) error {
	if len(headers) == 0 {
		return nil
	}
	args := gjson.ParseBytes(arguments)
	for _, ph := range headers {
		want, present := valueAt(args, ph.Path)
		if !present {
			continue
		}
		name := HeaderParamPrefix + ph.Name
		vals := h.Values(name)
		switch {
		case len(vals) == 0:
			return ErrHeaderMismatch.Wrapf("missing %s header for parameter %s", name, strings.Join(ph.Path, "."))
		case len(vals) > 1:
			return ErrHeaderMismatch.Wrapf("more than one %s header", name)
		}
		got, ok := DecodeHeaderValue(strings.Trim(vals[0], " \t"))
		if !ok {
			return ErrHeaderMismatch.Wrapf("malformed Base64 in the %s header", name)
		}
		if got != want {
			return ErrHeaderMismatch.Wrapf("%s header does not match parameter %s", name, strings.Join(ph.Path, "."))
		}
	}
	return nil
}
