package bridge

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/internal/jsonrpc"
	"github.com/taskbridge/taskbridge/internal/testenv"
	"github.com/taskbridge/taskbridge/store/postgres"
)

// sharedStore opens a fresh PostgreSQL schema as a replica would (one handle per replica).
func sharedStore(t testing.TB, dsn string) *postgres.Store {
	t.Helper()
	st, err := postgres.Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// burst sends n requests of one principal, alternating between the limiters (replicas
// behind a round-robin balancer), and counts the admitted ones.
func burst(ls []*rateLimiter, key string, n int) int {
	admitted := 0
	for i := range n {
		if ls[i%len(ls)].admit(key) == nil {
			admitted++
		}
	}
	return admitted
}

// TestSharedRateAcrossReplicas: two replicas on one PostgreSQL admit together what one
// would (the burst, give or take the batches they hold), where per-replica buckets would
// admit twice as much; a principal over the limit is refused with a retry-after.
func TestSharedRateAcrossReplicas(t *testing.T) {
	dsn := testenv.PostgresSchema(t, "tblimit")
	const rate, burstN = 1.0, 20
	shared := []*rateLimiter{
		newRateLimiter(rate, burstN, time.Now, sharedStore(t, dsn)),
		newRateLimiter(rate, burstN, time.Now, sharedStore(t, dsn)),
	}
	local := []*rateLimiter{newRateLimiter(rate, burstN, time.Now, nil), newRateLimiter(rate, burstN, time.Now, nil)}

	got := burst(shared, "/alice", 100)
	// The store grants the burst (and what refills meanwhile, ~1/s); every token granted is
	// spent here, as both replicas keep asking.
	if got < burstN || got > burstN+2 {
		t.Errorf("two shared replicas admitted %d of 100 requests, want the burst %d (+ refill)", got, burstN)
	}
	if got := burst(local, "/alice", 100); got != 2*burstN {
		t.Errorf("two local replicas admitted %d, want %d (the reason for sharing)", got, 2*burstN)
	}
	err := shared[0].admit("/alice")
	if err == nil {
		t.Fatal("a principal past its burst was admitted")
	}
	if ms := errData(err, "retryAfterMs"); ms < 1 || ms > 2000 {
		t.Errorf("retryAfterMs %d, want about one token's time (1000 ms)", ms)
	}
	// Another principal has its own bucket.
	if got := burst(shared, "/bob", 10); got != 10 {
		t.Errorf("another principal admitted %d of 10, want 10", got)
	}
}

// TestSharedRateFallsBackWhenStoreFails: a store that cannot answer does not refuse
// everyone: the replica's own bucket decides meanwhile.
func TestSharedRateFallsBackWhenStoreFails(t *testing.T) {
	dsn := testenv.PostgresSchema(t, "tblimit")
	st := sharedStore(t, dsn)
	st.Close() // every TakeTokens fails now
	l := newRateLimiter(1, 5, time.Now, st)
	if got := burst([]*rateLimiter{l}, "/alice", 10); got != 5 {
		t.Errorf("with the store down one replica admitted %d of 10, want its local burst 5", got)
	}
}

// BenchmarkSharedRate is the door's per-request cost of the shared limit far under the
// limit (the fast path, a store round-trip every batch requests) and of the local one.
func BenchmarkSharedRate(b *testing.B) {
	dsn := testenv.PostgresSchema(b, "tblimit")
	st := sharedStore(b, dsn)
	for _, c := range []struct {
		name   string
		tokens TokenStore
		burst  int
	}{{"local", nil, 100}, {"shared", st, 100}, {"shared-roundtrip-each", st, 4}} {
		b.Run(c.name, func(b *testing.B) {
			// A rate the benchmark stays far under per key: many principals; batch =
			// burst/4 requests per round-trip (25; 1 for the last case, the cost without
			// the fast path).
			l := newRateLimiter(1e6, c.burst, time.Now, c.tokens)
			keys := make([]string, 1024)
			for i := range keys {
				keys[i] = fmt.Sprintf("/%s-%d", c.name, i)
			}
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				if err := l.admit(keys[i%len(keys)]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// errData reads an integer field of a JSON-RPC error's data.
func errData(err error, field string) int64 {
	return gjson.GetBytes(jsonrpc.AsError(err).Data, field).Int()
}
