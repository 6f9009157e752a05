package mapping

// The reverse route's translations (2025-11-25 upstream → 2026-07-28 client): pure functions
// like the rest of this package. Only the top level of a payload (and its _meta) is decoded;
// every other member keeps its bytes.

import (
	"encoding/json"

	"github.com/taskbridge/taskbridge/internal/jsonrpc"
	"github.com/taskbridge/taskbridge/legacy"
	"github.com/taskbridge/taskbridge/sep2663"
)

// ServerCapsToModern translates 2025-11-25 ServerCapabilities: the shared keys are
// kept as sent, tasks is dropped (SEP-2663 forbids advertising it), and the tasks
// extension is added when the upstream can run tools/call as a task.
func ServerCapsToModern(raw json.RawMessage, tasks bool) (sep2663.ServerCapabilities, error) {
	var in map[string]json.RawMessage
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &in); err != nil {
			return sep2663.ServerCapabilities{}, jsonrpc.NewError(jsonrpc.CodeUpstream, "upstream capabilities are not an object")
		}
	}
	c := sep2663.ServerCapabilities{
		Experimental: in["experimental"], Logging: in["logging"], Completions: in["completions"],
		Prompts: in["prompts"], Resources: in["resources"], Tools: in["tools"],
	}
	if tasks {
		c.Extensions = map[string]json.RawMessage{sep2663.ExtensionTasks: json.RawMessage(`{}`)}
	}
	return c, nil
}

// modernOnlyParams are request fields a legacy server must not see.
var modernOnlyParams = []string{"inputResponses", "requestState", "task"}

// modernMetaKeys are the 2026-07-28 envelope keys removed from a forwarded request's _meta.
var modernMetaKeys = []string{sep2663.MetaProtocolVersion, sep2663.MetaClientCapabilities, sep2663.MetaClientInfo,
	"io.modelcontextprotocol/logLevel"}

// LegacyParams strips the modern envelope and fields from params for a legacy upstream.
// Only the top level and _meta are decoded; other members keep their bytes.
func LegacyParams(params json.RawMessage) (map[string]json.RawMessage, error) {
	var p map[string]json.RawMessage
	if err := json.Unmarshal(params, &p); err != nil || p == nil {
		return nil, jsonrpc.ErrInvalidParams.Wrapf("params must be an object")
	}
	for _, k := range modernOnlyParams {
		delete(p, k)
	}
	if m, ok := p["_meta"]; ok {
		var meta map[string]json.RawMessage
		if json.Unmarshal(m, &meta) == nil {
			for _, k := range modernMetaKeys {
				delete(meta, k)
			}
		}
		if len(meta) == 0 {
			delete(p, "_meta")
		} else {
			p["_meta"], _ = json.Marshal(meta)
		}
	}
	return p, nil
}

// WithCacheHints adds ttlMs 0 and cacheScope "private" when missing: the result came from
// the caller's own upstream session, and the legacy server said nothing about its
// lifetime, so a client must neither share nor reuse it.
func WithCacheHints(res json.RawMessage) (json.RawMessage, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(res, &top); err != nil || top == nil {
		return nil, jsonrpc.NewError(jsonrpc.CodeUpstream, "upstream result is not an object")
	}
	if _, ok := top["ttlMs"]; !ok {
		top["ttlMs"] = json.RawMessage(`0`)
	}
	if _, ok := top["cacheScope"]; !ok {
		top["cacheScope"] = json.RawMessage(`"private"`)
	}
	return json.Marshal(top)
}

// ToolsListForModern drops execution.taskSupport (2026-07-28 tools have no per-tool task
// flag; the server decides) and keeps everything else.
func ToolsListForModern(res json.RawMessage) (json.RawMessage, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(res, &top); err != nil {
		return nil, jsonrpc.NewError(jsonrpc.CodeUpstream, "upstream tools/list result is not an object")
	}
	var tools []map[string]json.RawMessage
	if json.Unmarshal(top["tools"], &tools) == nil {
		for _, t := range tools {
			var ex map[string]json.RawMessage
			if json.Unmarshal(t["execution"], &ex) == nil && ex != nil {
				delete(ex, "taskSupport")
				if len(ex) == 0 {
					delete(t, "execution")
				} else {
					t["execution"], _ = json.Marshal(ex)
				}
			}
		}
		top["tools"], _ = json.Marshal(tools)
	}
	return json.Marshal(top)
}

// ResultForModern stamps resultType:"complete" on a legacy result and drops the
// related-task _meta key (not part of SEP-2663).
func ResultForModern(res json.RawMessage) (json.RawMessage, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(res, &m); err != nil || m == nil {
		return nil, jsonrpc.NewError(jsonrpc.CodeUpstream, "upstream result is not an object")
	}
	m["resultType"] = json.RawMessage(`"complete"`)
	if meta, ok := m["_meta"]; ok {
		var mm map[string]json.RawMessage
		if json.Unmarshal(meta, &mm) == nil {
			delete(mm, legacy.MetaRelatedTask)
			if len(mm) == 0 {
				delete(m, "_meta")
			} else {
				m["_meta"], _ = json.Marshal(mm)
			}
		}
	}
	return json.Marshal(m)
}

// InputParamsForModern removes what 2026-07-28 input requests do not carry: the
// related-task _meta key and a URL-mode elicitationId.
func InputParamsForModern(params json.RawMessage) json.RawMessage {
	var p map[string]json.RawMessage
	if json.Unmarshal(params, &p) != nil || p == nil {
		return params
	}
	delete(p, "elicitationId")
	if m, ok := p["_meta"]; ok {
		var meta map[string]json.RawMessage
		if json.Unmarshal(m, &meta) == nil {
			delete(meta, legacy.MetaRelatedTask)
			if len(meta) == 0 {
				delete(p, "_meta")
			} else {
				p["_meta"], _ = json.Marshal(meta)
			}
		}
	}
	out, err := json.Marshal(p)
	if err != nil {
		return params
	}
	return out
}
