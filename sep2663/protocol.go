package sep2663

// Wire types of MCP revision 2026-07-28 and the Tasks extension SEP-2663
// ("io.modelcontextprotocol/tasks"), as far as taskbridge speaks them as a client.
//
// Sources (read and summarised, not copied):
//   - https://modelcontextprotocol.io/specification/2026-07-28
//   - https://github.com/modelcontextprotocol/modelcontextprotocol/blob/main/schema/2026-07-28/schema.ts
//   - https://github.com/modelcontextprotocol/modelcontextprotocol/blob/main/seps/2663-tasks-extension.md
//   - https://github.com/modelcontextprotocol/ext-tasks/blob/main/schema/draft/schema.ts
//
// Conventions: optional fields are omitempty; nullable-but-required fields (a task's ttlMs)
// are pointers without omitempty, so nil encodes as null; objects whose inner shape we do
// not interpret stay json.RawMessage so they round-trip byte for byte.

import (
	"encoding/json"

	"github.com/taskbridge/taskbridge/internal/jsonrpc"
)

// ProtocolVersion is the only revision this package speaks.
const ProtocolVersion = "2026-07-28"

// ExtensionTasks is the extension identifier of SEP-2663. It is a key of
// ClientCapabilities.extensions (client opt-in, per request) and of
// ServerCapabilities.extensions (server support, in server/discover).
const ExtensionTasks = "io.modelcontextprotocol/tasks"

// Keys of the 2026-07-28 request and result _meta objects.
const (
	// MetaProtocolVersion is required on every request; over HTTP it MUST equal the
	// MCP-Protocol-Version header.
	MetaProtocolVersion = "io.modelcontextprotocol/protocolVersion"
	// MetaClientCapabilities is required on every request: the capabilities of the client
	// for this request only. Servers MUST NOT infer them from earlier requests.
	MetaClientCapabilities = "io.modelcontextprotocol/clientCapabilities"
	// MetaClientInfo SHOULD be sent on every request (display and logging only).
	MetaClientInfo = "io.modelcontextprotocol/clientInfo"
	// MetaLogLevel is the optional per-request log level (a LoggingLevel): without it a
	// server sends no notifications/message for the request.
	MetaLogLevel = "io.modelcontextprotocol/logLevel"
	// MetaServerInfo SHOULD be in every result's _meta.
	MetaServerInfo = "io.modelcontextprotocol/serverInfo"
	// MetaSubscriptionID is on every notification delivered on a subscriptions/listen
	// stream; its value is the JSON-RPC id of the listen request.
	MetaSubscriptionID = "io.modelcontextprotocol/subscriptionId"
)

// Methods this face sends or receives.
const (
	MethodDiscover            = "server/discover"
	MethodToolsCall           = "tools/call"
	MethodPromptsGet          = "prompts/get"
	MethodResourcesRead       = "resources/read"
	MethodTasksGet            = "tasks/get"
	MethodTasksUpdate         = "tasks/update"
	MethodTasksCancel         = "tasks/cancel"
	MethodSubscriptionsListen = "subscriptions/listen"
	// NotificationTasks carries a DetailedTask on a subscriptions/listen stream (the final
	// name; drafts used "notifications/tasks/status").
	NotificationTasks = "notifications/tasks"
)

// ResultType values. Every 2026-07-28 result MUST carry resultType; a result without one is
// treated as "complete". A client MUST treat any value it does not recognise as invalid;
// "task" is recognised only when the client declared ExtensionTasks.
const (
	ResultComplete      = "complete"
	ResultInputRequired = "input_required"
	ResultTask          = "task" // added by SEP-2663; only tools/call may return it
)

// TaskStatus is the state of a task.
//
// working → input_required | terminal; input_required → working | terminal. The terminal
// states are completed, failed and cancelled, and a terminal task never changes again.
type TaskStatus string

const (
	// StatusWorking: the request is being processed.
	StatusWorking TaskStatus = "working"
	// StatusInputRequired: the server needs input; DetailedTask.InputRequests lists it.
	StatusInputRequired TaskStatus = "input_required"
	// StatusCompleted: finished; DetailedTask.Result holds what the request would have
	// returned, including a CallToolResult with isError:true (a tool error is completed).
	StatusCompleted TaskStatus = "completed"
	// StatusFailed: ended by a JSON-RPC error, inlined as DetailedTask.Error.
	StatusFailed TaskStatus = "failed"
	// StatusCancelled: cancelled before it finished.
	StatusCancelled TaskStatus = "cancelled"
)

// IsTerminal reports whether s is completed, failed or cancelled.
func (s TaskStatus) IsTerminal() bool {
	return s == StatusCompleted || s == StatusFailed || s == StatusCancelled
}

// Implementation describes an MCP implementation (client or server).
type Implementation struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	// Title is a human-readable display name.
	Title string `json:"title,omitempty"`
}

// ElicitationCapability is present when the client can answer elicitation/create.
type ElicitationCapability struct {
	// Form: form-mode elicitation (requestedSchema) is supported.
	Form json.RawMessage `json:"form,omitempty"`
	// URL: URL-mode elicitation is supported.
	URL json.RawMessage `json:"url,omitempty"`
}

// ClientCapabilities are declared per request in
// _meta["io.modelcontextprotocol/clientCapabilities"]. {} means no optional capabilities.
type ClientCapabilities struct {
	// Experimental: non-standard capabilities.
	Experimental json.RawMessage `json:"experimental,omitempty"`
	// Roots (deprecated in 2026-07-28): the client can answer roots/list.
	Roots json.RawMessage `json:"roots,omitempty"`
	// Sampling (deprecated in 2026-07-28): {context?, tools?}.
	Sampling json.RawMessage `json:"sampling,omitempty"`
	// Elicitation: {form?, url?}.
	Elicitation *ElicitationCapability `json:"elicitation,omitempty"`
	// Extensions: extension id → settings object; {ExtensionTasks: {}} opts in to tasks.
	Extensions map[string]json.RawMessage `json:"extensions,omitempty"`
}

// HasExtension reports whether the client declared extension id.
func (c ClientCapabilities) HasExtension(id string) bool {
	_, ok := c.Extensions[id]
	return ok
}

// ServerCapabilities are advertised in the server/discover result.
type ServerCapabilities struct {
	Experimental json.RawMessage `json:"experimental,omitempty"`
	// Logging is deprecated in 2026-07-28.
	Logging     json.RawMessage `json:"logging,omitempty"`
	Completions json.RawMessage `json:"completions,omitempty"`
	// Prompts: {listChanged?}.
	Prompts json.RawMessage `json:"prompts,omitempty"`
	// Resources: {subscribe?, listChanged?}.
	Resources json.RawMessage `json:"resources,omitempty"`
	// Tools: {listChanged?}.
	Tools json.RawMessage `json:"tools,omitempty"`
	// Extensions: extension id → settings; {ExtensionTasks: {}} means the server does tasks.
	Extensions map[string]json.RawMessage `json:"extensions,omitempty"`
}

// HasExtension reports whether the server advertises extension id.
func (c ServerCapabilities) HasExtension(id string) bool {
	_, ok := c.Extensions[id]
	return ok
}

// DiscoverResult is the result of server/discover (a CacheableResult).
type DiscoverResult struct {
	ResultType string `json:"resultType"`
	// SupportedVersions lists the protocol revisions the server speaks.
	SupportedVersions []string           `json:"supportedVersions"`
	Capabilities      ServerCapabilities `json:"capabilities"`
	// Instructions describe how to use the server (e.g. for a model's system prompt).
	Instructions string `json:"instructions,omitempty"`
	// TTLMs is a cache hint for this result (ms, ≥ 0), not a task lifetime.
	TTLMs int64 `json:"ttlMs"`
	// CacheScope is "public" or "private".
	CacheScope string                     `json:"cacheScope"`
	Meta       map[string]json.RawMessage `json:"_meta,omitempty"`
}

// ServerInfo returns _meta["io.modelcontextprotocol/serverInfo"], the server's only identity
// in 2026-07-28 (there is no top-level serverInfo). ok is false when it is absent or unusable.
func (r *DiscoverResult) ServerInfo() (Implementation, bool) {
	raw, ok := r.Meta[MetaServerInfo]
	if !ok {
		return Implementation{}, false
	}
	var impl Implementation
	if err := json.Unmarshal(raw, &impl); err != nil || impl.Name == "" {
		return Implementation{}, false
	}
	return impl, true
}

// Task is the state of one task as the server reports it.
type Task struct {
	// TaskID is chosen by the server and unguessable; treat it as a bearer handle.
	TaskID string     `json:"taskId"`
	Status TaskStatus `json:"status"`
	// StatusMessage is human-readable and may be shown to a user or model.
	StatusMessage string `json:"statusMessage,omitempty"`
	// CreatedAt and LastUpdatedAt are ISO 8601 timestamps.
	CreatedAt     string `json:"createdAt"`
	LastUpdatedAt string `json:"lastUpdatedAt"`
	// TTLMs is the lifetime in ms counted from creation; null (nil) means no limit. The key
	// is required, so it is encoded even when nil.
	TTLMs *int64 `json:"ttlMs"`
	// PollIntervalMs is the suggested poll interval; clients SHOULD honour it.
	PollIntervalMs *int64 `json:"pollIntervalMs,omitempty"`
}

// DetailedTask is a Task plus the field its status calls for: InputRequests when
// input_required, Result when completed, Error when failed. It is the body of a tasks/get
// result and the params of notifications/tasks.
type DetailedTask struct {
	Task
	// InputRequests is a snapshot of everything outstanding; keys are unique for the task's
	// whole life. Deduplicate by key and never answer a key twice.
	InputRequests InputRequests `json:"inputRequests,omitempty"`
	// Result is exactly what the original request would have returned.
	Result json.RawMessage `json:"result,omitempty"`
	// Error is the JSON-RPC error that ended execution.
	Error *jsonrpc.Error `json:"error,omitempty"`
}

// CreateTaskResult is the flat `Result & Task` answer to tools/call, resultType "task".
type CreateTaskResult struct {
	ResultType string `json:"resultType"`
	Task
	Meta map[string]json.RawMessage `json:"_meta,omitempty"`
}

// GetTaskResult is the `Result & DetailedTask` answer to tasks/get. resultType MUST be
// "complete" (some spec examples show "task"; readers should accept both).
type GetTaskResult struct {
	ResultType string `json:"resultType"`
	DetailedTask
	Meta map[string]json.RawMessage `json:"_meta,omitempty"`
}

// InputRequest is one MRTR request: a bare {method, params} (no jsonrpc, no id) for
// elicitation/create, sampling/createMessage or roots/list.
type InputRequest struct {
	Method string          `json:"method"`
	Params json.RawMessage `json:"params,omitempty"`
}

// InputRequests maps server-chosen keys to outstanding input requests.
type InputRequests map[string]InputRequest

// InputResponses maps InputRequests keys to the plain result objects answering them
// (ElicitResult, CreateMessageResult, ListRootsResult; no resultType, no JSON-RPC wrapper).
type InputResponses map[string]json.RawMessage

// InputRequiredResult (resultType "input_required") asks the client to retry the same
// request with a new id, adding params.inputResponses and echoing params.requestState. At
// least one of the two fields is present.
type InputRequiredResult struct {
	ResultType    string        `json:"resultType"`
	InputRequests InputRequests `json:"inputRequests,omitempty"`
	// RequestState is opaque to the client; echo it unchanged.
	RequestState string                     `json:"requestState,omitempty"`
	Meta         map[string]json.RawMessage `json:"_meta,omitempty"`
}

// GetTaskParams are the params of tasks/get.
type GetTaskParams struct {
	TaskID string                     `json:"taskId"`
	Meta   map[string]json.RawMessage `json:"_meta,omitempty"`
}

// UpdateTaskParams are the params of tasks/update. Keys of InputResponses are keys of the
// task's inputRequests; a partial set is allowed.
type UpdateTaskParams struct {
	TaskID         string                     `json:"taskId"`
	InputResponses InputResponses             `json:"inputResponses"`
	Meta           map[string]json.RawMessage `json:"_meta,omitempty"`
}

// CancelTaskParams are the params of tasks/cancel.
type CancelTaskParams struct {
	TaskID string                     `json:"taskId"`
	Meta   map[string]json.RawMessage `json:"_meta,omitempty"`
}

// TaskNotificationParams are the params of notifications/tasks: the DetailedTask tasks/get
// would return at that moment, without resultType, plus _meta carrying MetaSubscriptionID.
type TaskNotificationParams struct {
	DetailedTask
	Meta map[string]json.RawMessage `json:"_meta,omitempty"`
}
