// Package fallback holds taskbridge's capability manifests and the policy that decides the
// route of one tools/call (design §1 and §5).
//
// A manifest describes a peer: the upstream's era (2026-07-28 or legacy), versions, server
// implementation, extensions, task operations and each tool with its task mode; the client's
// era and whether it can hold a task. Decide combines the client manifest, the upstream
// manifest, one tool (with the operator's per-tool policy) and the request into one
// Decision: translate, host, collapse, passthrough or refuse, with a stable reason.
//
// Everything here is pure: no I/O, no clock. The bridge builds manifests from what it
// observed on the wire (server/discover, initialize, tools/list, the legacy session) and
// `taskbridge probe` prints them. Version checks live here and in mapping/, nowhere else.
//
// Decision flow (legacy 2025-11-25 client, tools/call with params.task):
//
//	operator override taskSupport "forbidden"      → refuse -32601
//	upstream can make a task for the tool           → translate (2026-07-28) | passthrough (legacy)
//	tool eligible for a bridge-hosted task          → host
//	tool mode forbidden (or absent on a legacy upstream) → refuse -32601
//	otherwise                                       → refuse jsonrpc.CodeTaskUnavailable
//
// Without params.task, or for a client that cannot hold tasks: collapse when the upstream
// may (or must) answer with a task, passthrough otherwise.
package fallback
