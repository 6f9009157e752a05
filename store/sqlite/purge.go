package sqlite

import (
	"context"
	"fmt"
	"time"

	"github.com/taskbridge/taskbridge/record"
	"github.com/taskbridge/taskbridge/store/internal/sqlrec"
)

// terminalIn is the SQL list of terminal statuses.
const terminalIn = `('completed', 'failed', 'cancelled')`

// CountActive counts owner's non-terminal tasks.
func (s *Store) CountActive(ctx context.Context, owner string) (int, error) {
	var n int
	err := s.r.QueryRowContext(ctx, `SELECT COUNT(*) FROM tasks WHERE owner = ? AND status IN (?, ?)`,
		owner, record.StatusWorking, record.StatusInputRequired).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("sqlite: count active: %w", err)
	}
	return n, nil
}

// ReleaseIdempotencyKey clears the task's idempotency key.
func (s *Store) ReleaseIdempotencyKey(ctx context.Context, id string) error {
	return s.execOne(ctx, "release idempotency key", `UPDATE tasks SET idempotency_key = '' WHERE id = ?`, id)
}

// ReleaseRequestID clears the task's request id if it is still requestID.
func (s *Store) ReleaseRequestID(ctx context.Context, id, requestID string) error {
	return s.execOne(ctx, "release request id", `UPDATE tasks SET request_id = '' WHERE id = ? AND request_id = ? AND request_id != ''`, id, requestID)
}

// PurgeExpired deletes payloads after the ttl and whole records after the retention, in
// one transaction.
func (s *Store) PurgeExpired(ctx context.Context, now time.Time, retention time.Duration) (purged, deleted int, err error) {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return 0, 0, fmt.Errorf("sqlite: purge: %w", err)
	}
	defer tx.Rollback()
	nowMs, cutMs := sqlrec.Ms(now), sqlrec.Ms(now.Add(-retention))
	expired := `ttl_ms IS NOT NULL AND created_at + ttl_ms < ? AND status IN ` + terminalIn
	if _, err := tx.ExecContext(ctx, `DELETE FROM inputs WHERE task_id IN (SELECT id FROM tasks WHERE `+expired+`)`, nowMs); err != nil {
		return 0, 0, fmt.Errorf("sqlite: purge inputs: %w", err)
	}
	res, err := tx.ExecContext(ctx, `DELETE FROM tasks WHERE `+expired, cutMs)
	d, err := rowsAffected(res, err)
	if err != nil {
		return 0, 0, fmt.Errorf("sqlite: purge: %w", err)
	}
	res, err = tx.ExecContext(ctx, `UPDATE tasks SET result = NULL, rpc_error = NULL, status_message = '',
		progress_token = NULL, version = version + 1
		WHERE `+expired+` AND (result IS NOT NULL OR rpc_error IS NOT NULL OR status_message != '' OR progress_token IS NOT NULL)`, nowMs)
	p, err := rowsAffected(res, err)
	if err != nil {
		return 0, 0, fmt.Errorf("sqlite: purge payloads: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return 0, 0, fmt.Errorf("sqlite: purge: %w", err)
	}
	return int(p), int(d), nil
}

// PurgeSessions deletes the sessions last seen before before.
func (s *Store) PurgeSessions(ctx context.Context, before time.Time) (int, error) {
	res, err := s.w.ExecContext(ctx, `DELETE FROM sessions WHERE last_seen_at < ?`, sqlrec.Ms(before))
	n, err := rowsAffected(res, err)
	if err != nil {
		return 0, fmt.Errorf("sqlite: purge sessions: %w", err)
	}
	return int(n), nil
}
