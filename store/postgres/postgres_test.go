package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/taskbridge/taskbridge/internal/testenv"
	"github.com/taskbridge/taskbridge/record"
	"github.com/taskbridge/taskbridge/store"
	"github.com/taskbridge/taskbridge/store/storetest"
)

// testDSN returns a DSN for a new, empty schema in the database named by
// TASKBRIDGE_TEST_PG (start one with scripts/pg.sh), dropped when t ends. Each test gets
// its own schema, so runs and tests never see each other's rows.
func testDSN(t testing.TB) string {
	t.Helper()
	base := os.Getenv("TASKBRIDGE_TEST_PG")
	if base == "" {
		testenv.Missing(t, "TASKBRIDGE_TEST_PG is not set (start a server with: eval \"$(scripts/pg.sh)\")")
	}
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("connect to TASKBRIDGE_TEST_PG: %v", err)
	}
	t.Cleanup(func() { admin.Close(context.Background()) })
	b := make([]byte, 8)
	rand.Read(b)
	schema := "tbtest_" + hex.EncodeToString(b)
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatalf("create schema: %v", err)
	}
	t.Cleanup(func() {
		if _, err := admin.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return base + " search_path=" + schema // key=value form
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

func openT(t testing.TB, dsn string) *Store {
	t.Helper()
	s, err := Open(context.Background(), dsn)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestStore(t *testing.T) {
	if os.Getenv("TASKBRIDGE_TEST_PG") == "" {
		testenv.Missing(t, "TASKBRIDGE_TEST_PG is not set (start a server with: eval \"$(scripts/pg.sh)\")")
	}
	storetest.Run(t, func(t *testing.T) store.Store { return openT(t, testDSN(t)) })
}

// TestConcurrentOpen starts several "replicas" on one new schema at once: the advisory
// lock makes them take turns, so the migrations run once and every Open succeeds.
func TestConcurrentOpen(t *testing.T) {
	dsn := testDSN(t)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			s, err := Open(t.Context(), dsn)
			if err != nil {
				t.Errorf("Open: %v", err)
				return
			}
			s.Close()
		})
	}
	wg.Wait()
	s := openT(t, dsn)
	var n, v int
	if err := s.pool.QueryRow(t.Context(), `SELECT COUNT(*), MAX(version) FROM schema_version`).Scan(&n, &v); err != nil {
		t.Fatal(err)
	}
	if n != len(migrations) || v != len(migrations) {
		t.Errorf("schema_version has %d rows, max %d; want %d", n, v, len(migrations))
	}
}

func TestRefusesNewerSchema(t *testing.T) {
	dsn := testDSN(t)
	s := openT(t, dsn)
	if _, err := s.pool.Exec(t.Context(), `INSERT INTO schema_version (version, applied_at) VALUES (999, 0)`); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if s, err := Open(t.Context(), dsn); err == nil || !strings.Contains(err.Error(), "newer") {
		if s != nil {
			s.Close()
		}
		t.Fatalf("Open of a newer schema: %v, want an error", err)
	}
}

// listener runs Listen on s in a goroutine and returns its payloads, and a wait that
// stops it and returns Listen's error.
func listener(t *testing.T, s *Store, channel string) (<-chan string, func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	got := make(chan string, 100)
	done := make(chan error, 1)
	go func() { done <- s.Listen(ctx, channel, func(p string) { got <- p }) }()
	stop := sync.OnceValue(func() error {
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(10 * time.Second):
			t.Error("Listen did not return after cancel")
			return nil
		}
	})
	t.Cleanup(func() { stop() })
	return got, stop
}

func next(t *testing.T, got <-chan string, want string) {
	t.Helper()
	select {
	case p := <-got:
		if p != want {
			t.Fatalf("notification %q, want %q", p, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("no notification, want %q", want)
	}
}

// TestListenNotify sends from one "replica" and receives on another.
func TestListenNotify(t *testing.T) {
	dsn := testDSN(t)
	a, b := openT(t, dsn), openT(t, dsn)
	channel := "task status " + t.Name() // needs quoting: checks Listen quotes it
	got, stop := listener(t, a, channel)
	next(t, got, "") // subscribed

	for _, p := range []string{"t1:completed", "t2:working", `quote'"\`} {
		if err := b.Notify(t.Context(), channel, p); err != nil {
			t.Fatal(err)
		}
		next(t, got, p)
	}
	if err := b.Notify(t.Context(), "other", "x"); err != nil {
		t.Fatal(err)
	}
	if err := b.Notify(t.Context(), channel, ""); err == nil {
		t.Error("Notify with an empty payload succeeded")
	}
	if err := stop(); err != nil {
		t.Errorf("Listen returned %v after cancel, want nil", err)
	}
	select {
	case p := <-got:
		t.Errorf("unexpected notification %q", p)
	default:
	}
}

// TestListenReconnects kills the listening backend: Listen reconnects, says so with
// fn(""), and receives again.
func TestListenReconnects(t *testing.T) {
	defer func(d time.Duration) { listenBackoffMin = d }(listenBackoffMin)
	listenBackoffMin = 10 * time.Millisecond
	dsn := testDSN(t)
	a, b := openT(t, dsn), openT(t, dsn)
	channel := "reconnect_" + hex.EncodeToString([]byte(t.Name()))[:16]
	got, _ := listener(t, a, channel)
	next(t, got, "")

	tag, err := b.pool.Exec(t.Context(), `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE query = $1 AND pid <> pg_backend_pid()`, "LISTEN "+pgx.Identifier{channel}.Sanitize())
	if err != nil || tag.RowsAffected() != 1 {
		t.Fatalf("terminate the listener's backend: %v, %d rows", err, tag.RowsAffected())
	}
	next(t, got, "") // resubscribed
	if err := b.Notify(t.Context(), channel, "after"); err != nil {
		t.Fatal(err)
	}
	next(t, got, "after")
}

// TestCloseStopsListen checks Close ends running Listen calls and refuses new ones.
func TestCloseStopsListen(t *testing.T) {
	s := openT(t, testDSN(t))
	got, _ := listener(t, s, "close_test")
	next(t, got, "")
	done := make(chan error, 1)
	go func() { done <- s.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Close: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return while Listen ran")
	}
	if err := s.Listen(t.Context(), "close_test", func(string) {}); !errors.Is(err, ErrClosed) {
		t.Errorf("Listen after Close: %v, want ErrClosed", err)
	}
}

// TestTwoReplicasAnswerInput races answers from two stores (two replicas): one wins.
func TestTwoReplicasAnswerInput(t *testing.T) {
	dsn := testDSN(t)
	a, b := openT(t, dsn), openT(t, dsn)
	ctx := t.Context()
	now := time.Now()
	task := &record.Task{ID: "t1", Owner: "o", Mode: record.ModeTranslate, Status: record.StatusWorking,
		Outcome: record.OutcomePending, CreatedAt: now, LastUpdatedAt: now}
	if err := a.CreateTask(ctx, task); err != nil {
		t.Fatal(err)
	}
	if err := b.PutInputs(ctx, []record.Input{{TaskID: "t1", Key: "k", Method: "roots/list"}}); err != nil {
		t.Fatal(err)
	}
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		firsts int
	)
	for i := range 20 {
		s := a
		if i%2 == 1 {
			s = b
		}
		wg.Go(func() {
			first, err := s.AnswerInput(ctx, "t1", "k", []byte(`{"roots":[]}`), now)
			if err != nil {
				t.Errorf("AnswerInput: %v", err)
			}
			if first {
				mu.Lock()
				firsts++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if firsts != 1 {
		t.Errorf("%d answers reported first=true across two replicas, want 1", firsts)
	}
}
