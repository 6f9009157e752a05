package passthrough

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/taskbridge/taskbridge/legacy"
	"github.com/taskbridge/taskbridge/record"
	"github.com/taskbridge/taskbridge/store"
	"github.com/taskbridge/taskbridge/store/sqlite"
)

// TestReversePurgesSessions: the reverse route's purge loop deletes the pass-through
// sessions not seen for SessionRetention and keeps the others, until Close stops it.
func TestLegacyPurgesSessions(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "r.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	now := time.Now()
	for id, seen := range map[string]time.Time{"old": now.Add(-2 * time.Hour), "fresh": now} {
		if err := st.CreateSession(ctx, &record.Session{ID: id, ProtocolVersion: "2025-11-25", CreatedAt: seen, LastSeenAt: seen}); err != nil {
			t.Fatal(err)
		}
	}
	r, err := NewLegacy(LegacyConfig{Upstream: legacy.NewClient(legacy.ClientOptions{URL: "http://127.0.0.1:1/mcp"}),
		Store: st, Logger: zerolog.Nop(), PurgeInterval: 20 * time.Millisecond, SessionRetention: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	r.Start() // the purge needs no upstream
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := st.GetSession(ctx, "old"); errors.Is(err, store.ErrNotFound) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the idle session was not purged")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := st.GetSession(ctx, "fresh"); err != nil {
		t.Fatalf("the fresh session: %v", err)
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := r.Close(cctx); err != nil {
		t.Fatalf("Close: %v (the purge loop must end with it)", err)
	}
}
