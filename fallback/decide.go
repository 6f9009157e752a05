package fallback

import (
	"fmt"
	"slices"

	"github.com/taskbridge/taskbridge/internal/jsonrpc"
	"github.com/taskbridge/taskbridge/sep2663"
)

// Kind is the route of one call.
type Kind string

// The five decisions of design §5.
const (
	Translate   Kind = "translate"   // both sides can do tasks: map one onto the other
	Host        Kind = "host"        // the bridge runs the synchronous upstream call as its own task
	Collapse    Kind = "collapse"    // the upstream makes a task the client cannot take: poll, answer synchronously
	Passthrough Kind = "passthrough" // no task to translate on either side
	Refuse      Kind = "refuse"      // a clear JSON-RPC error, never a hang
)

// Reasons are stable, low-cardinality slugs: they label metrics and logs (docs/fallback.md
// lists them).
const (
	ReasonBothTasks         = "both-sides-tasks"
	ReasonSameEra           = "same-era"
	ReasonLegacyUpstreamRun = "legacy-upstream-runs-task"
	ReasonHostReadOnly      = "host-readonly-hint"
	ReasonHostIdempotent    = "host-idempotent-hint"
	ReasonHostAllowed       = "host-allow-list"
	ReasonToolForbids       = "tool-forbids-tasks"
	ReasonToolRequires      = "tool-requires-task"
	ReasonNotHostable       = "upstream-no-tasks-not-hostable"
	ReasonHostDenied        = "upstream-no-tasks-host-denied"
	ReasonHostingOff        = "upstream-no-tasks-hosting-disabled"
	ReasonUpstreamMayTask   = "upstream-may-answer-with-task"
	ReasonUpstreamNeedsTask = "upstream-requires-task"
	ReasonNoTaskInvolved    = "no-task-involved"
	ReasonClientNoTasks     = "client-cannot-hold-tasks"
)

// Decision is the route for one call. Err is set for Refuse only.
type Decision struct {
	Kind   Kind
	Reason string
	Err    *jsonrpc.Error
}

// HostRule is the operator's word on hosting one tool.
type HostRule string

const (
	HostByHints  HostRule = ""         // default: readOnlyHint or idempotentHint tools only
	HostAllowed  HostRule = "allow"    // on the allow-list
	HostDenied   HostRule = "deny"     // on the deny-list (wins over the allow-list)
	HostDisabled HostRule = "disabled" // bridge-hosted tasks switched off globally
)

// ToolInfo is one tool with the operator's policy applied.
type ToolInfo struct {
	Tool
	// Advertise overrides the taskSupport told to legacy clients ("" = derived); the bridge
	// keeps its word: "forbidden" refuses task calls, "required" refuses plain calls.
	Advertise Mode
	Host      HostRule
}

// Request is what matters of the call itself.
type Request struct {
	// Task: a legacy client sent params.task; a 2026-07-28 client declared the tasks
	// extension for this request.
	Task bool
}

// Policy is the operator's configuration of the fallback.
type Policy struct {
	HostAllow   []string        // tools that may be hosted whatever their annotations
	HostDeny    []string        // tools never hosted (wins over HostAllow)
	NoHosting   bool            // refuse every bridge-hosted task
	TaskSupport map[string]Mode // taskSupport advertised to legacy clients, per tool
}

// Apply returns the ToolInfo of t under the policy.
func (p Policy) Apply(t Tool) ToolInfo {
	ti := ToolInfo{Tool: t, Advertise: p.TaskSupport[t.Name]}
	switch {
	case p.NoHosting:
		ti.Host = HostDisabled
	case slices.Contains(p.HostDeny, t.Name):
		ti.Host = HostDenied
	case slices.Contains(p.HostAllow, t.Name):
		ti.Host = HostAllowed
	}
	return ti
}

// Hostable reports whether the tool may run as a bridge-hosted task, with the reason.
func (t ToolInfo) Hostable() (bool, string) {
	switch {
	case t.Host == HostDisabled:
		return false, ReasonHostingOff
	case t.Host == HostDenied:
		return false, ReasonHostDenied
	case t.Host == HostAllowed:
		return true, ReasonHostAllowed
	case t.ReadOnly:
		return true, ReasonHostReadOnly
	case t.Idempotent:
		return true, ReasonHostIdempotent
	}
	return false, ReasonNotHostable
}

// Decide returns the route of one tools/call. It is pure.
func Decide(c ClientManifest, u UpstreamManifest, t ToolInfo, r Request) Decision {
	if c.Era == EraModern {
		return decideModern(c, u, t, r)
	}
	if !c.Tasks {
		// 2025-06-18 and older: the bridge declared no tasks, so params.task is ignored
		// (a receiver that did not declare task support MUST handle the request normally).
		return syncRoute(u, t, ReasonClientNoTasks)
	}
	if !r.Task {
		if t.Advertise == ModeRequired {
			return refuse(ReasonToolRequires, jsonrpc.NewError(jsonrpc.CodeMethodNotFound,
				fmt.Sprintf("Tool %q requires task augmentation (taskSupport \"required\"): call it with params.task", t.Name)).
				WithData(map[string]any{"reason": ReasonToolRequires, "tool": t.Name, "taskSupport": "required"}))
		}
		if u.Era == EraLegacy && u.Tasks {
			return Decision{Kind: Passthrough, Reason: ReasonSameEra}
		}
		return syncRoute(u, t, "")
	}
	if t.Advertise == ModeForbidden {
		return forbidden(t)
	}
	if u.CanTask(t.Mode) {
		if u.Era == EraLegacy {
			return Decision{Kind: Passthrough, Reason: ReasonLegacyUpstreamRun}
		}
		return Decision{Kind: Translate, Reason: ReasonBothTasks}
	}
	ok, why := t.Hostable()
	switch {
	case ok:
		return Decision{Kind: Host, Reason: why}
	case u.Tasks:
		// The upstream does tasks, only not for this tool: its mode forbids them (on a
		// legacy upstream an absent taskSupport means forbidden).
		return forbidden(t)
	}
	return unavailable(u, t, why)
}

// syncRoute is the route of a call that is not to become a task for the client: collapse
// when the upstream may (2026-07-28 with the extension: the bridge always declares it) or
// must (legacy, taskSupport required) answer with a task, else passthrough.
func syncRoute(u UpstreamManifest, t ToolInfo, reason string) Decision {
	switch {
	case u.Era == EraModern && u.CanTask(t.Mode):
		return Decision{Kind: Collapse, Reason: orReason(reason, ReasonUpstreamMayTask)}
	case u.Era == EraLegacy && u.Tasks && t.Mode == ModeRequired:
		return Decision{Kind: Collapse, Reason: orReason(reason, ReasonUpstreamNeedsTask)}
	}
	return Decision{Kind: Passthrough, Reason: orReason(reason, ReasonNoTaskInvolved)}
}

// decideModern routes a 2026-07-28 client. Toward a 2026-07-28 upstream everything passes
// through (same era). Toward a legacy upstream, a task the upstream makes is translated for
// a client that declared the extension and collapsed for one that did not; a synchronous
// answer is always acceptable to a 2026-07-28 client, so it never needs hosting.
func decideModern(c ClientManifest, u UpstreamManifest, t ToolInfo, r Request) Decision {
	if u.Era == EraModern {
		return Decision{Kind: Passthrough, Reason: ReasonSameEra}
	}
	if !c.Tasks || !r.Task {
		return syncRoute(u, t, "")
	}
	if u.CanTask(t.Mode) {
		return Decision{Kind: Translate, Reason: ReasonBothTasks}
	}
	return Decision{Kind: Passthrough, Reason: ReasonNoTaskInvolved}
}

// TaskSupport is the execution.taskSupport the bridge advertises for t to client c: the
// operator's override, else what a task-augmented call would get ("forbidden" when refused;
// the upstream's own mode when a legacy upstream runs the task; "optional" when the bridge
// translates or hosts). "" for a client that cannot hold tasks (the field means nothing
// to it and the tool is left as the upstream wrote it).
func TaskSupport(c ClientManifest, u UpstreamManifest, t ToolInfo) Mode {
	if c.Era != EraLegacy || !c.Tasks {
		return ""
	}
	if t.Advertise != "" {
		return t.Advertise
	}
	d := Decide(c, u, t, Request{Task: true})
	switch {
	case d.Kind == Refuse:
		return ModeForbidden
	case d.Kind == Passthrough && t.Mode == ModeRequired:
		return ModeRequired
	}
	return ModeOptional
}

func forbidden(t ToolInfo) Decision {
	return refuse(ReasonToolForbids, jsonrpc.NewError(jsonrpc.CodeMethodNotFound,
		fmt.Sprintf("Tool %q does not support task augmentation (taskSupport \"forbidden\"): call it without params.task", t.Name)).
		WithData(map[string]any{"reason": ReasonToolForbids, "tool": t.Name, "taskSupport": "forbidden", "retryWithoutTask": true}))
}

// unavailable is the refusal for an upstream without tasks and a tool the bridge may not
// host: it names the missing capability and what the caller can do.
func unavailable(u UpstreamManifest, t ToolInfo, why string) Decision {
	missing, server := sep2663.ExtensionTasks, "a 2026-07-28 server without the "+sep2663.ExtensionTasks+" extension"
	if u.Era == EraLegacy {
		missing, server = "tasks.requests.tools.call", "a "+orReason(u.ProtocolVersion, "legacy")+" server without the tasks.requests.tools.call capability"
	}
	var notHost string
	switch why {
	case ReasonHostingOff:
		notHost = "bridge-hosted tasks are switched off by the operator"
	case ReasonHostDenied:
		notHost = "the operator denies hosting this tool"
	default:
		notHost = "only tools annotated readOnlyHint or idempotentHint (or on the operator's allow-list) may run as bridge-hosted tasks"
	}
	return refuse(why, jsonrpc.NewError(jsonrpc.CodeTaskUnavailable,
		fmt.Sprintf("Tool %q cannot run as a task: the upstream is %s, and %s. Call it without params.task to run it synchronously.", t.Name, server, notHost)).
		WithData(map[string]any{"reason": why, "tool": t.Name, "missingCapability": missing, "retryWithoutTask": true}))
}

func refuse(reason string, err *jsonrpc.Error) Decision {
	return Decision{Kind: Refuse, Reason: reason, Err: err}
}

func orReason(s, d string) string {
	if s == "" {
		return d
	}
	return s
}
