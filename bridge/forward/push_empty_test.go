package forward_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/internal/fixture"
)

// emptyListens is an upstream that accepts subscriptions/listen and closes it at once
// (acknowledged, then the final result, nothing delivered), as the TS SDK v2 based
// SEP-2663 server does; everything else is the fixture's. It counts the listens.
type emptyListens struct {
	next    http.Handler
	listens atomic.Int64
}

func (u *emptyListens) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		u.next.ServeHTTP(w, r)
		return
	}
	body, _ := io.ReadAll(r.Body)
	if gjson.GetBytes(body, "method").Str != "subscriptions/listen" {
		r.Body = io.NopCloser(bytes.NewReader(body))
		u.next.ServeHTTP(w, r)
		return
	}
	u.listens.Add(1)
	id := gjson.GetBytes(body, "id").Raw
	w.Header().Set("Content-Type", "text/event-stream")
	fmt.Fprintf(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/subscriptions/acknowledged\",\"params\":{\"notifications\":{\"taskIds\":%s}}}\n\n",
		gjson.GetBytes(body, "params.notifications.taskIds").Raw)
	fmt.Fprintf(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"resultType\":\"complete\"}}\n\n", id)
}

// Issue 15 acceptance 6: in front of an upstream that closes every listen at once, the
// bridge opens at most a few listens per second (it used to re-open ~170 a second), yet
// keeps re-opening them (backoff with jitter, not giving up).
func TestEmptyListensBackOff(t *testing.T) {
	fx := fixture.New(fixture.Options{Scale: 0.1, PollIntervalMs: 1000})
	up := &emptyListens{next: fx}
	srv := httptest.NewServer(up)
	t.Cleanup(func() { srv.Close(); fx.Close() })
	e := newEnvAt(t, srv.URL+"/mcp")
	c := e.client()
	// 300 s at scale 0.1: the task stays tracked for the whole count.
	call(t, c, "tools/call", map[string]any{"name": "slow_compute", "arguments": map[string]any{"seconds": 300}, "task": map[string]any{"ttl": 600000}})
	deadline := time.Now().Add(5 * time.Second)
	for up.listens.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the bridge never opened subscriptions/listen")
		}
		time.Sleep(10 * time.Millisecond)
	}
	start := up.listens.Load()
	time.Sleep(10 * time.Second)
	n := up.listens.Load() - start
	t.Logf("listens opened in 10 s: %d", n)
	if n > 30 {
		t.Errorf("%d listens in 10 s against an upstream that closes them at once; want at most a few per second", n)
	}
	if n < 2 {
		t.Errorf("%d listens in 10 s: the bridge stopped re-opening the listen", n)
	}
}
