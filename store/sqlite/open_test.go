package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/taskbridge/taskbridge/record"
	"github.com/taskbridge/taskbridge/store"
)

// TestOpenModesNeverCreate: the read-only open and the write-but-never-create open both
// refuse a missing file with store.ErrNoStore and leave no file behind; a file without the
// taskbridge schema (an empty or foreign SQLite file) is refused the same way and is not
// migrated.
func TestOpenModesNeverCreate(t *testing.T) {
	ctx := context.Background()
	for _, mode := range []Mode{ReadOnly, ReadWriteExisting} {
		dir := t.TempDir()
		missing := filepath.Join(dir, "nope.db")
		_, err := OpenMode(ctx, missing, mode)
		if !errors.Is(err, store.ErrNoStore) || !strings.Contains(err.Error(), missing) {
			t.Errorf("mode %d on a missing file: err = %v, want ErrNoStore naming the path", mode, err)
		}
		if ents, _ := os.ReadDir(dir); len(ents) != 0 {
			t.Errorf("mode %d on a missing file left %d files behind", mode, len(ents))
		}

		foreign := filepath.Join(dir, "foreign.db")
		db, err := sql.Open("sqlite", foreign)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(`CREATE TABLE other (x INTEGER)`); err != nil {
			t.Fatal(err)
		}
		db.Close()
		_, err = OpenMode(ctx, foreign, mode)
		if !errors.Is(err, store.ErrNoStore) || !strings.Contains(err.Error(), "no taskbridge schema") {
			t.Errorf("mode %d on a foreign SQLite file: err = %v, want ErrNoStore", mode, err)
		}
		db, _ = sql.Open("sqlite", foreign)
		var n int
		db.QueryRow(`SELECT COUNT(*) FROM sqlite_master WHERE name = 'schema_version'`).Scan(&n)
		db.Close()
		if n != 0 {
			t.Errorf("mode %d migrated a foreign file", mode)
		}
	}
}

// TestReadOnlyStore: a migrated file opens read-only; reads work, every write and the
// readiness heartbeat fail, and nothing is changed.
func TestReadOnlyStore(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "tb.db")
	rw := openT(t, path)
	if err := rw.CreateTask(ctx, testTask("kept")); err != nil {
		t.Fatal(err)
	}
	rw.Close()

	ro, err := OpenMode(ctx, path, ReadOnly)
	if err != nil {
		t.Fatalf("OpenMode ReadOnly: %v", err)
	}
	defer ro.Close()
	if got, err := ro.GetTask(ctx, "kept"); err != nil || got.ID != "kept" {
		t.Fatalf("GetTask on the read-only store: %v %v", got, err)
	}
	if err := ro.CreateTask(ctx, testTask("new")); err == nil {
		t.Error("CreateTask on a read-only store succeeded")
	}
	if err := ro.CheckWritable(ctx); err == nil {
		t.Error("CheckWritable on a read-only store succeeded")
	}
	if ts, _ := ro.QueryTasks(ctx, store.TaskQuery{}); len(ts) != 1 {
		t.Errorf("after refused writes: %d tasks, want 1", len(ts))
	}
}

// TestReadWriteExistingMigratesForward: reconcile's open writes to a store that exists,
// and brings an older schema forward (as serve would).
func TestReadWriteExistingMigratesForward(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "tb.db")
	openT(t, path).Close()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	// Back to version 1, as a store written before the heartbeat existed.
	if _, err := db.Exec(`DROP TABLE heartbeat; ALTER TABLE tasks DROP COLUMN upstream_session_id; ALTER TABLE tasks DROP COLUMN trace_parent; ALTER TABLE tasks DROP COLUMN client_caps;
		ALTER TABLE inputs DROP COLUMN upstream_request_id; ALTER TABLE sessions DROP COLUMN upstream_session;
		DELETE FROM schema_version WHERE version >= 2`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	s, err := OpenMode(ctx, path, ReadWriteExisting)
	if err != nil {
		t.Fatalf("OpenMode ReadWriteExisting: %v", err)
	}
	defer s.Close()
	if err := s.CheckWritable(ctx); err != nil {
		t.Fatalf("CheckWritable after the forward migration: %v", err)
	}
	if err := s.CreateTask(ctx, testTask("w")); err != nil {
		t.Fatalf("CreateTask: %v", err)
	}
}

// TestReadOnlyAcceptsOlderSchema: an operator command built after a migration still reads
// a store the fleet has not migrated yet (version 1 has every table the commands read).
func TestReadOnlyAcceptsOlderSchema(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "tb.db")
	rw := openT(t, path)
	if err := rw.CreateTask(ctx, testTask("old")); err != nil {
		t.Fatal(err)
	}
	if err := rw.PutInputs(ctx, []record.Input{{TaskID: "old", Key: "k", Method: "roots/list"}}); err != nil {
		t.Fatal(err)
	}
	rw.Close()
	db, _ := sql.Open("sqlite", path)
	if _, err := db.Exec(`DROP TABLE heartbeat; ALTER TABLE tasks DROP COLUMN upstream_session_id; ALTER TABLE tasks DROP COLUMN trace_parent; ALTER TABLE tasks DROP COLUMN client_caps;
		ALTER TABLE inputs DROP COLUMN upstream_request_id; ALTER TABLE sessions DROP COLUMN upstream_session;
		DELETE FROM schema_version WHERE version >= 2`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	ro, err := OpenMode(ctx, path, ReadOnly)
	if err != nil {
		t.Fatalf("OpenMode ReadOnly on a version-1 store: %v", err)
	}
	defer ro.Close()
	if _, err := ro.Summary(ctx); err != nil {
		t.Fatal(err)
	}
	// Columns of later migrations read empty on the older schema.
	if ts, err := ro.QueryTasks(ctx, store.TaskQuery{}); err != nil || len(ts) != 1 || ts[0].UpstreamSessionID != "" || ts[0].TraceParent != "" {
		t.Errorf("QueryTasks on a version-1 store: %v, %v", ts, err)
	}
	if in, err := ro.ListInputs(ctx, "old"); err != nil || len(in) != 1 || in[0].UpstreamRequestID != nil {
		t.Errorf("ListInputs on a version-1 store: %v, %v", in, err)
	}
	v, _ := schemaVersion(ctx, ro.r)
	if v != 1 {
		t.Errorf("schema version after a read-only open: %d, want 1 (untouched)", v)
	}
}
