package sep2663

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
)

// Custom headers from tool parameters (2026-07-28 Streamable HTTP, "Custom Headers from
// Tool Parameters"): a tool's inputSchema may mark a parameter with "x-mcp-header": Name,
// and a client then MUST send the argument's value as the header Mcp-Param-Name on every
// tools/call of that tool, in the same encoding as Mcp-Name. A conforming server rejects a
// call whose header is missing or does not match the body with -32020.

// HeaderParamPrefix begins the name of every header mirrored from a tool parameter.
const HeaderParamPrefix = "Mcp-Param-"

// annotationKey is the inputSchema extension property naming the header.
const annotationKey = "x-mcp-header"

// maxSafeInteger is 2^53-1, the largest integer JavaScript represents exactly; an
// annotated integer parameter must stay within ±maxSafeInteger.
const maxSafeInteger = 1<<53 - 1

// ParamHeader is one valid x-mcp-header annotation of a tool: the header's name part and
// the chain of "properties" keys that leads from the schema root to the parameter.
type ParamHeader struct {
	Name string   // the x-mcp-header value; the header is Mcp-Param-{Name}
	Path []string // property keys from the root, e.g. ["region"] or ["target", "region"]
}

// ErrInvalidParamHeader is wrapped by every reason ParamHeaders rejects a tool definition.
var ErrInvalidParamHeader = errors.New("invalid x-mcp-header annotation")

// subschemaMaps are the JSON Schema keywords whose value is an object of subschemas by
// name; subschemaLists those whose value is an array of subschemas; subschemaOne those
// whose value is one subschema (or, for items, either form). Only "properties" chains from
// the root may carry an annotation; one found under any other keyword makes the tool
// invalid. Values of data keywords (const, enum, default, examples) are never schemas.
var (
	subschemaMaps  = []string{"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"}
	subschemaLists = []string{"oneOf", "anyOf", "allOf", "prefixItems"}
	subschemaOne   = []string{"items", "additionalItems", "additionalProperties", "unevaluatedItems",
		"unevaluatedProperties", "contains", "propertyNames", "not", "if", "then", "else"}
)

// ParamHeaders returns the x-mcp-header annotations of a tool's inputSchema, or an error
// wrapping ErrInvalidParamHeader that says why the tool definition is invalid: a value that
// is empty, not a string or not an HTTP token; two values equal ignoring case; an
// annotation on a parameter whose type is not "string", "integer" or "boolean"; or one
// that is not reachable from the root through "properties" keys alone. A schema without
// annotations (or no schema) gives none and no error.
func ParamHeaders(inputSchema json.RawMessage) ([]ParamHeader, error) {
	if len(inputSchema) == 0 || !strings.Contains(string(inputSchema), annotationKey) {
		return nil, nil // the common case: nothing to validate
	}
	w := &schemaWalk{seen: map[string]string{}}
	w.node(gjson.ParseBytes(inputSchema), nil, true)
	if w.err != nil {
		return nil, w.err
	}
	return w.headers, nil
}

// schemaWalk collects annotations; the first invalid one ends the walk in err.
type schemaWalk struct {
	headers []ParamHeader
	seen    map[string]string // lower-cased name → the name first seen
	err     error
}

func (w *schemaWalk) fail(format string, args ...any) {
	if w.err == nil {
		w.err = fmt.Errorf("%w: %s", ErrInvalidParamHeader, fmt.Sprintf(format, args...))
	}
}

// node visits one schema at path; static says whether path is a chain of "properties"
// keys from the root (the only place an annotation may be).
func (w *schemaWalk) node(s gjson.Result, path []string, static bool) {
	if w.err != nil || !s.IsObject() {
		return
	}
	if a := s.Get(gjson.Escape(annotationKey)); a.Exists() {
		w.annotation(s, a, path, static)
	}
	for _, k := range subschemaMaps {
		s.Get(gjson.Escape(k)).ForEach(func(name, sub gjson.Result) bool {
			w.node(sub, appendPath(path, name.String()), static && k == "properties")
			return w.err == nil
		})
	}
	for _, k := range subschemaLists {
		s.Get(k).ForEach(func(_, sub gjson.Result) bool {
			w.node(sub, path, false)
			return w.err == nil
		})
	}
	for _, k := range subschemaOne {
		sub := s.Get(k)
		if sub.IsArray() { // the old tuple form of items
			sub.ForEach(func(_, e gjson.Result) bool { w.node(e, path, false); return w.err == nil })
			continue
		}
		w.node(sub, path, false)
	}
}

func appendPath(path []string, key string) []string {
	return append(append([]string(nil), path...), key)
}

// annotation checks one x-mcp-header value and the schema it sits on.
func (w *schemaWalk) annotation(s, a gjson.Result, path []string, static bool) {
	where := "the schema root"
	if len(path) > 0 {
		where = "parameter " + strings.Join(path, ".")
	}
	switch {
	case !static || len(path) == 0:
		w.fail("%s: x-mcp-header is allowed only on a property reached through \"properties\" keys alone", where)
		return
	case a.Type != gjson.String || a.Str == "":
		w.fail("%s: x-mcp-header must be a non-empty string", where)
		return
	case !isToken(a.Str):
		w.fail("%s: x-mcp-header %q is not an HTTP field-name token", where, a.Str)
		return
	}
	if t := s.Get("type"); t.Type != gjson.String || (t.Str != "string" && t.Str != "integer" && t.Str != "boolean") {
		w.fail("%s: x-mcp-header needs type string, integer or boolean (got %s)", where, orNone(t.Raw))
		return
	}
	low := strings.ToLower(a.Str)
	if first, dup := w.seen[low]; dup {
		w.fail("%s: x-mcp-header %q repeats %q (names are case-insensitive)", where, a.Str, first)
		return
	}
	w.seen[low] = a.Str
	w.headers = append(w.headers, ParamHeader{Name: a.Str, Path: path})
}

func orNone(raw string) string {
	if raw == "" {
		return "none"
	}
	return raw
}

// isToken reports whether v is an RFC 9110 token (1*tchar), which also excludes controls.
func isToken(v string) bool {
	if v == "" {
		return false
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// ParamHeaderValues returns the Mcp-Param-* headers a tools/call with these arguments
// carries: for each annotation with a value at its exact path, the value as a string
// (strings as is, integers in decimal, booleans as true/false) in the header encoding
// (EncodeHeaderValue). A missing or null value sends no header. A value of another type
// than the annotation allows is sent as its JSON text, so the server's own validation
// answers it. Nil when no header applies.
func ParamHeaderValues(headers []ParamHeader, arguments json.RawMessage) http.Header {
	if len(headers) == 0 || len(arguments) == 0 {
		return nil
	}
	args := gjson.ParseBytes(arguments)
	var h http.Header
	for _, ph := range headers {
		v, ok := valueAt(args, ph.Path)
		if !ok {
			continue
		}
		if h == nil {
			h = http.Header{}
		}
		h.Set(HeaderParamPrefix+ph.Name, EncodeHeaderValue(v))
	}
	return h
}

// valueAt reads the instance value at path and converts it to its header string. ok is
// false when nothing (or null) is there.
func valueAt(v gjson.Result, path []string) (string, bool) {
	for _, key := range path {
		if !v.IsObject() {
			return "", false
		}
		v = v.Get(gjson.Escape(key))
	}
	switch v.Type {
	case gjson.String:
		return v.Str, true
	case gjson.True:
		return "true", true
	case gjson.False:
		return "false", true
	case gjson.Number:
		if n := v.Num; n == float64(int64(n)) && n <= maxSafeInteger && n >= -maxSafeInteger {
			return strconv.FormatInt(int64(n), 10), true // 42.0 and 4.2e1 are the integer 42
		}
		return v.Raw, true
	case gjson.JSON:
		return v.Raw, true
	}
	return "", false // absent or null: the header is omitted
}
