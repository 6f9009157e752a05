package bridge

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/tidwall/gjson"
	"golang.org/x/time/rate"

	"github.com/taskbridge/taskbridge/internal/jsonrpc"
)

// Per-principal request rate (design §7), applied by the front door to every request on
// every transport: an HTTP request before its body is read, and each message of a
// WebSocket or stdio connection.

// rateKeys bounds the limiters held: the least recently used one goes first, so whatever
// number of principals, sessions or addresses shows up, the map stays this size.
const rateKeys = 1 << 16

// rateLimiter is a token bucket per key: in the store replicas share when there is one
// (shared, door_limit_shared.go), else in this process (golang.org/x/time/rate; with a
// single-process store there is one replica). The local bucket is also the fallback
// while the shared store cannot be asked. An evicted key starts again with a full bucket.
//
// Concurrency: safe for concurrent use (the LRU is locked; each rate.Limiter is too).
type rateLimiter struct {
	limit  rate.Limit
	burst  int
	now    func() time.Time
	keys   *lru.Cache[string, *rate.Limiter]
	shared *sharedBuckets // nil: the local buckets decide
}

// newRateLimiter returns nil (no limit) when r <= 0. burst < 1 means twice the rate. With
// tokens non-nil the buckets are shared through it.
func newRateLimiter(r float64, burst int, now func() time.Time, tokens TokenStore) *rateLimiter {
	if r <= 0 {
		return nil
	}
	if burst < 1 {
		burst = max(1, int(2*r))
	}
	l := &rateLimiter{limit: rate.Limit(r), burst: burst, now: now}
	var evict func(string, *rate.Limiter)
	if tokens != nil {
		l.shared = newSharedBuckets(tokens, burst)
		evict = func(k string, _ *rate.Limiter) { l.shared.evict(k) }
	}
	l.keys, _ = lru.NewWithEvict[string, *rate.Limiter](rateKeys, evict)
	return l
}

// admit takes one token from key's bucket, or returns the refusal saying when to retry.
// Safe on a nil limiter (no limit).
func (l *rateLimiter) admit(key string) error {
	if l == nil {
		return nil
	}
	lim, ok := l.keys.Get(key)
	if !ok {
		lim = rate.NewLimiter(l.limit, l.burst)
		if prev, found, _ := l.keys.PeekOrAdd(key, lim); found {
			lim = prev
		}
	}
	now := l.now()
	if l.shared != nil {
		if ok, decided, wait := l.shared.take(l, key, now); decided {
			if ok {
				return nil
			}
			return l.refusal(wait)
		}
	}
	res := lim.ReserveN(now, 1)
	wait := res.DelayFrom(now)
	if wait == 0 {
		return nil
	}
	res.CancelAt(now)
	return l.refusal(wait)
}

// refusal is the error of a request refused for wait.
func (l *rateLimiter) refusal(wait time.Duration) error {
	ms := max(1, wait.Milliseconds())
	return jsonrpc.NewError(jsonrpc.CodeOverloaded,
		fmt.Sprintf("rate limit exceeded (%.3g requests/s per principal); retry after %d ms", float64(l.limit), ms)).
		WithData(map[string]any{"reason": "request_rate", "retryable": true, "retryAfterMs": ms, "limit": "requestRate"})
}

// rateLimited answers an HTTP request the rate limit refused: 429, Retry-After (whole
// seconds, rounded up) and the JSON-RPC error with id null (the body was not read).
func rateLimited(w http.ResponseWriter, r *http.Request, err error) {
	e := jsonrpc.AsError(err)
	ms := gjson.GetBytes(e.Data, "retryAfterMs").Int()
	w.Header().Set("Retry-After", strconv.FormatInt((ms+999)/1000, 10))
	refuse(w, r, http.StatusTooManyRequests, e)
}

// originPolicy is the one Origin rule of every face (DNS-rebinding defence): no Origin (not
// a browser), a loopback origin (http(s)://localhost, 127.0.0.1 or [::1], any port), or
// one of the allowed values; "*" allows every origin.
type originPolicy struct {
	any   bool
	exact map[string]bool
}

func newOriginPolicy(allowed []string) originPolicy {
	p := originPolicy{exact: map[string]bool{}}
	for _, o := range allowed {
		p.exact[o] = true
		p.any = p.any || o == "*"
	}
	return p
}

func (p originPolicy) allowed(origin string) bool {
	if origin == "" || p.any || p.exact[origin] {
		return true
	}
	u, err := url.Parse(origin)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		return false
	}
	switch u.Hostname() {
	case "localhost", "127.0.0.1", "::1":
		return true
	}
	return false
}
