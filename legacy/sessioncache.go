package legacy

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
)

// Session is a 2025-11-25 (or older) client session opened by initialize, as the face
// keeps it. Sessions live in a SessionStore, so any replica serves any request of one.
type Session struct {
	ID                 string
	ProtocolVersion    string
	ClientInfo         json.RawMessage // {"name","version",...} as sent (within the face's size bound)
	ClientCapabilities json.RawMessage
	Principal          string // "" without authentication
	CreatedAt          time.Time
	LastSeenAt         time.Time
	Closed             bool
	// Upstream is the route's reference for the session, stored with it: the Mcp-Session-Id
	// of the upstream session the legacy pass-through forwards it over. The Handler sets it
	// in Initialize (the record is created after Initialize returns).
	Upstream string
}

// SessionStore is what the face needs of durable storage: four calls on session records.
// The route in front of the face adapts its store to it. Implementations are safe for
// concurrent use (and, for a shared store, by many processes).
type SessionStore interface {
	CreateSession(ctx context.Context, s *Session) error
	// GetSession returns the session, or ErrNoSession.
	GetSession(ctx context.Context, id string) (*Session, error)
	TouchSession(ctx context.Context, id string, at time.Time) error
	// CloseSession marks the session closed, or returns ErrNoSession.
	CloseSession(ctx context.Context, id string) error
}

// ErrNoSession is a SessionStore's answer for an unknown session.
var ErrNoSession = errors.New("legacy: no such session")

// sessionCacheTTL bounds how long this process trusts a session record it read: a session
// closed on another replica stops working here within this time. Sessions closed through
// this process are dropped from the cache at once.
const sessionCacheTTL = 2 * time.Second

// sessions is a small read-through cache of session records, so the hot path (every
// request of a session) does not read the store. Safe for concurrent use (the LRU locks).
type sessions struct {
	st    SessionStore
	cache *lru.Cache[string, cachedSession]
}

type cachedSession struct {
	sess    Session
	expires time.Time
}

func newSessions(st SessionStore) *sessions {
	c, _ := lru.New[string, cachedSession](16384)
	return &sessions{st: st, cache: c}
}

// get returns a copy of the session record (from the cache while fresh).
func (c *sessions) get(ctx context.Context, id string) (*Session, error) {
	if e, ok := c.cache.Get(id); ok && time.Now().Before(e.expires) {
		s := e.sess
		return &s, nil
	}
	s, err := c.st.GetSession(ctx, id)
	if err != nil {
		return nil, err
	}
	c.cache.Add(id, cachedSession{sess: *s, expires: time.Now().Add(sessionCacheTTL)})
	return s, nil
}

func (c *sessions) forget(id string) { c.cache.Remove(id) }
