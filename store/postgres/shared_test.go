package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/taskbridge/taskbridge/record"
	"github.com/taskbridge/taskbridge/store"
)

// Two handles on one schema stand for two replicas throughout.
func twoReplicas(t *testing.T) (*Store, *Store) {
	dsn := testDSN(t)
	return openT(t, dsn), openT(t, dsn)
}

// TestAsks: an ask put by one replica is read and answered by the other; the first answer
// wins, an unknown id is not found, and a deleted ask is gone.
func TestAsks(t *testing.T) {
	a, b := twoReplicas(t)
	ctx := context.Background()
	exp := time.Now().Add(time.Minute).UTC().Truncate(time.Millisecond)
	if err := a.PutAsk(ctx, &store.Ask{RequestID: "r1", SessionID: "s1", Owner: "/alice", Method: "elicitation/create", Holder: "A", ExpiresAt: exp}); err != nil {
		t.Fatal(err)
	}
	got, err := b.GetAsk(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	if got.SessionID != "s1" || got.Owner != "/alice" || got.Holder != "A" || !got.ExpiresAt.Equal(exp) || got.AnsweredAt != nil || got.Response != nil {
		t.Fatalf("ask %+v", got)
	}
	resp := json.RawMessage(`{"jsonrpc":"2.0","id":"r1","result":{"action":"accept","content":{"b":1,"a":2}}}`)
	if first, err := b.AnswerAsk(ctx, "r1", resp, time.Now()); err != nil || !first {
		t.Fatalf("first answer: %v %v", first, err)
	}
	if first, err := a.AnswerAsk(ctx, "r1", json.RawMessage(`{"jsonrpc":"2.0","id":"r1","result":{}}`), time.Now()); err != nil || first {
		t.Fatalf("second answer: first=%v err=%v, want dropped", first, err)
	}
	got, _ = a.GetAsk(ctx, "r1")
	if string(got.Response) != string(resp) || got.AnsweredAt == nil {
		t.Fatalf("stored answer %s (at %v), want the first one byte for byte", got.Response, got.AnsweredAt)
	}
	if _, err := a.AnswerAsk(ctx, "nope", resp, time.Now()); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("answer of an unknown ask: %v", err)
	}
	if err := a.PutAsk(ctx, &store.Ask{RequestID: "r1", ExpiresAt: exp}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("a second ask under one id: %v", err)
	}
	if err := b.DeleteAsk(ctx, "r1"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.GetAsk(ctx, "r1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("deleted ask: %v", err)
	}
}

// TestLeases: one holder at a time; the holder renews; another takes it once it expired
// or was released.
func TestLeases(t *testing.T) {
	a, b := twoReplicas(t)
	ctx := context.Background()
	take := func(s *Store, holder string, ttl time.Duration) bool {
		t.Helper()
		ok, err := s.TakeLease(ctx, "poll:t1", holder, ttl)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if !take(a, "A", time.Minute) {
		t.Fatal("A did not get a free lease")
	}
	if take(b, "B", time.Minute) {
		t.Fatal("B took a lease A holds")
	}
	if !take(a, "A", 200*time.Millisecond) {
		t.Fatal("A could not renew its own lease")
	}
	time.Sleep(300 * time.Millisecond)
	if !take(b, "B", time.Minute) {
		t.Fatal("B did not get the lease after A's expired")
	}
	if take(a, "A", time.Minute) {
		t.Fatal("A took the lease back from B")
	}
	if err := a.ReleaseLease(ctx, "poll:t1", "A"); err != nil { // not A's: nothing happens
		t.Fatal(err)
	}
	if take(a, "A", time.Minute) {
		t.Fatal("A's release freed B's lease")
	}
	if err := b.ReleaseLease(ctx, "poll:t1", "B"); err != nil {
		t.Fatal(err)
	}
	if !take(a, "A", time.Minute) {
		t.Fatal("A did not get the released lease")
	}
}

// TestLeaseRace: many replicas racing for one free lease: exactly one wins.
func TestLeaseRace(t *testing.T) {
	dsn := testDSN(t)
	s := openT(t, dsn)
	var wins atomic.Int32
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ok, err := s.TakeLease(context.Background(), "poll:race", string(rune('a'+i)), time.Minute)
			if err != nil {
				t.Error(err)
			}
			if ok {
				wins.Add(1)
			}
		}()
	}
	wg.Wait()
	if n := wins.Load(); n != 1 {
		t.Fatalf("%d holders of one lease, want 1", n)
	}
}

// TestInputClaims: one carrier per unanswered input; renewals, expiry and release move
// it; an answered input has none.
func TestInputClaims(t *testing.T) {
	a, b := twoReplicas(t)
	ctx := context.Background()
	now := time.Now().UTC()
	if err := a.CreateTask(ctx, &record.Task{ID: "t1", Owner: "o", SessionID: "s", Status: record.StatusInputRequired,
		Outcome: record.OutcomePending, Mode: record.ModeTranslate, CreatedAt: now, LastUpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	if err := a.PutInputs(ctx, []record.Input{{TaskID: "t1", Key: "k", Method: "elicitation/create", Params: json.RawMessage(`{}`)}}); err != nil {
		t.Fatal(err)
	}
	claim := func(s *Store, carrier string, ttl time.Duration) bool {
		t.Helper()
		ok, err := s.ClaimInput(ctx, "t1", "k", carrier, ttl)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if !claim(a, "A", time.Minute) || claim(b, "B", time.Minute) || !claim(a, "A", 200*time.Millisecond) {
		t.Fatal("A should hold the claim and renew it, B be refused")
	}
	time.Sleep(300 * time.Millisecond)
	if !claim(b, "B", time.Minute) {
		t.Fatal("B did not get the expired claim")
	}
	if err := a.ReleaseInput(ctx, "t1", "k", "A"); err != nil || claim(a, "A", time.Minute) {
		t.Fatalf("A's release must not free B's claim (err %v)", err)
	}
	if err := b.ReleaseInput(ctx, "t1", "k", "B"); err != nil || !claim(a, "A", time.Minute) {
		t.Fatalf("released claim not taken by A (err %v)", err)
	}
	if _, err := b.AnswerInput(ctx, "t1", "k", json.RawMessage(`{"action":"accept"}`), time.Now()); err != nil {
		t.Fatal(err)
	}
	if claim(a, "A", time.Minute) {
		t.Fatal("an answered input was claimed")
	}
	// The input record itself is untouched by claims.
	ins, err := b.ListInputs(ctx, "t1")
	if err != nil || len(ins) != 1 || ins[0].AnsweredAt == nil {
		t.Fatalf("inputs %+v, %v", ins, err)
	}
}

// TestStreamEvents: events written by the holder are read by another replica after a
// given seq, only for the stream's own session; follow, trim and delete.
func TestStreamEvents(t *testing.T) {
	a, b := twoReplicas(t)
	ctx := context.Background()
	for i := range 4 {
		e := store.StreamEvent{StreamID: "pX", SessionID: "s1", Seq: uint64(i), Frame: []byte("id: pX-" + string(rune('0'+i)) + "\ndata: {}\n\n"), Last: i == 3}
		if err := a.PutStreamEvent(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.PutStreamEvent(ctx, store.StreamEvent{StreamID: "pX", SessionID: "s2", Seq: 9, Frame: []byte("x")}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("an event for another session's stream: %v", err)
	}
	evs, err := b.StreamEvents(ctx, "s1", "pX", 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 2 || evs[0].Seq != 2 || evs[1].Seq != 3 || !evs[1].Last || evs[0].Last || string(evs[0].Frame) != "id: pX-2\ndata: {}\n\n" {
		t.Fatalf("events after 1: %+v", evs)
	}
	if evs, err := b.StreamEvents(ctx, "s1", "pX", 3); err != nil || len(evs) != 0 {
		t.Fatalf("events after the last: %v %v", evs, err)
	}
	if _, err := b.StreamEvents(ctx, "s2", "pX", 0); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("another session's stream: %v", err)
	}
	st, err := b.GetStream(ctx, "pX")
	if err != nil || st.SessionID != "s1" || st.Followed != -1 || st.Active < 0 || st.Active > 5*time.Second {
		t.Fatalf("stream state %+v, %v", st, err)
	}
	if err := b.FollowStream(ctx, "pX", 2); err != nil {
		t.Fatal(err)
	}
	if err := b.FollowStream(ctx, "pX", 1); err != nil { // acked never goes back
		t.Fatal(err)
	}
	if st, _ = a.GetStream(ctx, "pX"); st.Followed < 0 || st.Followed > 5*time.Second || st.Acked != 2 {
		t.Fatalf("followed stream %+v", st)
	}
	if err := a.TrimStream(ctx, "pX", 2); err != nil {
		t.Fatal(err)
	}
	if evs, _ := b.StreamEvents(ctx, "s1", "pX", 0); len(evs) != 1 || evs[0].Seq != 3 {
		t.Fatalf("after trimming up to 2: %+v", evs)
	}
	if err := a.DeleteStream(ctx, "pX"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.StreamEvents(ctx, "s1", "pX", 0); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("deleted stream: %v", err)
	}
	if _, err := b.GetStream(ctx, "pX"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("deleted stream state: %v", err)
	}
}

// TestTokens: a new bucket is full; takes drain it; an empty bucket says when the next
// token comes; refunds go back; a bucket never holds more than burst.
func TestTokens(t *testing.T) {
	a, b := twoReplicas(t)
	ctx := context.Background()
	take := func(s *Store, want, refund int) (int, time.Duration) {
		t.Helper()
		got, wait, err := s.TakeTokens(ctx, "principal:/alice", 10, 5, want, refund)
		if err != nil {
			t.Fatal(err)
		}
		return got, wait
	}
	if got, _ := take(a, 3, 0); got != 3 {
		t.Fatalf("new bucket: got %d of 3", got)
	}
	if got, _ := take(b, 3, 0); got != 2 {
		t.Fatalf("second take: got %d, want the 2 left", got)
	}
	got, wait := take(a, 1, 0)
	if got != 0 || wait <= 0 || wait > 110*time.Millisecond {
		t.Fatalf("empty bucket: got %d, retry after %v (want ≤ 100 ms at 10/s)", got, wait)
	}
	if got, _ := take(b, 2, 2); got != 2 { // returns 2, takes 2
		t.Fatalf("take after a refund: got %d, want 2", got)
	}
	time.Sleep(600 * time.Millisecond) // 6 tokens' worth: capped at the burst
	if got, _ := take(a, 10, 0); got != 5 {
		t.Fatalf("after idling: got %d, want the burst of 5", got)
	}
	if got, _ := take(a, 1, 100); got != 1 {
		t.Fatalf("a huge refund: got %d, want 1", got)
	}
	if got, _ := take(b, 10, 0); got != 4 {
		t.Fatalf("after a refund beyond the burst: got %d, want the 4 left of 5", got)
	}
}

// TestTokensNeverOverAdmit: many takers on two replicas for 1 s get at most burst + rate×t.
func TestTokensNeverOverAdmit(t *testing.T) {
	a, b := twoReplicas(t)
	var granted atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(time.Second)
	for i := range 8 {
		s := a
		if i%2 == 1 {
			s = b
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				got, _, err := s.TakeTokens(context.Background(), "k", 20, 10, 3, 0)
				if err != nil {
					t.Error(err)
					return
				}
				granted.Add(int64(got))
			}
		}()
	}
	wg.Wait()
	limit := 10 + 20*time.Since(start).Seconds()
	if g := float64(granted.Load()); g > limit || g < 20 {
		t.Fatalf("granted %v tokens, want ≤ %.1f (burst + rate × elapsed) and most of it", g, limit)
	}
}

// TestPurgeShared: expired asks, old leases, full buckets and idle streams go; live ones stay.
func TestPurgeShared(t *testing.T) {
	s := openT(t, testDSN(t))
	ctx := context.Background()
	now := time.Now()
	_ = s.PutAsk(ctx, &store.Ask{RequestID: "old", ExpiresAt: now.Add(-time.Second)})
	_ = s.PutAsk(ctx, &store.Ask{RequestID: "live", ExpiresAt: now.Add(time.Minute)})
	_, _ = s.TakeLease(ctx, "l", "A", time.Minute)
	_ = s.PutStreamEvent(ctx, store.StreamEvent{StreamID: "p1", SessionID: "s", Frame: []byte("x")})
	if _, err := s.PurgeShared(ctx, now, time.Hour); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetAsk(ctx, "old"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("expired ask kept: %v", err)
	}
	if _, err := s.GetAsk(ctx, "live"); err != nil {
		t.Fatalf("live ask purged: %v", err)
	}
	if _, err := s.GetStream(ctx, "p1"); err != nil {
		t.Fatalf("active stream purged: %v", err)
	}
	if ok, _ := s.TakeLease(ctx, "l", "B", time.Minute); ok {
		t.Fatal("live lease purged")
	}
	time.Sleep(20 * time.Millisecond)
	if _, err := s.PurgeShared(ctx, now, 10*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetStream(ctx, "p1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("idle stream kept: %v", err)
	}
	if evs, err := s.StreamEvents(ctx, "s", "p1", 0); !errors.Is(err, store.ErrNotFound) || len(evs) != 0 {
		t.Fatalf("idle stream's events kept: %v %v", evs, err)
	}
}
