package jsonrpc

// The one table of JSON-RPC error codes taskbridge sends: the standard ones, the ones MCP
// 2026-07-28 reserves, and taskbridge's own. docs/troubleshooting.md and
// docs/architecture.md list the same table (a test keeps them in step).
//
// Taskbridge's own codes live in -32010..-32015. JSON-RPC leaves -32000..-32099 to
// servers; MCP 2026-07-28 keeps -32020..-32099 for the specification and leaves
// -32000..-32019 to implementations, where -32000..-32009 are crowded: -32002 was "resource
// not found" up to 2025-11-25 and must no longer be emitted; -32001, -32003 and -32004 were
// the draft 2026 numbers of the three header/capability/version errors (older alpha
// servers still send them); the TypeScript SDK uses -32000 and -32001 for its own transport
// errors. -32042 (URL elicitation required, 2025-11-25) is retired too. So taskbridge's
// codes mean one thing in either revision, and never what a peer's code means.
//
// Specifications: https://www.jsonrpc.org/specification#error_object,
// https://modelcontextprotocol.io/specification/2025-11-25 and the 2026-07-28 schema
// (https://github.com/modelcontextprotocol/modelcontextprotocol, schema/2026-07-28/schema.ts).

// Standard JSON-RPC codes.
const (
	CodeParseError     = -32700
	CodeInvalidRequest = -32600
	CodeMethodNotFound = -32601
	CodeInvalidParams  = -32602
	CodeInternalError  = -32603
)

// The codes MCP 2026-07-28 defines (sent with HTTP 400).
const (
	CodeHeaderMismatch     = -32020 // header/body mismatch, or a required header missing
	CodeMissingCapability  = -32021 // a required client capability was not declared
	CodeUnsupportedVersion = -32022 // unsupported protocol version
)

// CodeSessionNotFound is the 2025-11-25 face's answer (with HTTP 404) to an unknown, closed
// or foreign Mcp-Session-Id. It is not taskbridge's own code but the TypeScript SDK's, kept
// because its clients re-initialize on it.
const CodeSessionNotFound = -32001

// Taskbridge's own codes.
const (
	// CodeUpstream: the upstream could not be reached, timed out, or answered something
	// that is not MCP; the message is exactly the class, data.outcome says whether a call's
	// fate is unknown.
	CodeUpstream = -32010
	// CodeOverloaded: retry later (data.reason: overloaded, draining, max_concurrent_tasks,
	// request_rate, or an idempotent create still starting; data.retryAfterMs where known).
	CodeOverloaded = -32011
	// CodeTasksRefused: the operator stopped new task creation here (data.reason
	// kill_switch or sunset); retrying the same request on this bridge will not help.
	CodeTasksRefused = -32012
	// CodeOutcomeUnknown: a retry reused the idempotency key of a call whose outcome is
	// unknown (it may have run); refused until an operator reconciles it.
	CodeOutcomeUnknown = -32013
	// CodeTaskUnavailable: no task is possible for this tool here (the fallback policy's
	// refusal); call it without params.task.
	CodeTaskUnavailable = -32014
	// CodeInputTimeout: a relayed input request went unanswered for the input timeout.
	CodeInputTimeout = -32015
)

// CodeInfo is one row of the table.
type CodeInfo struct {
	Code    int64
	Name    string
	Owner   string // "JSON-RPC", "MCP 2026-07-28", "TypeScript SDK" or "taskbridge"
	Meaning string
}

// Codes is the table, in documentation order.
var Codes = []CodeInfo{
	{CodeParseError, "ParseError", "JSON-RPC", "the body is not JSON"},
	{CodeInvalidRequest, "InvalidRequest", "JSON-RPC", "not a valid request (also the door's HTTP refusals, with id null)"},
	{CodeMethodNotFound, "MethodNotFound", "JSON-RPC", "unknown method (HTTP 404 on the 2026-07-28 face)"},
	{CodeInvalidParams, "InvalidParams", "JSON-RPC", "bad params; also an unknown, expired or foreign task id (the same bytes for each)"},
	{CodeInternalError, "InternalError", "JSON-RPC", "an internal failure (no detail is sent)"},
	{CodeHeaderMismatch, "HeaderMismatch", "MCP 2026-07-28", "headers and body disagree, or a required header is missing"},
	{CodeMissingCapability, "MissingRequiredClientCapability", "MCP 2026-07-28", "the request needs a capability it did not declare"},
	{CodeUnsupportedVersion, "UnsupportedProtocolVersion", "MCP 2026-07-28", "the protocol version is not supported"},
	{CodeSessionNotFound, "SessionNotFound", "TypeScript SDK", "unknown, closed or foreign Mcp-Session-Id (HTTP 404): re-initialize"},
	{CodeUpstream, "Upstream", "taskbridge", "upstream unavailable, timed out, or an invalid upstream reply"},
	{CodeOverloaded, "Overloaded", "taskbridge", "retry later: overloaded, draining, a limit, or an idempotent create still starting"},
	{CodeTasksRefused, "TasksRefused", "taskbridge", "new tasks refused by the kill switch or the sunset"},
	{CodeOutcomeUnknown, "OutcomeUnknown", "taskbridge", "the idempotency key belongs to a call whose outcome is unknown, not yet reconciled"},
	{CodeTaskUnavailable, "TaskUnavailable", "taskbridge", "no task possible for this tool here (fallback refusal): call it without params.task"},
	{CodeInputTimeout, "InputTimeout", "taskbridge", "a relayed input request went unanswered for the input timeout"},
}

// Sentinels of taskbridge's own codes, for errors.Is (which matches by code).
var (
	ErrUpstream        = NewError(CodeUpstream, "upstream unavailable")
	ErrOverloaded      = NewError(CodeOverloaded, "overloaded")
	ErrTasksRefused    = NewError(CodeTasksRefused, "new tasks refused")
	ErrOutcomeUnknown  = NewError(CodeOutcomeUnknown, "outcome unknown")
	ErrTaskUnavailable = NewError(CodeTaskUnavailable, "no task possible")
	ErrInputTimeout    = NewError(CodeInputTimeout, "input request unanswered")
)
