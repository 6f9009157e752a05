// Package passthrough holds the two same-era routes (design §1): both faces of the
// client's own revision in front of an upstream of the same revision, with the bytes the
// bridge does not translate passed through untouched.
//
//   - Legacy (legacy.go, legacylist.go, purge.go): 2025-11-25 clients in front of a
//     2025-11-25 upstream. Each client session gets its own upstream session, opened with
//     the client's initialize params; every request, tasks/* included, is forwarded over
//     it unchanged; server→client requests are relayed under a bridge-minted id. For an
//     upstream that runs tasks without offering tasks/list, the route records the tasks it
//     sees created and answers tasks/list itself ("synthesized tasks/list").
//     A question the upstream asks about a task is kept in the store until it is
//     answered upstream and re-delivered under the same id after a cut or a restart
//     (legacyinput.go).
//   - Modern (modern.go): 2026-07-28 clients in front of a 2026-07-28 upstream: the
//     client's own _meta and params go upstream, the result comes back unchanged.
//
// Each takes its own options (LegacyConfig, ModernConfig); the work gate applies on both
// as on every route. They are reached only through the front door (package bridge).
package passthrough
