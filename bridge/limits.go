package bridge

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/taskbridge/taskbridge/internal/jsonrpc"
	"github.com/taskbridge/taskbridge/store"
)

// Per-principal limits (design §7): request rate, concurrent non-terminal tasks, result
// size. Each refusal is a JSON-RPC error saying which limit and what to do; none of them
// queues work.

// rateLimiter is a token bucket per owner. Buckets live in this process: with N replicas
// behind a balancer, a principal gets up to N times the rate (documented in
// docs/security.md). mu guards buckets and lastSweep.
type rateLimiter struct {
	rate  float64 // tokens per second
	burst float64

	mu        sync.Mutex
	buckets   map[string]*bucket
	lastSweep time.Time
}

type bucket struct {
	tokens float64
	at     time.Time
}

func newRateLimiter(rate float64, burst int) *rateLimiter {
	if rate <= 0 {
		return nil
	}
	b := float64(burst)
	if b < 1 {
		b = max(1, 2*rate)
	}
	return &rateLimiter{rate: rate, burst: b, buckets: map[string]*bucket{}}
}

// allow takes one token from owner's bucket; when empty it says how long until the next.
func (l *rateLimiter) allow(owner string, now time.Time) (bool, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sweep(now)
	bk := l.buckets[owner]
	if bk == nil {
		bk = &bucket{tokens: l.burst, at: now}
		l.buckets[owner] = bk
	}
	bk.tokens = min(l.burst, bk.tokens+now.Sub(bk.at).Seconds()*l.rate)
	bk.at = now
	if bk.tokens >= 1 {
		bk.tokens--
		return true, 0
	}
	return false, time.Duration((1 - bk.tokens) / l.rate * float64(time.Second))
}

// sweep drops full buckets (idle owners) once a minute, so the map holds active owners only.
func (l *rateLimiter) sweep(now time.Time) {
	if now.Sub(l.lastSweep) < time.Minute {
		return
	}
	l.lastSweep = now
	for k, bk := range l.buckets {
		if bk.tokens+now.Sub(bk.at).Seconds()*l.rate >= l.burst {
			delete(l.buckets, k)
		}
	}
}

// admit applies the request-rate limit to one JSON-RPC request.
func (b *Bridge) admit(ctx context.Context, sess *store.Session, req *jsonrpc.Message) error {
	if b.rate == nil {
		return nil
	}
	own, ok := b.callerOwner(ctx, sess)
	if !ok {
		return errTaskNotFound
	}
	ok, wait := b.rate.allow(own, b.cfg.Now())
	if ok {
		return nil
	}
	ms := max(1, wait.Milliseconds())
	return jsonrpc.NewError(jsonrpc.CodeOverloaded,
		fmt.Sprintf("rate limit exceeded (%.3g requests/s per principal); retry after %d ms", b.rate.rate, ms)).
		WithData(map[string]any{"retryable": true, "retryAfterMs": ms, "limit": "requestRate"})
}

// checkConcurrent refuses a new task when owner has MaxConcurrentTasks non-terminal tasks.
// The count and the insert are not one transaction: replicas racing may overshoot by the
// number of creations in flight at once.
func (b *Bridge) checkConcurrent(ctx context.Context, own string) error {
	max := b.cfg.MaxConcurrentTasks
	if max <= 0 {
		return nil
	}
	n, err := b.st.CountActive(ctx, own)
	if err != nil {
		return err
	}
	if n >= max {
		return jsonrpc.NewError(jsonrpc.CodeOverloaded,
			fmt.Sprintf("too many unfinished tasks (limit %d per principal); wait for one to end or cancel one", max)).
			WithData(map[string]any{"retryable": true, "limit": "maxConcurrentTasks", "max": max})
	}
	return nil
}

// capResult enforces MaxResultBytes on a record about to be written: a result or error
// larger than the cap is dropped and the task fails with a clear error. The real outcome
// (the operation may well have succeeded) is kept.
func (b *Bridge) capResult(rec *store.Task) {
	limit := b.cfg.MaxResultBytes
	n := int64(max(len(rec.Result), len(rec.Error)))
	if limit <= 0 || n <= limit {
		return
	}
	msg := fmt.Sprintf("The result (%d bytes) exceeds the bridge's limit of %d bytes; it was not kept.", n, limit)
	rec.Result = nil
	rec.Status = store.StatusFailed
	rec.StatusMessage = msg
	rec.Error = mustJSON(jsonrpc.NewError(jsonrpc.CodeInternalError, msg).
		WithData(map[string]any{"retryable": false, "outcome": string(rec.Outcome), "limit": "maxResultBytes"}))
}
