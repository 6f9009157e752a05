// Package store keeps taskbridge's durable records: legacy sessions, task records and the
// input requests relayed for them (the record types are package record; this package only
// persists them). One interface, two implementations: SQLite (embedded,
// the default, one replica) and PostgreSQL (several replicas).
//
// Concurrency contract: every method is safe for concurrent use by many goroutines and,
// for PostgreSQL, by many processes. Task updates are compare-and-swap on record.Task.Version, so
// two replicas racing on one record never lose a write silently: the loser gets ErrConflict,
// re-reads and decides again.
package store

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/taskbridge/taskbridge/record"
)

var (
	// ErrNotFound is returned when no record matches.
	ErrNotFound = errors.New("store: not found")
	// ErrConflict is returned by UpdateTask when the stored version moved on, and by
	// CreateTask when the id or the (owner, idempotency key) pair is already taken.
	ErrConflict = errors.New("store: conflict")
	// ErrNoStore is returned by the opens that never create a store (the read-only one of
	// the operator commands, and the read-write one of tasks reconcile) when the store does
	// not exist or holds no taskbridge schema: an empty store there would be a false
	// answer ("no legacy client"), not an answer.
	ErrNoStore = errors.New("store: no taskbridge store")
)

// Cursor is a keyset position in a newest-first task listing.
type Cursor struct {
	CreatedAt time.Time
	ID        string
}

// TaskQuery filters QueryTasks; zero fields match everything.
type TaskQuery struct {
	Owner     string
	SessionID string
	Status    record.Status
	Limit     int
}

// SessionTaskCount is one row of CountTasksBySession.
type SessionTaskCount struct {
	SessionID string
	Mode      record.Mode
	Count     int
}

// DayCount is one row of CountTasksByDay: the tasks created on the UTC day that starts at Day.
type DayCount struct {
	Day   time.Time
	Count int
}

// ClientSummary is one row of SummarizeClients: the legacy sessions seen in the report
// window that share a clientInfo name and version, a protocol version and a principal.
type ClientSummary struct {
	// Name and Version are clientInfo.name and .version when they are strings, else ""
	// (for a duplicated member, the first one counts, as gjson reads it).
	Name, Version   string
	ProtocolVersion string
	Principal       string
	FirstSeen       time.Time // earliest CreatedAt
	LastSeen        time.Time // latest LastSeenAt
	Sessions        int
	// Tasks counts the tasks these sessions created in the window, by mode (only the
	// modes that occur).
	Tasks map[record.Mode]int
}

// ClientDays is one row of SummarizeClientDays: a client (as in ClientSummary) had a
// session opened on the UTC day First and last seen on the UTC day Last (UTC midnights).
type ClientDays struct {
	Name, Version   string
	ProtocolVersion string
	Principal       string
	First, Last     time.Time
}

// Summary is what a store holds in all, whatever the window: the migration report tells
// "no legacy traffic in the window" (sessions exist, none recent) from "no data" (an empty
// or wrong store).
//
// Sessions are purged after the report window, so an idle bridge's store can hold none;
// Heartbeat then still shows that a running bridge uses this store.
type Summary struct {
	Sessions int
	// LastSessionSeen is the latest LastSeenAt of any session; zero without sessions.
	LastSessionSeen time.Time
	Tasks           int
	// Heartbeat is the last write of CheckWritable (serve at start and on readiness
	// checks); zero when none was ever made.
	Heartbeat time.Time
}

// Store is the durable record keeper. See the package comment for the concurrency contract.
type Store interface {
	CreateSession(ctx context.Context, s *record.Session) error
	GetSession(ctx context.Context, id string) (*record.Session, error)
	TouchSession(ctx context.Context, id string, at time.Time) error
	CloseSession(ctx context.Context, id string) error

	// CreateTask inserts t with Version 1. ErrConflict when the id, or the non-empty
	// (Owner, IdempotencyKey) pair, exists already.
	CreateTask(ctx context.Context, t *record.Task) error
	GetTask(ctx context.Context, id string) (*record.Task, error)
	// FindTaskByRequest finds the task created by request id requestID in a session.
	FindTaskByRequest(ctx context.Context, sessionID, requestID string) (*record.Task, error)
	FindTaskByIdempotencyKey(ctx context.Context, owner, key string) (*record.Task, error)
	// UpdateTask writes every mutable field of t if the stored Version equals t.Version,
	// then sets t.Version to the new version. Otherwise ErrConflict and nothing changes.
	UpdateTask(ctx context.Context, t *record.Task) error
	// ListTasks returns up to limit tasks of owner, newest first (CreatedAt desc, ID desc),
	// strictly after the cursor when it is non-nil.
	ListTasks(ctx context.Context, owner string, after *Cursor, limit int) ([]*record.Task, error)
	// ListActive returns every non-terminal task (for resuming after a restart).
	ListActive(ctx context.Context) ([]*record.Task, error)
	// ListUnsettled returns the terminal tasks with an upstream id whose real outcome is
	// still pending: cancelled by the client while the upstream may carry on. A replica
	// that died between recording such a cancel and telling the upstream leaves one.
	ListUnsettled(ctx context.Context) ([]*record.Task, error)
	// CountActive counts owner's non-terminal tasks (the per-principal concurrency cap).
	CountActive(ctx context.Context, owner string) (int, error)
	// ReleaseIdempotencyKey clears a task's IdempotencyKey (an operator reconciled it), so
	// a new task may take the key. ErrNotFound for an unknown id.
	ReleaseIdempotencyKey(ctx context.Context, id string) error
	// ReleaseRequestID clears a task's RequestID when it is still requestID (the session
	// reused the id for another call), so the new task may take it: (SessionID, RequestID)
	// stays unique. ErrNotFound when the task does not hold that id (any more).
	ReleaseRequestID(ctx context.Context, id, requestID string) error
	// PurgeExpired applies the TTL: every terminal task whose ttl ran out before now loses
	// its payload (Result, Error, StatusMessage, ProgressToken and its inputs; Version is
	// bumped) and keeps its audit part (owner, tool, arguments hash, timestamps, outcome);
	// a terminal task whose ttl ran out more than retention before now is deleted. It
	// reports how many records lost their payload and how many were deleted. Tasks with
	// an unlimited ttl are never purged.
	PurgeExpired(ctx context.Context, now time.Time, retention time.Duration) (purged, deleted int, err error)

	// PutInputs inserts the inputs that do not exist yet (by TaskID, Key); existing ones
	// are left untouched.
	PutInputs(ctx context.Context, in []record.Input) error
	ListInputs(ctx context.Context, taskID string) ([]record.Input, error)
	// MarkInputDelivered records the first delivery of an input under a bridge-issued
	// request id. An input already delivered keeps its id: ErrConflict, and the caller
	// uses the stored id (ListInputs). ErrConflict too when requestID is taken.
	MarkInputDelivered(ctx context.Context, taskID, key, requestID string, at time.Time) error
	FindInputByRequestID(ctx context.Context, requestID string) (*record.Input, error)
	// AnswerInput stores the first answer for (taskID, key) and reports first=true; later
	// answers are dropped and report first=false.
	AnswerInput(ctx context.Context, taskID, key string, resp json.RawMessage, at time.Time) (first bool, err error)
	MarkInputForwarded(ctx context.Context, taskID, key string, at time.Time) error

	// ListSessions returns the sessions last seen at or after since, most recently seen
	// first (operator reports: which legacy clients are still around).
	ListSessions(ctx context.Context, since time.Time) ([]*record.Session, error)
	// QueryTasks returns up to q.Limit tasks of any owner matching q, newest first
	// (CreatedAt desc, ID desc); Limit <= 0 means no limit. For operator commands.
	QueryTasks(ctx context.Context, q TaskQuery) ([]*record.Task, error)
	// CountTasksBySession counts the tasks created at or after since, per creating session
	// and mode (the migration report's "tasks created" and route columns).
	CountTasksBySession(ctx context.Context, since time.Time) ([]SessionTaskCount, error)
	// CountTasksByDay counts the tasks created at or after since per UTC day, oldest day
	// first; days without a task are absent (the /status chart of creations per day).
	CountTasksByDay(ctx context.Context, since time.Time) ([]DayCount, error)
	// SummarizeClients aggregates, in the database, the sessions last seen at or after
	// since by (clientInfo name, version, protocol version, principal), with the tasks
	// they created at or after since; rows in no particular order. The migration report
	// uses it so that it never loads the sessions themselves.
	SummarizeClients(ctx context.Context, since time.Time) ([]ClientSummary, error)
	// SummarizeClientDays returns, without duplicates and in no particular order, the
	// (client, first day, last day) of the sessions last seen at or after since: the
	// /status chart's clients per day, as few rows as there are distinct spans.
	SummarizeClientDays(ctx context.Context, since time.Time) ([]ClientDays, error)
	// CountTasksSince counts the tasks of any owner created at or after since.
	CountTasksSince(ctx context.Context, since time.Time) (int, error)
	// PurgeSessions deletes the sessions, closed or not, last seen before before (idle
	// since then: outside the report window) and reports how many it deleted. Their tasks
	// are not touched (PurgeExpired applies the tasks' own retention).
	PurgeSessions(ctx context.Context, before time.Time) (int, error)

	// Summary counts every session and task (see Summary).
	Summary(ctx context.Context) (Summary, error)

	// Ping checks the store is reachable.
	Ping(ctx context.Context) error
	// CheckWritable commits a tiny write (the heartbeat row) and reports whether it
	// succeeded. Readiness uses it: a store that answers reads but refuses writes (a
	// read-only file or role, a full disk) fails every new session and task.
	CheckWritable(ctx context.Context) error
	Close() error
}

// Shared is what replicas sharing one store coordinate through, beyond Store. Only a store
// several processes share implements it (store/postgres); with SQLite there is one process
// and the routes keep all of this in memory. Each consumer asserts the few methods it
// needs (the forward route, the legacy face's event store adapter, the door's limiter).
//
// Times that several replicas compare (lease and claim expiry, stream activity, the token
// buckets) are taken from the store's clock, never a replica's: replicas' clocks may
// disagree, the store's is one.
type Shared interface {
	// Listen and Notify carry one-line events between replicas (postgres.Store.Listen).
	Listen(ctx context.Context, channel string, fn func(payload string)) error
	Notify(ctx context.Context, channel, payload string) error

	// PutAsk records an input request a replica relayed on a stream it holds and is
	// waiting on (a pre-task MRTR round), so the client's answer may reach any replica.
	PutAsk(ctx context.Context, a *Ask) error
	// GetAsk reads an ask; ErrNotFound for an unknown (or purged) request id.
	GetAsk(ctx context.Context, requestID string) (*Ask, error)
	// AnswerAsk stores the first answer and reports first=true; a later one is dropped.
	// ErrNotFound for an unknown request id.
	AnswerAsk(ctx context.Context, requestID string, resp json.RawMessage, at time.Time) (first bool, err error)
	// DeleteAsk forgets an ask once its call stopped waiting (idempotent).
	DeleteAsk(ctx context.Context, requestID string) error

	// TakeLease makes holder the holder of name for ttl (store clock) and reports true
	// when name was free, expired or already holder's (a renewal); false while another
	// holder's lease runs.
	TakeLease(ctx context.Context, name, holder string, ttl time.Duration) (bool, error)
	// ReleaseLease frees name if holder holds it (idempotent).
	ReleaseLease(ctx context.Context, name, holder string) error

	// ClaimInput makes carrier the one replica delivering an unanswered input for ttl
	// (store clock): true when the input had no carrier, carrier's own (a renewal), or an
	// expired one; false for an answered input or another carrier's live claim.
	ClaimInput(ctx context.Context, taskID, key, carrier string, ttl time.Duration) (bool, error)
	// ReleaseInput drops carrier's claim (idempotent), so another replica may deliver it.
	ReleaseInput(ctx context.Context, taskID, key, carrier string) error

	// PutStreamEvent keeps one event of a resumable SSE stream (creating the stream on
	// its first event) and marks the stream active now.
	PutStreamEvent(ctx context.Context, e StreamEvent) error
	// StreamEvents returns the kept events of the session's stream after seq, in order.
	// ErrNotFound when the store keeps no such stream of that session.
	StreamEvents(ctx context.Context, sessionID, streamID string, after uint64) ([]StreamEvent, error)
	// TouchStream marks the stream active now (its holder is alive; keep-alives).
	TouchStream(ctx context.Context, streamID string) error
	// FollowStream records that a replica other than the holder serves the stream's
	// client now, which has every event up to acked.
	FollowStream(ctx context.Context, streamID string, acked uint64) error
	// GetStream reads a stream's activity. ErrNotFound for an unknown stream.
	GetStream(ctx context.Context, streamID string) (StreamState, error)
	// TrimStream drops the events up to seq (its holder's buffer dropped them).
	TrimStream(ctx context.Context, streamID string, upTo uint64) error
	// DeleteStream forgets a stream and its events (idempotent).
	DeleteStream(ctx context.Context, streamID string) error

	// TakeTokens takes up to want tokens from key's bucket (rate tokens per second, at most
	// burst), after returning refund unspent ones, and reports how many it got; with none,
	// retryAfter says when the next one will be there. See postgres.Store.TakeTokens.
	TakeTokens(ctx context.Context, key string, rate float64, burst, want, refund int) (got int, retryAfter time.Duration, err error)

	// PurgeShared deletes what no replica needs any more: expired asks and leases, full
	// token buckets, and streams inactive (neither held nor followed) for streamIdle.
	PurgeShared(ctx context.Context, now time.Time, streamIdle time.Duration) (int, error)
}

// Ask is an input request a replica relayed to a legacy client and waits on (Shared).
type Ask struct {
	RequestID string // the JSON-RPC id the bridge issued; the client's answer carries it
	SessionID string // the session that was asked: only it may answer
	Owner     string // the owner (principal or session) that was asked
	Method    string
	Holder    string    // the replica waiting on it
	ExpiresAt time.Time // after which nobody waits any more (purged)
	// Response is the client's whole JSON-RPC response (result or error), once answered.
	Response   json.RawMessage
	AnsweredAt *time.Time
}

// StreamEvent is one event of a resumable SSE stream as written on the wire (Shared).
type StreamEvent struct {
	StreamID  string
	SessionID string
	Seq       uint64
	Frame     []byte // the SSE event, id and data lines included
	Last      bool   // the stream's response: nothing follows
}

// StreamState is a kept stream's activity, as ages on the store's clock (Shared).
type StreamState struct {
	SessionID string
	// Active is how long ago its holder last wrote an event or a keep-alive.
	Active time.Duration
	// Followed is how long ago another replica last said it serves the stream's client;
	// negative when none ever did.
	Followed time.Duration
	Acked    uint64 // the follower's client has every event up to this one
}
