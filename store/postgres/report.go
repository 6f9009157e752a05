package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/taskbridge/taskbridge/record"
	"github.com/taskbridge/taskbridge/store"
	"github.com/taskbridge/taskbridge/store/internal/sqlrec"
)

// ListSessions returns the sessions last seen at or after since, most recently seen first.
func (s *Store) ListSessions(ctx context.Context, since time.Time) ([]*record.Session, error) {
	return query(ctx, s, "list sessions", sqlrec.ScanSession, `SELECT `+s.sessionCols+` FROM sessions
		WHERE last_seen_at >= $1 ORDER BY last_seen_at DESC, id DESC`, sqlrec.Ms(since))
}

// QueryTasks returns up to q.Limit tasks matching q, newest first.
func (s *Store) QueryTasks(ctx context.Context, q store.TaskQuery) ([]*record.Task, error) {
	where, args := sqlrec.TaskQuery(q, func(n int) string { return "$" + strconv.Itoa(n) })
	var lim *int // NULL: LIMIT ALL
	if q.Limit > 0 {
		lim = &q.Limit
	}
	args = append(args, lim)
	return s.listTasks(ctx, "query tasks", `SELECT `+s.taskCols+` FROM tasks`+where+
		` ORDER BY created_at DESC, id DESC LIMIT $`+strconv.Itoa(len(args)), args...)
}

// CountTasksByDay counts tasks created at or after since, per UTC day (created_at is
// milliseconds since the epoch, so a day is created_at / 86400000).
func (s *Store) CountTasksByDay(ctx context.Context, since time.Time) ([]store.DayCount, error) {
	return query(ctx, s, "count tasks by day", sqlrec.ScanDayCount, `SELECT created_at / 86400000 AS day, COUNT(*) FROM tasks
		WHERE created_at >= $1 GROUP BY day ORDER BY day`, sqlrec.Ms(since))
}

// CountTasksBySession counts tasks created at or after since, per session and mode.
func (s *Store) CountTasksBySession(ctx context.Context, since time.Time) ([]store.SessionTaskCount, error) {
	return query(ctx, s, "count tasks", sqlrec.ScanSessionTaskCount, `SELECT session_id, mode, COUNT(*) FROM tasks
		WHERE created_at >= $1 GROUP BY session_id, mode ORDER BY session_id, mode`, sqlrec.Ms(since))
}

// query runs a read and scans every row with scan.
func query[T any](ctx context.Context, s *Store, what string, scan func(sqlrec.Row) (T, error), q string, args ...any) ([]T, error) {
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("postgres: %s: %w", what, mapErr(err))
	}
	defer rows.Close()
	out, err := sqlrec.Collect(rows, scan)
	if err != nil {
		return nil, fmt.Errorf("postgres: %s: %w", what, err)
	}
	return out, nil
}

// clientSessions is the sessions last seen at or after $1 with their clientInfo name and
// version read in SQL: a member that is not a string (or is missing, or the column is
// NULL) reads as "". json_each keeps duplicated members in order, and the first one counts
// (as gjson reads the bytes; the json operators would take the last).
const clientSessions = `WITH s AS (
	SELECT id, protocol_version, principal, created_at, last_seen_at,
		COALESCE((SELECT CASE WHEN json_typeof(e.value) = 'string' THEN e.value #>> '{}' END
			FROM json_each(CASE WHEN json_typeof(client_info) = 'object' THEN client_info END)
				WITH ORDINALITY AS e(key, value, n)
			WHERE e.key = 'name' ORDER BY e.n LIMIT 1), '') AS name,
		COALESCE((SELECT CASE WHEN json_typeof(e.value) = 'string' THEN e.value #>> '{}' END
			FROM json_each(CASE WHEN json_typeof(client_info) = 'object' THEN client_info END)
				WITH ORDINALITY AS e(key, value, n)
			WHERE e.key = 'version' ORDER BY e.n LIMIT 1), '') AS version
	FROM sessions WHERE last_seen_at >= $1
)`

// SummarizeClients aggregates the sessions seen since, and their tasks, per client.
func (s *Store) SummarizeClients(ctx context.Context, since time.Time) ([]store.ClientSummary, error) {
	var out []store.ClientSummary
	// One snapshot for both queries.
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, clientSessions+` SELECT name, version, protocol_version, principal,
			MIN(created_at), MAX(last_seen_at), COUNT(*) FROM s GROUP BY name, version, protocol_version, principal`, sqlrec.Ms(since))
		if err != nil {
			return err
		}
		out, err = sqlrec.Collect(rows, sqlrec.ScanClientSummary)
		rows.Close()
		if err != nil {
			return err
		}
		rows, err = tx.Query(ctx, clientSessions+` SELECT s.name, s.version, s.protocol_version, s.principal,
			t.mode, COUNT(*) FROM s JOIN tasks t ON t.session_id = s.id WHERE t.created_at >= $1
			GROUP BY s.name, s.version, s.protocol_version, s.principal, t.mode`, sqlrec.Ms(since))
		if err != nil {
			return err
		}
		defer rows.Close()
		return sqlrec.AddClientTasks(out, rows)
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: summarize clients: %w", mapErr(err))
	}
	return out, nil
}

// CountTasksSince counts the tasks created at or after since.
func (s *Store) CountTasksSince(ctx context.Context, since time.Time) (int, error) {
	var n int64
	if err := s.pool.QueryRow(ctx, `SELECT COUNT(*) FROM tasks WHERE created_at >= $1`, sqlrec.Ms(since)).Scan(&n); err != nil {
		return 0, fmt.Errorf("postgres: count tasks: %w", err)
	}
	return int(n), nil
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
	err := s.pool.QueryRow(ctx, `SELECT (SELECT COUNT(*) FROM sessions),
		(SELECT COALESCE(MAX(last_seen_at), 0) FROM sessions), (SELECT COUNT(*) FROM tasks)`).
		Scan(&sum.Sessions, &last, &sum.Tasks)
	if err != nil {
		return sum, fmt.Errorf("postgres: summary: %w", err)
	}
	if sum.Sessions > 0 {
		sum.LastSessionSeen = sqlrec.Time(last)
	}
	// A store of schema version 1 has no heartbeat table (read-only opens accept it).
	var has bool
	if err := s.pool.QueryRow(ctx, `SELECT to_regclass('heartbeat') IS NOT NULL`).Scan(&has); err != nil {
		return sum, fmt.Errorf("postgres: summary: %w", err)
	}
	if has {
		var at int64
		err := s.pool.QueryRow(ctx, `SELECT at FROM heartbeat WHERE id = 1`).Scan(&at)
		switch {
		case err == nil:
			sum.Heartbeat = sqlrec.Time(at)
		case !errors.Is(err, pgx.ErrNoRows):
			return sum, fmt.Errorf("postgres: summary: %w", err)
		}
	}
	return sum, nil
}
