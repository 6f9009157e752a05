package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/taskbridge/taskbridge/store"
)

// The events of resumable SSE streams (store.Shared), so that a Last-Event-ID resume may
// reach any replica. A stream row says whose session it is and when its holder and its
// follower (the replica serving a resumed client, if not the holder) were last active, on
// the store's clock; its events are kept as written on the wire. The holder bounds what it
// keeps (TrimStream, DeleteStream) and PurgeShared drops streams nobody touched for the
// resume window.

// PutStreamEvent inserts the event and marks its stream active, creating it on its first
// event, in one statement; an event of another session's stream id is refused.
func (s *Store) PutStreamEvent(ctx context.Context, e store.StreamEvent) error {
	tag, err := s.pool.Exec(ctx, `WITH st AS (
		INSERT INTO streams AS st (id, session_id, active_at) VALUES ($1, $2, `+nowMs+`)
		ON CONFLICT (id) DO UPDATE SET active_at = EXCLUDED.active_at WHERE st.session_id = EXCLUDED.session_id
		RETURNING id)
		INSERT INTO stream_events (stream_id, seq, frame, last) SELECT id, $3, $4, $5 FROM st
		ON CONFLICT (stream_id, seq) DO NOTHING`, e.StreamID, e.SessionID, int64(e.Seq), e.Frame, e.Last)
	if err != nil {
		return fmt.Errorf("postgres: put stream event: %w", mapErr(err))
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("postgres: put stream event %s-%d: %w", e.StreamID, e.Seq, store.ErrConflict)
	}
	return nil
}

// StreamEvents returns the events after seq of the session's stream, oldest first.
func (s *Store) StreamEvents(ctx context.Context, sessionID, streamID string, after uint64) ([]store.StreamEvent, error) {
	rows, err := s.pool.Query(ctx, `SELECT e.seq, e.frame, e.last FROM streams st
		LEFT JOIN stream_events e ON e.stream_id = st.id AND e.seq > $3
		WHERE st.id = $1 AND st.session_id = $2 ORDER BY e.seq`, streamID, sessionID, int64(after))
	if err != nil {
		return nil, fmt.Errorf("postgres: stream events: %w", err)
	}
	defer rows.Close()
	var (
		out   []store.StreamEvent
		found bool
	)
	for rows.Next() {
		var (
			seq   *int64
			frame []byte
			last  *bool
		)
		if err := rows.Scan(&seq, &frame, &last); err != nil {
			return nil, fmt.Errorf("postgres: stream events: %w", err)
		}
		found = true
		if seq == nil {
			continue // the stream, without events after seq
		}
		out = append(out, store.StreamEvent{StreamID: streamID, SessionID: sessionID, Seq: uint64(*seq), Frame: frame, Last: *last})
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("postgres: stream events: %w", err)
	}
	if !found {
		return nil, fmt.Errorf("postgres: stream events: %w", store.ErrNotFound)
	}
	return out, nil
}

// TouchStream marks the stream active now.
func (s *Store) TouchStream(ctx context.Context, streamID string) error {
	return s.execOne(ctx, "touch stream", `UPDATE streams SET active_at = `+nowMs+` WHERE id = $1`, streamID)
}

// FollowStream records that another replica serves the stream's client, which has every
// event up to acked.
func (s *Store) FollowStream(ctx context.Context, streamID string, acked uint64) error {
	return s.execOne(ctx, "follow stream", `UPDATE streams SET followed_at = `+nowMs+`, acked = GREATEST(acked, $2)
		WHERE id = $1`, streamID, int64(acked))
}

// GetStream reads the stream's activity as ages on the store's clock.
func (s *Store) GetStream(ctx context.Context, streamID string) (store.StreamState, error) {
	var (
		st               store.StreamState
		active, followed int64
		acked            int64
	)
	err := s.pool.QueryRow(ctx, `SELECT session_id, `+nowMs+` - active_at,
		CASE WHEN followed_at = 0 THEN -1 ELSE `+nowMs+` - followed_at END, acked
		FROM streams WHERE id = $1`, streamID).Scan(&st.SessionID, &active, &followed, &acked)
	if err != nil {
		return st, fmt.Errorf("postgres: get stream: %w", mapErr(err))
	}
	st.Active = time.Duration(active) * time.Millisecond
	st.Followed = time.Duration(followed) * time.Millisecond
	if followed < 0 {
		st.Followed = -1
	}
	st.Acked = uint64(acked)
	return st, nil
}

// TrimStream drops the stream's events up to seq.
func (s *Store) TrimStream(ctx context.Context, streamID string, upTo uint64) error {
	if _, err := s.pool.Exec(ctx, `DELETE FROM stream_events WHERE stream_id = $1 AND seq <= $2`, streamID, int64(upTo)); err != nil {
		return fmt.Errorf("postgres: trim stream: %w", err)
	}
	return nil
}

// DeleteStream forgets the stream and its events.
func (s *Store) DeleteStream(ctx context.Context, streamID string) error {
	_, err := s.pool.Exec(ctx, `WITH e AS (DELETE FROM stream_events WHERE stream_id = $1)
		DELETE FROM streams WHERE id = $1`, streamID)
	if err != nil {
		return fmt.Errorf("postgres: delete stream: %w", err)
	}
	return nil
}
