// Package sqlrec is what the two SQL stores share: the columns of each table, how a
// record becomes query arguments and how a row becomes a record again, the scanning of the
// report queries' rows, and the WHERE builder of QueryTasks. Only the SQL text and the
// driver differ between SQLite (database/sql) and PostgreSQL (pgx); everything here works
// with either driver's rows (*sql.Row, *sql.Rows, pgx.Row, pgx.Rows all Scan).
//
// Columns: times are unix milliseconds (BIGINT); JSON is the exact bytes the record holds
// (BLOB / BYTEA), NULL when empty; an unlimited ttl is NULL.
package sqlrec

import (
	"database/sql"
	"encoding/json"
	"strings"
	"time"

	"github.com/taskbridge/taskbridge/record"
	"github.com/taskbridge/taskbridge/store"
)

// Row is one row to scan.
type Row interface{ Scan(dest ...any) error }

// Rows is a result set (the caller closes it).
type Rows interface {
	Row
	Next() bool
	Err() error
}

// Collect scans every row of rows with scan.
func Collect[T any](rows Rows, scan func(Row) (T, error)) ([]T, error) {
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// ---- values ----------------------------------------------------------------------------

// Ms is a time as stored: unix milliseconds.
func Ms(t time.Time) int64 { return t.UnixMilli() }

// Time is a stored time, in UTC.
func Time(ms int64) time.Time { return time.UnixMilli(ms).UTC() }

// NullMs is an optional time as an argument (NULL when nil).
func NullMs(t *time.Time) any {
	if t == nil {
		return nil
	}
	return t.UnixMilli()
}

// TimePtr is an optional stored time.
func TimePtr(v sql.NullInt64) *time.Time {
	if !v.Valid {
		return nil
	}
	t := Time(v.Int64)
	return &t
}

// NullInt is an optional integer as an argument (NULL when nil).
func NullInt(p *int64) any {
	if p == nil {
		return nil
	}
	return *p
}

// Raw passes JSON through as its exact bytes, or NULL when empty.
func Raw(b json.RawMessage) any {
	if len(b) == 0 {
		return nil
	}
	return []byte(b)
}

// RawOf is stored JSON (nil for NULL or empty).
func RawOf(b []byte) json.RawMessage {
	if len(b) == 0 {
		return nil
	}
	return json.RawMessage(b)
}

// ---- columns of older schemas ----------------------------------------------------------

// addedIn names the columns later migrations added, with the schema version that added
// them.
var addedIn = map[string]int{"upstream_session_id": 4, "upstream_request_id": 4, "trace_parent": 5, "upstream_session": 6, "client_caps": 7}

// SelectList is cols (TaskColumns, InputColumns or SessionColumns) as the SELECT list of a store whose
// schema is at version v: a column added after v reads as empty (empty(col) is the
// dialect's typed empty value), so an operator command built later still reads a store the
// fleet has not migrated yet. For the current schema it is cols unchanged.
func SelectList(cols string, v int, empty func(col string) string) string {
	parts := strings.Split(cols, ",")
	for i, p := range parts {
		col := strings.TrimSpace(p)
		if added, ok := addedIn[col]; ok && v < added {
			parts[i] = " " + empty(col) + " AS " + col
		}
	}
	return strings.Join(parts, ",")
}

// ---- tasks -----------------------------------------------------------------------------

// TaskColumns are the columns of tasks, in the order of TaskInsertArgs and ScanTask.
const TaskColumns = `id, owner, session_id, request_id, idempotency_key, origin, upstream_task_id,
	mode, tool, args_hash, status, status_message, created_at, last_updated_at, ttl_ms,
	poll_interval_ms, upstream_poll_ms, result, rpc_error, outcome, outcome_detail,
	progress_token, upstream_session_id, trace_parent, client_caps, version`

// TaskInsertArgs are the values of every column but version (the INSERT writes 1).
func TaskInsertArgs(t *record.Task) []any {
	return []any{t.ID, t.Owner, t.SessionID, t.RequestID, t.IdempotencyKey, t.Origin, t.UpstreamTaskID,
		t.Mode, t.Tool, t.ArgsHash, t.Status, t.StatusMessage, Ms(t.CreatedAt),
		Ms(t.LastUpdatedAt), NullInt(t.TTLMs), t.PollIntervalMs, t.UpstreamPollMs,
		Raw(t.Result), Raw(t.Error), t.Outcome, t.OutcomeDetail, Raw(t.ProgressToken), t.UpstreamSessionID, t.TraceParent, t.ClientCaps}
}

// TaskUpdateArgs are the values of the compare-and-swap UPDATE: upstream_task_id, mode,
// status, status_message, last_updated_at, ttl_ms, poll_interval_ms, upstream_poll_ms,
// result, rpc_error, outcome, outcome_detail, upstream_session_id, then the id and the
// expected version.
func TaskUpdateArgs(t *record.Task) []any {
	return []any{t.UpstreamTaskID, t.Mode, t.Status, t.StatusMessage, Ms(t.LastUpdatedAt),
		NullInt(t.TTLMs), t.PollIntervalMs, t.UpstreamPollMs, Raw(t.Result), Raw(t.Error),
		t.Outcome, t.OutcomeDetail, t.UpstreamSessionID, t.ID, t.Version}
}

// ScanTask reads a row of TaskColumns.
func ScanTask(row Row) (*record.Task, error) {
	var (
		t                   record.Task
		created, updated    int64
		ttl                 sql.NullInt64
		result, rpcErr, tok []byte
	)
	err := row.Scan(&t.ID, &t.Owner, &t.SessionID, &t.RequestID, &t.IdempotencyKey, &t.Origin,
		&t.UpstreamTaskID, &t.Mode, &t.Tool, &t.ArgsHash, &t.Status, &t.StatusMessage,
		&created, &updated, &ttl, &t.PollIntervalMs, &t.UpstreamPollMs, &result, &rpcErr,
		&t.Outcome, &t.OutcomeDetail, &tok, &t.UpstreamSessionID, &t.TraceParent, &t.ClientCaps, &t.Version)
	if err != nil {
		return nil, err
	}
	t.CreatedAt, t.LastUpdatedAt = Time(created), Time(updated)
	if ttl.Valid {
		t.TTLMs = &ttl.Int64
	}
	t.Result, t.Error, t.ProgressToken = RawOf(result), RawOf(rpcErr), RawOf(tok)
	return &t, nil
}

// ---- sessions --------------------------------------------------------------------------

// SessionColumns are the columns of sessions, in the order of SessionArgs and ScanSession.
const SessionColumns = `id, protocol_version, client_info, client_capabilities, principal, created_at, last_seen_at, closed,
	upstream_session`

// SessionArgs are the values of SessionColumns.
func SessionArgs(se *record.Session) []any {
	return []any{se.ID, se.ProtocolVersion, Raw(se.ClientInfo), Raw(se.ClientCapabilities), se.Principal,
		Ms(se.CreatedAt), Ms(se.LastSeenAt), se.Closed, se.UpstreamSessionID}
}

// ScanSession reads a row of SessionColumns.
func ScanSession(row Row) (*record.Session, error) {
	var (
		se             record.Session
		info, caps     []byte
		created, lastS int64
	)
	if err := row.Scan(&se.ID, &se.ProtocolVersion, &info, &caps, &se.Principal, &created, &lastS, &se.Closed, &se.UpstreamSessionID); err != nil {
		return nil, err
	}
	se.ClientInfo, se.ClientCapabilities = RawOf(info), RawOf(caps)
	se.CreatedAt, se.LastSeenAt = Time(created), Time(lastS)
	return &se, nil
}

// ---- inputs ----------------------------------------------------------------------------

// InputColumns are the columns of inputs, in the order of InputArgs and ScanInput.
const InputColumns = `task_id, key, method, params, request_id, delivered_at, response, answered_at, forwarded_at,
	upstream_request_id`

// InputArgs are the values of InputColumns.
func InputArgs(x record.Input) []any {
	return []any{x.TaskID, x.Key, x.Method, Raw(x.Params), x.RequestID, NullMs(x.DeliveredAt),
		Raw(x.Response), NullMs(x.AnsweredAt), NullMs(x.ForwardedAt), Raw(x.UpstreamRequestID)}
}

// ScanInput reads a row of InputColumns.
func ScanInput(row Row) (record.Input, error) {
	var (
		in                   record.Input
		params, resp, upID   []byte
		deliv, answ, forward sql.NullInt64
	)
	if err := row.Scan(&in.TaskID, &in.Key, &in.Method, &params, &in.RequestID, &deliv, &resp, &answ, &forward, &upID); err != nil {
		return in, err
	}
	in.Params, in.Response, in.UpstreamRequestID = RawOf(params), RawOf(resp), RawOf(upID)
	in.DeliveredAt, in.AnsweredAt, in.ForwardedAt = TimePtr(deliv), TimePtr(answ), TimePtr(forward)
	return in, nil
}

// ---- operator queries and reports ------------------------------------------------------

// TaskQuery is QueryTasks' WHERE clause for q, with its arguments; placeholder(n) writes
// the n-th argument's placeholder ("?" or "$n").
func TaskQuery(q store.TaskQuery, placeholder func(n int) string) (where string, args []any) {
	var conds []string
	add := func(col string, v any) {
		args = append(args, v)
		conds = append(conds, col+" = "+placeholder(len(args)))
	}
	if q.Owner != "" {
		add("owner", q.Owner)
	}
	if q.SessionID != "" {
		add("session_id", q.SessionID)
	}
	if q.Status != "" {
		add("status", string(q.Status))
	}
	if len(conds) > 0 {
		where = ` WHERE ` + strings.Join(conds, " AND ")
	}
	return where, args
}

// dayMs is one UTC day in milliseconds: days are created_at / dayMs.
const dayMs = 86400000

// ScanDayCount reads (day number, count) of CountTasksByDay.
func ScanDayCount(row Row) (store.DayCount, error) {
	var day, n int64
	if err := row.Scan(&day, &n); err != nil {
		return store.DayCount{}, err
	}
	return store.DayCount{Day: Time(day * dayMs), Count: int(n)}, nil
}

// ScanSessionTaskCount reads (session id, mode, count) of CountTasksBySession.
func ScanSessionTaskCount(row Row) (store.SessionTaskCount, error) {
	var (
		c    store.SessionTaskCount
		mode string
		n    int64
	)
	if err := row.Scan(&c.SessionID, &mode, &n); err != nil {
		return c, err
	}
	c.Mode, c.Count = record.Mode(mode), int(n)
	return c, nil
}

// ScanClientSummary reads (name, version, protocol version, principal, first created,
// last seen, sessions) of SummarizeClients' first query.
func ScanClientSummary(row Row) (store.ClientSummary, error) {
	var (
		c            store.ClientSummary
		first, lastS int64
		n            int64
	)
	if err := row.Scan(&c.Name, &c.Version, &c.ProtocolVersion, &c.Principal, &first, &lastS, &n); err != nil {
		return c, err
	}
	c.FirstSeen, c.LastSeen, c.Sessions, c.Tasks = Time(first), Time(lastS), int(n), map[record.Mode]int{}
	return c, nil
}

// AddClientTasks adds the rows of SummarizeClients' second query, (name, version,
// protocol version, principal, mode, count), to the summaries they belong to.
func AddClientTasks(out []store.ClientSummary, rows Rows) error {
	byKey := make(map[[4]string]*store.ClientSummary, len(out))
	for i := range out {
		c := &out[i]
		byKey[[4]string{c.Name, c.Version, c.ProtocolVersion, c.Principal}] = c
	}
	for rows.Next() {
		var (
			k    [4]string
			mode string
			n    int64
		)
		if err := rows.Scan(&k[0], &k[1], &k[2], &k[3], &mode, &n); err != nil {
			return err
		}
		if c := byKey[k]; c != nil {
			c.Tasks[record.Mode(mode)] += int(n)
		}
	}
	return rows.Err()
}

// ScanClientDays reads (name, version, protocol version, principal, first day, last day)
// of SummarizeClientDays.
func ScanClientDays(row Row) (store.ClientDays, error) {
	var (
		c           store.ClientDays
		first, last int64
	)
	if err := row.Scan(&c.Name, &c.Version, &c.ProtocolVersion, &c.Principal, &first, &last); err != nil {
		return c, err
	}
	c.First, c.Last = Time(first*dayMs), Time(last*dayMs)
	return c, nil
}
