package forward_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/internal/jsonrpc"
	"github.com/taskbridge/taskbridge/internal/legacyclient"
)

// rawSSE is one SSE response read the way a resuming client reads it: messages in order,
// remembering the id of the last event processed (its Last-Event-ID).
type rawSSE struct {
	resp   *http.Response
	br     *bufio.Reader
	cancel context.CancelFunc
	lastID string
}

// next returns the next JSON-RPC message, skipping priming events and comments.
func (s *rawSSE) next() (gjson.Result, error) {
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

func (s *rawSSE) cut() { s.cancel(); s.resp.Body.Close() }

// rawRequest opens a POST (body non-empty) or GET on the bridge's endpoint for session sid.
func rawRequest(t *testing.T, url, sid, body, lastEventID string) *rawSSE {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	method, accept := http.MethodGet, "text/event-stream"
	var rd io.Reader
	if body != "" {
		method, accept, rd = http.MethodPost, "application/json, text/event-stream", strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
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
	return &rawSSE{resp: resp, br: bufio.NewReader(resp.Body), cancel: cancel}
}

// A tasks/result stream cut right after the elicitation arrived: the client answers,
// resumes with Last-Event-ID, and receives the task's result exactly once, with no
// message repeated; the tasks/result handler kept running across the cut.
func TestTasksResultResumesAfterCut(t *testing.T) {
	e := newEnv(t)
	c := legacyclient.New(e.url)
	if _, err := c.Initialize(context.Background()); err != nil {
		t.Fatal(err)
	}
	tid := call(t, c, "tools/call", raw(`{"name":"confirm_delete","arguments":{"filename":"cut.txt"},"task":{}}`)).Get("task.taskId").Str
	body := `{"jsonrpc":"2.0","id":"res-1","method":"tasks/result","params":{"taskId":"` + tid + `"}}`
	post := rawRequest(t, e.url, c.SessionID(), body, "")

	var seen []gjson.Result
	deadline := time.AfterFunc(20*time.Second, post.cut) // fail, not hang
	var ask gjson.Result
	for {
		m, err := post.next()
		if err != nil {
			t.Fatalf("before the elicitation: %v", err)
		}
		seen = append(seen, m)
		if m.Get("method").Str == "elicitation/create" {
			ask = m
			break
		}
	}
	deadline.Stop()
	if post.lastID == "" {
		t.Fatal("the tasks/result stream carries no event ids")
	}
	post.cut()

	if err := c.Respond(context.Background(), jsonrpc.StringID(ask.Get("id").Str), json.RawMessage(`{"action":"accept","content":{"confirm":true}}`)); err != nil {
		t.Fatal(err)
	}
	resumed := rawRequest(t, e.url, c.SessionID(), "", post.lastID)
	deadline = time.AfterFunc(20*time.Second, resumed.cut)
	defer deadline.Stop()
	for {
		m, err := resumed.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("resumed stream: %v", err)
		}
		seen = append(seen, m)
	}

	var responses, asks int
	raws := map[string]bool{}
	for _, m := range seen {
		if raws[m.Raw] {
			t.Errorf("message delivered twice: %s", m.Raw)
		}
		raws[m.Raw] = true
		switch {
		case m.Get("method").Str == "elicitation/create":
			asks++
		case m.Get("id").Str == "res-1":
			responses++
			if text := m.Get("result.content.0.text").Str; text != "Deleted cut.txt" {
				t.Errorf("tasks/result = %s", m.Raw)
			}
		}
	}
	if responses != 1 || asks != 1 {
		t.Fatalf("responses = %d, elicitations = %d, want 1 and 1: %v", responses, asks, seen)
	}
	if st := call(t, c, "tasks/get", id(tid)).Get("status").Str; st != "completed" {
		t.Errorf("task status = %q", st)
	}
}
