package sep2663

import (
	"encoding/base64"
	"net/http"
	"strings"

	"github.com/tidwall/gjson"
)

// HTTP header names of the 2026-07-28 Streamable HTTP transport.
const (
	HeaderProtocolVersion = "MCP-Protocol-Version"
	HeaderMethod          = "Mcp-Method"
	HeaderName            = "Mcp-Name"
)

// Markers of the Base64 sentinel form of a header value (case-sensitive).
const (
	sentinelPrefix = "=?base64?"
	sentinelSuffix = "?="
)

// nameField returns the params field mirrored into Mcp-Name for method, or "" when the
// method carries no Mcp-Name.
func nameField(method string) string {
	switch method {
	case MethodToolsCall, MethodPromptsGet:
		return "name"
	case MethodResourcesRead:
		return "uri"
	case MethodTasksGet, MethodTasksUpdate, MethodTasksCancel:
		return "taskId"
	}
	return ""
}

// mcpName reads the Mcp-Name value for method from params without decoding them. ok is
// false when the method has no Mcp-Name or the field is missing or not a string.
func mcpName(method string, params []byte) (string, bool) {
	field := nameField(method)
	if field == "" || len(params) == 0 {
		return "", false
	}
	v := gjson.GetBytes(params, field)
	if v.Type != gjson.String {
		return "", false
	}
	return v.Str, true
}

// EncodeHeaderValue returns v as it must be sent in an Mcp-* header: unchanged when it is
// safe, else in the sentinel form =?base64?<standard Base64 of the UTF-8 bytes>?=. A value
// is unsafe when it holds anything but printable ASCII, starts or ends with a space or tab,
// or could be mistaken for the sentinel form itself.
func EncodeHeaderValue(v string) string {
	if headerSafe(v) {
		return v
	}
	return sentinelPrefix + base64.StdEncoding.EncodeToString([]byte(v)) + sentinelSuffix
}

// DecodeHeaderValue reverses EncodeHeaderValue. ok is false for a malformed sentinel.
func DecodeHeaderValue(v string) (string, bool) {
	if !strings.HasPrefix(v, sentinelPrefix) || !strings.HasSuffix(v, sentinelSuffix) ||
		len(v) < len(sentinelPrefix)+len(sentinelSuffix) {
		return v, true
	}
	b, err := base64.StdEncoding.DecodeString(v[len(sentinelPrefix) : len(v)-len(sentinelSuffix)])
	if err != nil {
		return "", false
	}
	return string(b), true
}

func headerSafe(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < 0x20 || c > 0x7e {
			return false
		}
	}
	if v != "" && (v[0] == ' ' || v[len(v)-1] == ' ') {
		return false
	}
	// Anything starting like the sentinel is encoded, so a decoder never misreads it.
	return !strings.HasPrefix(v, sentinelPrefix)
}

// setProtocolHeaders sets the headers every 2026-07-28 POST carries.
func setProtocolHeaders(h http.Header, method string, params []byte) {
	h.Set("Content-Type", "application/json")
	h.Set("Accept", "application/json, text/event-stream")
	h.Set(HeaderProtocolVersion, ProtocolVersion)
	h.Set(HeaderMethod, EncodeHeaderValue(method))
	if name, ok := mcpName(method, params); ok {
		h.Set(HeaderName, EncodeHeaderValue(name))
	}
}
