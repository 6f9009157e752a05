package postgres

import (
	"context"
	"errors"
	"testing"

	"github.com/taskbridge/taskbridge/internal/testenv"
	"github.com/taskbridge/taskbridge/record"
	"github.com/taskbridge/taskbridge/store"
)

// TestOpenReadOnlyRole: with a role that may only SELECT, OpenReadOnly reads a migrated
// schema; writes and the heartbeat fail; the read-write Open (which migrates) is refused
// by the server for that role. Nothing the read-only open does changes the schema.
func TestOpenReadOnlyRole(t *testing.T) {
	ctx := context.Background()
	dsn := testDSN(t)
	rw := openT(t, dsn)
	if err := rw.CreateSession(ctx, &record.Session{ID: "s1", ProtocolVersion: "2025-11-25"}); err != nil {
		t.Fatal(err)
	}
	roDSN := testenv.PostgresReadOnly(t, dsn)
	ro, err := OpenReadOnly(ctx, roDSN)
	if err != nil {
		t.Fatalf("OpenReadOnly with a SELECT-only role: %v", err)
	}
	defer ro.Close()
	if sum, err := ro.Summary(ctx); err != nil || sum.Sessions != 1 {
		t.Fatalf("Summary through the read-only role: %+v %v", sum, err)
	}
	if err := ro.CreateSession(ctx, &record.Session{ID: "s2", ProtocolVersion: "2025-11-25"}); err == nil {
		t.Error("CreateSession through the read-only open succeeded")
	}
	if err := ro.CheckWritable(ctx); err == nil {
		t.Error("CheckWritable through the read-only open succeeded")
	}
	if s, err := Open(ctx, roDSN); err == nil {
		s.Close()
		t.Error("the migrating Open succeeded with a SELECT-only role")
	}
}

// TestOpenReadOnlyEmptySchema: an empty schema is ErrNoStore, and stays empty.
func TestOpenReadOnlyEmptySchema(t *testing.T) {
	ctx := context.Background()
	dsn := testDSN(t)
	_, err := OpenReadOnly(ctx, dsn) // even the owner's role: no DDL on this path
	if !errors.Is(err, store.ErrNoStore) {
		t.Fatalf("OpenReadOnly of an empty schema: %v, want ErrNoStore", err)
	}
	pool, err := connect(ctx, dsn, false)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	var n int
	if err := pool.QueryRow(ctx, `SELECT COUNT(*) FROM pg_tables WHERE schemaname = current_schema()`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("the empty schema has %d tables after OpenReadOnly, want 0", n)
	}
}

// TestOpenExistingRefusesEmptySchema: the write-but-never-create open does not build a
// store in an empty schema; on a migrated one it writes.
func TestOpenExistingRefusesEmptySchema(t *testing.T) {
	ctx := context.Background()
	dsn := testDSN(t)
	if _, err := OpenExisting(ctx, dsn); !errors.Is(err, store.ErrNoStore) {
		t.Fatalf("OpenExisting of an empty schema: %v, want ErrNoStore", err)
	}
	openT(t, dsn).Close()
	s, err := OpenExisting(ctx, dsn)
	if err != nil {
		t.Fatalf("OpenExisting of a migrated schema: %v", err)
	}
	defer s.Close()
	if err := s.CheckWritable(ctx); err != nil {
		t.Fatal(err)
	}
}
