package verify

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidwall/gjson"
)

// TestCutRequestClosesTheConnection: a cut is a real one. The server sees the client's
// TCP connection close while it still holds the request (its context ends), and the
// client's next request arrives on a new connection of the same session.
func TestCutRequestClosesTheConnection(t *testing.T) {
	var got atomic.Bool
	gone := make(chan struct{})
	var mu sync.Mutex
	states := map[string]http.ConnState{}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var b bytes.Buffer
		b.ReadFrom(r.Body)
		if gjson.GetBytes(b.Bytes(), "method").Str == "tools/call" {
			got.Store(true)
			select { // held until the client is gone
			case <-r.Context().Done():
				close(gone)
			case <-time.After(10 * time.Second):
			}
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"jsonrpc":"2.0","id":` + gjson.GetBytes(b.Bytes(), "id").Raw + `,"result":{"status":"working"}}`))
	}))
	srv.Config.ConnState = func(c net.Conn, s http.ConnState) {
		mu.Lock()
		states[c.RemoteAddr().String()] = s
		mu.Unlock()
	}
	srv.Start()
	defer srv.Close()

	c := newLegacyClient(srv.URL, freshHTTP(), nil, withTasksCaps)
	c.own = true
	defer c.drop()
	ctx := context.Background()
	where, err := c.cutRequest(ctx, 7, "tools/call", map[string]any{"name": "x"}, got.Load)
	if err != nil {
		t.Fatal(err)
	}
	if where != "before the answer's headers" {
		t.Errorf("cut %s, want before the answer's headers (the server held the answer)", where)
	}
	select {
	case <-gone:
	case <-time.After(5 * time.Second):
		t.Fatal("the server never saw the client's connection close")
	}
	if _, err := c.call(ctx, "tasks/get", map[string]any{"taskId": "t"}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(states) != 2 {
		t.Fatalf("connections %v: want the cut one and a new one", states)
	}
	closed := 0
	for _, s := range states {
		if s == http.StateClosed {
			closed++
		}
	}
	if closed < 1 {
		t.Errorf("connections %v: the cut one is not closed", states)
	}
}
