package sessions_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/taskbridge/taskbridge/bridge/internal/sessions"
	"github.com/taskbridge/taskbridge/legacy"
	"github.com/taskbridge/taskbridge/store/sqlite"
)

// TestAdapter: the face's sessions round-trip through a real store; unknown sessions are
// the face's ErrNoSession.
func TestAdapter(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	a := sessions.New(st)
	now := time.Now().UTC().Truncate(time.Millisecond)
	in := &legacy.Session{ID: "s1", ProtocolVersion: "2025-11-25", ClientInfo: json.RawMessage(`{"name":"c"}`),
		ClientCapabilities: json.RawMessage(`{}`), Principal: "acme/alice", CreatedAt: now, LastSeenAt: now}
	if err := a.CreateSession(ctx, in); err != nil {
		t.Fatal(err)
	}
	got, err := a.GetSession(ctx, "s1")
	if err != nil || got.Principal != "acme/alice" || string(got.ClientInfo) != `{"name":"c"}` || !got.CreatedAt.Equal(now) {
		t.Fatalf("GetSession = %+v, %v", got, err)
	}
	if err := a.CloseSession(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	if got, _ := a.GetSession(ctx, "s1"); !got.Closed {
		t.Error("closed session reads open")
	}
	if _, err := a.GetSession(ctx, "nope"); !errors.Is(err, legacy.ErrNoSession) {
		t.Errorf("unknown session: %v, want legacy.ErrNoSession", err)
	}
	if err := a.CloseSession(ctx, "nope"); !errors.Is(err, legacy.ErrNoSession) {
		t.Errorf("closing an unknown session: %v", err)
	}
	if sessions.Owner(got) != "principal:acme/alice" || sessions.Owner(&legacy.Session{ID: "x"}) != "session:x" {
		t.Error("Owner")
	}
}
