package mapping

// The reverse route's translations (2025-11-25 upstream → 2026-07-28 client): pure functions
// like the rest of this package. Only the top level of a payload (and its _meta) is decoded;
// every other member keeps its bytes.

import (
	"encoding/json"

	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/internal/jsonobj"
	"github.com/taskbridge/taskbridge/internal/jsonrpc"
	"github.com/taskbridge/taskbridge/legacy"
	"github.com/taskbridge/taskbridge/sep2663"
)

// ServerCapsToModern translates 2025-11-25 ServerCapabilities: the shared keys are
// kept as sent, tasks is dropped (SEP-2663 forbids advertising it), and the tasks
// extension is added when the upstream can run tools/call as a task. What the reverse
// route does not deliver to a 2026-07-28 client is not advertised (issue 16 item 8):
// listChanged and subscribe (it has no subscriptions/listen) and logging (its replies
// carry no notifications/message); the other members of those objects keep their bytes.
func ServerCapsToModern(raw json.RawMessage, tasks bool) (sep2663.ServerCapabilities, error) {
	var in map[string]json.RawMessage
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &in); err != nil {
			return sep2663.ServerCapabilities{}, jsonrpc.NewError(jsonrpc.CodeUpstream, "upstream capabilities are not an object")
		}
	}
	c := sep2663.ServerCapabilities{
		Experimental: in["experimental"], Completions: in["completions"],
		Prompts: undelivered(in["prompts"]), Resources: undelivered(in["resources"]), Tools: undelivered(in["tools"]),
	}
	if tasks {
		c.Extensions = map[string]json.RawMessage{sep2663.ExtensionTasks: json.RawMessage(`{}`)}
	}
	return c, nil
}

// ServerCapsToModernRelayed is ServerCapsToModern for a route that serves
// subscriptions/listen from the upstream session's GET stream: listChanged and subscribe are
// kept as the upstream wrote them (logging is still removed: the route adds it back when it
// relays log messages, bridge/reverse/logs.go).
func ServerCapsToModernRelayed(raw json.RawMessage, tasks bool) (sep2663.ServerCapabilities, error) {
	c, err := ServerCapsToModern(raw, tasks)
	if err != nil {
		return c, err
	}
	var in map[string]json.RawMessage
	if len(raw) > 0 {
		_ = json.Unmarshal(raw, &in)
	}
	c.Prompts, c.Resources, c.Tools = in["prompts"], in["resources"], in["tools"]
	return c, nil
}

// undelivered removes listChanged and subscribe from a capability object (nil stays nil;
// a value that is not an object is kept as sent).
func undelivered(raw json.RawMessage) json.RawMessage {
	if raw == nil || !jsonobj.IsObject(raw) {
		return raw
	}
	o, err := jsonobj.Parse(raw)
	if err != nil {
		return raw
	}
	return o.Without("listChanged", "subscribe").Encode()
}

// modernOnlyParams are request fields a legacy server must not see.
var modernOnlyParams = []string{"inputResponses", "requestState", "task"}

// modernMetaKeys are the 2026-07-28 envelope keys removed from a forwarded request's _meta.
var modernMetaKeys = []string{sep2663.MetaProtocolVersion, sep2663.MetaClientCapabilities, sep2663.MetaClientInfo,
	"io.modelcontextprotocol/logLevel"}

// LegacyParams strips the modern envelope and fields from params for a legacy upstream.
// Only the top level and _meta are decoded; other members keep their bytes and order.
func LegacyParams(params json.RawMessage) (jsonobj.Object, error) {
	p, err := jsonobj.Parse(params)
	if err != nil {
		return nil, jsonrpc.ErrInvalidParams.Wrapf("params must be an object")
	}
	return p.Without(modernOnlyParams...).DropMeta(modernMetaKeys...), nil
}

// WithCacheHints adds ttlMs 0 and cacheScope "private" when missing: the result came from
// the caller's own upstream session, and the legacy server said nothing about its
// lifetime, so a client must neither share nor reuse it.
func WithCacheHints(res json.RawMessage) (json.RawMessage, error) {
	top, err := jsonobj.Parse(res)
	if err != nil {
		return nil, jsonrpc.NewError(jsonrpc.CodeUpstream, "upstream result is not an object")
	}
	return top.SetDefault("ttlMs", json.RawMessage(`0`)).SetDefault("cacheScope", json.RawMessage(`"private"`)).Encode(), nil
}

// ToolsListForModern drops execution.taskSupport (2026-07-28 tools have no per-tool task
// flag; the server decides) and keeps everything else as written.
func ToolsListForModern(res json.RawMessage) (json.RawMessage, error) {
	top, err := jsonobj.Parse(res)
	if err != nil {
		return nil, jsonrpc.NewError(jsonrpc.CodeUpstream, "upstream tools/list result is not an object")
	}
	raw, ok := top.Get("tools")
	if !ok {
		return top.Encode(), nil
	}
	tools, err := jsonobj.Elements(raw)
	if err != nil {
		return top.Encode(), nil // not an array: nothing to strip
	}
	for i, t := range tools {
		if tool, err := jsonobj.Parse(t); err == nil {
			tools[i] = tool.DropChildKeys("execution", "taskSupport").Encode()
		}
	}
	return top.Set("tools", jsonobj.EncodeArray(tools)).Encode(), nil
}

// ResultForModern stamps resultType:"complete" on a legacy result and drops the
// related-task _meta key (not part of SEP-2663).
func ResultForModern(res json.RawMessage) (json.RawMessage, error) {
	m, err := jsonobj.Parse(res)
	if err != nil {
		return nil, jsonrpc.NewError(jsonrpc.CodeUpstream, "upstream result is not an object")
	}
	return m.DropMeta(legacy.MetaRelatedTask).Set("resultType", json.RawMessage(`"complete"`)).Encode(), nil
}

// InputParamsForModern removes what 2026-07-28 input requests do not carry: the
// related-task _meta key, a URL-mode elicitationId and the bridge's input-key hint.
func InputParamsForModern(params json.RawMessage) json.RawMessage {
	p, err := jsonobj.Parse(params)
	if err != nil {
		return params
	}
	return p.Without("elicitationId").DropMeta(legacy.MetaRelatedTask, MetaInputKey).Encode()
}

// MetaInputKey is the _meta key by which a 2025-11-25 server names the MRTR key of a
// request it sends on a call's stream (params._meta["dev.taskbridge/inputKey"]). A legacy
// server has no way of its own to choose the key a 2026-07-28 client sees in
// inputRequests, and without a stable key a client cannot answer a question before it is
// asked (SEP-2322 inputResponses on the first call). Without the hint the bridge numbers
// the requests.
const MetaInputKey = "dev.taskbridge/inputKey"

// InputKeyHint returns the input-key hint of a server request's params, or "" when there
// is none or it is not 1-64 characters of [A-Za-z0-9_.-].
func InputKeyHint(params json.RawMessage) string {
	k := gjson.GetBytes(params, "_meta."+gjson.Escape(MetaInputKey))
	if k.Type != gjson.String || len(k.Str) == 0 || len(k.Str) > 64 {
		return ""
	}
	for _, c := range []byte(k.Str) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-') {
			return ""
		}
	}
	return k.Str
}
