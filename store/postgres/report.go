package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/taskbridge/taskbridge/record"
	"github.com/taskbridge/taskbridge/store"
)

// ListSessions returns the sessions last seen at or after since, most recently seen first.
func (s *Store) ListSessions(ctx context.Context, since time.Time) ([]*record.Session, error) {
	rows, err := s.pool.Query(ctx, `SELECT id, protocol_version, client_info, client_capabilities,
		principal, created_at, last_seen_at, closed FROM sessions WHERE last_seen_at >= $1
		ORDER BY last_seen_at DESC, id DESC`, msOf(since))
	if err != nil {
		return nil, fmt.Errorf("postgres: list sessions: %w", err)
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
			return nil, fmt.Errorf("postgres: list sessions: %w", err)
		}
		se.ClientInfo, se.ClientCapabilities = rawOf(info), rawOf(caps)
		se.CreatedAt, se.LastSeenAt = timeOf(created), timeOf(lastS)
		out = append(out, &se)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("postgres: list sessions: %w", err)
	}
	return out, nil
}

// QueryTasks returns up to q.Limit tasks matching q, newest first.
func (s *Store) QueryTasks(ctx context.Context, q store.TaskQuery) ([]*record.Task, error) {
	var (
		where []string
		args  []any
	)
	add := func(cond string, v any) {
		args = append(args, v)
		where = append(where, fmt.Sprintf(cond, len(args)))
	}
	if q.Owner != "" {
		add("owner = $%d", q.Owner)
	}
	if q.SessionID != "" {
		add("session_id = $%d", q.SessionID)
	}
	if q.Status != "" {
		add("status = $%d", string(q.Status))
	}
	query := `SELECT ` + taskColumns + ` FROM tasks`
	if len(where) > 0 {
		query += ` WHERE ` + strings.Join(where, " AND ")
	}
	var lim *int // NULL: LIMIT ALL
	if q.Limit > 0 {
		lim = &q.Limit
	}
	args = append(args, lim)
	query += fmt.Sprintf(` ORDER BY created_at DESC, id DESC LIMIT $%d`, len(args))
	return s.listTasks(ctx, "query tasks", query, args...)
}

// CountTasksByDay counts tasks created at or after since, per UTC day (created_at is
// milliseconds since the epoch, so a day is created_at / 86400000).
func (s *Store) CountTasksByDay(ctx context.Context, since time.Time) ([]store.DayCount, error) {
	rows, err := s.pool.Query(ctx, `SELECT created_at / 86400000 AS day, COUNT(*) FROM tasks
		WHERE created_at >= $1 GROUP BY day ORDER BY day`, msOf(since))
	if err != nil {
		return nil, fmt.Errorf("postgres: count tasks by day: %w", err)
	}
	defer rows.Close()
	var out []store.DayCount
	for rows.Next() {
		var day, n int64
		if err := rows.Scan(&day, &n); err != nil {
			return nil, fmt.Errorf("postgres: count tasks by day: %w", err)
		}
		out = append(out, store.DayCount{Day: time.UnixMilli(day * 86400000).UTC(), Count: int(n)})
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("postgres: count tasks by day: %w", err)
	}
	return out, nil
}

// CountTasksBySession counts tasks created at or after since, per session and mode.
func (s *Store) CountTasksBySession(ctx context.Context, since time.Time) ([]store.SessionTaskCount, error) {
	rows, err := s.pool.Query(ctx, `SELECT session_id, mode, COUNT(*) FROM tasks
		WHERE created_at >= $1 GROUP BY session_id, mode ORDER BY session_id, mode`, msOf(since))
	if err != nil {
		return nil, fmt.Errorf("postgres: count tasks: %w", err)
	}
	defer rows.Close()
	var out []store.SessionTaskCount
	for rows.Next() {
		var (
			c    store.SessionTaskCount
			mode string
			n    int64
		)
		if err := rows.Scan(&c.SessionID, &mode, &n); err != nil {
			return nil, fmt.Errorf("postgres: count tasks: %w", err)
		}
		c.Mode, c.Count = record.Mode(mode), int(n)
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("postgres: count tasks: %w", err)
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
			MIN(created_at), MAX(last_seen_at), COUNT(*) FROM s GROUP BY name, version, protocol_version, principal`, msOf(since))
		if err != nil {
			return err
		}
		for rows.Next() {
			var (
				c            store.ClientSummary
				first, lastS int64
				n            int64
			)
			if err := rows.Scan(&c.Name, &c.Version, &c.ProtocolVersion, &c.Principal, &first, &lastS, &n); err != nil {
				rows.Close()
				return err
			}
			c.FirstSeen, c.LastSeen, c.Sessions, c.Tasks = timeOf(first), timeOf(lastS), int(n), map[record.Mode]int{}
			out = append(out, c)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		byKey := map[[4]string]*store.ClientSummary{}
		for i := range out {
			c := &out[i]
			byKey[[4]string{c.Name, c.Version, c.ProtocolVersion, c.Principal}] = c
		}
		rows, err = tx.Query(ctx, clientSessions+` SELECT s.name, s.version, s.protocol_version, s.principal,
			t.mode, COUNT(*) FROM s JOIN tasks t ON t.session_id = s.id WHERE t.created_at >= $1
			GROUP BY s.name, s.version, s.protocol_version, s.principal, t.mode`, msOf(since))
		if err != nil {
			return err
		}
		defer rows.Close()
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
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: summarize clients: %w", mapErr(err))
	}
	return out, nil
}

// CountTasksSince counts the tasks created at or after since.
func (s *Store) CountTasksSince(ctx context.Context, since time.Time) (int, error) {
	var n int64
	if err := s.pool.QueryRow(ctx, `SELECT COUNT(*) FROM tasks WHERE created_at >= $1`, msOf(since)).Scan(&n); err != nil {
		return 0, fmt.Errorf("postgres: count tasks: %w", err)
	}
	return int(n), nil
}

// SummarizeClientDays returns the distinct (client, first day, last day) of the sessions
// last seen since.
func (s *Store) SummarizeClientDays(ctx context.Context, since time.Time) ([]store.ClientDays, error) {
	rows, err := s.pool.Query(ctx, clientSessions+` SELECT DISTINCT name, version, protocol_version, principal,
		created_at / 86400000, last_seen_at / 86400000 FROM s`, msOf(since))
	if err != nil {
		return nil, fmt.Errorf("postgres: summarize client days: %w", mapErr(err))
	}
	defer rows.Close()
	var out []store.ClientDays
	for rows.Next() {
		var (
			c           store.ClientDays
			first, last int64
		)
		if err := rows.Scan(&c.Name, &c.Version, &c.ProtocolVersion, &c.Principal, &first, &last); err != nil {
			return nil, fmt.Errorf("postgres: summarize client days: %w", err)
		}
		c.First, c.Last = timeOf(first*86400000), timeOf(last*86400000)
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("postgres: summarize client days: %w", err)
	}
	return out, nil
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
		sum.LastSessionSeen = timeOf(last)
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
			sum.Heartbeat = timeOf(at)
		case !errors.Is(err, pgx.ErrNoRows):
			return sum, fmt.Errorf("postgres: summary: %w", err)
		}
	}
	return sum, nil
}
