package sqlite

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"
)

// TestMigrationFourKeepsRows: a file written at schema version 3 (before the reverse
// route's columns) opens with every task and input intact; the new columns read empty, and
// the upgraded store writes them.
func TestMigrationFourKeepsRows(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v3.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	mustExec := func(q string, args ...any) {
		t.Helper()
		if _, err := db.ExecContext(ctx, q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	mustExec(`CREATE TABLE schema_version (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL) STRICT`)
	for v := 1; v <= 3; v++ {
		mustExec(migrations[v-1])
		mustExec(`INSERT INTO schema_version (version, applied_at) VALUES (?, 0)`, v)
	}
	now := time.Now().UnixMilli()
	mustExec(`INSERT INTO tasks (id, owner, session_id, request_id, idempotency_key, origin, upstream_task_id,
		mode, tool, args_hash, status, status_message, created_at, last_updated_at, ttl_ms, poll_interval_ms,
		upstream_poll_ms, result, rpc_error, outcome, outcome_detail, progress_token, version)
		VALUES ('old', 'session:s', 's', '1', '', 'http://u/mcp', 'up-old', 'translate', 'greet', '', 'working', '',
		?, ?, NULL, 1000, 0, NULL, NULL, 'pending', '', NULL, 4)`, now, now)
	mustExec(`INSERT INTO inputs (task_id, key, method, params, request_id) VALUES ('old', 'k', 'elicitation/create', CAST('{}' AS BLOB), 'b-1')`)
	db.Close()

	s := openT(t, path)
	var v int
	if err := s.r.QueryRow(`SELECT MAX(version) FROM schema_version`).Scan(&v); err != nil || v != len(migrations) {
		t.Fatalf("schema version %d (%v), want %d", v, err, len(migrations))
	}
	got, err := s.GetTask(ctx, "old")
	if err != nil || got.UpstreamTaskID != "up-old" || got.UpstreamSessionID != "" || got.Version != 4 {
		t.Fatalf("old task after migration: %+v, %v", got, err)
	}
	in, err := s.ListInputs(ctx, "old")
	if err != nil || len(in) != 1 || in[0].RequestID != "b-1" || in[0].UpstreamRequestID != nil {
		t.Fatalf("old input after migration: %+v, %v", in, err)
	}
	got.UpstreamSessionID = "sess-new"
	if err := s.UpdateTask(ctx, got); err != nil {
		t.Fatal(err)
	}
	if again, _ := s.GetTask(ctx, "old"); again.UpstreamSessionID != "sess-new" {
		t.Errorf("upstream session after update: %q", again.UpstreamSessionID)
	}
}
