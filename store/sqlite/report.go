package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/taskbridge/taskbridge/record"
	"github.com/taskbridge/taskbridge/store"
)

// ListSessions returns the sessions last seen at or after since, most recently seen first.
func (s *Store) ListSessions(ctx context.Context, since time.Time) ([]*record.Session, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT id, protocol_version, client_info, client_capabilities,
		principal, created_at, last_seen_at, closed FROM sessions WHERE last_seen_at >= ?
		ORDER BY last_seen_at DESC, id DESC`, msOf(since))
	if err != nil {
		return nil, fmt.Errorf("sqlite: list sessions: %w", err)
	}
	defer rows.Close()
	var out []*record.Session
	for rows.Next() {
		var (
			se             record.Session
			info, caps     []byte
			created, lastS int64
		)
		if err := rows.Scan(&se.ID, &se.ProtocolVersion, &info, &caps, &se.Principal, &created, &lastS, &se.Closed); err != nil {
			return nil, fmt.Errorf("sqlite: list sessions: %w", err)
		}
		se.ClientInfo, se.ClientCapabilities = rawOf(info), rawOf(caps)
		se.CreatedAt, se.LastSeenAt = timeOf(created), timeOf(lastS)
		out = append(out, &se)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: list sessions: %w", err)
	}
	return out, nil
}

// QueryTasks returns up to q.Limit tasks matching q, newest first.
func (s *Store) QueryTasks(ctx context.Context, q store.TaskQuery) ([]*record.Task, error) {
	var (
		where []string
		args  []any
	)
	if q.Owner != "" {
		where, args = append(where, "owner = ?"), append(args, q.Owner)
	}
	if q.SessionID != "" {
		where, args = append(where, "session_id = ?"), append(args, q.SessionID)
	}
	if q.Status != "" {
		where, args = append(where, "status = ?"), append(args, q.Status)
	}
	query := `SELECT ` + taskColumns + ` FROM tasks`
	if len(where) > 0 {
		query += ` WHERE ` + strings.Join(where, " AND ")
	}
	limit := q.Limit
	if limit <= 0 {
		limit = -1
	}
	query += ` ORDER BY created_at DESC, id DESC LIMIT ?`
	return s.listTasks(ctx, "query tasks", query, append(args, limit)...)
}

// CountTasksByDay counts tasks created at or after since, per UTC day (created_at is
// milliseconds since the epoch, so a day is created_at / 86400000).
func (s *Store) CountTasksByDay(ctx context.Context, since time.Time) ([]store.DayCount, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT created_at / 86400000 AS day, COUNT(*) FROM tasks
		WHERE created_at >= ? GROUP BY day ORDER BY day`, msOf(since))
	if err != nil {
		return nil, fmt.Errorf("sqlite: count tasks by day: %w", err)
	}
	defer rows.Close()
	var out []store.DayCount
	for rows.Next() {
		var day int64
		var c store.DayCount
		if err := rows.Scan(&day, &c.Count); err != nil {
			return nil, fmt.Errorf("sqlite: count tasks by day: %w", err)
		}
		c.Day = time.UnixMilli(day * 86400000).UTC()
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: count tasks by day: %w", err)
	}
	return out, nil
}

// CountTasksBySession counts tasks created at or after since, per session and mode.
func (s *Store) CountTasksBySession(ctx context.Context, since time.Time) ([]store.SessionTaskCount, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT session_id, mode, COUNT(*) FROM tasks
		WHERE created_at >= ? GROUP BY session_id, mode ORDER BY session_id, mode`, msOf(since))
	if err != nil {
		return nil, fmt.Errorf("sqlite: count tasks: %w", err)
	}
	defer rows.Close()
	var out []store.SessionTaskCount
	for rows.Next() {
		var c store.SessionTaskCount
		if err := rows.Scan(&c.SessionID, &c.Mode, &c.Count); err != nil {
			return nil, fmt.Errorf("sqlite: count tasks: %w", err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: count tasks: %w", err)
	}
	return out, nil
}

// clientSessions is the sessions last seen at or after ?1 with their clientInfo name and
// version read in SQL: a member that is not a string (or is missing, or the column is
// NULL) reads as "". client_info holds the JSON text the client sent, as a BLOB: cast to
// TEXT, since SQLite reads a BLOB argument of its JSON functions as JSONB.
const clientSessions = `WITH s AS (
	SELECT id, protocol_version, principal, created_at, last_seen_at,
		CASE WHEN json_valid(ci) THEN
			CASE WHEN json_type(ci, '$.name') = 'text' THEN json_extract(ci, '$.name') ELSE '' END
		ELSE '' END AS name,
		CASE WHEN json_valid(ci) THEN
			CASE WHEN json_type(ci, '$.version') = 'text' THEN json_extract(ci, '$.version') ELSE '' END
		ELSE '' END AS version
	FROM (SELECT *, CAST(client_info AS TEXT) AS ci FROM sessions WHERE last_seen_at >= ?1)
)`

// SummarizeClients aggregates the sessions seen since, and their tasks, per client.
func (s *Store) SummarizeClients(ctx context.Context, since time.Time) ([]store.ClientSummary, error) {
	tx, err := s.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true}) // one snapshot for both queries
	if err != nil {
		return nil, fmt.Errorf("sqlite: summarize clients: %w", err)
	}
	defer tx.Rollback()
	rows, err := tx.QueryContext(ctx, clientSessions+` SELECT name, version, protocol_version, principal,
		MIN(created_at), MAX(last_seen_at), COUNT(*) FROM s GROUP BY name, version, protocol_version, principal`, msOf(since))
	if err != nil {
		return nil, fmt.Errorf("sqlite: summarize clients: %w", err)
	}
	byKey := map[[4]string]*store.ClientSummary{}
	var out []store.ClientSummary
	for rows.Next() {
		var (
			c            store.ClientSummary
			first, lastS int64
		)
		if err := rows.Scan(&c.Name, &c.Version, &c.ProtocolVersion, &c.Principal, &first, &lastS, &c.Sessions); err != nil {
			rows.Close()
			return nil, fmt.Errorf("sqlite: summarize clients: %w", err)
		}
		c.FirstSeen, c.LastSeen, c.Tasks = timeOf(first), timeOf(lastS), map[record.Mode]int{}
		out = append(out, c)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: summarize clients: %w", err)
	}
	for i := range out {
		c := &out[i]
		byKey[[4]string{c.Name, c.Version, c.ProtocolVersion, c.Principal}] = c
	}
	rows, err = tx.QueryContext(ctx, clientSessions+` SELECT s.name, s.version, s.protocol_version, s.principal,
		t.mode, COUNT(*) FROM s JOIN tasks t ON t.session_id = s.id WHERE t.created_at >= ?1
		GROUP BY s.name, s.version, s.protocol_version, s.principal, t.mode`, msOf(since))
	if err != nil {
		return nil, fmt.Errorf("sqlite: summarize client tasks: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			k    [4]string
			mode string
			n    int
		)
		if err := rows.Scan(&k[0], &k[1], &k[2], &k[3], &mode, &n); err != nil {
			return nil, fmt.Errorf("sqlite: summarize client tasks: %w", err)
		}
		if c := byKey[k]; c != nil {
			c.Tasks[record.Mode(mode)] += n
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: summarize client tasks: %w", err)
	}
	return out, nil
}

// CountTasksSince counts the tasks created at or after since.
func (s *Store) CountTasksSince(ctx context.Context, since time.Time) (int, error) {
	var n int
	if err := s.r.QueryRowContext(ctx, `SELECT COUNT(*) FROM tasks WHERE created_at >= ?`, msOf(since)).Scan(&n); err != nil {
		return 0, fmt.Errorf("sqlite: count tasks: %w", err)
	}
	return n, nil
}

// SummarizeClientDays returns the distinct (client, first day, last day) of the sessions
// last seen since.
func (s *Store) SummarizeClientDays(ctx context.Context, since time.Time) ([]store.ClientDays, error) {
	rows, err := s.r.QueryContext(ctx, clientSessions+` SELECT DISTINCT name, version, protocol_version, principal,
		created_at / 86400000, last_seen_at / 86400000 FROM s`, msOf(since))
	if err != nil {
		return nil, fmt.Errorf("sqlite: summarize client days: %w", err)
	}
	defer rows.Close()
	var out []store.ClientDays
	for rows.Next() {
		var (
			c           store.ClientDays
			first, last int64
		)
		if err := rows.Scan(&c.Name, &c.Version, &c.ProtocolVersion, &c.Principal, &first, &last); err != nil {
			return nil, fmt.Errorf("sqlite: summarize client days: %w", err)
		}
		c.First, c.Last = timeOf(first*86400000), timeOf(last*86400000)
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: summarize client days: %w", err)
	}
	return out, nil
}

// Summary counts every session and task.
func (s *Store) Summary(ctx context.Context) (store.Summary, error) {
	var sum store.Summary
	var last int64
	err := s.r.QueryRowContext(ctx, `SELECT (SELECT COUNT(*) FROM sessions),
		(SELECT COALESCE(MAX(last_seen_at), 0) FROM sessions), (SELECT COUNT(*) FROM tasks)`).
		Scan(&sum.Sessions, &last, &sum.Tasks)
	if err != nil {
		return sum, fmt.Errorf("sqlite: summary: %w", err)
	}
	if sum.Sessions > 0 {
		sum.LastSessionSeen = timeOf(last)
	}
	// A store of schema version 1 has no heartbeat table (read-only opens accept it).
	var n int
	if err := s.r.QueryRowContext(ctx, `SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'heartbeat'`).Scan(&n); err != nil {
		return sum, fmt.Errorf("sqlite: summary: %w", err)
	}
	if n > 0 {
		var at int64
		err := s.r.QueryRowContext(ctx, `SELECT at FROM heartbeat WHERE id = 1`).Scan(&at)
		switch {
		case err == nil:
			sum.Heartbeat = timeOf(at)
		case !errors.Is(err, sql.ErrNoRows):
			return sum, fmt.Errorf("sqlite: summary: %w", err)
		}
	}
	return sum, nil
}
