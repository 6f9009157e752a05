package legacy

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/internal/jsonrpc"
)

// resumeEnv is an env with resumable streams (the plain-wire tests run without them).
func resumeEnv(t *testing.T, mod func(*Options)) *env {
	return newEnv(t, func(o *Options) {
		o.ResumeWindow = DefaultResumeWindow
		o.KeepAlive = -1
		if mod != nil {
			mod(o)
		}
	})
}

// sseConnT is one open SSE response as a client reads it: it remembers the id of the last
// event it processed, as a client's Last-Event-ID does.
type sseConnT struct {
	t      *testing.T
	resp   *http.Response
	r      *sseReader
	cancel context.CancelFunc
	lastID string
}

// nextMessage returns the data of the next event carrying a message, skipping priming
// events and comments (recording ids as it goes).
func (c *sseConnT) nextMessage() (string, error) {
	for {
		ev, err := c.r.next()
		if err != nil {
			return "", err
		}
		if ev.id != "" {
			c.lastID = ev.id
		}
		if ev.comment != "" || ev.data == "" {
			continue
		}
		if ev.event != "message" {
			return "", fmt.Errorf("event type %q", ev.event)
		}
		return ev.data, nil
	}
}

// rest reads messages until the stream ends.
func (c *sseConnT) rest() []string {
	c.t.Helper()
	var out []string
	for {
		data, err := c.nextMessage()
		if err == io.EOF {
			return out
		}
		if err != nil {
			c.t.Fatalf("reading the stream: %v (after %d messages)", err, len(out))
		}
		out = append(out, data)
	}
}

// cut drops the connection the way a network failure does.
func (c *sseConnT) cut() {
	c.cancel()
	c.resp.Body.Close()
}

// postSSE POSTs a request and returns its open SSE reply.
func (e *env) postSSE(sid, body string) *sseConnT {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	resp := e.do(e.request(ctx, http.MethodPost, sid, body))
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		cancel()
		e.t.Fatalf("POST: %d %s %s", resp.StatusCode, resp.Header.Get("Content-Type"), readBody(e.t, resp))
	}
	e.t.Cleanup(cancel)
	return &sseConnT{t: e.t, resp: resp, r: &sseReader{br: bufio.NewReader(resp.Body)}, cancel: cancel}
}

// resume GETs with Last-Event-ID and returns the response.
func (e *env) resume(sid, lastID string) (*http.Response, context.CancelFunc) {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req := e.request(ctx, http.MethodGet, sid, "")
	req.Header.Set("Last-Event-ID", lastID)
	resp := e.do(req)
	e.t.Cleanup(cancel)
	return resp, cancel
}

// resumeSSE resumes and expects a 200 event stream.
func (e *env) resumeSSE(sid, lastID string) *sseConnT {
	e.t.Helper()
	resp, cancel := e.resume(sid, lastID)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		cancel()
		e.t.Fatalf("resume GET: %d %s %s", resp.StatusCode, resp.Header.Get("Content-Type"), readBody(e.t, resp))
	}
	return &sseConnT{t: e.t, resp: resp, r: &sseReader{br: bufio.NewReader(resp.Body)}, cancel: cancel, lastID: lastID}
}

func numbered(method string, i int) *jsonrpc.Message {
	if method == "elicitation/create" {
		m, _ := jsonrpc.NewRequest(jsonrpc.StringID(fmt.Sprintf("br-%d", i)), method, json.RawMessage(fmt.Sprintf(`{"n":%d}`, i)))
		return m
	}
	return note(method, fmt.Sprintf(`{"n":%d}`, i))
}

// taskResultLike is a tasks/result-like handler: it sends the first messages, waits for
// cont, sends the rest and answers. It reports how its ctx ended (nil: it never did).
func taskResultLike(first, rest []*jsonrpc.Message, cont <-chan struct{}, ctxErr chan<- error) func(context.Context, *Session, *jsonrpc.Message, Stream) (json.RawMessage, error) {
	return func(ctx context.Context, _ *Session, _ *jsonrpc.Message, out Stream) (json.RawMessage, error) {
		for _, m := range first {
			if err := out.Send(m); err != nil {
				return nil, err
			}
		}
		select {
		case <-cont:
		case <-ctx.Done():
			ctxErr <- ctx.Err()
			return nil, ctx.Err()
		}
		for _, m := range rest {
			if err := out.Send(m); err != nil {
				return nil, err
			}
		}
		ctxErr <- ctx.Err()
		return json.RawMessage(`{"content":[{"type":"text","text":"done"}]}`), nil
	}
}

func wireOf(t *testing.T, ms []*jsonrpc.Message) []string {
	var out []string
	for _, m := range ms {
		b, err := encodeMessage(m)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, string(b))
	}
	return out
}

// A tasks/result stream cut after two of its messages is resumed with GET + Last-Event-ID
// while the handler still runs: the client gets every message, and the response, exactly
// once and in order, and the handler was never cancelled.
func TestResumePostStreamLive(t *testing.T) {
	e := resumeEnv(t, nil)
	sid := e.initSession()
	first := []*jsonrpc.Message{
		numbered("notifications/progress", 1),
		numbered("elicitation/create", 2),
		numbered("notifications/message", 3), // written before the cut, never read by the client
	}
	rest := []*jsonrpc.Message{numbered("elicitation/create", 4), numbered("notifications/progress", 5)}
	cont, ctxErr := make(chan struct{}), make(chan error, 1)
	e.h.ServeFunc = taskResultLike(first, rest, cont, ctxErr)

	c := e.postSSE(sid, `{"jsonrpc":"2.0","id":7,"method":"tasks/result","params":{"taskId":"t1"}}`)
	var got []string
	for range 2 {
		data, err := c.nextMessage()
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, data)
	}
	if !strings.HasPrefix(c.lastID, "p") || !strings.HasSuffix(c.lastID, "-2") {
		t.Fatalf("Last-Event-ID after two messages = %q, want p…-2", c.lastID)
	}
	c.cut()

	r := e.resumeSSE(sid, c.lastID)
	close(cont) // the rest is produced while the resumed connection is open
	got = append(got, r.rest()...)
	want := append(wireOf(t, append(first, rest...)), `{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"done"}]}}`)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("messages across the cut\n got %q\nwant %q", got, want)
	}
	if err := <-ctxErr; err != nil {
		t.Errorf("handler ctx ended: %v", err)
	}
	if stream, _, _ := strings.Cut(r.lastID, "-"); !strings.HasPrefix(c.lastID, stream+"-") {
		t.Errorf("resumed ids %q do not continue stream %q", r.lastID, c.lastID)
	}
}

// The handler finishes while the client is away: the resume replays the missed messages
// and the response, then ends; a second resume after the last event gets 204.
func TestResumePostStreamAfterFinish(t *testing.T) {
	e := resumeEnv(t, nil)
	sid := e.initSession()
	first := []*jsonrpc.Message{numbered("elicitation/create", 1)}
	rest := []*jsonrpc.Message{numbered("notifications/message", 2), numbered("elicitation/create", 3)}
	cont, ctxErr := make(chan struct{}), make(chan error, 1)
	e.h.ServeFunc = taskResultLike(first, rest, cont, ctxErr)

	c := e.postSSE(sid, `{"jsonrpc":"2.0","id":"r1","method":"tasks/result","params":{"taskId":"t1"}}`)
	data, err := c.nextMessage()
	if err != nil {
		t.Fatal(err)
	}
	c.cut()
	close(cont)
	if err := <-ctxErr; err != nil {
		t.Fatalf("handler ctx ended: %v", err)
	}
	r := e.resumeSSE(sid, c.lastID)
	got := append([]string{data}, r.rest()...)
	want := append(wireOf(t, append(first, rest...)), `{"jsonrpc":"2.0","id":"r1","result":{"content":[{"type":"text","text":"done"}]}}`)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("messages across the cut\n got %q\nwant %q", got, want)
	}
	resp, _ := e.resume(sid, r.lastID)
	if body := readBody(t, resp); resp.StatusCode != http.StatusNoContent || body != "" {
		t.Errorf("resume after the last event: %d %q, want 204", resp.StatusCode, body)
	}
}

// Two cuts in a row: each resume continues after the client's last event.
func TestResumePostStreamTwice(t *testing.T) {
	e := resumeEnv(t, nil)
	sid := e.initSession()
	steps := make(chan *jsonrpc.Message, 1)
	e.h.ServeFunc = func(ctx context.Context, _ *Session, _ *jsonrpc.Message, out Stream) (json.RawMessage, error) {
		for m := range steps {
			if err := out.Send(m); err != nil {
				return nil, err
			}
		}
		return json.RawMessage(`{"n":"end"}`), nil
	}
	steps <- numbered("notifications/message", 1) // the reply becomes a stream with it
	c := e.postSSE(sid, `{"jsonrpc":"2.0","id":3,"method":"tasks/result","params":{"taskId":"t"}}`)
	var got []string
	read := func(c *sseConnT) {
		data, err := c.nextMessage()
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, data)
	}
	read(c)
	c.cut()
	steps <- numbered("notifications/message", 2)
	r1 := e.resumeSSE(sid, c.lastID)
	read(r1)
	steps <- numbered("notifications/message", 3)
	read(r1)
	r1.cut()
	steps <- numbered("notifications/message", 4)
	close(steps)
	r2 := e.resumeSSE(sid, r1.lastID)
	got = append(got, r2.rest()...)
	want := []string{
		`{"jsonrpc":"2.0","method":"notifications/message","params":{"n":1}}`,
		`{"jsonrpc":"2.0","method":"notifications/message","params":{"n":2}}`,
		`{"jsonrpc":"2.0","method":"notifications/message","params":{"n":3}}`,
		`{"jsonrpc":"2.0","method":"notifications/message","params":{"n":4}}`,
		`{"jsonrpc":"2.0","id":3,"result":{"n":"end"}}`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("messages across two cuts\n got %q\nwant %q", got, want)
	}
}

// The wire of a resumable stream: a priming event (id, empty data) first, then numbered
// events of one stream id; a request answered without messages is still plain JSON.
func TestResumableWire(t *testing.T) {
	e := resumeEnv(t, nil)
	sid := e.initSession()
	resp, body := e.post(sid, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	if resp.Header.Get("Content-Type") != "application/json" || body != `{"jsonrpc":"2.0","id":1,"result":{"ok":true}}` {
		t.Errorf("plain reply: %q %q", resp.Header.Get("Content-Type"), body)
	}
	e.h.ServeFunc = func(_ context.Context, _ *Session, _ *jsonrpc.Message, out Stream) (json.RawMessage, error) {
		_ = out.Send(numbered("notifications/message", 1))
		return nil, nil
	}
	_, body = e.post(sid, `{"jsonrpc":"2.0","id":2,"method":"tools/call"}`)
	evs := readAllSSE(t, body)
	if len(evs) != 3 {
		t.Fatalf("events %+v", evs)
	}
	stream, seq, _ := strings.Cut(evs[0].id, "-")
	if len(stream) != 27 || stream[0] != 'p' || seq != "0" || evs[0].data != "" || evs[0].event != "" {
		t.Errorf("priming event %+v", evs[0])
	}
	if evs[1].id != stream+"-1" || evs[2].id != stream+"-2" || gjson.Get(evs[2].data, "id").Int() != 2 {
		t.Errorf("events %+v", evs)
	}
	// A second stream of the session has another id.
	_, body = e.post(sid, `{"jsonrpc":"2.0","id":3,"method":"tools/call"}`)
	if other := readAllSSE(t, body); strings.HasPrefix(other[0].id, stream) {
		t.Errorf("two streams share the id %q", stream)
	}
}

// A session of an earlier revision gets no event ids (priming events carry empty data,
// which its clients may not handle).
func TestResumableOnlyFrom20251125(t *testing.T) {
	e := resumeEnv(t, nil)
	resp, body := e.post("", strings.Replace(initBody, "2025-11-25", "2025-06-18", 1))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("initialize %d %s", resp.StatusCode, body)
	}
	sid := resp.Header.Get("Mcp-Session-Id")
	e.h.ServeFunc = func(_ context.Context, _ *Session, _ *jsonrpc.Message, out Stream) (json.RawMessage, error) {
		_ = out.Send(numbered("notifications/message", 1))
		return nil, nil
	}
	_, body = e.post(sid, `{"jsonrpc":"2.0","id":2,"method":"tools/call"}`)
	if strings.Contains(body, "id: ") {
		t.Errorf("2025-06-18 stream carries ids: %q", body)
	}
}

// Last-Event-ID naming a POST stream this process does not hold (expired, another
// replica's, another session's, or invented) gets 410 and a JSON-RPC error.
func TestResumeUnknownPostStream(t *testing.T) {
	e := resumeEnv(t, nil)
	sid, other := e.initSession(), e.initSession()
	cont, ctxErr := make(chan struct{}), make(chan error, 1)
	e.h.ServeFunc = taskResultLike([]*jsonrpc.Message{numbered("notifications/message", 1)}, nil, cont, ctxErr)
	c := e.postSSE(sid, `{"jsonrpc":"2.0","id":1,"method":"tasks/result","params":{"taskId":"t"}}`)
	if _, err := c.nextMessage(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ sid, last string }{
		{sid, "pAAAAAAAAAAAAAAAAAAAAAAAAAA-1"},
		{other, c.lastID},                              // another session's stream
		{sid, strings.TrimSuffix(c.lastID, "1") + "9"}, // an event never sent
	} {
		resp, _ := e.resume(tc.sid, tc.last)
		wantRPCError(t, resp, readBody(t, resp), http.StatusGone, -32600)
	}
	close(cont)
	if err := <-ctxErr; err != nil {
		t.Errorf("handler ctx: %v", err)
	}
	c.rest()
}

// Nobody resumes within the window: the handler's ctx ends as on a plain disconnect and a
// late resume gets 410.
func TestResumeWindowExpires(t *testing.T) {
	e := resumeEnv(t, func(o *Options) { o.ResumeWindow = 50 * time.Millisecond })
	sid := e.initSession()
	cont, ctxErr := make(chan struct{}), make(chan error, 1)
	e.h.ServeFunc = taskResultLike([]*jsonrpc.Message{numbered("notifications/message", 1)}, nil, cont, ctxErr)
	c := e.postSSE(sid, `{"jsonrpc":"2.0","id":1,"method":"tasks/result","params":{"taskId":"t"}}`)
	if _, err := c.nextMessage(); err != nil {
		t.Fatal(err)
	}
	c.cut()
	select {
	case err := <-ctxErr:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("handler ctx: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("handler still running long after the resume window")
	}
	resp, _ := e.resume(sid, c.lastID)
	wantRPCError(t, resp, readBody(t, resp), http.StatusGone, -32600)
}

// A client that leaves before the reply became a stream holds no event id: its handler is
// cancelled at once, as without resumability.
func TestResumeDisconnectBeforeStreamCancels(t *testing.T) {
	e := resumeEnv(t, nil)
	sid := e.initSession()
	started, ctxErr := make(chan struct{}), make(chan error, 1)
	e.h.ServeFunc = func(ctx context.Context, _ *Session, _ *jsonrpc.Message, _ Stream) (json.RawMessage, error) {
		close(started)
		select {
		case <-ctx.Done():
		case <-time.After(10 * time.Second):
		}
		ctxErr <- ctx.Err()
		return nil, ctx.Err()
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		if resp, err := e.ts.Client().Do(e.request(ctx, http.MethodPost, sid, `{"jsonrpc":"2.0","id":1,"method":"tasks/result","params":{"taskId":"t"}}`)); err == nil {
			resp.Body.Close()
		}
	}()
	<-started
	cancel()
	if err := <-ctxErr; !errors.Is(err, context.Canceled) {
		t.Errorf("handler ctx: %v", err)
	}
}

// Close does not wait for a stream whose client is away (nobody can resume on a closing
// server): its handler is cancelled and Close returns.
func TestCloseCancelsDetachedStream(t *testing.T) {
	e := resumeEnv(t, nil)
	sid := e.initSession()
	cont, ctxErr := make(chan struct{}), make(chan error, 1)
	e.h.ServeFunc = taskResultLike([]*jsonrpc.Message{numbered("notifications/message", 1)}, nil, cont, ctxErr)
	c := e.postSSE(sid, `{"jsonrpc":"2.0","id":1,"method":"tasks/result","params":{"taskId":"t"}}`)
	if _, err := c.nextMessage(); err != nil {
		t.Fatal(err)
	}
	c.cut()
	// The server notices the cut on its own; until then Close drains as for any request.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.srv.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := <-ctxErr; !errors.Is(err, context.Canceled) {
		t.Errorf("handler ctx: %v", err)
	}
}

// DELETE of the session ends its streams waiting for a resume.
func TestDeleteCancelsDetachedStream(t *testing.T) {
	e := resumeEnv(t, nil)
	sid := e.initSession()
	cont, ctxErr := make(chan struct{}), make(chan error, 1)
	e.h.ServeFunc = taskResultLike([]*jsonrpc.Message{numbered("notifications/message", 1)}, nil, cont, ctxErr)
	c := e.postSSE(sid, `{"jsonrpc":"2.0","id":1,"method":"tasks/result","params":{"taskId":"t"}}`)
	if _, err := c.nextMessage(); err != nil {
		t.Fatal(err)
	}
	c.cut() // the server may notice it before or after the DELETE: both must end the handler
	del := e.do(e.request(context.Background(), http.MethodDelete, sid, ""))
	readBody(t, del)
	select {
	case err := <-ctxErr:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("handler ctx: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("handler of a deleted session still waits for a resume")
	}
}

// The standalone GET stream: ids on pushed messages; a cut connection is resumed with
// Last-Event-ID, replaying what the client did not process, then continuing live.
func TestResumeGetStream(t *testing.T) {
	e := resumeEnv(t, nil)
	sid := e.initSession()
	g := e.resumeSSE(sid, "") // no Last-Event-ID: a fresh stream
	ev, err := g.r.next()
	if err != nil || ev.data != "" || !strings.HasPrefix(ev.id, "g") || !strings.HasSuffix(ev.id, "-0") {
		t.Fatalf("priming event %+v, %v", ev, err)
	}
	g.lastID = ev.id
	msgs := []*jsonrpc.Message{
		numbered("notifications/tasks/status", 1),
		numbered("elicitation/create", 2),
		numbered("notifications/tasks/status", 3),
	}
	for _, m := range msgs {
		if !e.srv.Push(sid, m) {
			t.Fatal("Push = false")
		}
	}
	data, err := g.nextMessage()
	if err != nil {
		t.Fatal(err)
	}
	got := []string{data}
	g.cut()
	waitFor(t, func() bool { return !e.srv.HasGetStream(sid) })
	if e.srv.Push(sid, numbered("notifications/tasks/status", 99)) {
		t.Fatal("Push with no GET connection = true (it would be buffered for nobody)")
	}
	r := e.resumeSSE(sid, g.lastID)
	waitFor(t, func() bool { return e.srv.HasGetStream(sid) })
	for range 2 {
		data, err := r.nextMessage()
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, data)
	}
	live := numbered("notifications/tasks/status", 4)
	if !e.srv.Push(sid, live) {
		t.Fatal("Push after resume = false")
	}
	data, err = r.nextMessage()
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, data)
	want := wireOf(t, append(msgs, live))
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("GET stream across the cut\n got %q\nwant %q", got, want)
	}
	stream, _, _ := strings.Cut(g.lastID, "-")
	if r.lastID != stream+"-4" {
		t.Errorf("last id after resume %q, want %s-4", r.lastID, stream)
	}
}

// A Last-Event-ID naming a GET stream this process does not know (another replica's, or
// expired) opens a fresh GET stream, as a GET without it does.
func TestResumeUnknownGetStreamIsFresh(t *testing.T) {
	e := resumeEnv(t, nil)
	sid := e.initSession()
	r := e.resumeSSE(sid, "gAAAAAAAAAAAAAAAAAAAAAAAAAA-5")
	ev, err := r.r.next()
	if err != nil || ev.data != "" || !strings.HasSuffix(ev.id, "-0") || strings.HasPrefix(ev.id, "gAAAA") {
		t.Fatalf("first event %+v, %v", ev, err)
	}
	if !e.srv.Push(sid, numbered("notifications/message", 1)) {
		t.Fatal("Push = false")
	}
	if data, err := r.nextMessage(); err != nil || gjson.Get(data, "params.n").Int() != 1 {
		t.Fatalf("%q %v", data, err)
	}
}

// Serve runs outside the HTTP server's goroutine on a resumable stream: a panic there
// answers -32603 on the stream instead of ending the process.
func TestResumableHandlerPanicIsInternalError(t *testing.T) {
	e := resumeEnv(t, nil)
	sid := e.initSession()
	e.h.ServeFunc = func(_ context.Context, _ *Session, _ *jsonrpc.Message, out Stream) (json.RawMessage, error) {
		_ = out.Send(numbered("notifications/message", 1))
		panic("boom")
	}
	c := e.postSSE(sid, `{"jsonrpc":"2.0","id":5,"method":"tools/call"}`)
	got := c.rest()
	if len(got) != 2 || gjson.Get(got[1], "id").Int() != 5 || gjson.Get(got[1], "error.code").Int() != -32603 {
		t.Fatalf("stream %q", got)
	}
}
