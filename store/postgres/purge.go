package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/taskbridge/taskbridge/record"
	"github.com/taskbridge/taskbridge/store/internal/sqlrec"
)

// terminalIn is the SQL list of terminal statuses.
const terminalIn = `('completed', 'failed', 'cancelled')`

// CountActive counts owner's non-terminal tasks.
func (s *Store) CountActive(ctx context.Context, owner string) (int, error) {
	var n int
	err := s.pool.QueryRow(ctx, `SELECT COUNT(*) FROM tasks WHERE owner = $1 AND status IN ($2, $3)`,
		owner, record.StatusWorking, record.StatusInputRequired).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("postgres: count active: %w", err)
	}
	return n, nil
}

// ReleaseIdempotencyKey clears the task's idempotency key.
func (s *Store) ReleaseIdempotencyKey(ctx context.Context, id string) error {
	return s.execOne(ctx, "release idempotency key", `UPDATE tasks SET idempotency_key = '' WHERE id = $1`, id)
}

// ReleaseRequestID clears the task's request id if it is still requestID.
func (s *Store) ReleaseRequestID(ctx context.Context, id, requestID string) error {
	return s.execOne(ctx, "release request id", `UPDATE tasks SET request_id = '' WHERE id = $1 AND request_id = $2 AND request_id <> ''`, id, requestID)
}

// PurgeExpired deletes payloads after the ttl and whole records after the retention, in
// one transaction.
func (s *Store) PurgeExpired(ctx context.Context, now time.Time, retention time.Duration) (purged, deleted int, err error) {
	nowMs, cutMs := sqlrec.Ms(now), sqlrec.Ms(now.Add(-retention))
	expired := `ttl_ms IS NOT NULL AND created_at + ttl_ms < $1 AND status IN ` + terminalIn
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `DELETE FROM inputs WHERE task_id IN (SELECT id FROM tasks WHERE `+expired+`)`, nowMs); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `DELETE FROM tasks WHERE `+expired, cutMs)
		if err != nil {
			return err
		}
		deleted = int(tag.RowsAffected())
		tag, err = tx.Exec(ctx, `UPDATE tasks SET result = NULL, rpc_error = NULL, status_message = '',
			progress_token = NULL, version = version + 1
			WHERE `+expired+` AND (result IS NOT NULL OR rpc_error IS NOT NULL OR status_message <> '' OR progress_token IS NOT NULL)`, nowMs)
		if err != nil {
			return err
		}
		purged = int(tag.RowsAffected())
		return nil
	})
	if err != nil {
		return 0, 0, fmt.Errorf("postgres: purge: %w", mapErr(err))
	}
	return purged, deleted, nil
}

// PurgeSessions deletes the sessions last seen before before.
func (s *Store) PurgeSessions(ctx context.Context, before time.Time) (int, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM sessions WHERE last_seen_at < $1`, sqlrec.Ms(before))
	if err != nil {
		return 0, fmt.Errorf("postgres: purge sessions: %w", mapErr(err))
	}
	return int(tag.RowsAffected()), nil
}
