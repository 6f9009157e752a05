// Package mapping is the only place that knows both protocol faces: it translates between
// the 2025-11-25 experimental Tasks API (package legacy) and the 2026-07-28 Tasks extension
// SEP-2663 (package sep2663). Statuses, Task fields, results, errors, capabilities and input
// requests.
//
// Why a package of its own: the two faces never import each other (design §2), and the
// translation rules are where the bridge can lie to a client: an illegal status transition,
// a lost payload, a leaked upstream field. Keeping them pure (no I/O, no clocks except as
// arguments, no logging) makes every rule a table test and every decoder a fuzz target.
//
// Payloads the bridge does not understand pass through byte for byte: results are decoded
// one level deep (a list of members with their original bytes), only the members a rule
// names are touched, and the object is joined back in its original order.
//
// # Protocol flow (forward route, what mapping is called for)
//
//	legacy client            bridge (mapping)                       SEP-2663 upstream
//	initialize ───────────▶ ServerCapsToLegacy(discover caps) ◀──── server/discover
//	                        ClientCapsToModern(init caps) ─────────▶ _meta.clientCapabilities
//	tools/list ───────────▶ ToolsListForLegacy ◀──────────────────── tools/list result
//	tools/call+task ──────▶ Observe(created task), CreateResultForLegacy
//	tasks/get ────────────▶ Observe(tasks/get) → Apply → TaskToLegacy
//	tasks/result ◀──────── InputToLegacy(inputRequests[key]) ◀────── input_required
//	  answer (POST) ──────▶ InputResponseToModern ─────────────────▶ tasks/update
//	tasks/result ◀──────── ResultForLegacy(Result) | ErrorForLegacy(Error)
//
// # Decisions where the spec and the design are silent
//
//   - Status words: matched ignoring ASCII case and surrounding white space, after the
//     draft vocabularies of design §3. Non-ASCII never matches (no Unicode case folding, so
//     "ſuccess" is not "success"). Hyphenated spellings ("in-progress") are unknown.
//   - input_required without any inputRequests (the schema requires them) is shown as
//     working: the legacy status promises requests to answer, and there are none.
//   - completed with a missing or non-object result: the client's task is failed with a
//     -32603 error "upstream task completed without a valid result" whose data says
//     retryable:false, outcome:"succeeded"; the record's outcome is succeeded (the upstream
//     did the work; a retry would do it twice).
//   - completed with isError:true → failed (2025-11-25 meaning); only the JSON literal true
//     counts. statusMessage: the upstream's if any, else the first non-empty text content,
//     else "tool returned an error" (TS SDK v1 clients never call tasks/result on failed, so
//     the message is all they get).
//   - failed: statusMessage falls back to error.message for the same reason.
//   - Result handed to legacy: only the top-level resultType is stripped from a tool result
//     (ttlMs/cacheScope are not CallToolResult fields, so a tool's own fields of those names
//     pass); StripModern (resultType, ttlMs, cacheScope) is for cacheable results such as
//     tools/list.
//   - ResultForLegacy / InputToLegacy replace a related-task _meta already present (the
//     bridge's id is the only one a legacy client may see; an upstream id never leaks). A
//     _meta that is null or not an object is replaced by a fresh object.
//   - Duplicate keys: the last one wins (as every JSON decoder reads it); a rewritten member
//     is written once, at the place of its last duplicate; untouched duplicates stay.
//   - ErrorForLegacy adds retryable/outcome (design §9) when data is absent, and also into an
//     object data that lacks them; it never overwrites a key and leaves non-object data alone.
//   - LostTask's error code is -32010 (jsonrpc.CodeUpstream, "the upstream answered
//     nonsense"), message "the upstream server no longer knows this task; its outcome is
//     unknown".
//   - CanTransition: a terminal status may not "change" even to itself (a terminal record is
//     frozen); "" (no record yet) may become any status; unknown statuses never.
//   - Apply: a terminal record only gets its pending outcome filled in, so a client-cancelled
//     task records what really happened upstream; LastUpdatedAt moves only when the status or
//     message visible to clients changes.
//   - CapTTL: a negative upstream ttl counts as unlimited (then capped). ClampPollInterval:
//     absent (0) gives the floor; a floor above the ceiling yields the ceiling; the defaults
//     are 500 ms and 30 s.
//   - SanitizeStatusMessage: \n \r \t become spaces; other control characters, bidi
//     embedding/override/isolate marks and invalid UTF-8 are removed; trimmed; cut to 1024
//     runes ending in "…".
//   - ClientCapsToModern: a capability whose value is not an object is dropped (leaves are
//     objects, never booleans); the legacy client's own "extensions" are carried over, except
//     the tasks extension, which is present exactly when the bridge asks for it.
//   - ServerCapsToLegacy keeps tools/resources/prompts/logging/completions as the upstream
//     wrote them but removes listChanged/subscribe; ServerCapsToLegacyRelayed keeps those
//     flags too, for a caller that relays those notifications and methods.
//   - ToolsListForLegacy: mode returning "" leaves the tool untouched (legacy default:
//     forbidden); a taskSupport the upstream already wrote is replaced.
//   - URL-mode elicitation: elicitationId = hex SHA-256 over a domain tag and the
//     length-prefixed (bridge task id, key); an upstream elicitationId is replaced.
package mapping
