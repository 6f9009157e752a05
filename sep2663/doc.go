// Package sep2663 is taskbridge's face toward MCP 2026-07-28 servers that implement the Tasks
// extension (SEP-2663, "io.modelcontextprotocol/tasks"): the wire types of that revision
// (protocol.go) and a stateless Streamable HTTP client for it (client.go, headers.go,
// stream.go).
//
// 2026-07-28 has no initialize handshake and no sessions. Every request carries the
// per-request envelope in params._meta (protocol version, client capabilities, client info)
// and mirrors routing fields into the MCP-Protocol-Version, Mcp-Method and Mcp-Name headers.
// The client injects both; callers hand it params exactly as they want them forwarded, and
// the bytes it does not need to change travel through untouched.
//
// Version and capability decisions (is the upstream modern? does it advertise tasks?) are
// not made here; they live in mapping/ and fallback/. This package only speaks the wire.
//
// # Protocol flow
//
//	client (taskbridge)                                   2026-07-28 server
//	  │ server/discover {_meta}                                  │
//	  │─────────────────────────────────────────────────────────▶│
//	  │◀─ {resultType:"complete", supportedVersions, capabilities│
//	  │     .extensions["io.modelcontextprotocol/tasks"], ttlMs} │
//	  │                                                          │
//	  │ tools/call {name, arguments, _meta{…, clientCapabilities │
//	  │   .extensions["io.modelcontextprotocol/tasks"]:{}}}      │
//	  │   Mcp-Method: tools/call, Mcp-Name: <tool>               │
//	  │─────────────────────────────────────────────────────────▶│
//	  │◀─ one of:                                                │
//	  │     resultType "complete"        → CallToolResult; done  │
//	  │     resultType "input_required"  → {inputRequests,       │
//	  │        requestState}; retry tools/call with a new id,    │
//	  │        params.inputResponses (+ requestState)            │
//	  │     resultType "task"            → flat Task {taskId,    │
//	  │        status, ttlMs, pollIntervalMs}                    │
//	  │                                                          │
//	  │ tasks/get {taskId}   (Mcp-Name: <taskId>), every         │
//	  │   pollIntervalMs until a terminal status                 │
//	  │─────────────────────────────────────────────────────────▶│
//	  │◀─ {resultType:"complete", DetailedTask}:                 │
//	  │     working                                              │
//	  │     input_required + inputRequests{key: {method,params}} │
//	  │     completed + result | failed + error | cancelled      │
//	  │                                                          │
//	  │ tasks/update {taskId, inputResponses{key: result}}       │
//	  │─────────────────────────────────────────────────────────▶│
//	  │◀─ {resultType:"complete"}  (ack; eventually consistent)  │
//	  │                                                          │
//	  │ tasks/cancel {taskId}                                    │
//	  │─────────────────────────────────────────────────────────▶│
//	  │◀─ {resultType:"complete"}  (ack; cancellation is         │
//	  │     cooperative, the task may still complete or fail)    │
//
// A reply is either one JSON object or an SSE stream scoped to the request that carries
// notifications (notifications/progress, notifications/message) before the response.
// JSON-RPC errors come back unchanged as *jsonrpc.Error (e.g. -32602 for an unknown taskId,
// -32021 when the tasks extension was not declared); transport failures and nonsense
// replies come back as *upstream.Error.
package sep2663
