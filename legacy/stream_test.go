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
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/internal/jsonrpc"
)

func TestParseAccept(t *testing.T) {
	for _, tc := range []struct {
		h         []string
		json, sse bool
	}{
		{nil, true, true},
		{[]string{""}, true, true},
		{[]string{"application/json, text/event-stream"}, true, true},
		{[]string{"application/json", "text/event-stream"}, true, true},
		{[]string{"application/json"}, true, false},
		{[]string{"text/event-stream"}, false, true},
		{[]string{"*/*"}, true, true},
		{[]string{"Application/JSON;q=0.9, TEXT/*"}, true, true},
		{[]string{"text/html"}, false, false},
	} {
		a := parseAccept(tc.h)
		if a.json != tc.json || a.sse != tc.sse {
			t.Errorf("parseAccept(%q) = json %v sse %v, want %v %v", tc.h, a.json, a.sse, tc.json, tc.sse)
		}
	}
}

func TestServeSSEStream(t *testing.T) {
	e := newEnv(t, nil)
	sid := e.initSession()
	elicit := `{"mode":"form","message":"Delete a.txt?","_meta":{"io.modelcontextprotocol/related-task":{"taskId":"t1"}}}`
	e.h.ServeFunc = func(_ context.Context, _ *Session, req *jsonrpc.Message, out Stream) (json.RawMessage, error) {
		if err := out.Send(note("notifications/progress", `{"progressToken":"p","progress":1}`)); err != nil {
			return nil, err
		}
		if err := out.KeepAlive(); err != nil {
			return nil, err
		}
		r, _ := jsonrpc.NewRequest(jsonrpc.IntID(0), "elicitation/create", json.RawMessage(elicit))
		if err := out.Send(r); err != nil {
			return nil, err
		}
		if err := out.Send(&jsonrpc.Message{ID: jsonrpc.IntID(9), Result: json.RawMessage(`{}`)}); !errors.Is(err, ErrNotRequestOrNotification) {
			t.Errorf("Send(response) = %v", err)
		}
		return json.RawMessage(`{"content":[],"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"t1"}}}`), nil
	}
	resp, body := e.post(sid, `{"jsonrpc":"2.0","id":4,"method":"tasks/result","params":{"taskId":"t1"}}`)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	for k, v := range map[string]string{"Content-Type": "text/event-stream", "Cache-Control": "no-cache", "X-Accel-Buffering": "no"} {
		if got := resp.Header.Get(k); got != v {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}
	want := "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":\"p\",\"progress\":1}}\n\n" +
		": keep-alive\n\n" +
		"event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"elicitation/create\",\"params\":" + elicit + "}\n\n" +
		"event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":4,\"result\":{\"content\":[],\"_meta\":{\"io.modelcontextprotocol/related-task\":{\"taskId\":\"t1\"}}}}\n\n"
	if body != want {
		t.Errorf("stream\n got %q\nwant %q", body, want)
	}
	evs := readAllSSE(t, body)
	if len(evs) != 4 || evs[1].comment != "keep-alive" || evs[3].event != "message" || gjson.Get(evs[3].data, "id").Int() != 4 {
		t.Errorf("parsed %+v", evs)
	}
	for _, ev := range evs {
		if ev.comment == "" {
			if _, err := jsonrpc.Decode([]byte(ev.data)); err != nil {
				t.Errorf("event %q: %v", ev.data, err)
			}
		}
	}
}

// Messages are flushed as they are sent, not when Serve returns: the client can answer an
// elicitation while the request is still open.
func TestServeSSEFlushesEachEvent(t *testing.T) {
	e := newEnv(t, nil)
	sid := e.initSession()
	answered := make(chan struct{})
	e.h.ServeFunc = func(ctx context.Context, _ *Session, _ *jsonrpc.Message, out Stream) (json.RawMessage, error) {
		r, _ := jsonrpc.NewRequest(jsonrpc.StringID("br-1"), "elicitation/create", json.RawMessage(`{}`))
		if err := out.Send(r); err != nil {
			return nil, err
		}
		select {
		case <-answered:
			return json.RawMessage(`{"done":true}`), nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second) // fail, not hang, if unflushed
	defer cancel()
	resp := e.do(e.request(ctx, http.MethodPost, sid, `{"jsonrpc":"2.0","id":5,"method":"tasks/result","params":{"taskId":"t"}}`))
	defer resp.Body.Close()
	r := &sseReader{br: bufio.NewReader(resp.Body)}
	ev, err := r.next()
	if err != nil || gjson.Get(ev.data, "method").Str != "elicitation/create" {
		t.Fatalf("first event %+v, %v", ev, err)
	}
	if resp, body := e.post(sid, `{"jsonrpc":"2.0","id":"br-1","result":{"action":"accept"}}`); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("answer: %d %s", resp.StatusCode, body)
	}
	close(answered)
	ev, err = r.next()
	if err != nil || ev.data != `{"jsonrpc":"2.0","id":5,"result":{"done":true}}` {
		t.Fatalf("final event %+v, %v", ev, err)
	}
	if _, err := r.next(); err != io.EOF {
		t.Errorf("stream did not end after the response: %v", err)
	}
}

// TestPostAcceptEnforced pins 2025-11-25 §"Sending Messages to the Server": a POST MUST list
// both application/json and text/event-stream; one that lists only one is 406, before any
// handler runs. (No Accept at all is */* by RFC 9110 and is served: TestServeLenientAccept.)
func TestPostAcceptEnforced(t *testing.T) {
	e := newEnv(t, nil)
	sid := e.initSession()
	for _, accept := range []string{"application/json", "text/event-stream", "text/html"} {
		resp, body := e.post(sid, `{"jsonrpc":"2.0","id":6,"method":"tools/call"}`, "Accept", accept)
		wantRPCError(t, resp, body, http.StatusNotAcceptable, -32600)
		if !strings.Contains(body, "application/json and text/event-stream") {
			t.Errorf("Accept %q: %s", accept, body)
		}
	}
	resp, body := e.post("", initBody, "Accept", "application/json")
	wantRPCError(t, resp, body, http.StatusNotAcceptable, -32600)
	if _, _, _, served := e.h.snapshot(); len(served) != 0 {
		t.Errorf("Serve called: %v", served)
	}
}

func TestServeLenientAccept(t *testing.T) {
	e := newEnv(t, nil)
	sid := e.initSession()
	e.h.ServeFunc = func(_ context.Context, _ *Session, _ *jsonrpc.Message, out Stream) (json.RawMessage, error) {
		return nil, out.KeepAlive()
	}
	// No Accept header at all: SSE allowed.
	resp, body := e.post(sid, `{"jsonrpc":"2.0","id":7,"method":"tools/call"}`, "Accept", "")
	if resp.Header.Get("Content-Type") != "text/event-stream" || !strings.HasSuffix(body, "data: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}\n\n") {
		t.Errorf("%q %q", resp.Header.Get("Content-Type"), body)
	}
}

func TestStreamClosedAfterServeReturns(t *testing.T) {
	e := newEnv(t, nil)
	sid := e.initSession()
	kept := make(chan Stream, 1)
	e.h.ServeFunc = func(_ context.Context, _ *Session, _ *jsonrpc.Message, out Stream) (json.RawMessage, error) {
		kept <- out
		return nil, nil
	}
	e.post(sid, `{"jsonrpc":"2.0","id":9,"method":"tools/list"}`)
	out := <-kept
	if err := out.Send(note("notifications/message", `{}`)); !errors.Is(err, ErrStreamClosed) {
		t.Errorf("Send after return = %v", err)
	}
	if err := out.KeepAlive(); !errors.Is(err, ErrStreamClosed) {
		t.Errorf("KeepAlive after return = %v", err)
	}
}

func TestClientDisconnectCancelsServe(t *testing.T) {
	e := newEnv(t, nil)
	sid := e.initSession()
	started, cancelled := make(chan struct{}), make(chan error, 1)
	e.h.ServeFunc = func(ctx context.Context, _ *Session, _ *jsonrpc.Message, _ Stream) (json.RawMessage, error) {
		close(started)
		select {
		case <-ctx.Done():
			cancelled <- ctx.Err()
		case <-time.After(10 * time.Second):
			cancelled <- errors.New("ctx not cancelled")
		}
		return nil, ctx.Err()
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		resp, err := e.ts.Client().Do(e.request(ctx, http.MethodPost, sid, `{"jsonrpc":"2.0","id":10,"method":"tasks/result","params":{"taskId":"t"}}`))
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	<-started
	cancel()
	if err := <-cancelled; !errors.Is(err, context.Canceled) {
		t.Errorf("handler ctx: %v", err)
	}
	if err := <-errc; err == nil {
		t.Error("client request succeeded after cancel")
	}
}

// openGet opens the standalone stream and waits for the headers.
func (e *env) openGet(ctx context.Context, sid string) (*http.Response, *sseReader) {
	e.t.Helper()
	resp := e.do(e.request(ctx, http.MethodGet, sid, ""))
	if resp.StatusCode != http.StatusOK {
		e.t.Fatalf("GET: %d %s", resp.StatusCode, readBody(e.t, resp))
	}
	return resp, &sseReader{br: bufio.NewReader(resp.Body)}
}

func TestGetStreamPush(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.KeepAlive = -1 })
	sid := e.initSession()
	if e.srv.HasGetStream(sid) {
		t.Fatal("HasGetStream before GET")
	}
	resp, r := e.openGet(context.Background(), sid)
	defer resp.Body.Close()
	for k, v := range map[string]string{"Content-Type": "text/event-stream", "Cache-Control": "no-cache", "X-Accel-Buffering": "no"} {
		if got := resp.Header.Get(k); got != v {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}
	if !e.srv.HasGetStream(sid) {
		t.Fatal("HasGetStream false with a GET open")
	}
	status := note("notifications/tasks/status", `{"taskId":"t1","status":"working"}`)
	if !e.srv.Push(sid, status) {
		t.Fatal("Push = false")
	}
	ev, err := r.next()
	want := `{"jsonrpc":"2.0","method":"notifications/tasks/status","params":{"taskId":"t1","status":"working"}}`
	if err != nil || ev.event != "message" || ev.data != want {
		t.Fatalf("event %+v, %v", ev, err)
	}
	if e.srv.Push("other", status) {
		t.Error("Push to a session without a GET stream = true")
	}
	if e.srv.Push(sid, &jsonrpc.Message{ID: jsonrpc.IntID(1), Result: json.RawMessage(`{}`)}) {
		t.Error("Push of a response = true")
	}
	// The caller's message is not modified (Push may fan one value out).
	if status.JSONRPC != "2.0" || status.Method != "notifications/tasks/status" {
		t.Errorf("message modified: %+v", status)
	}
}

func TestGetStreamKeepAlive(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.KeepAlive = 20 * time.Millisecond })
	sid := e.initSession()
	resp, r := e.openGet(context.Background(), sid)
	defer resp.Body.Close()
	for range 2 {
		ev, err := r.next()
		if err != nil || ev.comment != "keep-alive" {
			t.Fatalf("event %+v, %v", ev, err)
		}
	}
}

// TestGetStreamsSeveralPerSession pins 2025-11-25 §"Multiple Connections": a client may hold
// several GET streams; a new one does not end the earlier ones (each message travels on one),
// and only beyond maxGetStreams does the oldest end.
func TestGetStreamsSeveralPerSession(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.KeepAlive = -1 })
	sid := e.initSession()
	first, r1 := e.openGet(context.Background(), sid)
	defer first.Body.Close()
	second, r2 := e.openGet(context.Background(), sid)
	defer second.Body.Close()
	// The newest stream takes the message; the first is still open and takes the next one
	// once the second is gone.
	if !e.srv.Push(sid, note("notifications/tools/list_changed", `{}`)) {
		t.Fatal("Push = false")
	}
	if ev, err := r2.next(); err != nil || gjson.Get(ev.data, "method").Str != "notifications/tools/list_changed" {
		t.Fatalf("second stream %+v, %v", ev, err)
	}
	second.Body.Close()
	waitFor(t, func() bool {
		e.srv.mu.Lock()
		defer e.srv.mu.Unlock()
		return len(e.srv.streams[sid]) == 1
	})
	if !e.srv.Push(sid, note("notifications/resources/list_changed", `{}`)) {
		t.Fatal("Push after the second stream left = false")
	}
	if ev, err := r1.next(); err != nil || gjson.Get(ev.data, "method").Str != "notifications/resources/list_changed" {
		t.Fatalf("first stream %+v, %v (a newer GET must not have ended it)", ev, err)
	}
	// Beyond the bound the oldest ends.
	for range maxGetStreams {
		resp, _ := e.openGet(context.Background(), sid)
		defer resp.Body.Close()
	}
	if _, err := r1.next(); err != io.EOF {
		t.Fatalf("oldest stream beyond %d: %v, want EOF", maxGetStreams, err)
	}
}

func TestGetStreamClientLeaves(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.KeepAlive = -1 })
	sid := e.initSession()
	ctx, cancel := context.WithCancel(context.Background())
	resp, _ := e.openGet(ctx, sid)
	cancel()
	resp.Body.Close()
	waitFor(t, func() bool { return !e.srv.HasGetStream(sid) })
	if e.srv.Push(sid, note("notifications/message", `{}`)) {
		t.Error("Push after the client left = true")
	}
}

func TestGetRejections(t *testing.T) {
	e := newEnv(t, nil)
	sid := e.initSession()
	req := e.request(context.Background(), http.MethodGet, sid, "")
	req.Header.Set("Accept", "application/json")
	resp := e.do(req)
	wantRPCError(t, resp, readBody(t, resp), http.StatusNotAcceptable, -32600)
	resp = e.do(e.request(context.Background(), http.MethodGet, "", ""))
	wantRPCError(t, resp, readBody(t, resp), http.StatusBadRequest, -32600)
	resp = e.do(e.request(context.Background(), http.MethodGet, "unknown", ""))
	wantRPCError(t, resp, readBody(t, resp), http.StatusNotFound, -32001)
	req = e.request(context.Background(), http.MethodGet, sid, "")
	req.Header.Set("MCP-Protocol-Version", "1.0")
	resp = e.do(req)
	wantRPCError(t, resp, readBody(t, resp), http.StatusBadRequest, -32600)
	if e.srv.HasGetStream(sid) {
		t.Error("rejected GET left a stream")
	}
}

func TestDeleteEndsGetStream(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.KeepAlive = -1 })
	sid := e.initSession()
	resp, r := e.openGet(context.Background(), sid)
	defer resp.Body.Close()
	del := e.do(e.request(context.Background(), http.MethodDelete, sid, ""))
	readBody(t, del)
	if del.StatusCode != http.StatusOK {
		t.Fatalf("DELETE %d", del.StatusCode)
	}
	if _, err := r.next(); err != io.EOF {
		t.Fatalf("GET stream after DELETE: %v", err)
	}
	waitFor(t, func() bool { return !e.srv.HasGetStream(sid) })
	get := e.do(e.request(context.Background(), http.MethodGet, sid, ""))
	wantRPCError(t, get, readBody(t, get), http.StatusNotFound, -32001)
}

func TestCloseDrains(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.KeepAlive = -1 })
	sid := e.initSession()
	getResp, r := e.openGet(context.Background(), sid)
	defer getResp.Body.Close()
	started, release := make(chan struct{}), make(chan struct{})
	e.h.ServeFunc = func(ctx context.Context, _ *Session, _ *jsonrpc.Message, _ Stream) (json.RawMessage, error) {
		close(started)
		<-release
		return json.RawMessage(`{"late":true}`), ctx.Err()
	}
	postDone := make(chan string, 1)
	go func() {
		_, body := e.post(sid, `{"jsonrpc":"2.0","id":11,"method":"tools/call"}`)
		postDone <- body
	}()
	<-started
	closeDone := make(chan error, 1)
	go func() { closeDone <- e.srv.Close(context.Background()) }()
	if _, err := r.next(); err != io.EOF {
		t.Fatalf("GET stream after Close: %v", err)
	}
	waitFor(t, func() bool {
		resp, _ := e.post(sid, `{"jsonrpc":"2.0","id":12,"method":"ping"}`)
		return resp.StatusCode == http.StatusServiceUnavailable
	})
	select {
	case err := <-closeDone:
		t.Fatalf("Close returned %v before the in-flight handler", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	if err := <-closeDone; err != nil {
		t.Fatalf("Close: %v", err)
	}
	if body := <-postDone; body != `{"jsonrpc":"2.0","id":11,"result":{"late":true}}` {
		t.Errorf("in-flight reply %s", body)
	}
	if err := e.srv.Close(context.Background()); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestCloseGivesUpAndCancels(t *testing.T) {
	e := newEnv(t, nil)
	sid := e.initSession()
	started, ctxErr := make(chan struct{}), make(chan error, 1)
	e.h.ServeFunc = func(ctx context.Context, _ *Session, _ *jsonrpc.Message, _ Stream) (json.RawMessage, error) {
		close(started)
		<-ctx.Done()
		ctxErr <- ctx.Err()
		return nil, ctx.Err()
	}
	postDone := make(chan struct{})
	go func() {
		defer close(postDone)
		e.post(sid, `{"jsonrpc":"2.0","id":13,"method":"tools/call"}`)
	}()
	<-started
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	if err := e.srv.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close = %v, want DeadlineExceeded", err)
	}
	if err := <-ctxErr; !errors.Is(err, context.Canceled) {
		t.Errorf("handler ctx: %v", err)
	}
	<-postDone
}

func TestConcurrentSessions(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.KeepAlive = 5 * time.Millisecond })
	e.h.ServeFunc = func(_ context.Context, sess *Session, req *jsonrpc.Message, out Stream) (json.RawMessage, error) {
		if err := out.Send(note("notifications/progress", `{"progress":1}`)); err != nil {
			return nil, err
		}
		return json.RawMessage(`{"session":"` + sess.ID + `","id":` + req.ID.Raw() + `}`), nil
	}
	const n = 100
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- e.sessionRoundTrip(i)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if _, _, closed, _ := e.h.snapshot(); len(closed) != n {
		t.Errorf("%d sessions closed, want %d", len(closed), n)
	}
}

// sessionRoundTrip runs one client's life: initialize, GET stream with a push, an SSE
// request, a notification, DELETE. It reports instead of failing (it runs off the test
// goroutine).
func (e *env) sessionRoundTrip(i int) error {
	resp, err := e.ts.Client().Do(e.request(context.Background(), http.MethodPost, "", initBody))
	if err != nil {
		return err
	}
	resp.Body.Close()
	sid := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || sid == "" {
		return fmt.Errorf("client %d: initialize %d", i, resp.StatusCode)
	}
	get, err := e.ts.Client().Do(e.request(context.Background(), http.MethodGet, sid, ""))
	if err != nil {
		return err
	}
	defer get.Body.Close()
	gr := &sseReader{br: bufio.NewReader(get.Body)}
	if !e.srv.Push(sid, note("notifications/message", fmt.Sprintf(`{"n":%d}`, i))) {
		return fmt.Errorf("client %d: Push = false", i)
	}
	for {
		ev, err := gr.next()
		if err != nil {
			return fmt.Errorf("client %d: GET stream: %v", i, err)
		}
		if ev.comment == "" {
			if gjson.Get(ev.data, "params.n").Int() != int64(i) {
				return fmt.Errorf("client %d: got %s", i, ev.data)
			}
			break
		}
	}
	call := e.request(context.Background(), http.MethodPost, sid, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call"}`, i))
	resp, err = e.ts.Client().Do(call)
	if err != nil {
		return err
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	want := fmt.Sprintf("event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progress\":1}}\n\n"+
		"event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":%d,\"result\":{\"session\":\"%s\",\"id\":%d}}\n\n", i, sid, i)
	if string(b) != want {
		return fmt.Errorf("client %d: stream %q", i, b)
	}
	resp, err = e.ts.Client().Do(e.request(context.Background(), http.MethodPost, sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`))
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		return fmt.Errorf("client %d: notification %d", i, resp.StatusCode)
	}
	resp, err = e.ts.Client().Do(e.request(context.Background(), http.MethodDelete, sid, ""))
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("client %d: DELETE %d", i, resp.StatusCode)
	}
	return nil
}

// note builds a notification; safe to call from handler goroutines.
func note(method, params string) *jsonrpc.Message {
	m, err := jsonrpc.NewNotification(method, json.RawMessage(params))
	if err != nil {
		panic(err)
	}
	return m
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
