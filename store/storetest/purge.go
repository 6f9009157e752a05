package storetest

import (
	"testing"
	"time"

	"github.com/taskbridge/taskbridge/record"
	"github.com/taskbridge/taskbridge/store"
)

func testCountActive(t *testing.T, s store.Store) {
	ctx := t.Context()
	for i, st := range []record.Status{record.StatusWorking, record.StatusInputRequired, record.StatusCompleted, record.StatusFailed, record.StatusCancelled} {
		x := newTask(string(rune('a'+i)), "alice")
		x.Status = st
		must(t, s.CreateTask(ctx, x), "CreateTask")
	}
	must(t, s.CreateTask(ctx, newTask("z", "bob")), "CreateTask bob")
	for owner, want := range map[string]int{"alice": 2, "bob": 1, "carol": 0} {
		n, err := s.CountActive(ctx, owner)
		must(t, err, "CountActive")
		if n != want {
			t.Errorf("CountActive(%s) = %d, want %d", owner, n, want)
		}
	}
}

func testReleaseIdempotencyKey(t *testing.T, s store.Store) {
	ctx := t.Context()
	a := newTask("t1", "alice")
	a.IdempotencyKey = "k"
	must(t, s.CreateTask(ctx, a), "CreateTask")
	b := newTask("t2", "alice")
	b.RequestID, b.IdempotencyKey = "other", "k"
	wantErr(t, s.CreateTask(ctx, b), store.ErrConflict, "CreateTask with a taken key")
	must(t, s.ReleaseIdempotencyKey(ctx, "t1"), "ReleaseIdempotencyKey")
	_, err := s.FindTaskByIdempotencyKey(ctx, "alice", "k")
	wantErr(t, err, store.ErrNotFound, "FindTaskByIdempotencyKey after release")
	must(t, s.CreateTask(ctx, b), "CreateTask after release")
	got, err := s.GetTask(ctx, "t1")
	must(t, err, "GetTask")
	if got.IdempotencyKey != "" || got.Tool != a.Tool || got.ArgsHash != a.ArgsHash {
		t.Errorf("released task: key %q tool %q; want the key cleared and the rest kept", got.IdempotencyKey, got.Tool)
	}
	wantErr(t, s.ReleaseIdempotencyKey(ctx, "nope"), store.ErrNotFound, "ReleaseIdempotencyKey(unknown)")
}

// testReleaseRequestID: a session's request id names one task at a time; released, it can
// name a new one, and the old task keeps everything else.
func testReleaseRequestID(t *testing.T, s store.Store) {
	ctx := t.Context()
	a := newTask("r1", "alice")
	a.SessionID, a.RequestID = "sess", "0"
	must(t, s.CreateTask(ctx, a), "CreateTask")
	b := newTask("r2", "alice")
	b.SessionID, b.RequestID, b.Tool = "sess", "0", "other_tool"
	wantErr(t, s.CreateTask(ctx, b), store.ErrConflict, "CreateTask with a taken request id")
	wantErr(t, s.ReleaseRequestID(ctx, "r1", "1"), store.ErrNotFound, "ReleaseRequestID(another id)")
	must(t, s.ReleaseRequestID(ctx, "r1", "0"), "ReleaseRequestID")
	wantErr(t, s.ReleaseRequestID(ctx, "r1", "0"), store.ErrNotFound, "ReleaseRequestID twice")
	must(t, s.CreateTask(ctx, b), "CreateTask after release")
	got, err := s.FindTaskByRequest(ctx, "sess", "0")
	must(t, err, "FindTaskByRequest")
	if got.ID != "r2" {
		t.Errorf("FindTaskByRequest after release = %s, want r2", got.ID)
	}
	old, err := s.GetTask(ctx, "r1")
	must(t, err, "GetTask")
	if old.RequestID != "" || old.Tool != a.Tool || old.Owner != "alice" {
		t.Errorf("released task: request id %q tool %q; want the id cleared and the rest kept", old.RequestID, old.Tool)
	}
}

func testPurgeExpired(t *testing.T, s store.Store) {
	ctx := t.Context()
	ttl := int64(60_000)
	mk := func(id string, st record.Status, age time.Duration, ttl *int64) *record.Task {
		x := newTask(id, "alice")
		x.Status, x.TTLMs = st, ttl
		x.CreatedAt = base.Add(-age)
		x.LastUpdatedAt = x.CreatedAt
		x.Outcome = record.OutcomeSucceeded
		must(t, s.CreateTask(ctx, x), "CreateTask "+id)
		return x
	}
	fresh := mk("fresh", record.StatusCompleted, 30*time.Second, &ttl)    // ttl not yet out
	expired := mk("expired", record.StatusCompleted, 2*time.Minute, &ttl) // payload goes
	old := mk("old", record.StatusFailed, 48*time.Hour, &ttl)             // past retention: deleted
	running := mk("running", record.StatusWorking, 2*time.Minute, &ttl)   // never purged while live
	forever := mk("forever", record.StatusCompleted, 48*time.Hour, nil)   // unlimited ttl
	must(t, s.PutInputs(ctx, newInputs("expired")), "PutInputs")
	must(t, s.PutInputs(ctx, newInputs("old")), "PutInputs")

	purged, deleted, err := s.PurgeExpired(ctx, base, 24*time.Hour)
	must(t, err, "PurgeExpired")
	if purged != 1 || deleted != 1 {
		t.Errorf("PurgeExpired = %d purged, %d deleted; want 1, 1", purged, deleted)
	}
	_, err = s.GetTask(ctx, old.ID)
	wantErr(t, err, store.ErrNotFound, "GetTask(past retention)")
	got, err := s.GetTask(ctx, expired.ID)
	must(t, err, "GetTask(expired)")
	want := normTask(expired)
	want.Result, want.Error, want.StatusMessage, want.ProgressToken = nil, nil, "", nil
	want.Version = 2
	checkTask(t, want, got, "expired task after purge (audit part kept)")
	if ins, err := s.ListInputs(ctx, expired.ID); err != nil || len(ins) != 0 {
		t.Errorf("inputs of a purged task: %d, %v; want none", len(ins), err)
	}
	for _, x := range []*record.Task{fresh, running, forever} {
		got, err := s.GetTask(ctx, x.ID)
		must(t, err, "GetTask "+x.ID)
		checkTask(t, normTask(x), got, x.ID+" untouched")
	}
	// Idempotent: a second run finds nothing to do.
	purged, deleted, err = s.PurgeExpired(ctx, base, 24*time.Hour)
	must(t, err, "PurgeExpired again")
	if purged != 0 || deleted != 0 {
		t.Errorf("second PurgeExpired = %d, %d; want 0, 0", purged, deleted)
	}
}
