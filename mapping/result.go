package mapping

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/taskbridge/taskbridge/internal/jsonobj"
	"github.com/taskbridge/taskbridge/internal/jsonrpc"
	"github.com/taskbridge/taskbridge/legacy"
	"github.com/taskbridge/taskbridge/record"
	"github.com/taskbridge/taskbridge/sep2663"
)

// modernOnly are the top-level result fields 2026-07-28 added that a legacy client must not
// see: resultType on every result, ttlMs and cacheScope on cacheable results.
var modernOnly = []string{"resultType", "ttlMs", "cacheScope"}

// modernOnlyMeta are the _meta keys only 2026-07-28 defines on results: the server's
// identity, which a 2025-11-25 client learned in initialize (issue 16 item 16). An _meta
// left empty goes entirely.
var modernOnlyMeta = []string{sep2663.MetaServerInfo}

// ResultForLegacy prepares a CallToolResult for tasks/result: it strips a top-level
// "resultType" and sets _meta["io.modelcontextprotocol/related-task"] = {taskId:
// bridgeTaskID} (replacing any related-task already there, keeping every other _meta key).
// Only the top level (and _meta) is decoded; every other member keeps its bytes and order.
func ResultForLegacy(result json.RawMessage, bridgeTaskID string) (json.RawMessage, error) {
	ms, err := jsonobj.Parse(result)
	if err != nil {
		return nil, fmt.Errorf("mapping: tool result: %w", err)
	}
	related, err := json.Marshal(legacy.RelatedTask{TaskID: bridgeTaskID})
	if err != nil {
		return nil, err
	}
	return ms.Without("resultType").SetMeta(legacy.MetaRelatedTask, related).DropMeta(modernOnlyMeta...).Encode(), nil
}

// StripModern removes the 2026-07-28-only top-level fields (resultType, ttlMs, cacheScope)
// from a result for a legacy client. Everything else keeps its bytes.
func StripModern(result json.RawMessage) (json.RawMessage, error) {
	out, err := jsonobj.DropMembers(result, modernOnly, modernOnlyMeta) // no decoding: on every pass-through reply
	if err != nil {
		return nil, fmt.Errorf("mapping: result: %w", err)
	}
	return out, nil
}

// ErrorForLegacy returns the error object tasks/result sends for a failed task.
//
// The upstream's code, message and data are kept. Design §9 wants every failed task to say
// whether a retry makes sense, so data gains "retryable" and "outcome": as the whole data
// when there is none, or added to an object data that lacks them (existing keys are never
// overwritten; data that is not an object is left alone). An empty or undecodable errObj
// becomes {-32603, "upstream task failed without an error object"}; an empty outcome is
// "failed".
func ErrorForLegacy(errObj json.RawMessage, outcome record.Outcome, retryable bool) *jsonrpc.Error {
	var e jsonrpc.Error
	if len(errObj) == 0 || json.Unmarshal(errObj, &e) != nil || (e.Code == 0 && e.Message == "") {
		e = jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: msgFailedNoError}
	}
	if outcome == "" {
		outcome = record.OutcomeFailed
	}
	add := errorData{Retryable: retryable, Outcome: outcome}
	data := strings.TrimSpace(string(e.Data))
	switch {
	case data == "" || data == "null":
		e.Data, _ = json.Marshal(add)
	case jsonobj.IsObject(e.Data):
		ms, err := jsonobj.Parse(e.Data)
		if err != nil {
			break
		}
		if _, ok := ms.Get("retryable"); !ok {
			ms = append(ms, jsonobj.NewMember("retryable", json.RawMessage(fmt.Sprint(retryable))))
		}
		if _, ok := ms.Get("outcome"); !ok {
			o, _ := json.Marshal(outcome)
			ms = append(ms, jsonobj.NewMember("outcome", o))
		}
		e.Data = ms.Encode()
	}
	return &e
}

// ToolsListForLegacy rewrites a tools/list result for legacy clients: every tool gains
// execution.taskSupport = mode(name, toolRaw) (other execution fields kept; a taskSupport
// already there is replaced; mode returning "" leaves the tool untouched, which legacy
// clients read as "forbidden"), each tool keeps its bytes otherwise, and StripModern
// applies to the result (ttlMs, cacheScope, resultType go).
func ToolsListForLegacy(result json.RawMessage, mode func(name string, tool json.RawMessage) string) (json.RawMessage, error) {
	ms, err := jsonobj.Parse(result)
	if err != nil {
		return nil, fmt.Errorf("mapping: tools/list result: %w", err)
	}
	ms = ms.Without(modernOnly...).DropMeta(modernOnlyMeta...)
	rawTools, ok := ms.Get("tools")
	if !ok {
		return ms.Encode(), nil
	}
	tools, err := jsonobj.Elements(rawTools)
	if err != nil {
		return nil, fmt.Errorf("mapping: tools/list result: tools: %w", err)
	}
	for i, tool := range tools {
		if tools[i], err = withTaskSupport(tool, mode); err != nil {
			return nil, fmt.Errorf("mapping: tools/list result: tool %d: %w", i, err)
		}
	}
	return ms.Set("tools", jsonobj.EncodeArray(tools)).Encode(), nil
}

func withTaskSupport(tool json.RawMessage, mode func(string, json.RawMessage) string) (json.RawMessage, error) {
	tms, err := jsonobj.Parse(tool)
	if err != nil {
		return nil, err
	}
	var name string
	if raw, ok := tms.Get("name"); ok {
		_ = json.Unmarshal(raw, &name) // a nameless tool still gets a mode
	}
	m := ""
	if mode != nil {
		m = mode(name, tool)
	}
	if m == "" {
		return tool, nil
	}
	var exec jsonobj.Object
	if old, ok := tms.Get("execution"); ok && jsonobj.IsObject(old) {
		if exec, err = jsonobj.Parse(old); err != nil {
			return nil, err
		}
	}
	ts, _ := json.Marshal(m)
	exec = exec.Set("taskSupport", ts)
	return tms.Set("execution", exec.Encode()).Encode(), nil
}

// WithoutTools returns a tools/list result without the tools for which drop(name) is true;
// every other byte of the result and of the tools kept stays as it was.
func WithoutTools(result json.RawMessage, drop func(name string) bool) (json.RawMessage, error) {
	ms, err := jsonobj.Parse(result)
	if err != nil {
		return nil, fmt.Errorf("mapping: tools/list result: %w", err)
	}
	rawTools, ok := ms.Get("tools")
	if !ok {
		return result, nil
	}
	tools, err := jsonobj.Elements(rawTools)
	if err != nil {
		return nil, fmt.Errorf("mapping: tools/list result: tools: %w", err)
	}
	kept := tools[:0:0]
	for _, tool := range tools {
		if !drop(toolName(tool)) {
			kept = append(kept, tool)
		}
	}
	if len(kept) == len(tools) {
		return result, nil
	}
	return ms.Set("tools", jsonobj.EncodeArray(kept)).Encode(), nil
}

// toolName reads a tool's name ("" when it has none or the tool is not an object).
func toolName(tool json.RawMessage) string {
	var t struct {
		Name string `json:"name"`
	}
	_ = json.Unmarshal(tool, &t)
	return t.Name
}
