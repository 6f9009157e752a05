package gate

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/internal/jsonrpc"
)

func reasonOf(t *testing.T, err error) (int64, string) {
	t.Helper()
	var je *jsonrpc.Error
	if !errors.As(err, &je) {
		t.Fatalf("want a JSON-RPC error, got %v", err)
	}
	return je.Code, gjson.GetBytes(je.Data, "reason").Str
}

// TestAdmitOrderAndCodes: each policy refuses with its own code and reason, in the
// documented order; the sunset retires only the 2025-11-25 API; SetPolicy takes effect on
// the next call.
func TestAdmitOrderAndCodes(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2027, 8, 1, 0, 0, 0, 0, time.UTC)
	var draining bool
	g := New(Config{Now: func() time.Time { return now }, Draining: func() bool { return draining }})
	three := func(context.Context) (int, error) { return 3, nil }
	legacy := Task{Era: Legacy, Owner: "o", Active: three}
	modern := Task{Era: Modern, Owner: "o", Active: three}
	if err := g.Admit(ctx, legacy); err != nil {
		t.Fatalf("empty policy: %v", err)
	}
	cases := []struct {
		name   string
		p      Policy
		drain  bool
		task   Task
		code   int64
		reason string
	}{
		{"kill switch wins", Policy{KillSwitch: true, Sunset: now.Add(-time.Hour), MaxConcurrentTasks: 1}, true, legacy, jsonrpc.CodeTasksRefused, "kill_switch"},
		{"sunset before drain", Policy{Sunset: now.Add(-time.Hour)}, true, legacy, jsonrpc.CodeTasksRefused, "sunset"},
		{"sunset spares modern", Policy{Sunset: now.Add(-time.Hour)}, true, modern, jsonrpc.CodeOverloaded, "draining"},
		{"drain before the cap", Policy{MaxConcurrentTasks: 1}, true, legacy, jsonrpc.CodeOverloaded, "draining"},
		{"cap", Policy{MaxConcurrentTasks: 3}, false, modern, jsonrpc.CodeOverloaded, "max_concurrent_tasks"},
	}
	for _, c := range cases {
		g.SetPolicy(c.p)
		draining = c.drain
		code, reason := reasonOf(t, g.Admit(ctx, c.task))
		if code != c.code || reason != c.reason {
			t.Errorf("%s: code %d reason %q, want %d %q", c.name, code, reason, c.code, c.reason)
		}
	}
	draining = false
	g.SetPolicy(Policy{MaxConcurrentTasks: 4, Sunset: now.Add(time.Hour)})
	if err := g.Admit(ctx, legacy); err != nil {
		t.Errorf("under the cap, before the sunset: %v", err)
	}
	if err := g.Admit(ctx, Task{Era: Legacy}); err != nil {
		t.Errorf("a route that cannot count: %v", err)
	}
}

// TestAcquireBoundsInflight: with MaxInflight N, N slots are granted, the next is refused at
// once with retryAfterMs, and a released slot (released twice) frees exactly one.
func TestAcquireBoundsInflight(t *testing.T) {
	g := New(Config{Policy: Policy{MaxInflight: 3}})
	var rel []func()
	for range 3 {
		r, err := g.Acquire()
		if err != nil {
			t.Fatal(err)
		}
		rel = append(rel, r)
	}
	_, err := g.Acquire()
	var je *jsonrpc.Error
	if !errors.As(err, &je) || je.Code != jsonrpc.CodeOverloaded || gjson.GetBytes(je.Data, "retryAfterMs").Int() != 1000 {
		t.Fatalf("4th slot: %v", err)
	}
	rel[0]()
	rel[0]()
	if g.Inflight() != 2 {
		t.Fatalf("in flight after one release (twice): %d, want 2", g.Inflight())
	}
	if _, err := g.Acquire(); err != nil {
		t.Fatalf("after a release: %v", err)
	}
	if _, err := g.Acquire(); err == nil {
		t.Fatal("a double release must not free two slots")
	}
}

// TestAcquireConcurrent: many goroutines racing for slots never get more than the cap.
func TestAcquireConcurrent(t *testing.T) {
	g := New(Config{Policy: Policy{MaxInflight: 5}})
	var mu sync.Mutex
	granted, peak, cur := 0, 0, 0
	var wg sync.WaitGroup
	for range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := g.Acquire()
			if err != nil {
				return
			}
			mu.Lock()
			granted++
			cur++
			peak = max(peak, cur)
			mu.Unlock()
			time.Sleep(time.Millisecond)
			mu.Lock()
			cur--
			mu.Unlock()
			r()
		}()
	}
	wg.Wait()
	if peak > 5 || granted == 0 || g.Inflight() != 0 {
		t.Fatalf("peak %d granted %d left %d", peak, granted, g.Inflight())
	}
}

// TestLedger: counts per owner, ends by key and by group, expires by ttl, records nothing
// without a cap, and stays bounded.
func TestLedger(t *testing.T) {
	now := time.Unix(1000, 0)
	g := New(Config{Now: func() time.Time { return now }})
	l := NewLedger(g)
	l.Started("a", "s1", "k0", time.Minute)
	if n := l.Active("a"); n != 0 {
		t.Fatalf("recorded without a cap: %d", n)
	}
	g.SetPolicy(Policy{MaxConcurrentTasks: 10})
	l.Started("a", "s1", "k1", time.Minute)
	l.Started("a", "s1", "k1", time.Minute) // seen twice: one task
	l.Started("a", "s2", "k2", time.Hour)
	l.Started("b", "s3", "k3", 0)
	if a, b := l.Active("a"), l.Active("b"); a != 2 || b != 1 {
		t.Fatalf("active a=%d b=%d, want 2 1", a, b)
	}
	l.Ended("k2")
	l.EndGroup("s3")
	if a, b := l.Active("a"), l.Active("b"); a != 1 || b != 0 {
		t.Fatalf("after ends: a=%d b=%d, want 1 0", a, b)
	}
	now = now.Add(2 * time.Minute)
	if a := l.Active("a"); a != 0 {
		t.Fatalf("after the ttl: a=%d, want 0", a)
	}
	for i := range MaxLedgerEntries + 10 {
		l.Started("c", "", strconv.Itoa(i), time.Duration(i+1)*time.Second)
	}
	if n := l.Active("c"); n != MaxLedgerEntries {
		t.Fatalf("ledger holds %d, want the bound %d", n, MaxLedgerEntries)
	}
}

// TestLockDriftRefusal: with a drift set, every era's new task is refused with -32012,
// reason lock_drift, and a message naming what changed; the kill switch still comes
// first; SetDrift(nil) lifts it; a policy reload leaves it alone.
func TestLockDriftRefusal(t *testing.T) {
	ctx := context.Background()
	g := New(Config{})
	g.SetDrift(LockDriftError("tb.lock", []string{"tool slow_compute taskSupport: optional → required"}))
	for _, era := range []Era{Legacy, Modern, LegacyUpstream} {
		err := g.Admit(ctx, Task{Era: era, Owner: "o"})
		code, reason := reasonOf(t, err)
		if code != jsonrpc.CodeTasksRefused || reason != "lock_drift" || !strings.Contains(err.Error(), "slow_compute") {
			t.Errorf("era %d: %d %s %v", era, code, reason, err)
		}
	}
	g.SetPolicy(Policy{MaxInflight: 3}) // a reload of the policy keeps the drift
	if _, reason := reasonOf(t, g.Admit(ctx, Task{Era: Legacy})); reason != "lock_drift" {
		t.Errorf("after SetPolicy: %s", reason)
	}
	g.SetPolicy(Policy{KillSwitch: true})
	if _, reason := reasonOf(t, g.Admit(ctx, Task{Era: Legacy})); reason != "kill_switch" {
		t.Errorf("kill switch and drift: %s, want kill_switch first", reason)
	}
	g.SetPolicy(Policy{})
	g.SetDrift(nil)
	if err := g.Admit(ctx, Task{Era: Legacy}); err != nil {
		t.Errorf("after SetDrift(nil): %v", err)
	}
}
