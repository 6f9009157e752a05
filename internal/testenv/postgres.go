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
