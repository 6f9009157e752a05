// Package forward is the forward route: 2025-11-25 (and older) clients in front of a
// 2026-07-28 upstream with the SEP-2663 tasks extension (design §3). Bridge implements the
// legacy face's Handler on top of a sep2663.Client; it owns the task records (written
// through to the store before a client hears of them, so a restarted bridge on the same
// store resumes every task without re-running upstream work), the pollers, the fallback
// decision (translate, host, collapse, pass through, refuse: fallback/), bridge-hosted
// tasks, the sync collapse, the relay of input requests, the upstream push and the
// cross-replica events. It is reached only through the front door (package bridge).
//
// Protocol flow (legacy client → SEP-2663 upstream):
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
// Files by concern: bridge.go (the engine, initialize, dispatch, forwarding), registry.go
// (records: store, trackers, caches, compare-and-swap writes), tasks.go (task methods),
// tracker.go (polling), route.go and host.go (the fallback decision, bridge-hosted tasks),
// collapse.go, input.go (input relay), result.go (tasks/result), push.go (upstream
// listen), replica.go (purge, orphans, peers), security.go (ownership, idempotency,
// Reconcile), requestid.go, terminal.go, observe.go (the request log line),
// admit.go (the work gate).
package forward
