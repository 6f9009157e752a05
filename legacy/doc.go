// Package legacy is taskbridge's face towards MCP 2025-11-25 (and older) clients: the wire
// types of that revision (protocol.go) and the Streamable HTTP server with sessions
// (server.go, session.go, stream.go), plus the same face over stdio (Server.ServeStdio,
// stdio.go) and WebSocket (an Upgrade request to the endpoint, ws.go). A stdio or
// WebSocket connection is one session; Server.Push reaches it like a GET stream.
//
// The HTTP server is transport only. It validates headers and sessions, frames
// JSON-RPC messages as JSON or Server-Sent Events, and hands every message to a Handler
// that the bridge implements. Sessions are records in a SessionStore (this package's own
// four-method interface, which the route adapts its store to), so any replica can serve any
// request of any session; only the standalone GET stream lives in one
// process, and Server.Push reaches it only from that process.
//
// # Protocol flow
//
//	client                                   Server (this package)              Handler (bridge)
//	POST initialize (no Mcp-Session-Id)  ->  mint id, negotiate version    ->   Initialize
//	                                         SessionStore.CreateSession
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
//	GET  Accept: text/event-stream       ->  check session; up to 4 streams per session per process
//	<- 200 text/event-stream                 Server.Push(sessionID, msg) writes to one of them;
//	     : keep-alive (every 15 s)           a fifth GET ends the oldest
//	DELETE                               ->  CloseSession, end GET         ->   Closed
//	<- 200; later requests get 404 (-32001 "Session not found") and the client re-initializes
//
// Request-level rules (2025-11-25 §Transports): one JSON-RPC message per POST (batches are
// refused with -32600, which is why initialize does not negotiate 2025-03-26 or 2024-11-05,
// revisions that require them: NegotiatedVersions), Content-Type application/json (415 otherwise), a body of at most
// Options.MaxBodyBytes (413), MCP-Protocol-Version absent (assumed 2025-03-26) or one of the
// supported versions (400 otherwise). Authentication, the Origin check and the rate limit
// are not the face's: the front door in front of it (bridge.Door) applies them to every
// request and hands the principal over in the context (auth.PrincipalFrom); the face binds
// each session to the principal that opened it. A client disconnect is not a JSON-RPC cancellation, which arrives as
// notifications/cancelled through Notify. It cancels the Serve ctx, except on a resumable
// stream that already went out as SSE (see Resumability).
//
// # Resumability
//
// On sessions of 2025-11-25 or newer (resume.go; Options.ResumeWindow, default 5 min,
// negative turns it off) every SSE stream has an id, "p…" for a POST's stream and "g…" for
// the GET stream (26 random base32 characters after the letter), and its events carry
// "id: <streamID>-<seq>", opening with a priming event (seq 0, empty data). Events are
// kept in a bounded per-stream buffer (256 events / 4 MiB) in this process.
//
//	client                                   Server
//	POST tasks/result                    ->  Serve runs on the HTTP goroutine (a plain
//	                                         JSON reply stays just that: no buffer)
//	<- id: pX-0 / data:                      priming event (first message: now a stream)
//	<- id: pX-1 / elicitation/create
//	   (connection lost)                     Serve keeps running (its HTTP request stays
//	                                         open, writing nothing); events go to the buffer;
//	                                         its ctx ends only if nobody resumes within
//	                                         the window (or the session/Server ends)
//	GET Last-Event-ID: pX-1              ->  same session, stream held here
//	<- 200: events after 1, then live        up to the response; then the stream ends
//	GET Last-Event-ID: pX-<last>         ->  204 (ended, nothing left)
//	GET Last-Event-ID: pY-3 (unknown)    ->  410: send the request again
//	GET Last-Event-ID: gZ-4              ->  the GET stream again, missed events first
//	                                         (unknown g id: a fresh GET stream)
//
// A disconnect before the reply became SSE still cancels Serve (the client holds no id).
// Push never buffers for a disconnected GET stream (it reports false as before). Buffers
// do not move between replicas: a resume must reach the process that held the stream;
// elsewhere the client gets 410 and calls tasks/result again.
//
// Decisions the spec leaves open:
//   - A session may hold several GET streams (2025-11-25 allows it): a new one does not end
//     the earlier ones, and each pushed message travels on one of them (the newest that
//     takes it). Beyond maxGetStreams the oldest ends rather than 409: a client
//     reconnecting after half-open connections is served at once.
//   - A POST whose Accept lists only one of application/json and text/event-stream is 406;
//     none at all is any media type (RFC 9110) and is served.
//   - A message without an id whose method is not notifications/* is refused (400; dropped
//     on stdio and WebSocket): it never reaches the Handler as a notification.
//   - A Serve that returns ErrCancelled (the client cancelled the request) gets no
//     response: the stream ends empty.
//   - Push never blocks: each GET stream buffers 64 events; when the buffer is full, or no
//     stream is open here, Push reports false and the bridge chooses another path.
//   - HTTP-level errors (400/403/404/405/406/413/415/503) carry a JSON-RPC error with id
//     null; errors of the request itself travel in a 200 response with the request's id.
//   - Notify and Respond run before the 202 goes out, so a 202 means the bridge has the
//     message (for example an elicitation answer recorded in the store).
//   - LastSeenAt is written at most once a minute per session: skipped when the stored
//     value is recent, and deduplicated within the process for concurrent requests.
//   - An unknown POST stream id on resume gets 410 Gone, not 404 (404 means "session
//     terminated" and makes clients re-initialize); a finished stream the client has
//     entirely gets 204, which tells SSE clients to stop reconnecting (the TS SDK v1
//     client reconnects after a stream that ended with an error response).
//
// Not implemented: the 2024-11-05 HTTP+SSE transport.
package legacy
