// Acceptance 2 of issue 14 (part 2): two "taskbridge serve" replicas on one PostgreSQL,
// behind the round-robin alternator (no stickiness), coordinate through the store: the
// MRTR round of test_tool_with_task completes with its answer on the other replica, a
// Last-Event-ID resume sent to the other replica delivers the rest exactly once, 100
// pollers over both replicas cost the upstream about one tasks/get per poll interval, and
// a replica SIGKILLed while it holds the poll lease hands it over within a few intervals.
package interop

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/internal/fixture"
	"github.com/taskbridge/taskbridge/internal/jsonrpc"
	"github.com/taskbridge/taskbridge/internal/legacyclient"
)

func TestReplicasShareTheStore(t *testing.T) {
	if testing.Short() {
		t.Skip("builds taskbridge and runs two replicas")
	}
	dsn := replicaPG(t)
	bin, _ := binaries(t)
	const interval = 100 * time.Millisecond
	fx := fixture.New(fixture.Options{Name: "replicas-shared", Scale: 0.2, PollIntervalMs: interval.Milliseconds()})
	up := httptest.NewServer(fx)
	t.Cleanup(func() { up.Close(); fx.Close() })
	r0, p0 := serveReplicaCmd(t, bin, up.URL+"/mcp", dsn, "replica-0")
	r1 := serveReplica(t, bin, up.URL+"/mcp", dsn, "replica-1")
	_, lbURL := newAlternator(t, r0, r1)

	t.Run("mrtr", func(t *testing.T) {
		// tools/call's stream stays on one replica; the answer, the next request, goes to
		// the other.
		c := legacyclient.New(lbURL)
		c.Requests = make(chan *jsonrpc.Message, 4)
		initialize(t, c)
		type res struct {
			raw []byte
			err error
		}
		done := make(chan res, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			out, err := c.Call(ctx, "tools/call", map[string]any{"name": "test_tool_with_task", "arguments": map[string]any{}, "task": map[string]any{}})
			done <- res{out, err}
		}()
		var ask *jsonrpc.Message
		select {
		case ask = <-c.Requests:
		case <-time.After(20 * time.Second):
			t.Fatal("no MRTR input request relayed")
		}
		if err := c.Respond(context.Background(), ask.ID, json.RawMessage(`{"action":"accept","content":{"name":"replicas"}}`)); err != nil {
			t.Fatal(err)
		}
		var got res
		select {
		case got = <-done:
		case <-time.After(20 * time.Second):
			t.Fatal("the MRTR round never completed across replicas")
		}
		if got.err != nil {
			t.Fatalf("tools/call: %v", got.err)
		}
		taskID := gjson.GetBytes(got.raw, "task.taskId").Str
		if txt := resultText(t, c, taskID); !strings.Contains(txt, "Hello, replicas!") {
			t.Fatalf("result %q: want the answer given through the other replica", txt)
		}
	})

	t.Run("resume-on-other-replica", func(t *testing.T) {
		c := legacyclient.New(r0)
		initialize(t, c)
		onOther := legacyclient.New(r1)
		onOther.SetSessionID(c.SessionID())
		tid := callOK(t, c, "tools/call", map[string]any{"name": "confirm_delete", "arguments": map[string]any{"filename": "resumed.txt"}, "task": map[string]any{}}).Get("task.taskId").Str
		post := openSSE(t, r0, c.SessionID(), `{"jsonrpc":"2.0","id":"res-r","method":"tasks/result","params":{"taskId":"`+tid+`"}}`, "")
		var seen []gjson.Result
		for {
			m, err := post.next()
			if err != nil {
				t.Fatalf("replica-0's tasks/result stream before the elicitation: %v", err)
			}
			seen = append(seen, m)
			if m.Get("method").Str == "elicitation/create" {
				if err := onOther.Respond(context.Background(), jsonrpc.StringID(m.Get("id").Str), json.RawMessage(`{"action":"accept","content":{"confirm":true}}`)); err != nil {
					t.Fatal(err)
				}
				break
			}
		}
		post.close() // the connection to replica-0 drops; the client resumes on replica-1
		resumed := openSSE(t, r1, c.SessionID(), "", post.lastID)
		for {
			m, err := resumed.next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("stream resumed on replica-1: %v", err)
			}
			seen = append(seen, m)
		}
		responses, asks, dup := 0, 0, map[string]bool{}
		for _, m := range seen {
			if dup[m.Raw] {
				t.Errorf("delivered twice: %s", m.Raw)
			}
			dup[m.Raw] = true
			switch {
			case m.Get("method").Str == "elicitation/create":
				asks++
			case m.Get("id").Str == "res-r":
				responses++
				if txt := m.Get("result.content.0.text").Str; txt != "Deleted resumed.txt" {
					t.Errorf("tasks/result %s", m.Raw)
				}
			}
		}
		if responses != 1 || asks != 1 {
			t.Fatalf("responses %d, elicitations %d over both replicas, want 1 and 1", responses, asks)
		}
	})

	t.Run("poll-lease", func(t *testing.T) {
		first := legacyclient.New(r0)
		initialize(t, first)
		taskID := callOK(t, first, "tools/call", map[string]any{"name": "long_job", "arguments": map[string]any{"seconds": 600}, "task": map[string]any{}}).Get("task.taskId").Str
		gets := func() int {
			n := 0
			for _, v := range fx.Stats().TaskGets {
				n += v
			}
			return n
		}
		var clientPolls atomic.Int64
		pollers := func(ctx context.Context, url string, n int) *sync.WaitGroup {
			var wg sync.WaitGroup
			for range n {
				c := legacyclient.New(url)
				c.SetSessionID(first.SessionID())
				wg.Go(func() {
					for ctx.Err() == nil {
						if _, err := c.Call(ctx, "tasks/get", map[string]any{"taskId": taskID}); err == nil {
							clientPolls.Add(1)
						}
						time.Sleep(20 * time.Millisecond)
					}
				})
			}
			return &wg
		}
		// Replica-0 polls first (so it holds the lease), then 50 pollers on each replica.
		ctx0, stop0 := context.WithCancel(context.Background())
		defer stop0()
		wg0 := pollers(ctx0, r0, 50)
		time.Sleep(time.Second)
		ctx1, stop1 := context.WithCancel(context.Background())
		defer stop1()
		wg1 := pollers(ctx1, r1, 50)
		time.Sleep(500 * time.Millisecond)
		const window = 3 * time.Second
		before, polls := gets(), clientPolls.Load()
		time.Sleep(window)
		got, clients := gets()-before, clientPolls.Load()-polls
		t.Logf("100 pollers over both replicas: %d client tasks/get in %s → %d upstream tasks/get (poll interval %s)", clients, window, got, interval)
		if clients < 200 {
			t.Fatalf("only %d client polls: the replicas were not loaded", clients)
		}
		if want := int(window / interval); got > want*4/3 || got < want/4 {
			t.Errorf("upstream saw %d tasks/get in %s, want about %d (one replica polling, not two)", got, window, want)
		}

		// SIGKILL replica-0 (the lease holder) mid-poll: replica-1 takes the lease over.
		if err := p0.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		killed := time.Now()
		stop0()
		wg0.Wait()
		time.Sleep(interval / 2) // a tasks/get replica-0 had on the wire may still land
		atKill := gets()
		deadline := time.Now().Add(15 * time.Second)
		for gets() == atKill {
			if time.Now().After(deadline) {
				t.Fatal("nobody polled the upstream task within 15 s of the lease holder's SIGKILL")
			}
			time.Sleep(5 * time.Millisecond)
		}
		handover := time.Since(killed)
		t.Logf("lease handover after SIGKILL: %s (%.1f poll intervals)", handover.Round(time.Millisecond), float64(handover)/float64(interval))
		if handover > 10*interval {
			t.Errorf("lease handover took %s, want within a few poll intervals (≤ %s)", handover, 10*interval)
		}
		stop1()
		wg1.Wait()
	})
}

func initialize(t *testing.T, c *legacyclient.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := c.Initialize(ctx); err != nil {
		t.Fatal(err)
	}
}

func callOK(t *testing.T, c *legacyclient.Client, method string, params any) gjson.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := c.Call(ctx, method, params)
	if err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	return gjson.ParseBytes(out)
}

// resultText waits for the task to complete and returns its result's text.
func resultText(t *testing.T, c *legacyclient.Client, taskID string) string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for callOK(t, c, "tasks/get", map[string]any{"taskId": taskID}).Get("status").Str != "completed" {
		if time.Now().After(deadline) {
			t.Fatalf("task %s did not complete", taskID)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return callOK(t, c, "tasks/result", map[string]any{"taskId": taskID}).Get("content.0.text").Str
}

// sseReader reads one SSE response as a resuming client does: JSON-RPC messages in order,
// remembering the last event id.
type sseReader struct {
	resp   *http.Response
	br     *bufio.Reader
	cancel context.CancelFunc
	lastID string
}

// openSSE POSTs body (or GETs with Last-Event-ID when body is "") for session sid.
func openSSE(t *testing.T, url, sid, body, lastEventID string) *sseReader {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	method, accept := http.MethodGet, "text/event-stream"
	var rd io.Reader
	if body != "" {
		method, accept, rd = http.MethodPost, "application/json, text/event-stream", strings.NewReader(body)
	}
	req, _ := http.NewRequestWithContext(ctx, method, url, rd)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", accept)
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	if lastEventID != "" {
		req.Header.Set("Last-Event-ID", lastEventID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Fatalf("%s: %d %s %s", method, resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	return &sseReader{resp: resp, br: bufio.NewReader(resp.Body), cancel: cancel}
}

func (s *sseReader) next() (gjson.Result, error) {
	var data []string
	for {
		line, err := s.br.ReadString('\n')
		if err != nil {
			return gjson.Result{}, err
		}
		line = strings.TrimRight(line, "\r\n")
		switch {
		case line == "":
			if d := strings.Join(data, "\n"); d != "" {
				return gjson.Parse(d), nil
			}
			data = nil
		case strings.HasPrefix(line, "id:"):
			s.lastID = strings.TrimSpace(line[3:])
		case strings.HasPrefix(line, "data:"):
			data = append(data, strings.TrimPrefix(line[5:], " "))
		}
	}
}

func (s *sseReader) close() { s.cancel(); s.resp.Body.Close() }
