package bridge

import (
	"context"
	"sync"
	"time"
)

// The request rate shared by replicas (design §7, docs/security.md). On a store several
// replicas share (PostgreSQL) each principal's token bucket lives in the store
// (store.Shared.TakeTokens, GCRA on the store's clock), so N replicas together admit what
// one would. A round-trip per request would put the store on every request's path, so
// each replica takes tokens in batches and spends them locally (the fast path: a mutex
// and a counter):
//
//   - batch is a quarter of the burst (at least 1): at the full rate a replica goes to the
//     store about 4×rate/burst times a second per principal (twice a second with the
//     default burst of 2×rate); far under the limit, once every batch requests.
//   - Accuracy: the store never grants more than rate×t + burst tokens over t, and every
//     admitted request spent one, but a replica may spend a token it took earlier: over
//     any interval a principal gets at most rate×t + burst + replicas×batch requests.
//     Tokens a replica holds unspent are missing to the others, so a principal on one
//     replica may be refused with up to (replicas-1)×batch tokens held elsewhere, until
//     the bucket refills; no replica holds more than one batch per principal.
//   - A refusal is remembered until the store's retry-after, so a principal over the
//     limit costs no round-trip per request either.
//   - When the store cannot be asked (an error or a slow answer), the replica falls back
//     to its local bucket for that request: a store outage never refuses everyone, and a
//     principal gets at most the per-replica rate meanwhile.

// TokenStore is the shared token bucket the door's limiter takes from
// (store/postgres.Store implements it, see store.Shared.TakeTokens).
type TokenStore interface {
	TakeTokens(ctx context.Context, key string, rate float64, burst, want, refund int) (got int, retryAfter time.Duration, err error)
}

// sharedTimeout bounds one round-trip to the store's buckets; slower, the request is
// admitted or refused by the local bucket instead.
const sharedTimeout = 250 * time.Millisecond

// sharedKey is one principal's tokens taken from the store and not spent yet.
type sharedKey struct {
	mu           sync.Mutex
	tokens       int
	refusedUntil time.Time // the store said none are left before then
	retry        time.Duration
}

// sharedBuckets is the replica's side of the shared limit: the held tokens per key.
type sharedBuckets struct {
	st    TokenStore
	batch int
	keys  sync.Map // string → *sharedKey; bounded with the limiter's LRU (evict)
}

func newSharedBuckets(st TokenStore, burst int) *sharedBuckets {
	return &sharedBuckets{st: st, batch: max(1, burst/4)}
}

// take spends one of key's tokens: from those held, else from a batch the store grants.
// decided=false means the store could not be asked; the caller's local bucket decides.
func (s *sharedBuckets) take(l *rateLimiter, key string, now time.Time) (ok, decided bool, retry time.Duration) {
	v, _ := s.keys.LoadOrStore(key, &sharedKey{})
	k := v.(*sharedKey)
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.tokens > 0 {
		k.tokens--
		return true, true, 0
	}
	if now.Before(k.refusedUntil) {
		return false, true, k.refusedUntil.Sub(now)
	}
	ctx, cancel := context.WithTimeout(context.Background(), sharedTimeout)
	defer cancel()
	got, wait, err := s.st.TakeTokens(ctx, "rate:"+key, float64(l.limit), l.burst, s.batch, 0)
	if err != nil {
		return false, false, 0
	}
	if got == 0 {
		k.refusedUntil = now.Add(wait)
		return false, true, wait
	}
	k.tokens = got - 1
	return true, true, 0
}

// evict forgets a key's held tokens (the limiter's LRU dropped the key).
func (s *sharedBuckets) evict(key string) { s.keys.Delete(key) }
