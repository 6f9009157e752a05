// Package postgres is the store.Store for several replicas: PostgreSQL through pgx/v5,
// with LISTEN/NOTIFY to tell the replica that holds a client's stream about status
// changes made by another.
//
// Every compare-and-swap (UpdateTask, AnswerInput) is a single UPDATE whose WHERE clause
// holds the condition; under PostgreSQL's row locking exactly one of several concurrent
// updates of a row matches, whichever replica sends it.
//
// Column types mirror the SQLite store: times are bigint unix milliseconds, JSON is the
// json type (which keeps the exact bytes, unlike jsonb), and ids and keys are text
// COLLATE "C" so ordering is by bytes, as in SQLite, whatever the database's locale.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/taskbridge/taskbridge/store"
	"github.com/taskbridge/taskbridge/store/internal/sqlrec"
)

// ErrClosed is returned by Listen after Close.
var ErrClosed = errors.New("postgres: store closed")

// Store is the PostgreSQL store. It is safe for concurrent use by many goroutines and many
// processes.
type Store struct {
	pool *pgxpool.Pool

	// taskCols and inputCols are the SELECT lists of tasks and inputs for the schema's
	// version (sqlrec.SelectList: a read-only open of an older schema).
	taskCols, inputCols, sessionCols string

	// done is cancelled by Close to stop every Listen call.
	done   context.Context
	cancel context.CancelFunc

	mu        sync.Mutex // guards closed and Add on listeners
	closed    bool
	listeners sync.WaitGroup // running Listen calls

	closeOnce sync.Once
}

var _ store.Store = (*Store)(nil)

// Open connects to the database named by dsn (a URL or key=value string as pgx accepts;
// pool settings such as pool_max_conns go in it too) and brings the schema up to date.
func Open(ctx context.Context, dsn string) (*Store, error) {
	pool, err := connect(ctx, dsn, false)
	if err != nil {
		return nil, err
	}
	if err := migrate(ctx, pool); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres: open: %w", err)
	}
	return newStore(pool), nil
}

// OpenExisting is Open for a schema that must already hold the taskbridge tables (an
// operator command that writes, tasks reconcile): an empty schema is an error wrapping
// store.ErrNoStore instead of a new store; an older schema is migrated forward.
func OpenExisting(ctx context.Context, dsn string) (*Store, error) {
	pool, err := connect(ctx, dsn, false)
	if err != nil {
		return nil, err
	}
	if err := requireSchema(ctx, pool); err != nil {
		pool.Close()
		return nil, err
	}
	if err := migrate(ctx, pool); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres: open: %w", err)
	}
	return newStore(pool), nil
}

// OpenReadOnly connects for the operator commands that only read (report, tasks list,
// tasks show): no DDL, no write, so a role with only USAGE on the schema and SELECT on its
// tables will do. Every transaction is read-only (default_transaction_read_only), so a
// write by mistake fails instead of landing. The schema must exist: an error wrapping
// store.ErrNoStore otherwise.
func OpenReadOnly(ctx context.Context, dsn string) (*Store, error) {
	pool, err := connect(ctx, dsn, true)
	if err != nil {
		return nil, err
	}
	if err := requireSchema(ctx, pool); err != nil {
		pool.Close()
		return nil, err
	}
	s := newStore(pool)
	var v int
	if err := pool.QueryRow(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_version`).Scan(&v); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres: open: schema version: %w", err)
	}
	s.setColumns(v)
	return s, nil
}

// connect opens the pool (read-only sessions when ro).
func connect(ctx context.Context, dsn string, ro bool) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("postgres: parse dsn: %w", err)
	}
	if ro {
		cfg.ConnConfig.RuntimeParams["default_transaction_read_only"] = "on"
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: open: %w", err)
	}
	return pool, nil
}

func newStore(pool *pgxpool.Pool) *Store {
	done, cancel := context.WithCancel(context.Background())
	s := &Store{pool: pool, done: done, cancel: cancel}
	s.setColumns(len(migrations))
	return s
}

// setColumns sets the SELECT lists for a schema at version v.
func (s *Store) setColumns(v int) {
	empty := func(col string) string {
		if col == "upstream_session_id" || col == "trace_parent" || col == "upstream_session" || col == "client_caps" {
			return "''::text"
		}
		return "NULL::json"
	}
	s.taskCols = sqlrec.SelectList(sqlrec.TaskColumns, v, empty)
	s.inputCols = sqlrec.SelectList(sqlrec.InputColumns, v, empty)
	s.sessionCols = sqlrec.SelectList(sqlrec.SessionColumns, v, empty)
}

// CheckWritable commits a new heartbeat time: a real write, so a read-only role, a
// standby or a full disk fails it.
func (s *Store) CheckWritable(ctx context.Context) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO heartbeat (id, at) VALUES (1, $1)
		ON CONFLICT (id) DO UPDATE SET at = GREATEST(EXCLUDED.at, heartbeat.at + 1)`, time.Now().UnixMilli())
	if err != nil {
		return fmt.Errorf("postgres: heartbeat write: %w", err)
	}
	return nil
}

// Ping checks the database is reachable.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.pool.Ping(ctx); err != nil {
		return fmt.Errorf("postgres: ping: %w", err)
	}
	return nil
}

// Close stops every Listen call, waits for them to return, then closes the pool. It is
// safe to call more than once.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
		s.cancel()
		s.listeners.Wait()
		s.pool.Close()
	})
	return nil
}

// mapErr turns driver errors into the store's error values, keeping the original in the
// chain for the log.
func mapErr(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return store.ErrNotFound
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case "23505": // unique_violation
			return fmt.Errorf("%w: %w", store.ErrConflict, err)
		case "23503": // foreign_key_violation
			return fmt.Errorf("%w: %w", store.ErrNotFound, err)
		}
	}
	return err
}
