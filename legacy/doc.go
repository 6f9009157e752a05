// Package legacy is taskbridge's face towards MCP 2025-11-25 (and older) clients: the wire
// types of that revision (protocol.go) and the Streamable HTTP server with sessions
// (server.go, session.go, stream.go), plus the same face over stdio (Server.ServeStdio,
// stdio.go) and WebSocket (an Upgrade request to the endpoint, ws.go). A stdio or
// WebSocket connection is one session; Server.Push reaches it like a GET stream.
//
// The HTTP server is transport only. It validates headers, sessions and origins, frames
// JSON-RPC messages as JSON or Server-Sent Events, and hands every message to a Handler
// that the bridge implements. Sessions are store records (store.Session), so any replica
// can serve any request of any session; only the standalone GET stream lives in one
// process, and Server.Push reaches it only from that process.
//
// # Protocol flow
//
//	client                                   Server (this package)              Handler (bridge)
//	POST initialize (no Mcp-Session-Id)  ->  mint id, negotiate version    ->   Initialize
//	                                         store.CreateSession
//	<- 200 application/json + Mcp-Session-Id
//	POST notifications/initialized       ->  check session                 ->   Notify
//	<- 202
//	POST tools/call, tasks/result, …     ->  check session, touch (≤1/min) ->   Serve(ctx, sess, req, out)
//	<- 200 application/json                  (out unused)
//	<- 200 text/event-stream                 (out used: out.Send(elicitation/create), …)
//	     event: message / data: {request}    ...
//	     event: message / data: {response}   then the stream ends
//	POST {response to elicitation}       ->  check session                 ->   Respond
//	<- 202
//	GET  Accept: text/event-stream       ->  check session; one stream per session per process
//	<- 200 text/event-stream                 Server.Push(sessionID, msg) writes here;
//	     : keep-alive (every 15 s)           a newer GET replaces an older one
//	DELETE                               ->  store.CloseSession, end GET   ->   Closed
//	<- 200; later requests get 404 (-32001 "Session not found") and the client re-initializes
//
// Request-level rules (2025-11-25 §Transports): one JSON-RPC message per POST (batches are
// refused with -32600), Content-Type application/json (415 otherwise), a body of at most
// Options.MaxBodyBytes (413), MCP-Protocol-Version absent (assumed 2025-03-26) or one of the
// supported versions (400 otherwise), Origin absent, loopback or allowed (403 otherwise).
// A client disconnect cancels the Serve ctx; it is not a JSON-RPC cancellation, which
// arrives as notifications/cancelled through Notify.
//
// Decisions the spec leaves open:
//   - A second GET for a session replaces the first (the older stream ends), rather than
//     409: a client reconnecting after a half-open connection is served at once, and only
//     the holder of the session id can open it.
//   - Push never blocks: each GET stream buffers 64 events; when the buffer is full, or no
//     stream is open here, Push reports false and the bridge chooses another path.
//   - HTTP-level errors (400/403/404/405/406/413/415/503) carry a JSON-RPC error with id
//     null; errors of the request itself travel in a 200 response with the request's id.
//   - Notify and Respond run before the 202 goes out, so a 202 means the bridge has the
//     message (for example an elicitation answer recorded in the store).
//   - LastSeenAt is written at most once a minute per session: skipped when the stored
//     value is recent, and deduplicated within the process for concurrent requests.
//
// Not implemented: SSE event ids and resumption with Last-Event-ID (a GET carrying it gets
// a fresh standalone stream; clients recover by issuing tasks/result again), and the
// 2024-11-05 HTTP+SSE transport.
package legacy
