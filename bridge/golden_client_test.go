package bridge_test

// The golden runner's clients (golden_test.go).

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/internal/jsonobj"
	"github.com/taskbridge/taskbridge/sep2663"
)

// goldenClient speaks 2025-11-25 Streamable HTTP (with a session) or, when modern,
// 2026-07-28 (stateless: every request carries the _meta envelope and the MCP-Protocol-
// Version, Mcp-Method and Mcp-Name headers; a request written without the envelope gets the
// default one: capabilities with the tasks extension, clientInfo golden-client 1.0.0). It
// collects every message it receives, per stream (a POST's reply, its SSE events, the GET
// stream). mu guards the fields below it.
type goldenClient struct {
	url    string
	modern bool
	vars   *vars
	ctx    context.Context
	cancel context.CancelFunc
	posts  sync.WaitGroup // requests in flight
	all    sync.WaitGroup // every reader goroutine

	mu      sync.Mutex
	session string
	version string
	streams int            // streams opened so far (their ids)
	pending []received     // messages not matched yet, in arrival order
	open    map[int]string // stream → the request it still waits on
	arrived chan struct{}  // signalled on every new message
}

type received struct {
	stream int
	raw    string
	v      any
}

func newGoldenClient(url string, v *vars, modern bool) *goldenClient {
	ctx, cancel := context.WithCancel(context.Background())
	return &goldenClient{url: url, modern: modern, vars: v, ctx: ctx, cancel: cancel, version: "2025-11-25",
		open: map[int]string{}, arrived: make(chan struct{}, 1)}
}

func (c *goldenClient) close() {
	c.cancel()
	c.all.Wait()
}

func (c *goldenClient) do(method string, body []byte) (*http.Response, error) {
	req, err := http.NewRequestWithContext(c.ctx, method, c.url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json, text/event-stream")
	if method == http.MethodPost {
		req.Header.Set("Content-Type", "application/json")
	} else {
		req.Header.Set("Accept", "text/event-stream")
	}
	c.mu.Lock()
	if c.session != "" {
		req.Header.Set("Mcp-Session-Id", c.session)
		req.Header.Set("MCP-Protocol-Version", c.version)
	}
	c.mu.Unlock()
	if c.modern {
		modernHeaders(req.Header, body)
	}
	return http.DefaultClient.Do(req)
}

// defaultEnvelope is the _meta a modern request written without one gets.
var defaultEnvelope = map[string]json.RawMessage{
	sep2663.MetaProtocolVersion:    json.RawMessage(`"` + sep2663.ProtocolVersion + `"`),
	sep2663.MetaClientCapabilities: json.RawMessage(`{"extensions":{"` + sep2663.ExtensionTasks + `":{}}}`),
	sep2663.MetaClientInfo:         json.RawMessage(`{"name":"golden-client","version":"1.0.0"}`),
}

// withEnvelope gives a 2026-07-28 request the _meta envelope members it lacks (the rest
// of the message keeps its bytes and order).
func withEnvelope(body []byte) []byte {
	msg, err := jsonobj.Parse(body)
	if err != nil || !msg.Has("method") || !msg.Has("id") {
		return body
	}
	params := msg.Child("params")
	meta := params.Child("_meta")
	for _, k := range []string{sep2663.MetaProtocolVersion, sep2663.MetaClientCapabilities, sep2663.MetaClientInfo} {
		meta = meta.SetDefault(k, defaultEnvelope[k])
	}
	return msg.Set("params", params.Set("_meta", meta.Encode()).Encode()).Encode()
}

// modernHeaders sets the 2026-07-28 HTTP headers a request's body implies.
func modernHeaders(h http.Header, body []byte) {
	if v := gjson.GetBytes(body, "params._meta."+gjson.Escape(sep2663.MetaProtocolVersion)).Str; v != "" {
		h.Set(sep2663.HeaderProtocolVersion, v)
	}
	if m := gjson.GetBytes(body, "method").Str; m != "" {
		h.Set(sep2663.HeaderMethod, m)
	}
	for _, f := range []string{"name", "uri", "taskId"} {
		if v := gjson.GetBytes(body, "params."+f); v.Type == gjson.String {
			h.Set(sep2663.HeaderName, sep2663.EncodeHeaderValue(v.Str))
			break
		}
	}
}

// initialize opens the session the way most clients do, for transcripts that do not.
func (c *goldenClient) initialize() error {
	resp, err := c.do(http.MethodPost, []byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25",`+
		`"capabilities":{"elicitation":{"form":{}}},"clientInfo":{"name":"golden-client","version":"1.0.0"}}}`))
	if err != nil {
		return err
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Mcp-Session-Id") == "" || !gjson.GetBytes(body, "result").Exists() {
		return fmt.Errorf("initialize: HTTP %d %s", resp.StatusCode, body)
	}
	c.mu.Lock()
	c.session = resp.Header.Get("Mcp-Session-Id")
	c.mu.Unlock()
	return c.post([]byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`))
}

// post sends a notification or a response; the bridge must accept it with 202.
func (c *goldenClient) post(body []byte) error {
	resp, err := c.do(http.MethodPost, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("HTTP %d (want 202): %s", resp.StatusCode, b)
	}
	return nil
}

// request POSTs a request in the background; its reply (JSON or SSE) becomes a stream.
func (c *goldenClient) request(body []byte, init bool) {
	c.mu.Lock()
	c.streams++
	sid := c.streams
	c.open[sid] = string(body)
	c.mu.Unlock()
	c.posts.Add(1)
	c.all.Add(1)
	go func() {
		defer c.all.Done()
		defer c.posts.Done()
		defer func() { c.mu.Lock(); delete(c.open, sid); c.mu.Unlock() }()
		if c.modern {
			body = withEnvelope(body)
		}
		resp, err := c.do(http.MethodPost, body)
		if err != nil {
			c.push(sid, compact(map[string]any{"transportError": err.Error()}))
			return
		}
		defer resp.Body.Close()
		if init {
			c.mu.Lock()
			c.session = resp.Header.Get("Mcp-Session-Id")
			c.mu.Unlock()
		}
		c.readReply(sid, resp)
	}()
}

// openGet opens the session's standalone SSE stream and returns once the bridge holds it.
func (c *goldenClient) openGet() error {
	resp, err := c.do(http.MethodGet, nil)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return fmt.Errorf("GET: HTTP %d: %s", resp.StatusCode, b)
	}
	c.mu.Lock()
	c.streams++
	sid := c.streams
	c.mu.Unlock()
	c.all.Add(1)
	go func() {
		defer c.all.Done()
		defer resp.Body.Close()
		c.readSSE(sid, resp.Body)
	}()
	return nil
}

func (c *goldenClient) readReply(sid int, resp *http.Response) {
	switch ct := resp.Header.Get("Content-Type"); {
	case resp.StatusCode == http.StatusOK && strings.HasPrefix(ct, "text/event-stream"):
		c.readSSE(sid, resp.Body)
	default:
		b, _ := io.ReadAll(resp.Body)
		if c.modern && json.Valid(b) && gjson.GetBytes(b, "jsonrpc").Exists() {
			// 2026-07-28 answers errors with HTTP 400/404 and a JSON-RPC body: the body is the message.
			c.push(sid, string(b))
			return
		}
		if resp.StatusCode != http.StatusOK || !json.Valid(b) {
			b = []byte(compact(map[string]any{"httpStatus": resp.StatusCode, "body": string(b)}))
		}
		c.push(sid, string(b))
	}
}

// readSSE collects the "data:" of each event; comments (keep-alives) are not messages.
func (c *goldenClient) readSSE(sid int, r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 8<<20)
	var data []string
	for sc.Scan() {
		ln := sc.Text()
		switch {
		case ln == "" && len(data) > 0:
			// An event with empty data is the priming event of a resumable stream
			// (an event id only): not a message.
			if msg := strings.Join(data, "\n"); strings.TrimSpace(msg) != "" {
				c.push(sid, msg)
			}
			data = nil
		case strings.HasPrefix(ln, "data:"):
			data = append(data, strings.TrimPrefix(strings.TrimPrefix(ln, "data:"), " "))
		}
	}
}

func (c *goldenClient) push(sid int, raw string) {
	c.mu.Lock()
	c.pending = append(c.pending, received{stream: sid, raw: raw, v: decodeJSON(raw)})
	c.mu.Unlock()
	select {
	case c.arrived <- struct{}{}:
	default:
	}
}

// expect takes the message matching want among the oldest unread message of each stream
// (order holds within a stream; across streams it is a race the transcript must not
// depend on). In -update mode a non-matching message is taken after a short grace.
func (c *goldenClient) expect(want any) (got *received, diffs []string) {
	deadline := time.After(goldenWait)
	var grace <-chan time.Time
	for {
		c.mu.Lock()
		seen := map[int]bool{}
		diffs = nil
		for i, r := range c.pending {
			if seen[r.stream] {
				continue
			}
			seen[r.stream] = true
			d := c.vars.match(want, r.v, false, false)
			if len(d) == 0 {
				c.pending = slices.Delete(c.pending, i, i+1)
				c.mu.Unlock()
				return &r, nil
			}
			diffs = append(diffs, fmt.Sprintf("against %s:\n\t\t%s", r.raw, strings.Join(d, "\n\t\t")))
		}
		if *update && len(c.pending) > 0 && grace == nil {
			grace = time.After(500 * time.Millisecond)
		}
		c.mu.Unlock()
		select {
		case <-c.arrived:
		case <-grace:
			c.mu.Lock()
			r := c.pending[0]
			c.pending = c.pending[1:]
			c.mu.Unlock()
			return &r, append(c.vars.match(want, r.v, false, true), "(taken for -update)")
		case <-deadline:
			if diffs == nil {
				diffs = []string{"nothing received within " + goldenWait.String()}
			}
			return nil, diffs
		}
	}
}
