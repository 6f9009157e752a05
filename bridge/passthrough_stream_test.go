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

// progressUpstream answers tools/call "report" itself, as an upstream running a long
// synchronous call does: an SSE reply with three notifications/progress 300 ms apart, then
// the result; it notes when it wrote each. Every other request goes to the fixture.
type progressUpstream struct {
	fx   http.Handler
	mu   sync.Mutex
	sent []time.Time // progress events, then the response
}

func (u *progressUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var buf bytes.Buffer
	buf.ReadFrom(r.Body)
	body := buf.Bytes()
	if gjson.GetBytes(body, "method").Str != "tools/call" || gjson.GetBytes(body, "params.name").Str != "report" {
		r.Body = readCloser{bytes.NewReader(body)}
		u.fx.ServeHTTP(w, r)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	tok := gjson.GetBytes(body, "params._meta.progressToken").Raw
	for i := 1; i <= 3; i++ {
		fmt.Fprintf(w, "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":%s,\"progress\":%d,\"total\":3}}\n\n", tok, i)
		rc.Flush()
		u.note()
		select {
		case <-r.Context().Done():
			return
		case <-time.After(300 * time.Millisecond):
		}
	}
	fmt.Fprintf(w, "data: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"done\"}]}}\n\n", gjson.GetBytes(body, "id").Raw)
	rc.Flush()
	u.note()
}

func (u *progressUpstream) note() {
	u.mu.Lock()
	u.sent = append(u.sent, time.Now())
	u.mu.Unlock()
}

// TestModernPassThroughStreamsProgress is the other half of acceptance 4: the progress
// notifications of a long synchronous call through the modern pass-through reach the
// client while the call runs (each within 100 ms of the upstream sending it, the first long
// before the result exists), then the result ends the stream.
func TestModernPassThroughStreamsProgress(t *testing.T) {
	fx := fixture.New(fixture.Options{Scale: 0.1})
	pu := &progressUpstream{fx: fx}
	up := httptest.NewServer(pu)
	t.Cleanup(func() { up.Close(); fx.Close() })
	ctx := context.Background()
	st, err := sqlite.Open(ctx, t.TempDir()+"/tb.db")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	b, err := bridge.NewForward(forward.Config{Store: st, Upstream: sep2663.NewClient(sep2663.ClientOptions{URL: up.URL + "/mcp"}),
		Logger: zerolog.Nop(), PollFloorMs: 100, Heartbeat: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close(context.Background()) })
	srv := httptest.NewServer(mustDoor(t, bridge.DoorConfig{}, b))
	t.Cleanup(srv.Close)

	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"report","arguments":{},"_meta":{"progressToken":"p1",` +
		`"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "tools/call")
	req.Header.Set("Mcp-Name", "report")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Fatalf("reply Content-Type %q, want an SSE stream", ct)
	}
	var got []time.Time
	var kinds []string
	r := sse.NewReader(resp.Body, 1<<20)
	for {
		ev, err := r.Next()
		if err != nil {
			t.Fatalf("stream ended after %v: %v", kinds, err)
		}
		if !ev.HasData {
			continue
		}
		got = append(got, time.Now())
		if gjson.GetBytes(ev.Data, "method").Str == "notifications/progress" {
			kinds = append(kinds, fmt.Sprintf("progress %d (token %s)", gjson.GetBytes(ev.Data, "params.progress").Int(), gjson.GetBytes(ev.Data, "params.progressToken").Raw))
			continue
		}
		kinds = append(kinds, "result "+gjson.GetBytes(ev.Data, "result.content.0.text").Str)
		break
	}
	want := []string{`progress 1 (token "p1")`, `progress 2 (token "p1")`, `progress 3 (token "p1")`, "result done"}
	if fmt.Sprint(kinds) != fmt.Sprint(want) {
		t.Fatalf("events %v, want %v", kinds, want)
	}
	pu.mu.Lock()
	defer pu.mu.Unlock()
	for i := range got {
		lag := got[i].Sub(pu.sent[i])
		t.Logf("%s: %v after the upstream sent it", kinds[i], lag)
		if lag > 100*time.Millisecond {
			t.Errorf("%s arrived %v after the upstream sent it (want < 100 ms)", kinds[i], lag)
		}
	}
	if !got[0].Before(pu.sent[3]) {
		t.Errorf("the first progress arrived after the result was sent: not while the call ran")
	}
}
