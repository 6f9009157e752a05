package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"
)

// PostgresSchema returns a DSN for a fresh schema (named prefix_<random>) in the server of
// TASKBRIDGE_TEST_PG (scripts/test.sh starts one), dropped when t ends. Without the
// variable the test is skipped locally and fails under CI=true.
func PostgresSchema(t testing.TB, prefix string) string {
	t.Helper()
	base := os.Getenv("TASKBRIDGE_TEST_PG")
	if base == "" {
		Missing(t, "TASKBRIDGE_TEST_PG is not set (start a server with: eval \"$(scripts/pg.sh)\")")
	}
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("connect to TASKBRIDGE_TEST_PG: %v", err)
	}
	b := make([]byte, 8)
	rand.Read(b)
	schema := prefix + "_" + hex.EncodeToString(b)
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		admin.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE")
		admin.Close(context.Background())
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// PostgresReadOnly creates a login role that may only read the schema named by dsn's
// search_path (USAGE on the schema, SELECT on the tables it has now) and returns dsn with
// that role as the user. The role is dropped when t ends. The test server trusts local
// connections, so the role needs no password.
func PostgresReadOnly(t testing.TB, dsn string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		t.Fatalf("PostgresReadOnly wants a postgres:// URL, got %q", dsn)
	}
	schema := u.Query().Get("search_path")
	if schema == "" {
		t.Fatalf("PostgresReadOnly: %q has no search_path", dsn)
	}
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	b := make([]byte, 6)
	rand.Read(b)
	role := "tbro_" + hex.EncodeToString(b)
	for _, q := range []string{
		"CREATE ROLE " + role + " LOGIN",
		"GRANT USAGE ON SCHEMA " + schema + " TO " + role,
		"GRANT SELECT ON ALL TABLES IN SCHEMA " + schema + " TO " + role,
	} {
		if _, err := admin.Exec(ctx, q); err != nil {
			admin.Close(ctx)
			t.Fatalf("%s: %v", q, err)
		}
	}
	t.Cleanup(func() {
		c := context.Background()
		admin.Exec(c, "DROP OWNED BY "+role)
		admin.Exec(c, "DROP ROLE "+role)
		admin.Close(c)
	})
	u.User = url.User(role)
	return u.String()
}
