package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestMigrationFourKeepsRows: a schema written at version 3 (before the reverse route's
// columns) is read by the read-only open as it is (the new columns read empty), then opens
// with every task and input intact; the upgraded store writes the new columns.
func TestMigrationFourKeepsRows(t *testing.T) {
	dsn := testDSN(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := conn.Exec(ctx, q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	exec(`CREATE TABLE schema_version (version integer PRIMARY KEY, applied_at bigint NOT NULL)`)
	for v := 1; v <= 3; v++ {
		exec(migrations[v-1])
		exec(`INSERT INTO schema_version (version, applied_at) VALUES ($1, 0)`, v)
	}
	now := time.Now().UnixMilli()
	exec(`INSERT INTO tasks (id, owner, session_id, request_id, idempotency_key, origin, upstream_task_id,
		mode, tool, args_hash, status, status_message, created_at, last_updated_at, ttl_ms, poll_interval_ms,
		upstream_poll_ms, result, rpc_error, outcome, outcome_detail, progress_token, version)
		VALUES ('old', 'session:s', 's', '1', '', 'http://u/mcp', 'up-old', 'translate', 'greet', '', 'working', '',
		$1, $2, NULL, 1000, 0, NULL, NULL, 'pending', '', NULL, 4)`, now, now)
	exec(`INSERT INTO inputs (task_id, key, method, params, request_id) VALUES ('old', 'k', 'elicitation/create', '{}', 'b-1')`)
	conn.Close(ctx)

	ro, err := OpenReadOnly(ctx, dsn)
	if err != nil {
		t.Fatalf("OpenReadOnly on version 3: %v", err)
	}
	if got, err := ro.GetTask(ctx, "old"); err != nil || got.UpstreamSessionID != "" {
		t.Errorf("read-only GetTask on version 3: %+v, %v", got, err)
	}
	if in, err := ro.ListInputs(ctx, "old"); err != nil || len(in) != 1 || in[0].UpstreamRequestID != nil {
		t.Errorf("read-only ListInputs on version 3: %+v, %v", in, err)
	}
	ro.Close()

	s := openT(t, dsn)
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
