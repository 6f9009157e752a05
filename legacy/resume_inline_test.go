package legacy

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/taskbridge/taskbridge/internal/jsonrpc"
)

// onHTTPGoroutine reports whether the caller runs on the goroutine net/http's server gave
// the request (its stack passes through conn.serve) rather than one the face started.
func onHTTPGoroutine() bool {
	buf := make([]byte, 64<<10)
	return strings.Contains(string(buf[:runtime.Stack(buf, false)]), "net/http.(*conn).serve")
}

// handlerProbe records, for each call, whether Serve ran on the HTTP goroutine and how
// many goroutines the process had while it ran.
type handlerProbe struct {
	mu     sync.Mutex
	inline []bool
	counts []int
}

func (p *handlerProbe) record() {
	on, n := onHTTPGoroutine(), runtime.NumGoroutine()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.inline = append(p.inline, on)
	p.counts = append(p.counts, n)
}

func (p *handlerProbe) take() (inline []bool, counts []int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	inline, counts = p.inline, p.counts
	p.inline, p.counts = nil, nil
	return inline, counts
}

// A request on a resumable session whose reply stays plain JSON is served on the HTTP
// goroutine: no goroutine is started for it (the process has no more goroutines while its
// handler runs than while the handler of a 2025-06-18 session's call does, which the
// plain face always served inline) and no replay buffer is registered, over many
// sequential calls on the same connection.
func TestResumablePlainReplyStartsNoGoroutine(t *testing.T) {
	e := resumeEnv(t, nil)
	sid := e.initSession()
	var p handlerProbe
	e.h.ServeFunc = func(context.Context, *Session, *jsonrpc.Message, Stream) (json.RawMessage, error) {
		p.record()
		return json.RawMessage(`{"ok":true}`), nil
	}
	resp, body := e.post("", strings.Replace(initBody, "2025-11-25", "2025-06-18", 1))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("initialize 2025-06-18: %d %s", resp.StatusCode, body)
	}
	plainSID := resp.Header.Get("Mcp-Session-Id")
	call := func(sid, version string, i int) {
		t.Helper()
		resp, body := e.post(sid, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{}}`, i),
			"MCP-Protocol-Version", version)
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != contentTypeJSON ||
			body != fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{"ok":true}}`, i) {
			t.Fatalf("%s: %d %s %s", version, resp.StatusCode, resp.Header.Get("Content-Type"), body)
		}
	}
	for i := range 5 {
		call(plainSID, "2025-06-18", i) // the plain face: no resumable stream at all
	}
	_, plain := p.take()
	for i := range 200 {
		call(sid, "2025-11-25", 100+i)
	}
	inline, counts := p.take()
	if len(inline) != 200 {
		t.Fatalf("handler ran %d times, want 200", len(inline))
	}
	// The plain face's highest count is the baseline; a background goroutine of net/http
	// or the test server may come and go, so a few calls above it are noise, while a
	// goroutine per POST puts every call above it.
	baseline := slices.Max(plain)
	above := 0
	for i := range inline {
		if !inline[i] {
			t.Fatalf("call %d: Serve ran off the HTTP goroutine", i)
		}
		if counts[i] > baseline {
			above++
		}
	}
	if above > len(inline)/20 {
		t.Fatalf("%d of %d calls ran with more goroutines than the plain face's %d", above, len(inline), baseline)
	}
	if n := e.srv.replays.len(); n != 0 {
		t.Errorf("%d streams registered for replay after plain replies, want 0", n)
	}
}

// A reply that turns into a stream on the HTTP goroutine is still resumable: the client
// cuts it after the first event, the handler carries on (its ctx not cancelled), and a
// GET with Last-Event-ID gets the rest and the response.
func TestResumableStreamFromHTTPGoroutineResumes(t *testing.T) {
	e := resumeEnv(t, nil)
	sid := e.initSession()
	var p handlerProbe
	first := []*jsonrpc.Message{numbered("notifications/progress", 1)}
	rest := []*jsonrpc.Message{numbered("notifications/progress", 2)}
	cont, ctxErr := make(chan struct{}), make(chan error, 1)
	inner := taskResultLike(first, rest, cont, ctxErr)
	e.h.ServeFunc = func(ctx context.Context, sess *Session, req *jsonrpc.Message, out Stream) (json.RawMessage, error) {
		p.record()
		return inner(ctx, sess, req, out)
	}
	c := e.postSSE(sid, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"slow"}}`)
	if _, err := c.nextMessage(); err != nil {
		t.Fatal(err)
	}
	c.cut()
	r := e.resumeSSE(sid, c.lastID)
	close(cont)
	got := r.rest()
	want := append(wireOf(t, rest), `{"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":"done"}]}}`)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("after the resume\n got %q\nwant %q", got, want)
	}
	if err := <-ctxErr; err != nil {
		t.Errorf("handler ctx ended: %v", err)
	}
	if inline, _ := p.take(); len(inline) != 1 || !inline[0] {
		t.Errorf("Serve on the HTTP goroutine: %v, want [true]", inline)
	}
}
