package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/taskbridge/taskbridge/store"
	"github.com/taskbridge/taskbridge/store/internal/sqlrec"
)

// What replicas coordinate through (store.Shared): MRTR asks, leases, input carriers and
// token buckets here; resumable streams in streams.go. Every time that several replicas
// compare is the database's clock (nowMs), so replicas' own clocks may disagree.

var _ store.Shared = (*Store)(nil)

// nowMs is the store's clock in unix milliseconds: the statement's start, the same for
// every use within one statement.
const nowMs = `(extract(epoch FROM statement_timestamp()) * 1000)::bigint`

// nowMsF is nowMs as double precision (the token buckets count fractions of a token).
const nowMsF = `(extract(epoch FROM statement_timestamp()) * 1000)::float8`

// ---- asks -------------------------------------------------------------------------------

// PutAsk inserts the ask (its request id is fresh; a repeat is a conflict).
func (s *Store) PutAsk(ctx context.Context, a *store.Ask) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO asks (request_id, session_id, owner, method, holder, expires_at)
		VALUES ($1, $2, $3, $4, $5, $6)`, a.RequestID, a.SessionID, a.Owner, a.Method, a.Holder, sqlrec.Ms(a.ExpiresAt))
	if err != nil {
		return fmt.Errorf("postgres: put ask: %w", mapErr(err))
	}
	return nil
}

// GetAsk reads an ask by its request id.
func (s *Store) GetAsk(ctx context.Context, requestID string) (*store.Ask, error) {
	var (
		a        store.Ask
		exp      int64
		resp     []byte
		answered *int64
	)
	err := s.pool.QueryRow(ctx, `SELECT request_id, session_id, owner, method, holder, expires_at, response::text, answered_at
		FROM asks WHERE request_id = $1`, requestID).Scan(&a.RequestID, &a.SessionID, &a.Owner, &a.Method, &a.Holder, &exp, &resp, &answered)
	if err != nil {
		return nil, fmt.Errorf("postgres: get ask: %w", mapErr(err))
	}
	a.ExpiresAt = time.UnixMilli(exp).UTC()
	if resp != nil {
		a.Response = json.RawMessage(resp)
	}
	if answered != nil {
		t := time.UnixMilli(*answered).UTC()
		a.AnsweredAt = &t
	}
	return &a, nil
}

// AnswerAsk stores the first answer; the condition sits in the UPDATE, so one answer wins
// whichever replicas race.
func (s *Store) AnswerAsk(ctx context.Context, requestID string, resp json.RawMessage, at time.Time) (bool, error) {
	tag, err := s.pool.Exec(ctx, `UPDATE asks SET response = $1, answered_at = $2
		WHERE request_id = $3 AND answered_at IS NULL`, sqlrec.Raw(resp), sqlrec.Ms(at), requestID)
	if err != nil {
		return false, fmt.Errorf("postgres: answer ask: %w", mapErr(err))
	}
	if tag.RowsAffected() == 1 {
		return true, nil
	}
	var one int
	err = s.pool.QueryRow(ctx, `SELECT 1 FROM asks WHERE request_id = $1`, requestID).Scan(&one)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, fmt.Errorf("postgres: answer ask: %w", store.ErrNotFound)
	}
	if err != nil {
		return false, fmt.Errorf("postgres: answer ask: %w", err)
	}
	return false, nil
}

// DeleteAsk forgets an ask.
func (s *Store) DeleteAsk(ctx context.Context, requestID string) error {
	if _, err := s.pool.Exec(ctx, `DELETE FROM asks WHERE request_id = $1`, requestID); err != nil {
		return fmt.Errorf("postgres: delete ask: %w", err)
	}
	return nil
}

// ---- leases ------------------------------------------------------------------------------

// TakeLease takes, renews or refuses the lease in one statement: the upsert writes only
// when the row is absent, expired (store clock) or already holder's.
func (s *Store) TakeLease(ctx context.Context, name, holder string, ttl time.Duration) (bool, error) {
	tag, err := s.pool.Exec(ctx, `INSERT INTO leases AS l (name, holder, until) VALUES ($1, $2, `+nowMs+` + $3)
		ON CONFLICT (name) DO UPDATE SET holder = EXCLUDED.holder, until = EXCLUDED.until
		WHERE l.holder = EXCLUDED.holder OR l.until < `+nowMs, name, holder, ttl.Milliseconds())
	if err != nil {
		return false, fmt.Errorf("postgres: take lease: %w", err)
	}
	return tag.RowsAffected() == 1, nil
}

// ReleaseLease frees the lease if holder holds it.
func (s *Store) ReleaseLease(ctx context.Context, name, holder string) error {
	if _, err := s.pool.Exec(ctx, `DELETE FROM leases WHERE name = $1 AND holder = $2`, name, holder); err != nil {
		return fmt.Errorf("postgres: release lease: %w", err)
	}
	return nil
}

// ---- input carriers ------------------------------------------------------------------------

// ClaimInput makes carrier the deliverer of an unanswered input, in one UPDATE whose WHERE
// holds the condition (no carrier, carrier's own, or expired on the store's clock).
func (s *Store) ClaimInput(ctx context.Context, taskID, key, carrier string, ttl time.Duration) (bool, error) {
	tag, err := s.pool.Exec(ctx, `UPDATE inputs SET carrier = $3, carrier_until = `+nowMs+` + $4
		WHERE task_id = $1 AND key = $2 AND answered_at IS NULL
		AND (carrier = '' OR carrier = $3 OR carrier_until < `+nowMs+`)`, taskID, key, carrier, ttl.Milliseconds())
	if err != nil {
		return false, fmt.Errorf("postgres: claim input: %w", err)
	}
	return tag.RowsAffected() == 1, nil
}

// ReleaseInput drops carrier's claim on an input.
func (s *Store) ReleaseInput(ctx context.Context, taskID, key, carrier string) error {
	if _, err := s.pool.Exec(ctx, `UPDATE inputs SET carrier = '', carrier_until = 0
		WHERE task_id = $1 AND key = $2 AND carrier = $3`, taskID, key, carrier); err != nil {
		return fmt.Errorf("postgres: release input: %w", err)
	}
	return nil
}

// ---- token buckets -----------------------------------------------------------------------

// TakeTokens is one shared token bucket per key, kept as GCRA's theoretical arrival time
// (tat, store clock in ms): with T = 1/rate the emission interval and tau = burst×T, the
// bucket holds floor((now + tau - max(tat, now)) / T) tokens. Taking g of them moves tat to
// max(tat, now) + g×T; returning r unspent ones first moves it back by r×T (a bucket never
// holds more than burst: tat below now is a full bucket). One upsert does it all, so
// replicas racing on one key queue on its row lock and never over-admit. A new key starts
// full.
func (s *Store) TakeTokens(ctx context.Context, key string, rate float64, burst, want, refund int) (int, time.Duration, error) {
	if rate <= 0 || burst < 1 || want < 1 {
		return 0, 0, fmt.Errorf("postgres: take tokens: rate %v, burst %d, want %d", rate, burst, want)
	}
	want = min(want, burst)
	t := 1000 / rate // ms per token
	// base is max(tat - refund×T, now); room the tokens that fit between base and now + tau.
	const base = `GREATEST(b.tat - $2::float8 * $5::integer, ` + nowMsF + `)`
	const room = `LEAST($4::integer, GREATEST(0, floor((` + nowMsF + ` + $3::float8 - ` + base + `) / $2::float8)))`
	var (
		got int
		tat float64
		now float64
	)
	err := s.pool.QueryRow(ctx, `INSERT INTO rate_buckets AS b (key, tat, granted)
		VALUES ($1, `+nowMsF+` + $2::float8 * $4::integer, $4::integer)
		ON CONFLICT (key) DO UPDATE SET granted = `+room+`::integer, tat = `+base+` + $2::float8 * `+room+`
		RETURNING granted, tat, `+nowMsF,
		key, t, float64(burst)*t, want, refund).Scan(&got, &tat, &now)
	if err != nil {
		return 0, 0, fmt.Errorf("postgres: take tokens: %w", err)
	}
	if got > 0 {
		return got, 0, nil
	}
	wait := time.Duration((tat + t - now - float64(burst)*t) * float64(time.Millisecond))
	return 0, max(wait, time.Millisecond), nil
}

// ---- purge -------------------------------------------------------------------------------

// PurgeShared deletes expired asks, leases expired a minute ago, buckets full for a minute
// (a missing bucket is a full one) and streams neither held nor followed for streamIdle,
// in one transaction.
func (s *Store) PurgeShared(ctx context.Context, now time.Time, streamIdle time.Duration) (int, error) {
	n := 0
	idle := streamIdle.Milliseconds()
	stale := `SELECT id FROM streams WHERE active_at < ` + nowMs + ` - $1 AND followed_at < ` + nowMs + ` - $1`
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		for _, q := range []struct {
			sql  string
			args []any
		}{
			{`DELETE FROM asks WHERE expires_at < $1`, []any{sqlrec.Ms(now)}},
			{`DELETE FROM leases WHERE until < ` + nowMs + ` - 60000`, nil},
			{`DELETE FROM rate_buckets WHERE tat < ` + nowMsF + ` - 60000`, nil},
			{`DELETE FROM stream_events WHERE stream_id IN (` + stale + `)`, []any{idle}},
			{`DELETE FROM streams WHERE id IN (` + stale + `)`, []any{idle}},
		} {
			tag, err := tx.Exec(ctx, q.sql, q.args...)
			if err != nil {
				return err
			}
			n += int(tag.RowsAffected())
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("postgres: purge shared: %w", err)
	}
	return n, nil
}
