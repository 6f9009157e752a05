package sqlite

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/taskbridge/taskbridge/store"
)

// ListSessions returns the sessions last seen at or after since, most recently seen first.
func (s *Store) ListSessions(ctx context.Context, since time.Time) ([]*store.Session, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT id, protocol_version, client_info, client_capabilities,
		principal, created_at, last_seen_at, closed FROM sessions WHERE last_seen_at >= ?
		ORDER BY last_seen_at DESC, id DESC`, msOf(since))
	if err != nil {
		return nil, fmt.Errorf("sqlite: list sessions: %w", err)
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
func (s *Store) QueryTasks(ctx context.Context, q store.TaskQuery) ([]*store.Task, error) {
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
