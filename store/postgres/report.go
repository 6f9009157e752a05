package postgres

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/taskbridge/taskbridge/store"
)

// ListSessions returns the sessions last seen at or after since, most recently seen first.
func (s *Store) ListSessions(ctx context.Context, since time.Time) ([]*store.Session, error) {
	rows, err := s.pool.Query(ctx, `SELECT id, protocol_version, client_info, client_capabilities,
		principal, created_at, last_seen_at, closed FROM sessions WHERE last_seen_at >= $1
		ORDER BY last_seen_at DESC, id DESC`, msOf(since))
	if err != nil {
		return nil, fmt.Errorf("postgres: list sessions: %w", err)
	}
	defer rows.Close()
	var out []*store.Session
	for rows.Next() {
		var (
			se             store.Session
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
func (s *Store) QueryTasks(ctx context.Context, q store.TaskQuery) ([]*store.Task, error) {
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
		c.Mode, c.Count = store.Mode(mode), int(n)
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("postgres: count tasks: %w", err)
	}
	return out, nil
}
