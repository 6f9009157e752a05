package forward

import (
	"context"
	"errors"
	"time"

	"github.com/taskbridge/taskbridge/legacy"
	"github.com/taskbridge/taskbridge/store"
)

// keptEvents adapts the shared store (store.Shared) to the legacy face's EventStore, so a
// Last-Event-ID resume of a tasks/call or tasks/result stream may reach any replica
// (legacy/resume_shared.go). The face never sees the store.
type keptEvents struct{ sh store.Shared }

var _ legacy.EventStore = keptEvents{}

func (k keptEvents) PutEvent(ctx context.Context, sessionID, streamID string, seq uint64, frame []byte, last bool) error {
	return k.sh.PutStreamEvent(ctx, store.StreamEvent{StreamID: streamID, SessionID: sessionID, Seq: seq, Frame: frame, Last: last})
}

func (k keptEvents) Events(ctx context.Context, sessionID, streamID string, after uint64) ([]legacy.StoredEvent, bool, error) {
	evs, err := k.sh.StreamEvents(ctx, sessionID, streamID, after)
	if errors.Is(err, store.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	out := make([]legacy.StoredEvent, len(evs))
	for i, e := range evs {
		out[i] = legacy.StoredEvent{Seq: e.Seq, Frame: e.Frame, Last: e.Last}
	}
	return out, true, nil
}

func (k keptEvents) Touch(ctx context.Context, streamID string) error {
	return k.sh.TouchStream(ctx, streamID)
}

func (k keptEvents) Follow(ctx context.Context, streamID string, acked uint64) error {
	return k.sh.FollowStream(ctx, streamID, acked)
}

func (k keptEvents) Activity(ctx context.Context, streamID string) (time.Duration, time.Duration, bool, error) {
	st, err := k.sh.GetStream(ctx, streamID)
	if errors.Is(err, store.ErrNotFound) {
		return 0, 0, false, nil
	}
	if err != nil {
		return 0, 0, false, err
	}
	return st.Active, st.Followed, true, nil
}

func (k keptEvents) Delete(ctx context.Context, streamID string) error {
	return k.sh.DeleteStream(ctx, streamID)
}
