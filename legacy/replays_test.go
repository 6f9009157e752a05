package legacy

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/taskbridge/taskbridge/internal/jsonrpc"
)

// bigNote is a notification of about n bytes.
func bigNote(i, n int) *jsonrpc.Message {
	return note("notifications/message", fmt.Sprintf(`{"i":%d,"pad":%q}`, i, strings.Repeat("x", n)))
}

// streamOf returns the stream id of an SSE reply body (its priming event's id).
func streamOf(t *testing.T, body string) string {
	t.Helper()
	evs := readAllSSE(t, body)
	if len(evs) == 0 {
		t.Fatalf("no events in %q", body)
	}
	id, _, _ := strings.Cut(evs[0].id, "-")
	return id
}

// heapInUse is HeapAlloc after a full collection.
func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// TestReplayBudgetHolds: 96 ended streams of 256 KiB each (24 MiB of events) under a
// 1 MiB budget: the registry accounts at most 1 MiB, the rings it holds add up to what it
// accounts, the heap holds a few MiB, not 24; the oldest stream's resume answers 410 Gone
// and the newest still replays its events and response.
func TestReplayBudgetHolds(t *testing.T) {
	const budget, n, size = 1 << 20, 96, 256 << 10
	e := resumeEnv(t, func(o *Options) { o.MaxReplayBytes = budget })
	sid := e.initSession()
	var i int
	e.h.ServeFunc = func(_ context.Context, _ *Session, _ *jsonrpc.Message, out Stream) (json.RawMessage, error) {
		i++
		return json.RawMessage(`{"ok":true}`), out.Send(bigNote(i, size))
	}
	start := heapInUse()
	var streams []string
	for k := range n {
		resp, body := e.post(sid, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call"}`, k))
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("POST %d: %d", k, resp.StatusCode)
		}
		streams = append(streams, streamOf(t, body))
	}
	if got := e.srv.replays.bytes(); got > budget || got == 0 {
		t.Fatalf("replay bytes accounted = %d, want 0 < n <= %d", got, budget)
	}
	if held, accounted := ringBytes(e.srv), e.srv.replays.bytes(); held != accounted {
		t.Fatalf("rings hold %d bytes, the registry accounts %d", held, accounted)
	}
	grew := int64(heapInUse()) - int64(start)
	t.Logf("heap grew %.1f MiB after %d MiB of events (budget %d MiB)", float64(grew)/(1<<20), n*size>>20, budget>>20)
	if grew > 8<<20 {
		t.Errorf("heap grew %.1f MiB, want under 8 MiB", float64(grew)/(1<<20))
	}

	resp, _ := e.resume(sid, streams[0]+"-0")
	if body := readBody(t, resp); resp.StatusCode != http.StatusGone || !strings.Contains(body, "Gone") {
		t.Errorf("resume of the oldest stream: %d %s, want 410 Gone", resp.StatusCode, body)
	}
	r := e.resumeSSE(sid, streams[n-1]+"-0")
	got := r.rest()
	if len(got) != 2 || !strings.Contains(got[0], fmt.Sprintf(`"i":%d`, n)) || !strings.Contains(got[1], `"result":{"ok":true}`) {
		t.Errorf("resume of the newest stream replayed %d messages, want its event and its response", len(got))
	}
}

// TestReplayBudgetGivesUpAwayStreams: POST streams whose client went away while the
// handler still runs are dropped oldest first once the budget is full: the oldest
// handler's ctx ends (as when its own buffer overflows) and its resume gets 410; the
// newest resumes. A connected stream that is dropped keeps receiving live events and
// cannot be resumed after its connection breaks.
func TestReplayBudgetGivesUpAwayStreams(t *testing.T) {
	const budget, size = 1 << 20, 300 << 10
	e := resumeEnv(t, func(o *Options) { o.MaxReplayBytes = budget })
	sid := e.initSession()
	type run struct {
		more  chan struct{} // each receive sends one more big event
		ended chan error    // the handler's ctx error when it returned
	}
	runs := make(chan run, 16)
	e.h.ServeFunc = func(ctx context.Context, _ *Session, _ *jsonrpc.Message, out Stream) (json.RawMessage, error) {
		r := <-runs
		for i := 0; ; i++ {
			if err := out.Send(bigNote(i, size)); err != nil {
				r.ended <- ctx.Err()
				return nil, err
			}
			select {
			case <-r.more:
			case <-ctx.Done():
				r.ended <- ctx.Err()
				return nil, ctx.Err()
			}
		}
	}
	open := func(k int) (run, *sseConnT) {
		r := run{more: make(chan struct{}), ended: make(chan error, 1)}
		runs <- r
		c := e.postSSE(sid, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tasks/result","params":{"taskId":"t"}}`, k))
		if _, err := c.nextMessage(); err != nil {
			t.Fatal(err)
		}
		return r, c
	}
	live, liveConn := open(0) // stays connected
	away := make([]*sseConnT, 0, 5)
	var awayRuns []run
	for k := 1; k <= 5; k++ { // 5 more streams of 300 KiB each: 1.8 MiB with the first
		r, c := open(k)
		c.cut()
		away, awayRuns = append(away, c), append(awayRuns, r)
	}
	if got := e.srv.replays.bytes(); got > budget {
		t.Fatalf("replay bytes accounted = %d, want <= %d", got, budget)
	}
	// The connected stream, registered first, went first; then the oldest away ones.
	select {
	case err := <-awayRuns[0].ended:
		if err == nil {
			t.Fatalf("the oldest away stream's handler ended without its ctx ending")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the oldest away stream's handler still runs with the budget full")
	}
	resp, _ := e.resume(sid, away[0].lastID)
	if body := readBody(t, resp); resp.StatusCode != http.StatusGone {
		t.Errorf("resume of the oldest away stream: %d %s, want 410", resp.StatusCode, body)
	}
	r := e.resumeSSE(sid, away[4].lastID)
	r.cut()

	// The connected stream was the oldest: dropped, it still streams live.
	live.more <- struct{}{}
	msg, err := liveConn.nextMessage()
	if err != nil || !strings.Contains(msg, `"i":1`) {
		t.Fatalf("the connected stream after the budget dropped it: %q %v, want its next event", msg, err)
	}
	liveConn.cut()
	select {
	case err := <-live.ended:
		if err == nil {
			t.Errorf("a dropped stream whose client left: handler ctx did not end")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a dropped stream whose client left: handler still runs")
	}
	resp, _ = e.resume(sid, liveConn.lastID)
	if body := readBody(t, resp); resp.StatusCode != http.StatusGone {
		t.Errorf("resume of the dropped connected stream: %d %s, want 410", resp.StatusCode, body)
	}
}

// ringBytes sums the buffers of the registered streams, taking each stream's lock after
// the registry's is released (the lock order is stream, then registry).
func ringBytes(s *Server) int64 {
	s.replays.mu.Lock()
	var es []replayEntry
	for _, e := range s.replays.m {
		es = append(es, *e)
	}
	s.replays.mu.Unlock()
	var n int64
	for _, e := range es {
		if e.post != nil {
			e.post.mu.Lock()
			n += int64(e.post.ring.bytes)
			e.post.mu.Unlock()
		}
		if e.log != nil {
			e.log.mu.Lock()
			n += int64(e.log.ring.bytes)
			e.log.mu.Unlock()
		}
	}
	return n
}
