package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/taskbridge/taskbridge/record"
	"github.com/taskbridge/taskbridge/store"
	"github.com/taskbridge/taskbridge/store/internal/sqlrec"
)

// CreateSession inserts se. ErrConflict when the id exists.
func (s *Store) CreateSession(ctx context.Context, se *record.Session) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO sessions (`+sqlrec.SessionColumns+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`, sqlrec.SessionArgs(se)...)
	if err != nil {
		return fmt.Errorf("postgres: create session: %w", mapErr(err))
	}
	return nil
}

// GetSession returns the session with id, or ErrNotFound.
func (s *Store) GetSession(ctx context.Context, id string) (*record.Session, error) {
	se, err := sqlrec.ScanSession(s.pool.QueryRow(ctx, `SELECT `+s.sessionCols+` FROM sessions WHERE id = $1`, id))
	if err != nil {
		return nil, fmt.Errorf("postgres: get session: %w", mapErr(err))
	}
	return se, nil
}

// TouchSession moves LastSeenAt forward to at; it never moves it back.
func (s *Store) TouchSession(ctx context.Context, id string, at time.Time) error {
	return s.execOne(ctx, "touch session",
		`UPDATE sessions SET last_seen_at = GREATEST(last_seen_at, $1) WHERE id = $2`, sqlrec.Ms(at), id)
}

// CloseSession marks the session closed.
func (s *Store) CloseSession(ctx context.Context, id string) error {
	return s.execOne(ctx, "close session", `UPDATE sessions SET closed = true WHERE id = $1`, id)
}

// execOne runs a write that must match a row; ErrNotFound when it matched none.
func (s *Store) execOne(ctx context.Context, what, query string, args ...any) error {
	tag, err := s.pool.Exec(ctx, query, args...)
	if err != nil {
		return fmt.Errorf("postgres: %s: %w", what, mapErr(err))
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("postgres: %s: %w", what, store.ErrNotFound)
	}
	return nil
}

// CreateTask inserts t and sets t.Version to 1.
func (s *Store) CreateTask(ctx context.Context, t *record.Task) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO tasks (`+sqlrec.TaskColumns+`) VALUES
		($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, 1)`, sqlrec.TaskInsertArgs(t)...)
	if err != nil {
		return fmt.Errorf("postgres: create task %s: %w", t.ID, mapErr(err))
	}
	t.Version = 1
	return nil
}

func (s *Store) getTask(ctx context.Context, what, where string, args ...any) (*record.Task, error) {
	t, err := sqlrec.ScanTask(s.pool.QueryRow(ctx, `SELECT `+s.taskCols+` FROM tasks WHERE `+where, args...))
	if err != nil {
		return nil, fmt.Errorf("postgres: %s: %w", what, mapErr(err))
	}
	return t, nil
}

// GetTask returns the task with id, or ErrNotFound.
func (s *Store) GetTask(ctx context.Context, id string) (*record.Task, error) {
	return s.getTask(ctx, "get task", `id = $1`, id)
}

// FindTaskByRequest returns the task created by requestID in the session, or ErrNotFound.
func (s *Store) FindTaskByRequest(ctx context.Context, sessionID, requestID string) (*record.Task, error) {
	return s.getTask(ctx, "find task by request", `session_id = $1 AND request_id = $2 AND request_id <> ''`, sessionID, requestID)
}

// FindTaskByIdempotencyKey returns owner's task with key, or ErrNotFound.
func (s *Store) FindTaskByIdempotencyKey(ctx context.Context, owner, key string) (*record.Task, error) {
	return s.getTask(ctx, "find task by idempotency key", `owner = $1 AND idempotency_key = $2 AND idempotency_key <> ''`, owner, key)
}

// UpdateTask writes the mutable fields of t if the stored version is t.Version. The
// identity fields (ID, Owner, SessionID, RequestID, IdempotencyKey, Origin, Tool,
// ArgsHash, CreatedAt, ProgressToken) are never rewritten. ErrConflict when the version
// moved on, ErrNotFound when there is no such task.
func (s *Store) UpdateTask(ctx context.Context, t *record.Task) error {
	tag, err := s.pool.Exec(ctx, `UPDATE tasks SET
		upstream_task_id = $1, mode = $2, status = $3, status_message = $4, last_updated_at = $5,
		ttl_ms = $6, poll_interval_ms = $7, upstream_poll_ms = $8, result = $9, rpc_error = $10,
		outcome = $11, outcome_detail = $12, upstream_session_id = $13, version = version + 1
		WHERE id = $14 AND version = $15`, sqlrec.TaskUpdateArgs(t)...)
	if err != nil {
		return fmt.Errorf("postgres: update task %s: %w", t.ID, mapErr(err))
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("postgres: update task %s version %d: %w", t.ID, t.Version, s.missOrConflict(ctx, t.ID))
	}
	t.Version++
	return nil
}

// missOrConflict explains why a compare-and-swap on task id matched no row.
func (s *Store) missOrConflict(ctx context.Context, id string) error {
	var one int
	err := s.pool.QueryRow(ctx, `SELECT 1 FROM tasks WHERE id = $1`, id).Scan(&one)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return store.ErrNotFound
	case err != nil:
		return err
	}
	return store.ErrConflict
}

// ListTasks returns up to limit of owner's tasks, newest first, strictly after the cursor.
// limit <= 0 means no limit.
func (s *Store) ListTasks(ctx context.Context, owner string, after *store.Cursor, limit int) ([]*record.Task, error) {
	var lim *int // NULL: LIMIT ALL
	if limit > 0 {
		lim = &limit
	}
	if after == nil {
		return s.listTasks(ctx, "list tasks", `SELECT `+s.taskCols+` FROM tasks WHERE owner = $1
			ORDER BY created_at DESC, id DESC LIMIT $2`, owner, lim)
	}
	// A row value comparison, so the (owner, created_at, id) index can seek to it.
	return s.listTasks(ctx, "list tasks", `SELECT `+s.taskCols+` FROM tasks
		WHERE owner = $1 AND (created_at, id) < ($2, $3)
		ORDER BY created_at DESC, id DESC LIMIT $4`, owner, sqlrec.Ms(after.CreatedAt), after.ID, lim)
}

// ListActive returns every task that is not terminal, oldest first.
func (s *Store) ListActive(ctx context.Context) ([]*record.Task, error) {
	return s.listTasks(ctx, "list active tasks", `SELECT `+s.taskCols+` FROM tasks
		WHERE status IN ($1, $2) ORDER BY created_at, id`, record.StatusWorking, record.StatusInputRequired)
}

// ListUnsettled returns terminal tasks with an upstream id and a pending outcome.
func (s *Store) ListUnsettled(ctx context.Context) ([]*record.Task, error) {
	return s.listTasks(ctx, "list unsettled tasks", `SELECT `+s.taskCols+` FROM tasks
		WHERE status IN ($1, $2, $3) AND outcome = $4 AND upstream_task_id <> '' ORDER BY created_at, id`,
		record.StatusCompleted, record.StatusFailed, record.StatusCancelled, record.OutcomePending)
}

func (s *Store) listTasks(ctx context.Context, what, query string, args ...any) ([]*record.Task, error) {
	rows, err := s.pool.Query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("postgres: %s: %w", what, err)
	}
	defer rows.Close()
	out, err := sqlrec.Collect(rows, sqlrec.ScanTask)
	if err != nil {
		return nil, fmt.Errorf("postgres: %s: %w", what, err)
	}
	return out, nil
}
