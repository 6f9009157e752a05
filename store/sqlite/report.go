package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/taskbridge/taskbridge/record"
	"github.com/taskbridge/taskbridge/store"
	"github.com/taskbridge/taskbridge/store/internal/sqlrec"
)

// ListSessions returns the sessions last seen at or after since, most recently seen first.
func (s *Store) ListSessions(ctx context.Context, since time.Time) ([]*record.Session, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT `+s.sessionCols+` FROM sessions WHERE last_seen_at >= ?
		ORDER BY last_seen_at DESC, id DESC`, sqlrec.Ms(since))
	if err != nil {
		return nil, fmt.Errorf("sqlite: list sessions: %w", err)
	}
	defer rows.Close()
	out, err := sqlrec.Collect(rows, sqlrec.ScanSession)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list sessions: %w", err)
	}
	return out, nil
}

// QueryTasks returns up to q.Limit tasks matching q, newest first.
func (s *Store) QueryTasks(ctx context.Context, q store.TaskQuery) ([]*record.Task, error) {
	where, args := sqlrec.TaskQuery(q, func(int) string { return "?" })
	limit := q.Limit
	if limit <= 0 {
		limit = -1 // SQLite: no limit
	}
	return s.listTasks(ctx, "query tasks", `SELECT `+s.taskCols+` FROM tasks`+where+
		` ORDER BY created_at DESC, id DESC LIMIT ?`, append(args, limit)...)
}

// CountTasksByDay counts tasks created at or after since, per UTC day (created_at is
// milliseconds since the epoch, so a day is created_at / 86400000).
func (s *Store) CountTasksByDay(ctx context.Context, since time.Time) ([]store.DayCount, error) {
	return query(ctx, s, "count tasks by day", sqlrec.ScanDayCount, `SELECT created_at / 86400000 AS day, COUNT(*) FROM tasks
		WHERE created_at >= ? GROUP BY day ORDER BY day`, sqlrec.Ms(since))
}

// CountTasksBySession counts tasks created at or after since, per session and mode.
func (s *Store) CountTasksBySession(ctx context.Context, since time.Time) ([]store.SessionTaskCount, error) {
	return query(ctx, s, "count tasks", sqlrec.ScanSessionTaskCount, `SELECT session_id, mode, COUNT(*) FROM tasks
		WHERE created_at >= ? GROUP BY session_id, mode ORDER BY session_id, mode`, sqlrec.Ms(since))
}

// query runs a read and scans every row with scan.
func query[T any](ctx context.Context, s *Store, what string, scan func(sqlrec.Row) (T, error), q string, args ...any) ([]T, error) {
	rows, err := s.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: %s: %w", what, err)
	}
	defer rows.Close()
	out, err := sqlrec.Collect(rows, scan)
	if err != nil {
		return nil, fmt.Errorf("sqlite: %s: %w", what, err)
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
		MIN(created_at), MAX(last_seen_at), COUNT(*) FROM s GROUP BY name, version, protocol_version, principal`, sqlrec.Ms(since))
	if err != nil {
		return nil, fmt.Errorf("sqlite: summarize clients: %w", err)
	}
	out, err := sqlrec.Collect(rows, sqlrec.ScanClientSummary)
	rows.Close()
	if err != nil {
		return nil, fmt.Errorf("sqlite: summarize clients: %w", err)
	}
	rows, err = tx.QueryContext(ctx, clientSessions+` SELECT s.name, s.version, s.protocol_version, s.principal,
		t.mode, COUNT(*) FROM s JOIN tasks t ON t.session_id = s.id WHERE t.created_at >= ?1
		GROUP BY s.name, s.version, s.protocol_version, s.principal, t.mode`, sqlrec.Ms(since))
	if err != nil {
		return nil, fmt.Errorf("sqlite: summarize client tasks: %w", err)
	}
	defer rows.Close()
	if err := sqlrec.AddClientTasks(out, rows); err != nil {
		return nil, fmt.Errorf("sqlite: summarize client tasks: %w", err)
	}
	return out, nil
}

// CountTasksSince counts the tasks created at or after since.
func (s *Store) CountTasksSince(ctx context.Context, since time.Time) (int, error) {
	var n int
	if err := s.r.QueryRowContext(ctx, `SELECT COUNT(*) FROM tasks WHERE created_at >= ?`, sqlrec.Ms(since)).Scan(&n); err != nil {
		return 0, fmt.Errorf("sqlite: count tasks: %w", err)
	}
	return n, nil
}

// SummarizeClientDays returns the distinct (client, first day, last day) of the sessions
// last seen since.
func (s *Store) SummarizeClientDays(ctx context.Context, since time.Time) ([]store.ClientDays, error) {
	return query(ctx, s, "summarize client days", sqlrec.ScanClientDays, clientSessions+` SELECT DISTINCT name, version, protocol_version, principal,
		created_at / 86400000, last_seen_at / 86400000 FROM s`, sqlrec.Ms(since))
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
		sum.LastSessionSeen = sqlrec.Time(last)
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
			sum.Heartbeat = sqlrec.Time(at)
		case !errors.Is(err, sql.ErrNoRows):
			return sum, fmt.Errorf("sqlite: summary: %w", err)
		}
	}
	return sum, nil
}
