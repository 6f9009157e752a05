package bridge_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/bridge"
	"github.com/taskbridge/taskbridge/bridge/forward"
	"github.com/taskbridge/taskbridge/internal/fixture"
	"github.com/taskbridge/taskbridge/internal/sse"
	"github.com/taskbridge/taskbridge/sep2663"
	"github.com/taskbridge/taskbridge/store/sqlite"
)

// sendClock wraps the fixture upstream and notes when each SSE event of a reply was
// written (flushed) by the upstream, by method, and when a listen request ended upstream.
type sendClock struct {
	h          http.Handler
	mu         sync.Mutex
	sent       map[string][]time.Time // method (or "response") → send times, in order
	listenDone chan struct{}
}

type clockWriter struct {
	http.ResponseWriter
	c *sendClock
}

func (w clockWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w clockWriter) Write(b []byte) (int, error) {
	n, err := w.ResponseWriter.Write(b)
	now := time.Now()
	for _, line := range strings.Split(string(b), "\n") {
		if d, ok := strings.CutPrefix(line, "data:"); ok {
			m := gjson.Get(d, "method").Str
			if m == "" {
				m = "response"
			}
			w.c.mu.Lock()
			w.c.sent[m] = append(w.c.sent[m], now)
			w.c.mu.Unlock()
		}
	}
	return n, err
}

func (c *sendClock) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body []byte
	if r.Body != nil {
		var buf bytes.Buffer
		buf.ReadFrom(r.Body)
		body = buf.Bytes()
		r.Body = readCloser{bytes.NewReader(body)}
	}
	c.h.ServeHTTP(clockWriter{w, c}, r)
	if gjson.GetBytes(body, "method").Str == "subscriptions/listen" {
		close(c.listenDone)
	}
}

// keepAliveCounter counts the keep-alive comments of a stream as it is read.
type keepAliveCounter struct {
	r interface{ Read([]byte) (int, error) }
	n int
}

func (k *keepAliveCounter) Read(p []byte) (int, error) {
	n, err := k.r.Read(p)
	k.n += strings.Count(string(p[:n]), ": keep-alive")
	return n, err
}

type readCloser struct{ *bytes.Reader }

func (readCloser) Close() error { return nil }

// TestModernPassThroughStreamsListen is issue 14's acceptance 4: subscriptions/listen
// through the modern pass-through is an SSE stream to the client, event by event as the
// upstream sends them — the acknowledgement first, then each notifications/tasks — each
// within 100 ms of the upstream writing it (generous: loopback takes well under 1 ms), with
// keep-alive comments while nothing happens; when the client hangs up, the upstream's listen
// request ends too.
func TestModernPassThroughStreamsListen(t *testing.T) {
	fx := fixture.New(fixture.Options{Scale: 0.1, PollIntervalMs: 100, Listen: true})
	clock := &sendClock{h: fx, sent: map[string][]time.Time{}, listenDone: make(chan struct{})}
	up := httptest.NewServer(clock)
	t.Cleanup(func() { up.Close(); fx.Close() })
	ctx := context.Background()
	st, err := sqlite.Open(ctx, t.TempDir()+"/tb.db")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	b, err := bridge.NewForward(forward.Config{Store: st, Upstream: sep2663.NewClient(sep2663.ClientOptions{URL: up.URL + "/mcp"}),
		Logger: zerolog.Nop(), PollFloorMs: 100, Heartbeat: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close(context.Background()) })
	srv := httptest.NewServer(mustDoor(t, bridge.DoorConfig{}, b))
	t.Cleanup(srv.Close)
	url := srv.URL + "/mcp"

	_, created := modernPost(t, url, "", "tools/call", `{"name":"slow_compute","arguments":{"seconds":5}}`)
	id := gjson.Get(created, "result.taskId").Str
	if id == "" {
		t.Fatalf("tools/call: %s", created)
	}
	lctx, hangUp := context.WithCancel(ctx)
	defer hangUp()
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}`
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":"L","method":"subscriptions/listen","params":{"notifications":{"taskIds":[%q]},%s}}`, id, meta)
	req, _ := http.NewRequestWithContext(lctx, http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "subscriptions/listen")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Fatalf("listen reply Content-Type %q, want an SSE stream", ct)
	}
	type got struct {
		method, status string
		at             time.Time
	}
	var events []got
	counted := &keepAliveCounter{r: resp.Body}
	lines := sse.NewReader(counted, 1<<20)
	deadline := time.AfterFunc(20*time.Second, hangUp)
	defer deadline.Stop()
	for {
		ev, err := lines.Next()
		if err != nil {
			t.Fatalf("stream ended after %d events: %v", len(events), err)
		}
		if !ev.HasData {
			continue
		}
		at := time.Now()
		events = append(events, got{gjson.GetBytes(ev.Data, "method").Str, gjson.GetBytes(ev.Data, "params.status").Str, at})
		if s := events[len(events)-1].status; s == "completed" || s == "failed" {
			break
		}
	}
	if events[0].method != "notifications/subscriptions/acknowledged" || len(events) < 3 {
		t.Fatalf("events %+v: want the acknowledgement, then notifications/tasks up to the end", events)
	}
	clock.mu.Lock()
	idx := map[string]int{}
	for _, e := range events {
		sent := clock.sent[e.method]
		i := idx[e.method]
		idx[e.method]++
		if i >= len(sent) {
			t.Errorf("%s #%d received but never sent upstream", e.method, i)
			continue
		}
		lag := e.at.Sub(sent[i])
		t.Logf("%s %s: %v after the upstream sent it", e.method, e.status, lag)
		if lag > 100*time.Millisecond {
			t.Errorf("%s #%d arrived %v after the upstream sent it (want < 100 ms)", e.method, i, lag)
		}
	}
	clock.mu.Unlock()
	if counted.n == 0 {
		t.Errorf("no keep-alive comment in %v of stream (heartbeat 200 ms)", events[len(events)-1].at.Sub(events[0].at))
	}
	hangUp()
	select {
	case <-clock.listenDone:
	case <-time.After(5 * time.Second):
		t.Fatal("the upstream's listen request was still open 5 s after the client hung up")
	}
}
