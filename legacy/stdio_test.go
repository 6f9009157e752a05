package legacy

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/internal/jsonrpc"
)

// stdioPeer is a client end of ServeStdio over two pipes.
type stdioPeer struct {
	t    *testing.T
	in   *io.PipeWriter // the server's stdin
	out  *bufio.Reader  // the server's stdout
	done chan error     // ServeStdio's return value
}

func startStdio(t *testing.T, e *env) *stdioPeer {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	p := &stdioPeer{t: t, in: inW, out: bufio.NewReader(outR), done: make(chan error, 1)}
	go func() {
		err := e.srv.ServeStdio(context.Background(), inR, outW, StdioOptions{})
		outW.Close()
		p.done <- err
	}()
	t.Cleanup(func() {
		inW.Close()
		go io.Copy(io.Discard, outR) // let a blocked writer finish
		select {
		case <-p.done:
		case <-time.After(5 * time.Second):
			t.Error("ServeStdio did not return after stdin closed")
		}
	})
	return p
}

func (p *stdioPeer) send(line string) {
	p.t.Helper()
	if _, err := io.WriteString(p.in, line+"\n"); err != nil {
		p.t.Fatalf("write stdin: %v", err)
	}
}

// recv reads one line of stdout and checks it is a single JSON-RPC message.
func (p *stdioPeer) recv() string {
	p.t.Helper()
	type res struct {
		s   string
		err error
	}
	ch := make(chan res, 1)
	go func() { s, err := p.out.ReadString('\n'); ch <- res{s, err} }()
	select {
	case r := <-ch:
		if r.err != nil {
			p.t.Fatalf("read stdout: %v (got %q)", r.err, r.s)
		}
		line := strings.TrimSuffix(r.s, "\n")
		if _, err := jsonrpc.Decode([]byte(line)); err != nil {
			p.t.Fatalf("stdout line is not one JSON-RPC message: %q", line)
		}
		return line
	case <-time.After(10 * time.Second):
		p.t.Fatal("no line on stdout within 10s")
		return ""
	}
}

func (p *stdioPeer) initialize() string {
	p.t.Helper()
	p.send(initBody)
	resp := p.recv()
	if gjson.Get(resp, "id").Int() != 1 || gjson.Get(resp, "result.protocolVersion").Str != "2025-11-25" {
		p.t.Fatalf("initialize answer: %s", resp)
	}
	return resp
}

func TestStdioSessionIsAStoreRecordForTheConnection(t *testing.T) {
	e := newEnv(t, nil)
	p := startStdio(t, e)
	p.initialize()
	var sessID string
	e.h.ServeFunc = func(_ context.Context, sess *Session, _ *jsonrpc.Message, _ Stream) (json.RawMessage, error) {
		sessID = sess.ID
		return json.RawMessage(`{"tools":[]}`), nil
	}
	p.send(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	if r := p.recv(); gjson.Get(r, "id").Int() != 2 || !gjson.Get(r, "result.tools").IsArray() {
		t.Fatalf("tools/list answer: %s", r)
	}
	s, ok := e.st.session(sessID)
	if !ok || s.Closed || gjson.GetBytes(s.ClientInfo, "name").Str != "curl" || !gjson.GetBytes(s.ClientCapabilities, "elicitation").Exists() {
		t.Fatalf("stored session = %+v, %v", s, ok)
	}
	p.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	p.send(`{"jsonrpc":"2.0","id":3,"method":"ping"}`)
	if r := p.recv(); gjson.Get(r, "id").Int() != 3 || gjson.Get(r, "result").Raw != "{}" {
		t.Fatalf("ping answer: %s", r)
	}
	p.in.Close()
	if err := <-p.done; err != nil {
		t.Fatalf("ServeStdio = %v, want nil at EOF", err)
	}
	p.done <- nil // for the cleanup
	if s, _ := e.st.session(sessID); !s.Closed {
		t.Error("session not closed in the store after stdin closed")
	}
	notified, _, closed, _ := e.h.snapshot()
	if len(closed) != 1 || closed[0] != sessID {
		t.Errorf("Handler.Closed calls = %v, want [%s]", closed, sessID)
	}
	if len(notified) != 1 || notified[0] != "notifications/initialized" {
		t.Errorf("notified = %v", notified)
	}
}

func TestStdioRefusesRequestsBeforeInitializeAndBadLines(t *testing.T) {
	e := newEnv(t, nil)
	p := startStdio(t, e)
	p.send(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	if r := p.recv(); gjson.Get(r, "error.code").Int() != jsonrpc.CodeInvalidRequest || gjson.Get(r, "id").Int() != 1 {
		t.Fatalf("request before initialize: %s", r)
	}
	p.send(`{not json`)
	if r := p.recv(); gjson.Get(r, "error.code").Int() != jsonrpc.CodeParseError || gjson.Get(r, "id").Type != gjson.Null {
		t.Fatalf("bad line: %s", r)
	}
	p.send(`[{"jsonrpc":"2.0","id":1,"method":"ping"}]`)
	if r := p.recv(); gjson.Get(r, "error.code").Int() != jsonrpc.CodeInvalidRequest {
		t.Fatalf("batch: %s", r)
	}
	p.initialize()
	p.send(initBody)
	if r := p.recv(); gjson.Get(r, "error.code").Int() != jsonrpc.CodeInvalidRequest {
		t.Fatalf("second initialize: %s", r)
	}
	// Issue 16 item 10: an id-less request method is dropped (a notification gets no reply),
	// never handed to the route; the next request is served as usual.
	p.send(`{"jsonrpc":"2.0","method":"tools/call","params":{"name":"x"}}`)
	p.send(`{"jsonrpc":"2.0","id":9,"method":"ping"}`)
	if r := p.recv(); gjson.Get(r, "id").Int() != 9 || gjson.Get(r, "error").Exists() {
		t.Fatalf("ping after an id-less tools/call: %s", r)
	}
	if notified, _, _, served := e.h.snapshot(); len(served) != 0 || slices.Contains(notified, "tools/call") {
		t.Errorf("handler saw %v / %v", served, notified)
	}
}

// An input request sent on a request's stream reaches stdout before the response; the
// client's answer goes to Handler.Respond; a Push reaches the same connection; a blocked
// request does not hold up another one.
func TestStdioStreamsPushAndConcurrency(t *testing.T) {
	e := newEnv(t, nil)
	p := startStdio(t, e)
	p.initialize()
	release := make(chan struct{})
	var sessID string
	gotSess := make(chan struct{})
	e.h.ServeFunc = func(ctx context.Context, sess *Session, req *jsonrpc.Message, out Stream) (json.RawMessage, error) {
		switch req.Method {
		case "tasks/result":
			sessID = sess.ID
			close(gotSess)
			m, _ := jsonrpc.NewRequest(jsonrpc.StringID("ask-1"), "elicitation/create", map[string]any{"message": "ok?"})
			if err := out.Send(m); err != nil {
				return nil, err
			}
			select {
			case <-release:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return json.RawMessage(`{"content":[]}`), nil
		default:
			return json.RawMessage(`{"status":"working"}`), nil
		}
	}
	p.send(`{"jsonrpc":"2.0","id":10,"method":"tasks/result","params":{"taskId":"t"}}`)
	if r := p.recv(); gjson.Get(r, "method").Str != "elicitation/create" || gjson.Get(r, "id").Str != "ask-1" {
		t.Fatalf("want the elicitation first, got %s", r)
	}
	<-gotSess
	p.send(`{"jsonrpc":"2.0","id":11,"method":"tasks/get","params":{"taskId":"t"}}`)
	if r := p.recv(); gjson.Get(r, "id").Int() != 11 {
		t.Fatalf("tasks/get should answer while tasks/result blocks; got %s", r)
	}
	if !e.srv.HasGetStream(sessID) {
		t.Error("HasGetStream = false for a live stdio session")
	}
	note, _ := jsonrpc.NewNotification("notifications/tasks/status", map[string]any{"taskId": "t", "status": "completed"})
	if !e.srv.Push(sessID, note) {
		t.Fatal("Push to a stdio session = false")
	}
	if r := p.recv(); gjson.Get(r, "method").Str != "notifications/tasks/status" {
		t.Fatalf("pushed notification: %s", r)
	}
	p.send(`{"jsonrpc":"2.0","id":"ask-1","result":{"action":"accept","content":{}}}`)
	// The answer is handed to Respond on a goroutine of its own: wait for it before the
	// blocked request may end (the two need not arrive in any order).
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if _, responded, _, _ := e.h.snapshot(); len(responded) > 0 || time.Now().After(deadline) {
			break
		}
	}
	close(release)
	if r := p.recv(); gjson.Get(r, "id").Int() != 10 || !gjson.Get(r, "result.content").IsArray() {
		t.Fatalf("tasks/result answer: %s", r)
	}
	if _, responded, _, _ := e.h.snapshot(); len(responded) != 1 || responded[0] != `"ask-1"` {
		t.Errorf("responded = %v", responded)
	}
}

// Closing stdin cancels the requests in flight and ends the session; Push then reports
// false.
func TestStdioEOFCancelsInFlight(t *testing.T) {
	e := newEnv(t, nil)
	p := startStdio(t, e)
	p.initialize()
	cancelled := make(chan error, 1)
	started := make(chan string, 1)
	e.h.ServeFunc = func(ctx context.Context, sess *Session, _ *jsonrpc.Message, _ Stream) (json.RawMessage, error) {
		started <- sess.ID
		<-ctx.Done()
		cancelled <- ctx.Err()
		return nil, ctx.Err()
	}
	p.send(`{"jsonrpc":"2.0","id":2,"method":"tasks/result","params":{"taskId":"t"}}`)
	sessID := <-started
	p.in.Close()
	select {
	case err := <-cancelled:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("ctx err = %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("in-flight request not cancelled at EOF")
	}
	<-p.done
	p.done <- nil
	note, _ := jsonrpc.NewNotification("notifications/tasks/status", map[string]any{})
	if e.srv.Push(sessID, note) || e.srv.HasGetStream(sessID) {
		t.Error("ended stdio session still reachable by Push")
	}
}

// Server.Close ends a stdio connection.
func TestStdioEndsOnServerClose(t *testing.T) {
	e := newEnv(t, nil)
	p := startStdio(t, e)
	p.initialize()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := e.srv.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	select {
	case err := <-p.done:
		p.done <- err
	case <-time.After(5 * time.Second):
		t.Fatal("ServeStdio still running after Server.Close")
	}
}
