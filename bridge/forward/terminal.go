package forward

import (
	"context"
	"encoding/json"
	"errors"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/taskbridge/taskbridge/bridge/internal/errmap"
	"github.com/taskbridge/taskbridge/record"
	"github.com/taskbridge/taskbridge/store"
)

// terminalCacheSize is how many finished records the process keeps in memory.
const terminalCacheSize = 4096

// terminalCache keeps finished task records in memory so that tasks/get, ownership checks
// and tasks/cancel of a finished task need no store read. A finished record never changes.
//
// It holds no payload: Add keeps a copy without Result and Error, so the cache's size is
// a few hundred bytes per entry whatever the results weigh (4096 results of 8 MiB would
// be 32 GiB). tasks/result reads the payload from the store (payloadRecord).
//
// Safe for concurrent use (the LRU locks).
type terminalCache struct {
	c *lru.Cache[string, *record.Task]
}

func newTerminalCache() *terminalCache {
	c, _ := lru.New[string, *record.Task](terminalCacheSize) // only a size <= 0 fails
	return &terminalCache{c: c}
}

// Add caches a payload-free copy of rec.
func (tc *terminalCache) Add(id string, rec *record.Task) {
	c := *rec
	c.Result, c.Error = nil, nil
	tc.c.Add(id, &c)
}

// Get returns the cached record (without its payload) or false.
func (tc *terminalCache) Get(id string) (*record.Task, bool) { return tc.c.Get(id) }

// terminalPayload answers tasks/result for a finished record the caller may see (load
// checked owner and ttl). A record without its payload (from the cache) is read again
// from the store, which holds the payload until the ttl purge.
func (b *Bridge) terminalPayload(ctx context.Context, rec *record.Task) (json.RawMessage, error) {
	if len(rec.Result) == 0 && len(rec.Error) == 0 {
		full, err := b.reg.get(ctx, rec.ID)
		if errors.Is(err, store.ErrNotFound) {
			return nil, errmap.ErrTaskNotFound
		}
		if err != nil {
			return nil, err
		}
		rec = full
	}
	return b.payload(rec)
}
