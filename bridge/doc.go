// Package bridge is taskbridge's front door and era router, and nothing else.
//
// The front door (door.go, door_limit.go; Door) is the one entry of every request on every
// transport: transport limits → authentication → per-principal rate limit → era and route
// choice → the route. Inside each route the work gate (bridge/internal/gate; Gate, admit.go)
// decides every new task and every upstream call, with the same codes everywhere.
//
// The era router (routes.go) builds the pair of routes that serve one upstream, one per
// client era; the door dispatches each request to one of them (dispatchTable, Routes):
//
//	route                 clients      upstream     package               built by
//	forward               2025-11-25   2026-07-28   bridge/forward        NewForward
//	modern-passthrough    2026-07-28   2026-07-28   bridge/passthrough    NewForward (Modern)
//	reverse               2026-07-28   2025-11-25   bridge/reverse        NewReverse
//	legacy-passthrough    2025-11-25   2025-11-25   bridge/passthrough    NewReverse (Legacy)
//
// Route packages never import each other nor this package; what they share lives below
// them in bridge/internal: errmap (the one error mapper and the shared not-found answer),
// gate (the work gate), ids (task and request ids), pending (the one registry of waiting
// requests), sessions (the store adapted to the 2025-11-25 face's session interface, and
// the owner rule). docs/architecture.md draws the whole floor plan.
package bridge
