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

// CreateSession inserts se. ErrConflict when the id exists.
func (s *Store) CreateSession(ctx context.Context, se *record.Session) error {
	_, err := s.w.ExecContext(ctx, `INSERT INTO sessions (`+sqlrec.SessionColumns+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`, sqlrec.SessionArgs(se)...)
	if err != nil {
		return fmt.Errorf("sqlite: create session: %w", mapErr(err))
	}
	return nil
}

// GetSession returns the session with id, or ErrNotFound.
func (s *Store) GetSession(ctx context.Context, id string) (*record.Session, error) {
	se, err := sqlrec.ScanSession(s.r.QueryRowContext(ctx, `SELECT `+s.sessionCols+` FROM sessions WHERE id = ?`, id))
	if err != nil {
		return nil, fmt.Errorf("sqlite: get session: %w", mapErr(err))
	}
	return se, nil
}

// TouchSession moves LastSeenAt forward to at; it never moves it back.
func (s *Store) TouchSession(ctx context.Context, id string, at time.Time) error {
	return s.execOne(ctx, "touch session",
		`UPDATE sessions SET last_seen_at = MAX(last_seen_at, ?) WHERE id = ?`, sqlrec.Ms(at), id)
}

// CloseSession marks the session closed.
func (s *Store) CloseSession(ctx context.Context, id string) error {
	return s.execOne(ctx, "close session", `UPDATE sessions SET closed = 1 WHERE id = ?`, id)
}

// execOne runs a write that must match a row; ErrNotFound when it matched none.
func (s *Store) execOne(ctx context.Context, what, query string, args ...any) error {
	n, err := rowsAffected(s.w.ExecContext(ctx, query, args...))
	if err != nil {
		return fmt.Errorf("sqlite: %s: %w", what, mapErr(err))
	}
	if n == 0 {
		return fmt.Errorf("sqlite: %s: %w", what, store.ErrNotFound)
	}
	return nil
}

// CreateTask inserts t and sets t.Version to 1.
func (s *Store) CreateTask(ctx context.Context, t *record.Task) error {
	_, err := s.w.ExecContext(ctx, `INSERT INTO tasks (`+sqlrec.TaskColumns+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1)`, sqlrec.TaskInsertArgs(t)...)
	if err != nil {
		return fmt.Errorf("sqlite: create task %s: %w", t.ID, mapErr(err))
	}
	t.Version = 1
	return nil
}

func (s *Store) getTask(ctx context.Context, what, where string, args ...any) (*record.Task, error) {
	t, err := sqlrec.ScanTask(s.r.QueryRowContext(ctx, `SELECT `+s.taskCols+` FROM tasks WHERE `+where, args...))
	if err != nil {
		return nil, fmt.Errorf("sqlite: %s: %w", what, mapErr(err))
	}
	return t, nil
}

// GetTask returns the task with id, or ErrNotFound.
func (s *Store) GetTask(ctx context.Context, id string) (*record.Task, error) {
	return s.getTask(ctx, "get task", `id = ?`, id)
}

// FindTaskByRequest returns the task created by requestID in the session, or ErrNotFound.
func (s *Store) FindTaskByRequest(ctx context.Context, sessionID, requestID string) (*record.Task, error) {
	return s.getTask(ctx, "find task by request", `session_id = ? AND request_id = ? AND request_id != ''`, sessionID, requestID)
}

// FindTaskByIdempotencyKey returns owner's task with key, or ErrNotFound.
func (s *Store) FindTaskByIdempotencyKey(ctx context.Context, owner, key string) (*record.Task, error) {
	return s.getTask(ctx, "find task by idempotency key", `owner = ? AND idempotency_key = ? AND idempotency_key != ''`, owner, key)
}

// UpdateTask writes the mutable fields of t if the stored version is t.Version. The
// identity fields (ID, Owner, SessionID, RequestID, IdempotencyKey, Origin, Tool,
// ArgsHash, CreatedAt, ProgressToken) are never rewritten. ErrConflict when the version
// moved on, ErrNotFound when there is no such task.
func (s *Store) UpdateTask(ctx context.Context, t *record.Task) error {
	n, err := rowsAffected(s.w.ExecContext(ctx, `UPDATE tasks SET
		upstream_task_id = ?, mode = ?, status = ?, status_message = ?, last_updated_at = ?,
		ttl_ms = ?, poll_interval_ms = ?, upstream_poll_ms = ?, result = ?, rpc_error = ?,
		outcome = ?, outcome_detail = ?, upstream_session_id = ?, version = version + 1
		WHERE id = ? AND version = ?`, sqlrec.TaskUpdateArgs(t)...))
	if err != nil {
		return fmt.Errorf("sqlite: update task %s: %w", t.ID, mapErr(err))
	}
	if n == 0 {
		return fmt.Errorf("sqlite: update task %s version %d: %w", t.ID, t.Version, s.missOrConflict(ctx, t.ID))
	}
	t.Version++
	return nil
}

// missOrConflict explains why a compare-and-swap on task id matched no row.
func (s *Store) missOrConflict(ctx context.Context, id string) error {
	var one int
	err := s.r.QueryRowContext(ctx, `SELECT 1 FROM tasks WHERE id = ?`, id).Scan(&one)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return store.ErrNotFound
	case err != nil:
		return err
	}
	return store.ErrConflict
}

// ListTasks returns up to limit of owner's tasks, newest first, strictly after the cursor.
// limit <= 0 means no limit.
func (s *Store) ListTasks(ctx context.Context, owner string, after *store.Cursor, limit int) ([]*record.Task, error) {
	if limit <= 0 {
		limit = -1 // SQLite: no limit
	}
	query := `SELECT ` + s.taskCols + ` FROM tasks WHERE owner = ?`
	args := []any{owner}
	if after != nil {
		// A row value comparison, so the (owner, created_at, id) index can seek to it.
		query += ` AND (created_at, id) < (?, ?)`
		args = append(args, sqlrec.Ms(after.CreatedAt), after.ID)
	}
	query += ` ORDER BY created_at DESC, id DESC LIMIT ?`
	return s.listTasks(ctx, "list tasks", query, append(args, limit)...)
}

// ListActive returns every task that is not terminal, oldest first.
func (s *Store) ListActive(ctx context.Context) ([]*record.Task, error) {
	return s.listTasks(ctx, "list active tasks", `SELECT `+s.taskCols+` FROM tasks
		WHERE status IN (?, ?) ORDER BY created_at, id`, record.StatusWorking, record.StatusInputRequired)
}

// ListUnsettled returns terminal tasks with an upstream id and a pending outcome.
func (s *Store) ListUnsettled(ctx context.Context) ([]*record.Task, error) {
	return s.listTasks(ctx, "list unsettled tasks", `SELECT `+s.taskCols+` FROM tasks
		WHERE status IN (?, ?, ?) AND outcome = ? AND upstream_task_id != '' ORDER BY created_at, id`,
		record.StatusCompleted, record.StatusFailed, record.StatusCancelled, record.OutcomePending)
}

func (s *Store) listTasks(ctx context.Context, what, query string, args ...any) ([]*record.Task, error) {
	rows, err := s.r.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: %s: %w", what, err)
	}
	defer rows.Close()
	out, err := sqlrec.Collect(rows, sqlrec.ScanTask)
	if err != nil {
		return nil, fmt.Errorf("sqlite: %s: %w", what, err)
	}
	return out, nil
}
