// Package record is taskbridge's vocabulary of durable records: the task record (its
// status as 2025-11-25 clients see it, the real outcome of the operation, who runs it), the
// legacy session record and the input requests relayed for a task. It is pure (no I/O):
// mapping/, fallback/, the routes and store/ all speak it, and store/ only persists it.
package record

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"time"
)

// Status is the task status as shown to legacy (2025-11-25) clients.
type Status string

// The 2025-11-25 statuses.
const (
	StatusWorking       Status = "working"
	StatusInputRequired Status = "input_required"
	StatusCompleted     Status = "completed"
	StatusFailed        Status = "failed"
	StatusCancelled     Status = "cancelled"
)

// Terminal reports whether s never changes again.
func (s Status) Terminal() bool {
	return s == StatusCompleted || s == StatusFailed || s == StatusCancelled
}

// Outcome is what really happened to the operation, kept apart from the protocol status:
// a task cancelled at the client's request may still have completed upstream.
type Outcome string

// Operation outcomes.
const (
	OutcomePending   Outcome = "pending"
	OutcomeSucceeded Outcome = "succeeded"
	OutcomeFailed    Outcome = "failed"
	OutcomeCancelled Outcome = "cancelled"
	OutcomeUnknown   Outcome = "unknown"
)

// Mode says who runs the task.
type Mode string

// Task modes.
const (
	ModeTranslate Mode = "translate" // an upstream SEP-2663 task, translated
	ModeHost      Mode = "host"      // a bridge-hosted task around a synchronous upstream call
	ModeComplete  Mode = "complete"  // the upstream answered synchronously; the record holds the result
	// ModeReverse is a 2025-11-25 upstream task run for a 2026-07-28 client (the reverse
	// route): the bridge's id, the upstream's task id and the upstream session it lives in.
	ModeReverse Mode = "reverse"
	// ModePassThrough is a 2026-07-28 upstream task created through the modern
	// pass-through: its ID is PassThroughID(Origin, UpstreamTaskID), and the record only
	// binds the task to its owner and counts it while unfinished (the task's state is the
	// upstream's; Status is the last one the bridge saw pass).
	ModePassThrough Mode = "passthrough"
	// ModeLegacyPassThrough holds the questions (input requests) a 2025-11-25 upstream
	// asked about a task of the legacy pass-through until they are answered upstream: its
	// ID is LegacyPassThroughID(client session, upstream task id), its inputs are the
	// questions, and Status is input_required while one is unanswered (the task itself is
	// the upstream's; bridge/passthrough/legacyinput.go).
	ModeLegacyPassThrough Mode = "legacy-passthrough"
)

// Task is one task record. Times are stored with millisecond precision, in UTC.
type Task struct {
	// ID is bridge-minted, random, >= 128 bits, never the upstream's id; a pass-through
	// record's is derived from the upstream's (PassThroughID), which clients do see.
	ID             string
	Owner          string // principal, or "session:<id>" without authentication
	SessionID      string // legacy session that created it
	RequestID      string // raw JSON-RPC id of the creating request (idempotency within a session)
	IdempotencyKey string // optional, unique per Owner
	Origin         string // upstream identity (URL or command)
	UpstreamTaskID string // empty until the upstream answered
	// UpstreamSessionID is the upstream's Mcp-Session-Id the task lives in (reverse route:
	// a 2025-11-25 task exists only in its session); empty for the other modes.
	UpstreamSessionID string
	// ClientCaps (reverse route) is the normalized capability set the creating request
	// declared (mapping.InputCaps, canonical JSON), which its upstream session was
	// initialized with: the upstream's input requests for the task are checked against it,
	// after a restart too. Written once, at create; "" for the other modes and for records
	// written before it was kept.
	ClientCaps     string
	Mode           Mode
	Tool           string
	ArgsHash       string // hex sha-256 of the arguments; arguments themselves are never stored
	Status         Status
	StatusMessage  string
	CreatedAt      time.Time
	LastUpdatedAt  time.Time
	TTLMs          *int64 // nil: unlimited
	PollIntervalMs int64  // what legacy clients are told
	UpstreamPollMs int64  // what the upstream asked for (0 if unknown)
	// Result is the CallToolResult to hand out from tasks/result (set when completed, or
	// when failed through a tool error with isError:true).
	Result json.RawMessage
	// Error is the JSON-RPC error object ({code,message,data}) when failed by an error.
	Error         json.RawMessage
	Outcome       Outcome
	OutcomeDetail string
	ProgressToken json.RawMessage // from the creating request's _meta, if any
	// TraceParent is the W3C traceparent of the create's span (internal/trace), written once
	// at create: later requests about the task link to it. "" while tracing is off.
	TraceParent string
	// Version is incremented by every successful UpdateTask; callers pass back the version
	// they read.
	Version int64
}

// PassThroughID is the record id of the modern pass-through's task upstreamTaskID of the
// upstream origin: one record per upstream task, found again from the id the client sends,
// never equal to an id another mode mints (those carry no "pt-" prefix).
func PassThroughID(origin, upstreamTaskID string) string {
	sum := sha256.Sum256([]byte(origin + "\x00" + upstreamTaskID))
	return "pt-" + hex.EncodeToString(sum[:])
}

// LegacyPassThroughID is the record id of the legacy pass-through's question holder for the
// upstream task upstreamTaskID of client session sessionID (a 2025-11-25 task lives in its
// session, so the pair names it).
func LegacyPassThroughID(sessionID, upstreamTaskID string) string {
	sum := sha256.Sum256([]byte(sessionID + "\x00" + upstreamTaskID))
	return "lpt-" + hex.EncodeToString(sum[:])
}

// ExpiresAt returns when the task's ttl runs out, and false for an unlimited ttl.
func (t *Task) ExpiresAt() (time.Time, bool) {
	if t.TTLMs == nil {
		return time.Time{}, false
	}
	return t.CreatedAt.Add(time.Duration(*t.TTLMs) * time.Millisecond), true
}

// Session is a legacy (2025-11-25 and older) client session opened by initialize.
type Session struct {
	ID                 string
	ProtocolVersion    string
	ClientInfo         json.RawMessage // {"name","version",...} as sent
	ClientCapabilities json.RawMessage
	Principal          string // "" without authentication
	CreatedAt          time.Time
	LastSeenAt         time.Time
	Closed             bool
	// UpstreamSessionID (column upstream_session) is the Mcp-Session-Id of the upstream session the legacy
	// pass-through forwards this client session over ("" on other routes): a restarted
	// bridge adopts it, since a 2025-11-25 upstream binds its tasks to its session.
	UpstreamSessionID string
}

// Input is one input request an upstream task is waiting on, and its relay state.
type Input struct {
	TaskID string
	Key    string          // the upstream inputRequests key
	Method string          // elicitation/create, sampling/createMessage, roots/list
	Params json.RawMessage // as sent to the legacy client (bridge ids, related-task _meta)
	// RequestID is the JSON-RPC id the bridge issued when it delivered the request ("" until
	// delivered). Unique across the store: a client's answer is matched by it alone.
	RequestID   string
	DeliveredAt *time.Time
	Response    json.RawMessage // the client's result object, once answered
	AnsweredAt  *time.Time
	ForwardedAt *time.Time // when the answer went upstream in tasks/update
	// UpstreamRequestID is the raw JSON-RPC id under which a 2025-11-25 upstream sent the
	// request (reverse route), so that an answer given after a restart, or on another
	// replica, can still be POSTed back to it; nil for the forward route.
	UpstreamRequestID json.RawMessage
}
