// Package sqlite is the embedded store.Store: one SQLite file in WAL mode, through the pure
// Go driver modernc.org/sqlite. It is the default for a single replica.
//
// Connections: one writer connection runs every write, so writes in this process queue in
// database/sql instead of fighting over SQLite's lock, and a small pool of read-only
// connections serves reads, which in WAL mode never wait for the writer. Several processes
// may share one file: SQLite's file lock serializes their writers, busy_timeout makes a
// writer wait for the lock instead of failing, and transactions begin IMMEDIATE so a
// transaction never has to upgrade a read lock (the upgrade is what fails with
// SQLITE_BUSY regardless of the timeout).
//
// Every compare-and-swap (UpdateTask, AnswerInput) is a single UPDATE whose WHERE clause
// holds the condition, so it is atomic across connections and processes alike.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v5"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/taskbridge/taskbridge/store"
	"github.com/taskbridge/taskbridge/store/internal/sqlrec"
)

// busyTimeoutMs is how long a writer waits for another process's write lock.
const busyTimeoutMs = 10_000

// synchronous is the durability level. In WAL mode NORMAL never corrupts the database
// and loses nothing when the process dies (an OOM kill, a panic, a redeploy): a commit has
// reached the OS page cache when the WAL write returns. Only an OS crash or power loss can
// roll back the commits since the last WAL sync (at most those since the last
// checkpoint). Those are events that also drop every client connection, and clients then
// re-ask by id; the residual risk is a record lost after its id was handed out. FULL
// would close that at one fsync per commit: measured here ~1,100-3,300 creations/s
// sequential and ~900-1,000/s from 8 goroutines under load, against ~6,000/s with NORMAL,
// so FULL sits at the 1,000/s target rather than well above it. Deployments that need
// power-loss durability should run PostgreSQL (or raise this to FULL).
const synchronous = "NORMAL"

// Store is the SQLite store. It is safe for concurrent use; see the package comment.
type Store struct {
	w *sql.DB // one connection: every write goes through it
	r *sql.DB // read-only connections

	// taskCols and inputCols are the SELECT lists of tasks and inputs for the file's
	// schema version (sqlrec.SelectList: a read-only open of an older file).
	taskCols, inputCols, sessionCols string

	closeOnce sync.Once
	closeErr  error
}

var _ store.Store = (*Store)(nil)

// Mode says what Open may do to the file.
type Mode int

const (
	// ReadWrite creates the file when it is missing and brings its schema up to date
	// (serve, stdio, demo).
	ReadWrite Mode = iota
	// ReadWriteExisting writes, but only to a file that exists and already holds the
	// taskbridge schema; it may migrate that schema forward (tasks reconcile).
	ReadWriteExisting
	// ReadOnly opens an existing file holding the schema with SQLite's mode=ro: nothing
	// is ever created, migrated or written (report, tasks list, tasks show).
	ReadOnly
)

// Open opens (creating if needed) the database file at path and brings its schema up to
// date. path is a file system path; it must not contain '?'.
func Open(ctx context.Context, path string) (*Store, error) { return OpenMode(ctx, path, ReadWrite) }

// OpenMode opens the database file at path as mode allows. ReadWriteExisting and ReadOnly
// return an error wrapping store.ErrNoStore when the file is missing or holds no
// taskbridge schema.
func OpenMode(ctx context.Context, path string, mode Mode) (*Store, error) {
	if path == "" || strings.ContainsAny(path, "?#") || strings.HasPrefix(path, ":memory:") || strings.HasPrefix(path, "file:") {
		return nil, fmt.Errorf("sqlite: invalid database path %q", path)
	}
	if mode != ReadWrite {
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%w: the file %s does not exist", store.ErrNoStore, path)
		} else if err != nil {
			return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
		}
	}
	if mode == ReadOnly {
		return openReadOnly(ctx, path)
	}
	name := path
	if mode == ReadWriteExisting {
		name = uriOf(path, "rw") // SQLite refuses to create the file
	}
	w, err := openDB(name, url.Values{
		"_journal_mode": {"WAL"},
		"_synchronous":  {synchronous},
		"_txlock":       {"immediate"},
	}, 1)
	if err != nil {
		return nil, err
	}
	if mode == ReadWriteExisting {
		if err := requireSchema(ctx, w, path); err != nil {
			w.Close()
			return nil, err
		}
	}
	// The writer sets WAL mode (persistent in the file) and migrates before any reader
	// opens, so readers never see a half-built schema.
	if err := retryBusy(ctx, func() error { return migrate(ctx, w) }); err != nil {
		w.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	r, err := openDB(name, url.Values{"_query_only": {"1"}}, max(4, runtime.NumCPU()))
	if err == nil {
		err = retryBusy(ctx, func() error { return r.PingContext(ctx) })
	}
	if err != nil {
		w.Close()
		if r != nil {
			r.Close()
		}
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	return newStore(w, r, len(migrations)), nil
}

// newStore is a Store over the two pools of a file at schema version v.
func newStore(w, r *sql.DB, v int) *Store {
	empty := func(col string) string {
		if col == "upstream_session_id" || col == "trace_parent" || col == "upstream_session" || col == "client_caps" {
			return "''"
		}
		return "NULL"
	}
	return &Store{w: w, r: r, taskCols: sqlrec.SelectList(sqlrec.TaskColumns, v, empty),
		inputCols: sqlrec.SelectList(sqlrec.InputColumns, v, empty), sessionCols: sqlrec.SelectList(sqlrec.SessionColumns, v, empty)}
}

// openReadOnly opens both pools with mode=ro, so every write fails with SQLITE_READONLY
// and a missing file is never created, after checking the schema is there.
func openReadOnly(ctx context.Context, path string) (*Store, error) {
	name := uriOf(path, "ro")
	w, err := openDB(name, url.Values{"_query_only": {"1"}}, 1)
	if err != nil {
		return nil, err
	}
	r, err := openDB(name, url.Values{"_query_only": {"1"}}, max(4, runtime.NumCPU()))
	if err != nil {
		w.Close()
		return nil, err
	}
	if err := requireSchema(ctx, r, path); err != nil {
		w.Close()
		r.Close()
		return nil, err
	}
	v, err := schemaVersion(ctx, r)
	if err != nil {
		w.Close()
		r.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	return newStore(w, r, v), nil
}

// uriOf is the file: URI of path with SQLite's mode parameter (ro: read-only; rw: read
// and write, never create).
func uriOf(path, mode string) string {
	return "file:" + (&url.URL{Path: path}).EscapedPath() + "?mode=" + mode
}

// requireSchema fails with store.ErrNoStore unless db holds a taskbridge schema this
// build can read (version 1 up to the newest it knows).
func requireSchema(ctx context.Context, db *sql.DB, path string) error {
	v, err := schemaVersion(ctx, db)
	if err != nil {
		return fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	switch {
	case v == 0:
		return fmt.Errorf("%w: %s holds no taskbridge schema (taskbridge serve creates it)", store.ErrNoStore, path)
	case v > len(migrations):
		return fmt.Errorf("sqlite: open %s: database schema version %d is newer than this build knows (%d)", path, v, len(migrations))
	}
	return nil
}

// openDB opens a pool of at most conns connections with the settings every connection
// needs plus extra.
func openDB(name string, extra url.Values, conns int) (*sql.DB, error) {
	q := url.Values{
		"_busy_timeout": {fmt.Sprint(busyTimeoutMs)},
		"_foreign_keys": {"1"},
	}
	for k, v := range extra {
		q[k] = v
	}
	sep := "?"
	if strings.Contains(name, "?") {
		sep = "&" // a file: URI with its mode
	}
	db, err := sql.Open("sqlite", name+sep+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", name, err)
	}
	db.SetMaxOpenConns(conns)
	db.SetMaxIdleConns(conns)
	db.SetConnMaxLifetime(0)
	db.SetConnMaxIdleTime(0)
	return db, nil
}

// retryBusy runs fn again while it fails with SQLITE_BUSY, for up to the busy timeout.
// SQLite returns SQLITE_BUSY without waiting in a few cases, the one that matters being a
// new file that another process is converting to WAL mode at the same moment. The waits
// are cenkalti/backoff/v5's: 15 ms ±67% (5 to 25 ms), so two processes do not collide again
// in step. Any other error, or the last SQLITE_BUSY, is returned as fn gave it (ctx's
// error when ctx ends first).
func retryBusy(ctx context.Context, fn func() error) error {
	bo := &backoff.ExponentialBackOff{InitialInterval: 15 * time.Millisecond, RandomizationFactor: 0.67,
		Multiplier: 1, MaxInterval: 25 * time.Millisecond}
	_, err := backoff.Retry(ctx, func() (struct{}, error) {
		err := fn()
		var se *sqlite.Error
		if err != nil && (!errors.As(err, &se) || se.Code()&0xff != sqlite3.SQLITE_BUSY) {
			return struct{}{}, backoff.Permanent(err)
		}
		return struct{}{}, err
	}, backoff.WithBackOff(bo), backoff.WithMaxElapsedTime(busyTimeoutMs*time.Millisecond))
	return err
}

// Ping checks both pools can reach the file.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.w.PingContext(ctx); err != nil {
		return fmt.Errorf("sqlite: ping: %w", err)
	}
	if err := s.r.PingContext(ctx); err != nil {
		return fmt.Errorf("sqlite: ping: %w", err)
	}
	return nil
}

// CheckWritable commits a new heartbeat time through the writer connection: a real write,
// so a file that became read-only or a full disk fails it.
func (s *Store) CheckWritable(ctx context.Context) error {
	_, err := s.w.ExecContext(ctx, `INSERT INTO heartbeat (id, at) VALUES (1, ?)
		ON CONFLICT (id) DO UPDATE SET at = MAX(excluded.at, heartbeat.at + 1)`, time.Now().UnixMilli())
	if err != nil {
		return fmt.Errorf("sqlite: heartbeat write: %w", err)
	}
	return nil
}

// Close closes the database. It is safe to call more than once; later calls return what
// the first returned.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.closeErr = errors.Join(s.r.Close(), s.w.Close())
	})
	return s.closeErr
}

// mapErr turns driver errors into the store's error values, keeping the original in the
// chain for the log.
func mapErr(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, sql.ErrNoRows) {
		return store.ErrNotFound
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() {
		case sqlite3.SQLITE_CONSTRAINT_UNIQUE, sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY:
			return fmt.Errorf("%w: %w", store.ErrConflict, err)
		case sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY:
			return fmt.Errorf("%w: %w", store.ErrNotFound, err)
		}
	}
	return err
}

// rowsAffected returns how many rows res changed.
func rowsAffected(res sql.Result, err error) (int64, error) {
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}
