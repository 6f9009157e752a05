package forward_test

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/taskbridge/taskbridge/bridge"
	"github.com/taskbridge/taskbridge/bridge/forward"
	"github.com/taskbridge/taskbridge/internal/fixture"
	"github.com/taskbridge/taskbridge/internal/legacyclient"
	"github.com/taskbridge/taskbridge/record"
	"github.com/taskbridge/taskbridge/sep2663"
	"github.com/taskbridge/taskbridge/store"
	"github.com/taskbridge/taskbridge/store/postgres"
)

// hostedReplicas is two bridges on one PostgreSQL schema in front of an upstream without
// the tasks extension, so task-augmented calls become bridge-hosted tasks. CreateTimeout
// is 1 s, so the orphan sweep runs every 3 s and would fail any intent older than 6 s;
// Heartbeat is 200 ms, so a hosted record without a beat for 5.6 s counts as abandoned.
func hostedReplicas(t *testing.T) (*fixture.Server, [2]string, [2]store.Store) {
	t.Helper()
	dsn := pgDSN(t)
	fx := fixture.New(fixture.Options{NoTasksExtension: true, Scale: 1})
	up := httptest.NewServer(fx)
	t.Cleanup(func() { up.Close(); fx.Close() })
	var urls [2]string
	var sts [2]store.Store
	for i := range 2 {
		st, err := postgres.Open(context.Background(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		b, err := bridge.NewForward(forward.Config{Store: st, Logger: zerolog.Nop(), PollFloorMs: 100,
			Heartbeat: 200 * time.Millisecond, CreateTimeout: time.Second,
			Upstream: sep2663.NewClient(sep2663.ClientOptions{URL: up.URL + "/mcp"})})
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(mustDoor(t, bridge.DoorConfig{}, b))
		t.Cleanup(func() { srv.Close(); b.Close(context.Background()); st.Close() })
		urls[i], sts[i] = srv.URL+"/mcp", st
	}
	return fx, urls, sts
}

// TestHostedTaskOutlivesOrphanSweep: a bridge-hosted call running on replica A for longer
// than the intent grace (and the heartbeat lease) is not failed by replica B's orphan
// sweep: A's heartbeat keeps it alive, and the client gets the real result from B.
func TestHostedTaskOutlivesOrphanSweep(t *testing.T) {
	fx, urls, _ := hostedReplicas(t)
	onA := legacyclient.New(urls[0])
	if _, err := onA.Initialize(context.Background()); err != nil {
		t.Fatal(err)
	}
	taskID := createTask(t, onA, "slow_compute", map[string]any{"seconds": 9, "label": "hb"})
	onB := legacyclient.New(urls[1])
	onB.SetSessionID(onA.SessionID())
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		got := call(t, onB, "tasks/get", id(taskID))
		s := got.Get("status").Str
		if s == "completed" {
			break
		}
		if s != "working" {
			t.Fatalf("replica B shows the hosted task as %s while A still runs it: %s", s, got.Raw)
		}
		if time.Now().After(deadline) {
			t.Fatal("the hosted task never completed")
		}
	}
	res := call(t, onB, "tasks/result", id(taskID))
	if txt := res.Get("content.0.text").Str; !strings.Contains(txt, "hb completed after 9s") {
		t.Fatalf("tasks/result on B: %s", res.Raw)
	}
	if n := fx.Stats().Executions["slow_compute"]; n != 1 {
		t.Fatalf("upstream ran slow_compute %d times, want 1", n)
	}
}

// TestHostedTaskOfDeadReplicaFailed: a hosted record left by a replica that died (working,
// no heartbeat for longer than the lease) is failed by a live replica's sweep, with the
// outcome unknown; one whose heartbeat is fresh is left alone.
func TestHostedTaskOfDeadReplicaFailed(t *testing.T) {
	_, urls, sts := hostedReplicas(t)
	c := legacyclient.New(urls[1])
	if _, err := c.Initialize(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	stale := time.Now().Add(-time.Minute).UTC().Truncate(time.Millisecond)
	ttl := int64(600_000)
	mk := func(idSuffix string, last time.Time) *record.Task {
		return &record.Task{ID: strings.Repeat("d", 31) + idSuffix, Owner: "session:" + c.SessionID(), SessionID: c.SessionID(),
			RequestID: `"dead-` + idSuffix + `"`, Mode: record.ModeHost, Tool: "slow_compute",
			ArgsHash: "x", Status: record.StatusWorking, StatusMessage: "Running", CreatedAt: stale, LastUpdatedAt: last,
			TTLMs: &ttl, PollIntervalMs: 100, Outcome: record.OutcomePending}
	}
	dead := mk("1", stale)
	// A beating record: created as long ago, but its replica refreshed it just now. It
	// must survive the sweeps (its replica is alive, just not one of these two).
	alive := mk("2", time.Now().UTC())
	for _, r := range []*record.Task{dead, alive} {
		if err := sts[0].CreateTask(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	var got *record.Task
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		var err error
		if got, err = sts[1].GetTask(ctx, dead.ID); err != nil {
			t.Fatal(err)
		}
		if got.Status.Terminal() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the dead replica's hosted task was never failed")
		}
		// Keep "alive" beating as its replica would.
		a, err := sts[1].GetTask(ctx, alive.ID)
		if err != nil {
			t.Fatal(err)
		}
		a.LastUpdatedAt = time.Now().UTC()
		if err := sts[1].UpdateTask(ctx, a); err != nil && err != store.ErrConflict {
			t.Fatal(err)
		}
	}
	if got.Status != record.StatusFailed || got.Outcome != record.OutcomeUnknown {
		t.Fatalf("dead replica's hosted task: status %s outcome %s, want failed/unknown", got.Status, got.Outcome)
	}
	res := call(t, c, "tasks/get", id(dead.ID))
	if res.Get("status").Str != "failed" || !strings.Contains(res.Get("statusMessage").Str, "unknown") {
		t.Fatalf("client sees %s, want failed with an unknown outcome", res.Raw)
	}
	a, err := sts[1].GetTask(ctx, alive.ID)
	if err != nil {
		t.Fatal(err)
	}
	if a.Status != record.StatusWorking {
		t.Fatalf("a hosted task with a fresh heartbeat was %s by the sweep, want working", a.Status)
	}
}
