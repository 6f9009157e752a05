package fallback

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"

	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/legacy"
	"github.com/taskbridge/taskbridge/sep2663"
)

// Era is the protocol generation of a peer.
type Era string

const (
	// EraModern is MCP 2026-07-28: server/discover, no sessions, tasks only through the
	// SEP-2663 extension.
	EraModern Era = "2026-07-28"
	// EraLegacy is MCP 2025-11-25 or older: initialize and sessions; 2025-11-25 has the
	// experimental Tasks API, older revisions have no tasks at all.
	EraLegacy Era = "legacy"
)

// Mode is a tool's task mode.
type Mode string

// Tool task modes. The first three are 2025-11-25's execution.taskSupport values; a
// 2026-07-28 tool carries no such field, so its mode is ModeUnknown (the server decides per
// call whether to create a task).
const (
	ModeForbidden Mode = "forbidden"
	ModeOptional  Mode = "optional"
	ModeRequired  Mode = "required"
	ModeUnknown   Mode = "unknown"
)

// ParseMode reads a taskSupport value; anything unrecognised is ModeUnknown.
func ParseMode(s string) Mode {
	switch m := Mode(s); m {
	case ModeForbidden, ModeOptional, ModeRequired:
		return m
	}
	return ModeUnknown
}

// Implementation names a server (or client) implementation.
type Implementation struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	Title   string `json:"title,omitempty"`
}

// Tool is one upstream tool as the manifest records it: its task mode and the annotations
// that decide whether the bridge may host it.
type Tool struct {
	Name        string `json:"name"`
	Mode        Mode   `json:"taskSupport"`
	ReadOnly    bool   `json:"readOnlyHint,omitempty"`
	Idempotent  bool   `json:"idempotentHint,omitempty"`
	Destructive bool   `json:"destructiveHint,omitempty"`
}

// UpstreamManifest is what taskbridge knows about an upstream server.
type UpstreamManifest struct {
	Era Era `json:"era"`
	// ProtocolVersion is the revision spoken with it: 2026-07-28, or the one initialize
	// negotiated.
	ProtocolVersion   string         `json:"protocolVersion"`
	SupportedVersions []string       `json:"supportedVersions"`
	Server            Implementation `json:"server"`
	// Extensions are the server's extension ids (2026-07-28), sorted.
	Extensions []string `json:"extensions"`
	// Tasks: the upstream can create tasks for tools/call (the SEP-2663 extension, or the
	// legacy tasks.requests.tools.call capability).
	Tasks bool `json:"tasks"`
	// TaskOperations are the task methods the upstream serves.
	TaskOperations []string `json:"taskOperations"`
	// DiscoverTTLMs is discover's cache lifetime (modern only): re-check the era and
	// capabilities when it runs out.
	DiscoverTTLMs int64  `json:"discoverTtlMs,omitempty"`
	Tools         []Tool `json:"tools"`
}

// Tool returns the manifest's entry for name; ok is false for a tool it does not list.
func (m *UpstreamManifest) Tool(name string) (Tool, bool) {
	for _, t := range m.Tools {
		if t.Name == name {
			return t, true
		}
	}
	return Tool{}, false
}

// CanTask reports whether the upstream itself can make a task for a tool of mode m: a
// 2026-07-28 upstream with the extension for any tool not known to forbid it; a legacy
// upstream with tasks.requests.tools.call for tools declared optional or required (absent
// means forbidden there).
func (m *UpstreamManifest) CanTask(mode Mode) bool {
	if !m.Tasks {
		return false
	}
	if m.Era == EraModern {
		return mode != ModeForbidden
	}
	return mode == ModeOptional || mode == ModeRequired
}

// FromDiscover builds the manifest of a 2026-07-28 upstream from its server/discover result.
func FromDiscover(d *sep2663.DiscoverResult) UpstreamManifest {
	m := UpstreamManifest{
		Era:               EraModern,
		ProtocolVersion:   sep2663.ProtocolVersion,
		SupportedVersions: nonNil(d.SupportedVersions),
		Extensions:        []string{},
		TaskOperations:    []string{},
		DiscoverTTLMs:     d.TTLMs,
		Tools:             []Tool{},
	}
	if info, ok := d.ServerInfo(); ok {
		m.Server = Implementation{Name: info.Name, Version: info.Version, Title: info.Title}
	}
	for ext := range d.Capabilities.Extensions {
		m.Extensions = append(m.Extensions, ext)
	}
	sort.Strings(m.Extensions)
	if d.Capabilities.HasExtension(sep2663.ExtensionTasks) {
		m.Tasks = true
		m.TaskOperations = []string{sep2663.MethodTasksGet, sep2663.MethodTasksUpdate, sep2663.MethodTasksCancel}
	}
	return m
}

// FromInitialize builds the manifest of a legacy upstream from its initialize result. Only
// 2025-11-25 has tasks; an older negotiated revision has none, whatever it declares.
func FromInitialize(result json.RawMessage) (UpstreamManifest, error) {
	var r legacy.InitializeResult
	if err := json.Unmarshal(result, &r); err != nil {
		return UpstreamManifest{}, fmt.Errorf("fallback: initialize result: %w", err)
	}
	if r.ProtocolVersion == "" {
		return UpstreamManifest{}, errors.New("fallback: initialize result without protocolVersion")
	}
	m := UpstreamManifest{
		Era:               EraLegacy,
		ProtocolVersion:   r.ProtocolVersion,
		SupportedVersions: []string{r.ProtocolVersion},
		Server:            Implementation{Name: r.ServerInfo.Name, Version: r.ServerInfo.Version, Title: r.ServerInfo.Title},
		Extensions:        []string{},
		TaskOperations:    []string{},
		Tools:             []Tool{},
	}
	tasks := gjson.GetBytes(r.Capabilities, "tasks")
	if r.ProtocolVersion != legacy.ProtocolVersion || !tasks.IsObject() {
		return m, nil
	}
	m.Tasks = tasks.Get("requests.tools.call").IsObject()
	if m.Tasks {
		m.TaskOperations = append(m.TaskOperations, "tasks/get", "tasks/result")
	}
	if tasks.Get("list").IsObject() {
		m.TaskOperations = append(m.TaskOperations, "tasks/list")
	}
	if tasks.Get("cancel").IsObject() {
		m.TaskOperations = append(m.TaskOperations, "tasks/cancel")
	}
	return m, nil
}

// ToolFromJSON reads one tools/list entry: name, annotations, and the task mode
// (execution.taskSupport; absent means forbidden on a legacy upstream and unknown on a
// 2026-07-28 one, whose tools carry no such field).
func ToolFromJSON(era Era, raw json.RawMessage) Tool {
	r := gjson.ParseBytes(raw)
	t := Tool{
		Name:        r.Get("name").String(),
		ReadOnly:    r.Get("annotations.readOnlyHint").Type == gjson.True,
		Idempotent:  r.Get("annotations.idempotentHint").Type == gjson.True,
		Destructive: r.Get("annotations.destructiveHint").Type == gjson.True,
	}
	ts := r.Get("execution.taskSupport")
	switch {
	case ts.Type == gjson.String:
		t.Mode = ParseMode(ts.Str)
	case era == EraLegacy:
		t.Mode = ModeForbidden
	default:
		t.Mode = ModeUnknown
	}
	return t
}

// ToolsFromList reads the tools of one tools/list result page.
func ToolsFromList(era Era, result json.RawMessage) []Tool {
	var out []Tool
	gjson.GetBytes(result, "tools").ForEach(func(_, v gjson.Result) bool {
		out = append(out, ToolFromJSON(era, json.RawMessage(v.Raw)))
		return true
	})
	return out
}

// ClientManifest is what taskbridge knows about the client of one request.
type ClientManifest struct {
	Era     Era
	Version string
	// Tasks: the client can hold a task. A legacy client when it negotiated 2025-11-25 (the
	// bridge then declares tasks to it); a 2026-07-28 client when this request declared the
	// io.modelcontextprotocol/tasks extension.
	Tasks bool
}

// LegacyClient is the manifest of a legacy session that negotiated protocolVersion.
func LegacyClient(protocolVersion string) ClientManifest {
	return ClientManifest{Era: EraLegacy, Version: protocolVersion, Tasks: protocolVersion == legacy.ProtocolVersion}
}

// ModernClient is the manifest of a 2026-07-28 request with these capabilities.
func ModernClient(caps sep2663.ClientCapabilities) ClientManifest {
	return ClientManifest{Era: EraModern, Version: sep2663.ProtocolVersion, Tasks: caps.HasExtension(sep2663.ExtensionTasks)}
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
