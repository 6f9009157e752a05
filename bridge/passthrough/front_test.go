package passthrough_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/taskbridge/taskbridge/bridge"
	"github.com/taskbridge/taskbridge/legacy"
	"github.com/taskbridge/taskbridge/store"
)

// serveInFront serves taskbridge's 2025-11-25 face (the Reverse route's legacy
// pass-through, behind the front door) on st in front of the legacy server upFace, and
// returns its /mcp URL. Cleanup closes the bridge, then upFace.
func serveInFront(t *testing.T, ctx context.Context, upFace *legacy.Server, st store.Store) string {
	t.Helper()
	upSrv := httptest.NewServer(upFace)
	t.Cleanup(upSrv.Close)
	r, err := bridge.NewReverse(bridge.ReverseConfig{Upstream: legacy.NewClient(legacy.ClientOptions{URL: upSrv.URL}), Store: st, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	door, err := bridge.NewDoor(bridge.DoorConfig{Logger: zerolog.Nop()}, r)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", door)
	hs := httptest.NewServer(mux)
	t.Cleanup(func() {
		hs.CloseClientConnections()
		hs.Close()
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		r.Close(cctx)
		upFace.Close(cctx)
	})
	return hs.URL + "/mcp"
}
