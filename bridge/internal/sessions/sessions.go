// Package sessions adapts taskbridge's store to the 2025-11-25 face: the face owns the
// small interface it consumes (legacy.SessionStore, four calls) and its own Session type;
// the routes that serve legacy clients (the forward route and the legacy pass-through)
// hand it this adapter, which persists each session as a record.Session.
//
// It also holds the one rule every route uses to bind tasks to a caller: Owner for a
// legacy session's tasks, ModernOwner for a 2026-07-28 request's.
package sessions

import (
	"context"
	"errors"
	"time"

	"github.com/taskbridge/taskbridge/legacy"
	"github.com/taskbridge/taskbridge/record"
	"github.com/taskbridge/taskbridge/store"
)

// Store is a legacy.SessionStore on top of a store.Store. Safe for concurrent use, as the
// store is.
type Store struct{ st store.Store }

// New adapts st.
func New(st store.Store) Store { return Store{st: st} }

var _ legacy.SessionStore = Store{}

// CreateSession stores s as a session record.
func (s Store) CreateSession(ctx context.Context, sess *legacy.Session) error {
	return s.st.CreateSession(ctx, ToRecord(sess))
}

// GetSession reads a session record; legacy.ErrNoSession when there is none.
func (s Store) GetSession(ctx context.Context, id string) (*legacy.Session, error) {
	rec, err := s.st.GetSession(ctx, id)
	if err != nil {
		return nil, noSession(err)
	}
	return FromRecord(rec), nil
}

// TouchSession records activity on a session.
func (s Store) TouchSession(ctx context.Context, id string, at time.Time) error {
	return noSession(s.st.TouchSession(ctx, id, at))
}

// CloseSession marks a session closed; legacy.ErrNoSession when there is none.
func (s Store) CloseSession(ctx context.Context, id string) error {
	return noSession(s.st.CloseSession(ctx, id))
}

// noSession turns the store's not-found into the face's.
func noSession(err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return legacy.ErrNoSession
	}
	return err
}

// FromRecord is the face's view of a session record.
func FromRecord(r *record.Session) *legacy.Session {
	return &legacy.Session{ID: r.ID, ProtocolVersion: r.ProtocolVersion, ClientInfo: r.ClientInfo,
		ClientCapabilities: r.ClientCapabilities, Principal: r.Principal, CreatedAt: r.CreatedAt,
		LastSeenAt: r.LastSeenAt, Closed: r.Closed, Upstream: r.UpstreamSessionID}
}

// ToRecord is the session record of the face's session.
func ToRecord(s *legacy.Session) *record.Session {
	return &record.Session{ID: s.ID, ProtocolVersion: s.ProtocolVersion, ClientInfo: s.ClientInfo,
		ClientCapabilities: s.ClientCapabilities, Principal: s.Principal, CreatedAt: s.CreatedAt,
		LastSeenAt: s.LastSeenAt, Closed: s.Closed, UpstreamSessionID: s.Upstream}
}

// Owner is the identity a legacy session's tasks are bound to: its principal, or the
// session itself without authentication.
func Owner(sess *legacy.Session) string {
	if sess.Principal != "" {
		return "principal:" + sess.Principal
	}
	return "session:" + sess.ID
}

// AnonymousModern is the owner of 2026-07-28 requests without authentication: such a
// request carries no session to bind its tasks to, so every anonymous modern caller is one
// owner (its task ids, 128 random bits, are what keeps them apart; docs/security.md).
const AnonymousModern = "anonymous"

// ModernOwner is the identity a 2026-07-28 request's tasks are bound to (the reverse route
// and the modern pass-through): its principal, under the same name as a legacy session of
// that principal ("principal:<key>", so a principal's limit counts its tasks on every
// route), or AnonymousModern.
func ModernOwner(principal string) string {
	if principal != "" {
		return "principal:" + principal
	}
	return AnonymousModern
}
