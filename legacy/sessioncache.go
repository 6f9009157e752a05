package legacy

import (
	"context"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/taskbridge/taskbridge/record"
	"github.com/taskbridge/taskbridge/store"
)

// sessionCacheTTL bounds how long this process trusts a session record it read: a session
// closed on another replica stops working here within this time. Sessions closed through
// this process are dropped from the cache at once.
const sessionCacheTTL = 2 * time.Second

// sessions is a small read-through cache of session records, so the hot path (every
// request of a session) does not read the store. Safe for concurrent use (the LRU locks).
type sessions struct {
	st    store.Store
	cache *lru.Cache[string, cachedSession]
}

type cachedSession struct {
	sess    record.Session
	expires time.Time
}

func newSessions(st store.Store) *sessions {
	c, _ := lru.New[string, cachedSession](16384)
	return &sessions{st: st, cache: c}
}

// get returns a copy of the session record (from the cache while fresh).
func (c *sessions) get(ctx context.Context, id string) (*record.Session, error) {
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
