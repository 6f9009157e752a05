package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// migrations holds the schema changes in order; migrations[i] brings the schema to version
// i+1. Append only: a released migration never changes.
var migrations = []string{
	// 1: sessions, tasks, inputs.
	`
CREATE TABLE sessions (
	id                  TEXT PRIMARY KEY,
	protocol_version    TEXT NOT NULL,
	client_info         BLOB,
	client_capabilities BLOB,
	principal           TEXT NOT NULL,
	created_at          INTEGER NOT NULL,
	last_seen_at        INTEGER NOT NULL,
	closed              INTEGER NOT NULL DEFAULT 0
) STRICT;

CREATE TABLE tasks (
	id               TEXT PRIMARY KEY,
	owner            TEXT NOT NULL,
	session_id       TEXT NOT NULL,
	request_id       TEXT NOT NULL,
	idempotency_key  TEXT NOT NULL,
	origin           TEXT NOT NULL,
	upstream_task_id TEXT NOT NULL,
	mode             TEXT NOT NULL,
	tool             TEXT NOT NULL,
	args_hash        TEXT NOT NULL,
	status           TEXT NOT NULL,
	status_message   TEXT NOT NULL,
	created_at       INTEGER NOT NULL,
	last_updated_at  INTEGER NOT NULL,
	ttl_ms           INTEGER,
	poll_interval_ms INTEGER NOT NULL,
	upstream_poll_ms INTEGER NOT NULL,
	result           BLOB,
	rpc_error        BLOB,
	outcome          TEXT NOT NULL,
	outcome_detail   TEXT NOT NULL,
	progress_token   BLOB,
	version          INTEGER NOT NULL
) STRICT;

CREATE INDEX tasks_owner_created ON tasks (owner, created_at DESC, id DESC);
CREATE UNIQUE INDEX tasks_session_request ON tasks (session_id, request_id) WHERE request_id != '';
CREATE UNIQUE INDEX tasks_owner_idempotency ON tasks (owner, idempotency_key) WHERE idempotency_key != '';
CREATE INDEX tasks_status ON tasks (status);

CREATE TABLE inputs (
	task_id      TEXT NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
	key          TEXT NOT NULL,
	method       TEXT NOT NULL,
	params       BLOB,
	request_id   TEXT NOT NULL,
	delivered_at INTEGER,
	response     BLOB,
	answered_at  INTEGER,
	forwarded_at INTEGER,
	PRIMARY KEY (task_id, key)
) STRICT;

CREATE UNIQUE INDEX inputs_request ON inputs (request_id) WHERE request_id != '';
`,
	// 2: the heartbeat row readiness writes (Store.CheckWritable).
	`
CREATE TABLE heartbeat (
	id INTEGER PRIMARY KEY CHECK (id = 1),
	at INTEGER NOT NULL
) STRICT;
`,
	// 3: nothing. PostgreSQL's migration 3 holds what replicas coordinate through (store.Shared);
	// one SQLite process needs none of it. Kept so that both stores number their
	// migrations alike (sqlrec.SelectList reads one version table for both).
	`SELECT 1;`,
	// 4: the reverse route's records: the upstream session a 2025-11-25 task lives in, and
	// the upstream's JSON-RPC id of each input request it relayed.
	`
ALTER TABLE tasks ADD COLUMN upstream_session_id TEXT NOT NULL DEFAULT '';
ALTER TABLE inputs ADD COLUMN upstream_request_id BLOB;
`,
	// 5: the create span's trace context on each task (internal/trace), written once.
	`
ALTER TABLE tasks ADD COLUMN trace_parent TEXT NOT NULL DEFAULT '';
`,
	// 6: the legacy pass-through's records: the upstream session a client session is
	// forwarded over, adopted after a restart (record.Session.UpstreamSessionID).
	`ALTER TABLE sessions ADD COLUMN upstream_session TEXT NOT NULL DEFAULT '';`,
	// 7: the reverse route's records: the capability set the creating request declared
	// (record.Task.ClientCaps), kept for the upstream session adopted after a restart.
	`ALTER TABLE tasks ADD COLUMN client_caps TEXT NOT NULL DEFAULT '';`,
}

// schemaVersion returns the schema version of db, 0 when it has no schema_version table.
func schemaVersion(ctx context.Context, db *sql.DB) (int, error) {
	var n int
	if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'`).Scan(&n); err != nil {
		return 0, fmt.Errorf("schema version: %w", err)
	}
	if n == 0 {
		return 0, nil
	}
	var v int
	if err := db.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_version`).Scan(&v); err != nil {
		return 0, fmt.Errorf("schema version: %w", err)
	}
	return v, nil
}

// migrate applies the migrations the database lacks, in one IMMEDIATE transaction, so two
// processes opening a new file together apply each migration once. A database written by
// a newer taskbridge (a version we do not know) is refused rather than guessed at.
func migrate(ctx context.Context, db *sql.DB) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_version (
		version    INTEGER PRIMARY KEY,
		applied_at INTEGER NOT NULL
	) STRICT`); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	var cur int
	if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_version`).Scan(&cur); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if cur > len(migrations) {
		return fmt.Errorf("migrate: database schema version %d is newer than this build knows (%d)", cur, len(migrations))
	}
	for v := cur + 1; v <= len(migrations); v++ {
		if _, err := tx.ExecContext(ctx, migrations[v-1]); err != nil {
			return fmt.Errorf("migrate to version %d: %w", v, err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO schema_version (version, applied_at) VALUES (?, ?)`, v, time.Now().UnixMilli()); err != nil {
			return fmt.Errorf("migrate to version %d: %w", v, err)
		}
	}
	return tx.Commit()
}
