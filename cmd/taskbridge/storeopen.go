package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/taskbridge/taskbridge/internal/config"
	"github.com/taskbridge/taskbridge/store"
	"github.com/taskbridge/taskbridge/store/postgres"
	"github.com/taskbridge/taskbridge/store/sqlite"
)

// storeAccess is what a command may do to its store.
type storeAccess int

const (
	// storeCreate creates and migrates the store as needed (serve, stdio).
	storeCreate storeAccess = iota
	// storeWriteExisting writes to a store that exists and holds the schema; it never
	// creates one (tasks reconcile).
	storeWriteExisting
	// storeReadOnly only reads: SQLite mode=ro, PostgreSQL read-only sessions, no DDL
	// (report, tasks list, tasks show, config check --connect).
	storeReadOnly
)

// openStore opens "sqlite:PATH" (the default) or a postgres:// DSN, creating and
// migrating it as serve needs.
func openStore(ctx context.Context, spec string) (store.Store, error) {
	return openStoreAs(ctx, spec, storeCreate)
}

// openStoreAs opens the store named by spec with the given access. A store that does not
// exist, or holds no taskbridge schema, is an error naming the store looked for (password
// masked) and saying how to point at the right one.
func openStoreAs(ctx context.Context, spec string, a storeAccess) (store.Store, error) {
	st, err := openSpec(ctx, spec, a)
	if errors.Is(err, store.ErrNoStore) {
		why := strings.TrimPrefix(err.Error(), store.ErrNoStore.Error()+": ")
		return nil, fmt.Errorf("no taskbridge store at %s: %s\n(point --store, TASKBRIDGE_STORE or --config at the store the bridge writes; "+
			"taskbridge serve creates it on its first start; this command never creates one)", config.MaskDSN(spec), why)
	}
	if err != nil {
		return nil, fmt.Errorf("store %s: %w", config.MaskDSN(spec), err)
	}
	return st, nil
}

func openSpec(ctx context.Context, spec string, a storeAccess) (store.Store, error) {
	switch {
	case strings.HasPrefix(spec, "sqlite:"):
		mode := map[storeAccess]sqlite.Mode{storeCreate: sqlite.ReadWrite, storeWriteExisting: sqlite.ReadWriteExisting, storeReadOnly: sqlite.ReadOnly}[a]
		return sqlite.OpenMode(ctx, strings.TrimPrefix(spec, "sqlite:"), mode)
	case strings.HasPrefix(spec, "postgres://"), strings.HasPrefix(spec, "postgresql://"):
		switch a {
		case storeReadOnly:
			return postgres.OpenReadOnly(ctx, spec)
		case storeWriteExisting:
			return postgres.OpenExisting(ctx, spec)
		}
		return postgres.Open(ctx, spec)
	}
	return nil, fmt.Errorf("--store %q: want sqlite:PATH or postgres://…", config.MaskDSN(spec))
}
