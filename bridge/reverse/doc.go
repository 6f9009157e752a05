// Package reverse is the reverse route: 2026-07-28 clients with the SEP-2663 tasks
// extension in front of a 2025-11-25 upstream (design §4). Reverse implements the modern
// face's Handler (sep2663.Handler) on top of a legacy.Client: one pooled upstream session
// per principal, bridge-minted task ids for the upstream's tasks, the upstream's
// tasks/result held open from creation on (its server requests become inputRequests, its
// answer the task's payload), and MRTR (input_required + requestState) for server requests
// that come before a task exists. Tasks are store records (records.go), with the upstream
// session they live in, so any process serves them after a restart or on another
// replica, re-opening the held tasks/result in that session (held.go). It is reached only through
// the front door (package bridge); legacy clients of the same upstream are passed through
// (bridge/passthrough).
//
// Protocol flow (modern client → bridge → legacy upstream):
//
//	server/discover          → built from the upstream's initialize (pooled session)
//	tools/call (extension declared, tool optional|required)
//	                         → tools/call + task:{} upstream; the CreateTaskResult becomes a
//	                           flat resultType:"task" with a bridge-minted id, and the
//	                           bridge holds tasks/result open upstream at once
//	  server requests on the tools/call stream (before the task exists)
//	                         → input_required + inputRequests + requestState (MRTR); the
//	                           retry with inputResponses answers them and resumes the call
//	tasks/get                → upstream tasks/get; terminal: result/error from the held
//	                           tasks/result; requests that arrived on it: input_required
//	tasks/update             → answers the held requests (POSTed upstream as responses)
//	tasks/cancel             → upstream tasks/cancel, empty ack
//	subscriptions/listen     → the caller's upstream session's GET-stream notifications
//	                           (list changed; resources/updated after a legacy
//	                           resources/subscribe), stamped with the subscriptionId;
//	                           notifications/tasks for the caller's own taskIds
//	_meta logLevel           → logging/setLevel on the pooled session (most verbose
//	                           request in flight); the request's own notifications/message
//	                           at its level and above on its SSE reply
//
// Files: reverse.go (the engine, discover, dispatch, forwarding), call.go (tools/call and
// MRTR), records.go (the task records), held.go (held tasks/result, input requests, resume
// and purge), tasks.go (tasks/*), input.go (the input box of a held MRTR call), ops.go
// (drain and readiness), getstream.go (the upstream sessions' GET streams), listen.go
// (subscriptions/listen), listen_tasks.go (its notifications/tasks), logs.go (log messages).
package reverse
