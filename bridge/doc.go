// Package bridge is taskbridge's front door and router, and (for now) the engines behind
// them. The front door (door.go, Door) is the one entry of every request on every
// transport: transport limits → authentication → per-principal rate limit → era and route
// choice → the route, where the work gate (internal/gate, Gate) decides every new task and
// every upstream call (admit.go). The engines — Bridge (forward: a SEP-2663 upstream) and
// Reverse (a 2025-11-25 upstream) — are reached only through a Door. Bridge implements the
// legacy (2025-11-25) face's Handler on top of a SEP-2663 upstream, and owns the task
// registry, the pollers and the sync-collapse path.
//
// Protocol flow (forward route: legacy client → SEP-2663 upstream):
//
//	initialize            answered here from the upstream's server/discover
//	tools/list            forwarded; every tool gains execution.taskSupport
//	tools/call + task     intent record → upstream tools/call (tasks extension declared)
//	                        resultType task     → record gets the upstream id → {task:{bridge id}}
//	                        resultType complete → completed (or failed by isError) record → {task:{…}}
//	tools/call (no task)  forwarded; an upstream task is polled to the end ("sync collapse")
//	tasks/get             record, refreshed from upstream tasks/get at most once per poll interval
//	tasks/result          blocks until the record is terminal, then the stored payload
//	tasks/list            the caller's records, newest first, keyset cursor
//	tasks/cancel          record → cancelled at once; upstream tasks/cancel; real outcome recorded later
//
// Records are written through to the store before the client hears of them, so a restarted
// bridge on the same store resumes every task without re-running upstream work.
package bridge
