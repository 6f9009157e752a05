package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/taskbridge/taskbridge/store"
)

// migrateLockKey is the pg_advisory_xact_lock key that serializes migrations: replicas
// starting together take turns, and all but the first find nothing to do.
const migrateLockKey = 0x7461736b62726467 // "taskbrdg"

// migrations holds the schema changes in order; migrations[i] brings the schema to version
// i+1. Append only: a released migration never changes. Tables are created in the first
// schema of the connection's search_path.
var migrations = []string{
	// 1: sessions, tasks, inputs.
	`
CREATE TABLE sessions (
	id                  text COLLATE "C" PRIMARY KEY,
	protocol_version    text NOT NULL,
	client_info         json,
	client_capabilities json,
	principal           text NOT NULL,
	created_at          bigint NOT NULL,
	last_seen_at        bigint NOT NULL,
	closed              boolean NOT NULL DEFAULT false
);

CREATE TABLE tasks (
	id               text COLLATE "C" PRIMARY KEY,
	owner            text COLLATE "C" NOT NULL,
	session_id       text COLLATE "C" NOT NULL,
	request_id       text COLLATE "C" NOT NULL,
	idempotency_key  text COLLATE "C" NOT NULL,
	origin           text NOT NULL,
	upstream_task_id text NOT NULL,
	mode             text NOT NULL,
	tool             text NOT NULL,
	args_hash        text NOT NULL,
	status           text NOT NULL,
	status_message   text NOT NULL,
	created_at       bigint NOT NULL,
	last_updated_at  bigint NOT NULL,
	ttl_ms           bigint,
	poll_interval_ms bigint NOT NULL,
	upstream_poll_ms bigint NOT NULL,
	result           json,
	rpc_error        json,
	outcome          text NOT NULL,
	outcome_detail   text NOT NULL,
	progress_token   json,
	version          bigint NOT NULL
);

CREATE INDEX tasks_owner_created ON tasks (owner, created_at DESC, id DESC);
CREATE UNIQUE INDEX tasks_session_request ON tasks (session_id, request_id) WHERE request_id <> '';
CREATE UNIQUE INDEX tasks_owner_idempotency ON tasks (owner, idempotency_key) WHERE idempotency_key <> '';
CREATE INDEX tasks_status ON tasks (status);

CREATE TABLE inputs (
	task_id      text COLLATE "C" NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,
	key          text COLLATE "C" NOT NULL,
	method       text NOT NULL,
	params       json,
	request_id   text COLLATE "C" NOT NULL,
	delivered_at bigint,
	response     json,
	answered_at  bigint,
	forwarded_at bigint,
	PRIMARY KEY (task_id, key)
);

CREATE UNIQUE INDEX inputs_request ON inputs (request_id) WHERE request_id <> '';
`,
	// 2: the heartbeat row readiness writes (Store.CheckWritable).
	`
CREATE TABLE heartbeat (
	id integer PRIMARY KEY CHECK (id = 1),
	at bigint NOT NULL
);
`,
	// 3: what replicas coordinate through (store.Shared, shared.go, streams.go): MRTR asks,
	// leases, the carrier of each relayed input, resumable streams' events, token buckets.
	// Times compared across replicas are the store's clock (unix ms, see nowMs).
	`
ALTER TABLE inputs
	ADD COLUMN carrier       text NOT NULL DEFAULT '',
	ADD COLUMN carrier_until bigint NOT NULL DEFAULT 0;

CREATE TABLE asks (
	request_id  text COLLATE "C" PRIMARY KEY,
	session_id  text COLLATE "C" NOT NULL,
	owner       text COLLATE "C" NOT NULL,
	method      text NOT NULL,
	holder      text NOT NULL,
	expires_at  bigint NOT NULL,
	response    json,
	answered_at bigint
);
CREATE INDEX asks_expires ON asks (expires_at);

CREATE TABLE leases (
	name   text COLLATE "C" PRIMARY KEY,
	holder text NOT NULL,
	until  bigint NOT NULL
);

CREATE TABLE streams (
	id          text COLLATE "C" PRIMARY KEY,
	session_id  text COLLATE "C" NOT NULL,
	active_at   bigint NOT NULL,
	followed_at bigint NOT NULL DEFAULT 0,
	acked       bigint NOT NULL DEFAULT 0
);
CREATE INDEX streams_active ON streams (active_at);

CREATE TABLE stream_events (
	stream_id text COLLATE "C" NOT NULL,
	seq       bigint NOT NULL,
	frame     bytea NOT NULL,
	last      boolean NOT NULL,
	PRIMARY KEY (stream_id, seq)
);

CREATE TABLE rate_buckets (
	key     text COLLATE "C" PRIMARY KEY,
	tat     double precision NOT NULL,
	granted integer NOT NULL
);
`,
	// 4: the reverse route's records: the upstream session a 2025-11-25 task lives in, and
	// the upstream's JSON-RPC id of each input request it relayed.
	`
ALTER TABLE tasks ADD COLUMN upstream_session_id text NOT NULL DEFAULT '';
ALTER TABLE inputs ADD COLUMN upstream_request_id json;
`,
	// 5: the create span's trace context on each task (internal/trace), written once.
	`
ALTER TABLE tasks ADD COLUMN trace_parent text NOT NULL DEFAULT '';
`,
	// 6: the legacy pass-through's records: the upstream session a client session is
	// forwarded over, adopted after a restart (record.Session.UpstreamSessionID).
	`ALTER TABLE sessions ADD COLUMN upstream_session text NOT NULL DEFAULT '';`,
	// 7: the reverse route's records: the capability set the creating request declared
	// (record.Task.ClientCaps), kept for the upstream session adopted after a restart.
	`ALTER TABLE tasks ADD COLUMN client_caps text NOT NULL DEFAULT '';`,
}

// requireSchema fails with store.ErrNoStore unless the connection's search_path shows a
// taskbridge schema this build can read. It only reads.
func requireSchema(ctx context.Context, pool *pgxpool.Pool) error {
	var found bool
	if err := pool.QueryRow(ctx, `SELECT to_regclass('schema_version') IS NOT NULL`).Scan(&found); err != nil {
		return fmt.Errorf("postgres: open: %w", err)
	}
	if !found {
		var path string
		_ = pool.QueryRow(ctx, `SELECT current_setting('search_path')`).Scan(&path)
		return fmt.Errorf("%w: no taskbridge schema in the search_path (%s) of this role (taskbridge serve creates it)", store.ErrNoStore, path)
	}
	var v int
	if err := pool.QueryRow(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_version`).Scan(&v); err != nil {
		return fmt.Errorf("postgres: open: schema version: %w", err)
	}
	switch {
	case v == 0:
		return fmt.Errorf("%w: the schema_version table is empty (taskbridge serve migrates it)", store.ErrNoStore)
	case v > len(migrations):
		return fmt.Errorf("postgres: open: database schema version %d is newer than this build knows (%d)", v, len(migrations))
	}
	return nil
}

// migrate applies the migrations the database lacks, in one transaction holding the
// migration lock. A database written by a newer taskbridge is refused rather than guessed
// at.
func migrate(ctx context.Context, pool *pgxpool.Pool) error {
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(migrateLockKey)); err != nil {
			return fmt.Errorf("migrate: lock: %w", err)
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_version (
			version    integer PRIMARY KEY,
			applied_at bigint NOT NULL
		)`); err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
		var cur int
		if err := tx.QueryRow(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_version`).Scan(&cur); err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
		if cur > len(migrations) {
			return fmt.Errorf("migrate: database schema version %d is newer than this build knows (%d)", cur, len(migrations))
		}
		for v := cur + 1; v <= len(migrations); v++ {
			if _, err := tx.Exec(ctx, migrations[v-1]); err != nil {
				return fmt.Errorf("migrate to version %d: %w", v, err)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO schema_version (version, applied_at) VALUES ($1, $2)`, v, time.Now().UnixMilli()); err != nil {
				return fmt.Errorf("migrate to version %d: %w", v, err)
			}
		}
		return nil
	})
}
