package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/internal/testenv"
	"github.com/taskbridge/taskbridge/record"
	"github.com/taskbridge/taskbridge/store/postgres"
)

// runTB runs the command in process and returns stdout, stderr and the error main would
// turn into exit status 1.
func runTB(args ...string) (string, string, error) {
	var out, errb bytes.Buffer
	err := run(context.Background(), args, &out, &errb)
	return out.String(), errb.String(), err
}

// TestReadOnlyCommandsMissingSQLite (acceptance 1): report, tasks list and tasks show on a
// SQLite path where there is no store fail with a message naming the store looked for, and
// create nothing: no file, no -wal, no -shm. tasks reconcile, which writes, does not create
// one either.
func TestReadOnlyCommandsMissingSQLite(t *testing.T) {
	dir := t.TempDir()
	spec := "sqlite:" + filepath.Join(dir, "taskbridge.db")
	for _, args := range [][]string{
		{"report", "--store", spec},
		{"report", "--store", spec, "--json"},
		{"tasks", "list", "--store", spec},
		{"tasks", "show", "some-id", "--store", spec},
		{"tasks", "reconcile", "some-id", "--outcome", "failed", "--store", spec},
	} {
		out, _, err := runTB(args...)
		if err == nil {
			t.Fatalf("taskbridge %v on a missing store: no error; stdout %q", args, out)
		}
		msg := err.Error()
		if !strings.Contains(msg, "no taskbridge store at "+spec) || !strings.Contains(msg, "does not exist") ||
			!strings.Contains(msg, "never creates one") {
			t.Errorf("taskbridge %v: error %q does not say which store was looked for and why", args, msg)
		}
		if out != "" {
			t.Errorf("taskbridge %v printed a result: %q", args, out)
		}
		if ents, _ := os.ReadDir(dir); len(ents) != 0 {
			t.Fatalf("taskbridge %v created %d files in %s", args, len(ents), dir)
		}
	}
	// The same with the store from the environment, as an operator in the wrong directory has it.
	t.Setenv("TASKBRIDGE_STORE", "sqlite:taskbridge.db")
	t.Chdir(dir)
	if _, _, err := runTB("report"); err == nil || !strings.Contains(err.Error(), "no taskbridge store at sqlite:taskbridge.db") {
		t.Errorf("report in a directory without a store: %v", err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("report created %d files in the working directory", len(ents))
	}
}

// TestReadOnlyCommandsForeignSQLite: an SQLite file without the taskbridge schema is not
// taken for an empty store, and is not migrated.
func TestReadOnlyCommandsForeignSQLite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "other.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`CREATE TABLE notes (x TEXT)`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	_, _, err = runTB("report", "--store", "sqlite:"+path)
	if err == nil || !strings.Contains(err.Error(), "holds no taskbridge schema") {
		t.Fatalf("report on a foreign SQLite file: %v", err)
	}
	db, _ = sql.Open("sqlite", path)
	defer db.Close()
	var n int
	db.QueryRow(`SELECT COUNT(*) FROM sqlite_master WHERE type = 'table'`).Scan(&n)
	if n != 1 {
		t.Errorf("the foreign file has %d tables after report, want 1 (untouched)", n)
	}
}

// TestReportTellsNoDataFromNoTraffic: a store without any record, and never written by a
// running bridge, says "no data" (no evidence either way); once a bridge has written to it
// (its heartbeat), or it holds legacy sessions all older than the window, the report says
// nothing depends on the bridge, with the facts that back it.
func TestReportTellsNoDataFromNoTraffic(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tb.db")
	st, err := openStore(context.Background(), "sqlite:"+path)
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	out, _, err := runTB("report", "--store", "sqlite:"+path)
	if err != nil || !strings.Contains(out, "No data: this store holds no session and no task, and no running bridge ever wrote to it") ||
		strings.Contains(out, "nothing depends on the bridge") {
		t.Fatalf("report of an empty store (%v):\n%s", err, out)
	}
	js, _, _ := runTB("report", "--store", "sqlite:"+path, "--json")
	if gjson.Get(js, "evidence").Str != "no_data" {
		t.Errorf("report --json evidence = %q, want no_data", gjson.Get(js, "evidence").Str)
	}

	// A running bridge writes its heartbeat at start: an idle bridge's store, whose
	// sessions were purged after the window, is evidence of no traffic.
	st, _ = openStore(context.Background(), "sqlite:"+path)
	if err := st.CheckWritable(context.Background()); err != nil {
		t.Fatal(err)
	}
	st.Close()
	out, _, err = runTB("report", "--store", "sqlite:"+path)
	if err != nil || !strings.Contains(out, "No legacy client was seen in the window (the store holds 0 sessions and 0 tasks; the last session was seen never;") ||
		!strings.Contains(out, "a running bridge last wrote to it on "+time.Now().UTC().Format("2006-01-02")) || !strings.Contains(out, "nothing depends on the bridge any more") {
		t.Fatalf("report of an idle bridge's store (%v):\n%s", err, out)
	}

	st, _ = openStore(context.Background(), "sqlite:"+path)
	old := time.Now().Add(-60 * 24 * time.Hour).UTC()
	if err := st.CreateSession(context.Background(), &record.Session{ID: "s-old", ProtocolVersion: "2025-11-25",
		ClientInfo: json.RawMessage(`{"name":"old-ide","version":"1"}`), CreatedAt: old, LastSeenAt: old}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	out, _, err = runTB("report", "--store", "sqlite:"+path)
	if err != nil || !strings.Contains(out, "No legacy client was seen in the window (the store holds 1 sessions and 0 tasks; the last session was seen on "+old.Format("2006-01-02")) ||
		!strings.Contains(out, "nothing depends on the bridge any more") {
		t.Fatalf("report with traffic only before the window (%v):\n%s", err, out)
	}
	js, _, _ = runTB("report", "--store", "sqlite:"+path, "--json")
	if gjson.Get(js, "evidence").Str != "no_legacy_traffic_in_window" || gjson.Get(js, "stored.sessions").Int() != 1 ||
		!gjson.Get(js, "stored.lastBridgeWrite").Exists() {
		t.Errorf("report --json: %s", js)
	}
}

// TestReportTerminalSafe: client-supplied names reach the terminal escaped.
func TestReportTerminalSafe(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tb.db")
	st, err := openStore(context.Background(), "sqlite:"+path)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	if err := st.CreateSession(context.Background(), &record.Session{ID: "s1", ProtocolVersion: "2025-11-25",
		ClientInfo: json.RawMessage(`{"name":"evil\u001b[2J\u001b]0;owned\u0007","version":"1\r\n2"}`), CreatedAt: now, LastSeenAt: now}); err != nil {
		t.Fatal(err)
	}
	ttl := int64(60_000)
	if err := st.CreateTask(context.Background(), &record.Task{ID: "t1", Owner: "principal:/a\u001b[31m", SessionID: "s1",
		Tool: "tool\u202e", Status: record.StatusWorking, StatusMessage: "msg\u001b[0m", Mode: record.ModeTranslate,
		CreatedAt: now, LastUpdatedAt: now, TTLMs: &ttl, Outcome: record.OutcomePending}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	for _, args := range [][]string{{"report"}, {"tasks", "list"}, {"tasks", "show", "t1"}} {
		out, _, err := runTB(append(args, "--store", "sqlite:"+path)...)
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		if strings.ContainsAny(out, "\x1b\x07\r\u202e") {
			t.Errorf("taskbridge %v printed raw control characters:\n%q", args, out)
		}
		if args[0] == "report" && !strings.Contains(out, `evil\x1b[2J\x1b]0;owned\x07`) {
			t.Errorf("report does not show the escaped name:\n%s", out)
		}
	}
}

// TestReadOnlyCommandsPostgresRole (acceptance 1): with a role that may only SELECT, report,
// tasks list and tasks show work against a PostgreSQL store, and nothing is migrated: a
// schema left at version 1 stays at version 1. With that role, an empty schema is an error
// and stays empty.
func TestReadOnlyCommandsPostgresRole(t *testing.T) {
	ctx := context.Background()
	dsn := testenv.PostgresSchema(t, "tbro")
	st, err := postgres.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	ttl := int64(60_000)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(st.CreateSession(ctx, &record.Session{ID: "s1", ProtocolVersion: "2025-11-25",
		ClientInfo: json.RawMessage(`{"name":"pg-ide","version":"3.1"}`), CreatedAt: now, LastSeenAt: now}))
	must(st.CreateTask(ctx, &record.Task{ID: "pg-task", Owner: "session:s1", SessionID: "s1", Tool: "slow_compute",
		Status: record.StatusWorking, Mode: record.ModeTranslate, CreatedAt: now, LastUpdatedAt: now, TTLMs: &ttl, Outcome: record.OutcomePending}))
	st.Close()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	// Back to schema version 1, as a store not yet migrated by a newer serve.
	_, err = conn.Exec(ctx, `ALTER TABLE tasks DROP COLUMN trace_parent; DROP TABLE heartbeat; DELETE FROM schema_version WHERE version > 1`)
	must(err)
	ro := testenv.PostgresReadOnly(t, dsn)

	out, _, err := runTB("report", "--store", ro)
	if err != nil || !strings.Contains(out, "pg-ide") || !strings.Contains(out, "Tasks in flight: 1") {
		t.Fatalf("report with a read-only role (%v):\n%s", err, out)
	}
	out, _, err = runTB("tasks", "list", "--store", ro)
	if err != nil || !strings.Contains(out, "pg-task") {
		t.Fatalf("tasks list with a read-only role (%v):\n%s", err, out)
	}
	out, _, err = runTB("tasks", "show", "pg-task", "--store", ro, "--json")
	if err != nil || gjson.Get(out, "status").Str != "working" {
		t.Fatalf("tasks show with a read-only role (%v):\n%s", err, out)
	}
	var v int
	var heartbeat bool
	must(conn.QueryRow(ctx, `SELECT MAX(version), to_regclass('heartbeat') IS NOT NULL FROM schema_version`).Scan(&v, &heartbeat))
	if v != 1 || heartbeat {
		t.Errorf("after the read-only commands: schema version %d, heartbeat table %v; want 1 and none (nothing migrated)", v, heartbeat)
	}

	empty := testenv.PostgresSchema(t, "tbro_empty")
	roEmpty := testenv.PostgresReadOnly(t, empty)
	if _, _, err := runTB("report", "--store", roEmpty); err == nil || !strings.Contains(err.Error(), "no taskbridge store at") ||
		!strings.Contains(err.Error(), "no taskbridge schema") {
		t.Errorf("report on an empty schema: %v", err)
	}
	// Even the owner's role: the read-only path never runs DDL.
	if _, _, err := runTB("report", "--store", empty); err == nil {
		t.Error("report on an empty schema with the owner's role succeeded")
	}
	ec, err := pgx.Connect(ctx, empty)
	must(err)
	defer ec.Close(ctx)
	var n int
	must(ec.QueryRow(ctx, `SELECT COUNT(*) FROM pg_tables WHERE schemaname = current_schema()`).Scan(&n))
	if n != 0 {
		t.Errorf("the empty schema has %d tables after report, want 0", n)
	}
}
