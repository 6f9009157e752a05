package sqlite

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/taskbridge/taskbridge/record"
	"github.com/taskbridge/taskbridge/store"
	"github.com/taskbridge/taskbridge/store/storetest"
)

func openT(t testing.TB, path string) *Store {
	t.Helper()
	s, err := Open(context.Background(), path)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		return openT(t, filepath.Join(t.TempDir(), "taskbridge.db"))
	})
}

func testTask(id string) *record.Task {
	now := time.Now()
	return &record.Task{
		ID: id, Owner: "alice", SessionID: "s1", RequestID: "r-" + id, Mode: record.ModeTranslate,
		Tool: "t", Status: record.StatusWorking, Outcome: record.OutcomePending,
		CreatedAt: now, LastUpdatedAt: now, PollIntervalMs: 1000,
	}
}

// TestTwoProcesses opens the file twice, as two bridge processes sharing it would: each
// sees the other's writes, compare-and-swap holds across them, and exactly one of 20
// concurrent answers split between them wins.
func TestTwoProcesses(t *testing.T) {
	path := filepath.Join(t.TempDir(), "shared.db")
	a, b := openT(t, path), openT(t, path)
	ctx := t.Context()

	if err := a.CreateTask(ctx, testTask("t1")); err != nil {
		t.Fatal(err)
	}
	got, err := b.GetTask(ctx, "t1")
	if err != nil {
		t.Fatalf("b.GetTask after a.CreateTask: %v", err)
	}
	if err := b.CreateTask(ctx, testTask("t1")); !errors.Is(err, store.ErrConflict) {
		t.Errorf("b.CreateTask of a's id: %v, want ErrConflict", err)
	}
	stale := *got
	got.StatusMessage = "from b"
	if err := b.UpdateTask(ctx, got); err != nil {
		t.Fatal(err)
	}
	if err := a.UpdateTask(ctx, &stale); !errors.Is(err, store.ErrConflict) {
		t.Errorf("a.UpdateTask with the version b replaced: %v, want ErrConflict", err)
	}
	if x, _ := a.GetTask(ctx, "t1"); x == nil || x.StatusMessage != "from b" {
		t.Errorf("a does not see b's update: %+v", x)
	}

	if err := b.PutInputs(ctx, []record.Input{{TaskID: "t1", Key: "k", Method: "elicitation/create"}}); err != nil {
		t.Fatal(err)
	}
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		firsts []string
	)
	for i := range 20 {
		s, name := a, "a"
		if i%2 == 1 {
			s, name = b, "b"
		}
		wg.Go(func() {
			resp := json.RawMessage(fmt.Sprintf(`{"from":"%s%d"}`, name, i))
			first, err := s.AnswerInput(ctx, "t1", "k", resp, time.Now())
			if err != nil {
				t.Errorf("%s.AnswerInput: %v", name, err)
			}
			if first {
				mu.Lock()
				firsts = append(firsts, string(resp))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(firsts) != 1 {
		t.Fatalf("first=true from %d answers across two stores, want 1: %v", len(firsts), firsts)
	}
	for name, s := range map[string]*Store{"a": a, "b": b} {
		in, err := s.ListInputs(ctx, "t1")
		if err != nil || len(in) != 1 || string(in[0].Response) != firsts[0] {
			t.Errorf("%s.ListInputs = %+v, %v; want the winner %s", name, in, err, firsts[0])
		}
	}
}

// TestConcurrentOpen opens a new file from several goroutines at once: the migrations run
// once and every Open succeeds.
func TestConcurrentOpen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "new.db")
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			s, err := Open(t.Context(), path)
			if err != nil {
				t.Errorf("Open: %v", err)
				return
			}
			s.Close()
		})
	}
	wg.Wait()
	s := openT(t, path)
	var n, v int
	if err := s.r.QueryRow(`SELECT COUNT(*), MAX(version) FROM schema_version`).Scan(&n, &v); err != nil {
		t.Fatal(err)
	}
	if n != len(migrations) || v != len(migrations) {
		t.Errorf("schema_version has %d rows, max %d; want %d", n, v, len(migrations))
	}
}

func TestReopenKeepsData(t *testing.T) {
	path := filepath.Join(t.TempDir(), "re.db")
	s := openT(t, path)
	if err := s.CreateTask(t.Context(), testTask("t1")); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2 := openT(t, path)
	if _, err := s2.GetTask(t.Context(), "t1"); err != nil {
		t.Fatalf("GetTask after reopen: %v", err)
	}
	var mode string
	if err := s2.r.QueryRow(`PRAGMA journal_mode`).Scan(&mode); err != nil || mode != "wal" {
		t.Errorf("journal_mode = %q, %v; want wal", mode, err)
	}
}

func TestRefusesNewerSchema(t *testing.T) {
	path := filepath.Join(t.TempDir(), "newer.db")
	s := openT(t, path)
	if _, err := s.w.Exec(`INSERT INTO schema_version (version, applied_at) VALUES (999, 0)`); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if s, err := Open(t.Context(), path); err == nil || !strings.Contains(err.Error(), "newer") {
		if s != nil {
			s.Close()
		}
		t.Fatalf("Open of a newer schema: %v, want an error", err)
	}
}

func TestReadersCannotWrite(t *testing.T) {
	s := openT(t, filepath.Join(t.TempDir(), "ro.db"))
	if _, err := s.r.Exec(`DELETE FROM tasks`); err == nil {
		t.Errorf("a write through the read pool succeeded")
	}
}

func TestOpenRejectsBadPath(t *testing.T) {
	for _, p := range []string{"", ":memory:", "file:x.db", "a?b.db"} {
		if s, err := Open(t.Context(), p); err == nil {
			s.Close()
			t.Errorf("Open(%q) succeeded", p)
		}
	}
}

// TestListUsesIndex checks the keyset query seeks the listing index instead of scanning.
func TestListUsesIndex(t *testing.T) {
	s := openT(t, filepath.Join(t.TempDir(), "plan.db"))
	rows, err := s.r.Query(`EXPLAIN QUERY PLAN SELECT id FROM tasks WHERE owner = ? AND (created_at, id) < (?, ?)
		ORDER BY created_at DESC, id DESC LIMIT 10`, "a", 1, "x")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	p := strings.Join(plan, "; ")
	if !strings.Contains(p, "tasks_owner_created") || strings.Contains(p, "TEMP B-TREE") {
		t.Errorf("query plan %q does not use tasks_owner_created in order", p)
	}
	t.Logf("plan: %s", p)
}
