package mapping

import (
	"encoding/json"
	"fmt"

	"github.com/taskbridge/taskbridge/internal/jsonobj"
	"github.com/taskbridge/taskbridge/legacy"
	"github.com/taskbridge/taskbridge/sep2663"
)

var emptyObject = json.RawMessage(`{}`)

// ClientCapsToModern translates legacy initialize capabilities (2025-11-25 and older) to the
// 2026-07-28 ClientCapabilities object sent in every upstream request's _meta:
//   - elicitation: form/url kept; an elicitation without either ({} in 2025-06-18) means form;
//   - sampling, roots, experimental: carried over as written;
//   - extensions: carried over, except io.modelcontextprotocol/tasks, which is present exactly
//     when withTasks (the bridge, not the legacy client, handles modern tasks);
//   - tasks (the 2025-11-25 shape) is dropped: SEP-2663 counts it as "not declared";
//   - anything else, and any capability whose value is not an object, is dropped.
//
// Empty, null or absent input means no capabilities. Non-object input is an error.
func ClientCapsToModern(legacyCaps json.RawMessage, withTasks bool) (json.RawMessage, error) {
	var in jsonobj.Object
	if len(legacyCaps) > 0 && string(legacyCaps) != "null" {
		var err error
		if in, err = jsonobj.Parse(legacyCaps); err != nil {
			return nil, fmt.Errorf("mapping: client capabilities: %w", err)
		}
	}
	var out jsonobj.Object
	for _, key := range []string{"experimental", "roots", "sampling"} {
		if v, ok := in.Get(key); ok && jsonobj.IsObject(v) {
			out = append(out, jsonobj.NewMember(key, v))
		}
	}
	if v, ok := in.Get("elicitation"); ok && jsonobj.IsObject(v) {
		if el, err := elicitationToModern(v); err == nil {
			out = append(out, jsonobj.NewMember("elicitation", el))
		}
	}
	var ext jsonobj.Object
	if v, ok := in.Get("extensions"); ok && jsonobj.IsObject(v) {
		if ms, err := jsonobj.Parse(v); err == nil {
			ext = ms.Without(sep2663.ExtensionTasks)
		}
	}
	if withTasks {
		ext = append(ext, jsonobj.NewMember(sep2663.ExtensionTasks, emptyObject))
	}
	if len(ext) > 0 {
		out = append(out, jsonobj.NewMember("extensions", ext.Encode()))
	}
	return out.Encode(), nil
}

func elicitationToModern(v json.RawMessage) (json.RawMessage, error) {
	ms, err := jsonobj.Parse(v)
	if err != nil {
		return nil, err
	}
	var out jsonobj.Object
	for _, key := range []string{"form", "url"} {
		if mv, ok := ms.Get(key); ok && jsonobj.IsObject(mv) {
			out = append(out, jsonobj.NewMember(key, mv))
		}
	}
	if len(out) == 0 {
		out = append(out, jsonobj.NewMember("form", emptyObject))
	}
	return out.Encode(), nil
}

// ServerCapsToLegacy translates server/discover capabilities to legacy initialize
// capabilities: experimental, tools, resources, prompts, logging and completions are kept as
// the upstream wrote them, except listChanged and subscribe (a route that does not relay
// the upstream's change notifications must not advertise them: issue 16 item 8; see
// ServerCapsToLegacyRelayed); extensions are dropped (2025-11-25 has none on the server
// side). When withTasks, tasks = {list:{}, cancel:{}, requests:{tools:{call:{}}}} is added.
func ServerCapsToLegacy(caps sep2663.ServerCapabilities, withTasks bool) (json.RawMessage, error) {
	return serverCapsToLegacy(caps, withTasks, false)
}

// ServerCapsToLegacyRelayed is ServerCapsToLegacy for a route that relays the upstream's
// list-changed and resource-updated notifications (its subscriptions/listen) to the legacy
// session's GET stream: listChanged and subscribe are kept as the upstream wrote them, so
// exactly what the upstream offers is advertised.
func ServerCapsToLegacyRelayed(caps sep2663.ServerCapabilities, withTasks bool) (json.RawMessage, error) {
	return serverCapsToLegacy(caps, withTasks, true)
}

func serverCapsToLegacy(caps sep2663.ServerCapabilities, withTasks, relayed bool) (json.RawMessage, error) {
	var out jsonobj.Object
	add := func(key string, v json.RawMessage) {
		if len(v) > 0 && string(v) != "null" {
			out = append(out, jsonobj.NewMember(key, v))
		}
	}
	keep := undelivered
	if relayed {
		keep = func(v json.RawMessage) json.RawMessage { return v }
	}
	add("experimental", caps.Experimental)
	add("logging", caps.Logging)
	add("completions", caps.Completions)
	add("prompts", keep(caps.Prompts))
	add("resources", keep(caps.Resources))
	add("tools", keep(caps.Tools))
	for _, m := range out {
		if !json.Valid(m.Value) {
			return nil, fmt.Errorf("mapping: server capability %q is not valid JSON", m.Key)
		}
	}
	if withTasks {
		tasks, err := json.Marshal(LegacyTasksCapability())
		if err != nil {
			return nil, err
		}
		out = append(out, jsonobj.NewMember("tasks", tasks))
	}
	return out.Encode(), nil
}

// LegacyTasksCapability is what the bridge declares to 2025-11-25 clients:
// {list:{}, cancel:{}, requests:{tools:{call:{}}}}.
func LegacyTasksCapability() legacy.ServerTasksCapability {
	return legacy.ServerTasksCapability{
		List:     &struct{}{},
		Cancel:   &struct{}{},
		Requests: &legacy.ServerTaskRequestsCapability{Tools: &legacy.ToolsTaskCapability{Call: &struct{}{}}},
	}
}

// WithoutTasksExtension returns a 2026-07-28 ClientCapabilities object without the tasks
// extension (extensions[sep2663.ExtensionTasks] removed, extensions dropped when nothing is
// left in it); every other member keeps its bytes. The modern pass-through sends a
// tools/call with it when no new task may start, so the upstream must answer synchronously
// or refuse, as a legacy client is told to call without params.task.
func WithoutTasksExtension(caps json.RawMessage) (json.RawMessage, error) {
	ms, err := jsonobj.Parse(caps)
	if err != nil {
		return nil, err
	}
	ext, ok := ms.Get("extensions")
	if !ok || !jsonobj.IsObject(ext) {
		return caps, nil
	}
	em, err := jsonobj.Parse(ext)
	if err != nil {
		return nil, err
	}
	if _, has := em.Get(sep2663.ExtensionTasks); !has {
		return caps, nil
	}
	if em = em.Without(sep2663.ExtensionTasks); len(em) == 0 {
		return ms.Without("extensions").Encode(), nil
	}
	return ms.Set("extensions", em.Encode()).Encode(), nil
}
