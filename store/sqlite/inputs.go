package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

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
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sqlite: put inputs: %w", err)
	}
	defer tx.Rollback()
	for _, x := range in {
		_, err := tx.ExecContext(ctx, `INSERT INTO inputs (`+sqlrec.InputColumns+`)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (task_id, key) DO NOTHING`, sqlrec.InputArgs(x)...)
		if err != nil {
			return fmt.Errorf("sqlite: put input %s/%s: %w", x.TaskID, x.Key, mapErr(err))
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sqlite: put inputs: %w", mapErr(err))
	}
	return nil
}

// ListInputs returns the task's inputs in key order.
func (s *Store) ListInputs(ctx context.Context, taskID string) ([]record.Input, error) {
	return query(ctx, s, "list inputs", sqlrec.ScanInput, `SELECT `+s.inputCols+` FROM inputs WHERE task_id = ? ORDER BY key`, taskID)
}

// MarkInputDelivered records a delivery under requestID, replacing an earlier one.
// ErrConflict when another input holds requestID.
func (s *Store) MarkInputDelivered(ctx context.Context, taskID, key, requestID string, at time.Time) error {
	n, err := rowsAffected(s.w.ExecContext(ctx, `UPDATE inputs SET request_id = ?, delivered_at = ?
		WHERE task_id = ? AND key = ? AND request_id = ''`, requestID, sqlrec.Ms(at), taskID, key))
	if err != nil {
		return fmt.Errorf("sqlite: mark input delivered: %w", mapErr(err))
	}
	if n == 1 {
		return nil
	}
	var exists int
	err = s.r.QueryRowContext(ctx, `SELECT 1 FROM inputs WHERE task_id = ? AND key = ?`, taskID, key).Scan(&exists)
	if err != nil {
		return fmt.Errorf("sqlite: mark input delivered: %w", mapErr(err))
	}
	return fmt.Errorf("sqlite: mark input delivered: already delivered under another id: %w", store.ErrConflict)
}

// FindInputByRequestID returns the input delivered under requestID, or ErrNotFound.
func (s *Store) FindInputByRequestID(ctx context.Context, requestID string) (*record.Input, error) {
	in, err := sqlrec.ScanInput(s.r.QueryRowContext(ctx, `SELECT `+s.inputCols+` FROM inputs
		WHERE request_id = ? AND request_id != ''`, requestID))
	if err != nil {
		return nil, fmt.Errorf("sqlite: find input by request id: %w", mapErr(err))
	}
	return &in, nil
}

// AnswerInput stores resp if the input has no answer yet. The condition sits in the
// UPDATE itself, so exactly one answer wins however many connections or processes race.
func (s *Store) AnswerInput(ctx context.Context, taskID, key string, resp json.RawMessage, at time.Time) (bool, error) {
	n, err := rowsAffected(s.w.ExecContext(ctx, `UPDATE inputs SET response = ?, answered_at = ?
		WHERE task_id = ? AND key = ? AND answered_at IS NULL`, sqlrec.Raw(resp), sqlrec.Ms(at), taskID, key))
	if err != nil {
		return false, fmt.Errorf("sqlite: answer input: %w", mapErr(err))
	}
	if n == 1 {
		return true, nil
	}
	var one int
	err = s.r.QueryRowContext(ctx, `SELECT 1 FROM inputs WHERE task_id = ? AND key = ?`, taskID, key).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, fmt.Errorf("sqlite: answer input: %w", store.ErrNotFound)
	}
	if err != nil {
		return false, fmt.Errorf("sqlite: answer input: %w", err)
	}
	return false, nil
}

// MarkInputForwarded records when the answer went upstream; the first time is kept.
func (s *Store) MarkInputForwarded(ctx context.Context, taskID, key string, at time.Time) error {
	return s.execOne(ctx, "mark input forwarded",
		`UPDATE inputs SET forwarded_at = COALESCE(forwarded_at, ?) WHERE task_id = ? AND key = ?`,
		sqlrec.Ms(at), taskID, key)
}
