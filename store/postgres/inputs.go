package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/taskbridge/taskbridge/record"
	"github.com/taskbridge/taskbridge/store"
	"github.com/taskbridge/taskbridge/store/internal/sqlrec"
)

// PutInputs inserts the inputs that do not exist yet, in one transaction. ErrNotFound when
// an input names an unknown task.
func (s *Store) PutInputs(ctx context.Context, in []record.Input) error {
	if len(in) == 0 {
		return nil
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		for _, x := range in {
			_, err := tx.Exec(ctx, `INSERT INTO inputs (`+sqlrec.InputColumns+`)
				VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
				ON CONFLICT (task_id, key) DO NOTHING`, sqlrec.InputArgs(x)...)
			if err != nil {
				return fmt.Errorf("input %s/%s: %w", x.TaskID, x.Key, mapErr(err))
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("postgres: put inputs: %w", err)
	}
	return nil
}

// ListInputs returns the task's inputs in key order.
func (s *Store) ListInputs(ctx context.Context, taskID string) ([]record.Input, error) {
	return query(ctx, s, "list inputs", sqlrec.ScanInput, `SELECT `+s.inputCols+` FROM inputs WHERE task_id = $1 ORDER BY key`, taskID)
}

// MarkInputDelivered records a delivery under requestID, replacing an earlier one.
// ErrConflict when another input holds requestID.
func (s *Store) MarkInputDelivered(ctx context.Context, taskID, key, requestID string, at time.Time) error {
	tag, err := s.pool.Exec(ctx, `UPDATE inputs SET request_id = $1, delivered_at = $2
		WHERE task_id = $3 AND key = $4 AND request_id = ''`, requestID, sqlrec.Ms(at), taskID, key)
	if err != nil {
		return fmt.Errorf("postgres: mark input delivered: %w", mapErr(err))
	}
	if tag.RowsAffected() == 1 {
		return nil
	}
	var exists int
	err = s.pool.QueryRow(ctx, `SELECT 1 FROM inputs WHERE task_id = $1 AND key = $2`, taskID, key).Scan(&exists)
	if err != nil {
		return fmt.Errorf("postgres: mark input delivered: %w", mapErr(err))
	}
	return fmt.Errorf("postgres: mark input delivered: already delivered under another id: %w", store.ErrConflict)
}

// FindInputByRequestID returns the input delivered under requestID, or ErrNotFound.
func (s *Store) FindInputByRequestID(ctx context.Context, requestID string) (*record.Input, error) {
	in, err := sqlrec.ScanInput(s.pool.QueryRow(ctx, `SELECT `+s.inputCols+` FROM inputs
		WHERE request_id = $1 AND request_id <> ''`, requestID))
	if err != nil {
		return nil, fmt.Errorf("postgres: find input by request id: %w", mapErr(err))
	}
	return &in, nil
}

// AnswerInput stores resp if the input has no answer yet. The condition sits in the
// UPDATE itself: concurrent updates of the row queue on its lock and re-check the
// condition, so exactly one answer wins across every replica.
func (s *Store) AnswerInput(ctx context.Context, taskID, key string, resp json.RawMessage, at time.Time) (bool, error) {
	tag, err := s.pool.Exec(ctx, `UPDATE inputs SET response = $1, answered_at = $2
		WHERE task_id = $3 AND key = $4 AND answered_at IS NULL`, sqlrec.Raw(resp), sqlrec.Ms(at), taskID, key)
	if err != nil {
		return false, fmt.Errorf("postgres: answer input: %w", mapErr(err))
	}
	if tag.RowsAffected() == 1 {
		return true, nil
	}
	var one int
	err = s.pool.QueryRow(ctx, `SELECT 1 FROM inputs WHERE task_id = $1 AND key = $2`, taskID, key).Scan(&one)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, fmt.Errorf("postgres: answer input: %w", store.ErrNotFound)
	}
	if err != nil {
		return false, fmt.Errorf("postgres: answer input: %w", err)
	}
	return false, nil
}

// MarkInputForwarded records when the answer went upstream; the first time is kept.
func (s *Store) MarkInputForwarded(ctx context.Context, taskID, key string, at time.Time) error {
	return s.execOne(ctx, "mark input forwarded",
		`UPDATE inputs SET forwarded_at = COALESCE(forwarded_at, $1) WHERE task_id = $2 AND key = $3`,
		sqlrec.Ms(at), taskID, key)
}
