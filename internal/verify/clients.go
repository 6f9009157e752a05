package verify

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/internal/sse"
	"github.com/taskbridge/taskbridge/sep2663"
)

// legacyClient is verify's built-in 2025-11-25 client: one session, raw answers kept, so
// not-found answers can be compared byte for byte. Server→client requests are refused
// (-32601): verify only runs tools that need no input.
type legacyClient struct {
	url    string
	hc     atomic.Pointer[http.Client] // swapped by reconnect (a client on its own transport)
	own    bool                        // hc is this client's own (cutClient): reconnect may drop it
	header http.Header                 // the principal's credential (nil without authentication)
	caps   string                      // the capabilities offered in initialize
	sess   atomic.Value
	nextID atomic.Int64
}

// withTasksCaps is a 2025-11-25 client's capabilities with the tasks capability.
const withTasksCaps = `{"tasks":{"list":{},"cancel":{}},"elicitation":{"form":{}}}`

// reply is one JSON-RPC answer: the raw result or the raw error object.
type reply struct {
	Result json.RawMessage
	Error  json.RawMessage // the "error" member, exactly as sent
	Status int             // the HTTP status
}

// code is the JSON-RPC error code (0 for a result).
func (r reply) code() int64 { return gjson.GetBytes(r.Error, "code").Int() }

// errText is a short form of the error for evidence.
func (r reply) errText() string {
	if r.Error == nil {
		return ""
	}
	return fmt.Sprintf("%d %s", r.code(), gjson.GetBytes(r.Error, "message").Str)
}

func newLegacyClient(url string, hc *http.Client, h http.Header, caps string) *legacyClient {
	c := &legacyClient{url: url, header: h, caps: caps}
	c.hc.Store(hc)
	return c
}

func (c *legacyClient) session() string { s, _ := c.sess.Load().(string); return s }

// initialize opens the session and returns the initialize result.
func (c *legacyClient) initialize(ctx context.Context) (reply, error) {
	params := fmt.Sprintf(`{"protocolVersion":"2025-11-25","capabilities":%s,"clientInfo":{"name":"taskbridge-verify","version":"1"}}`, c.caps)
	r, err := c.call(ctx, "initialize", json.RawMessage(params))
	if err != nil || r.Error != nil {
		return r, err
	}
	_, err = c.send(ctx, []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`))
	return r, err
}

// call sends one request and returns its answer; err is a transport failure or an
// answer that is not JSON-RPC.
func (c *legacyClient) call(ctx context.Context, method string, params any) (reply, error) {
	p, err := json.Marshal(params)
	if err != nil {
		return reply{}, err
	}
	return c.send(ctx, requestBody(c.nextID.Add(1), method, p))
}

// callID is call with a given JSON-RPC id (a retry of an earlier request).
func (c *legacyClient) callID(ctx context.Context, id int64, method string, params any) (reply, error) {
	p, err := json.Marshal(params)
	if err != nil {
		return reply{}, err
	}
	return c.send(ctx, requestBody(id, method, p))
}

func requestBody(id int64, method string, params []byte) []byte {
	return fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`, id, method, params)
}

// request is one POST of body to the bridge with the session and the credential.
func (c *legacyClient) request(ctx context.Context, body []byte) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if s := c.session(); s != "" {
		req.Header.Set("Mcp-Session-Id", s)
		req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	}
	for k, v := range c.header {
		req.Header[k] = v
	}
	return req, nil
}

func (c *legacyClient) send(ctx context.Context, body []byte) (reply, error) {
	return c.exchange(ctx, body, func(m gjson.Result) { c.refuse(ctx, m.Get("id").Raw) })
}

// exchange sends one message and reads its answer. A server→client request on an SSE
// answer goes to onRequest, and reading goes on (until ctx ends, which cuts the stream).
func (c *legacyClient) exchange(ctx context.Context, body []byte, onRequest func(gjson.Result)) (reply, error) {
	req, err := c.request(ctx, body)
	if err != nil {
		return reply{}, err
	}
	resp, err := c.hc.Load().Do(req)
	if err != nil {
		return reply{}, err
	}
	defer resp.Body.Close()
	if s := resp.Header.Get("Mcp-Session-Id"); s != "" {
		c.sess.Store(s)
	}
	out := reply{Status: resp.StatusCode}
	if resp.StatusCode == http.StatusAccepted {
		return out, nil
	}
	var msg []byte
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		rd := sse.NewReader(resp.Body, 64<<20)
		for {
			ev, err := rd.Next()
			if err != nil {
				if err == io.EOF {
					break
				}
				return out, err
			}
			if len(ev.Data) == 0 {
				continue
			}
			m := gjson.ParseBytes(ev.Data)
			if m.Get("method").Exists() {
				if m.Get("id").Exists() { // a server→client request
					onRequest(m)
				}
				continue
			}
			msg = ev.Data
			break
		}
	} else {
		msg, _ = io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	}
	m := gjson.ParseBytes(msg)
	switch {
	case m.Get("result").Exists():
		out.Result = json.RawMessage(m.Get("result").Raw)
	case m.Get("error").Exists():
		out.Error = json.RawMessage(m.Get("error").Raw)
	default:
		return out, fmt.Errorf("HTTP %d without a JSON-RPC answer", resp.StatusCode)
	}
	return out, nil
}

// refuse answers a server→client request with -32601.
func (c *legacyClient) refuse(ctx context.Context, rawID string) {
	body := `{"jsonrpc":"2.0","id":` + rawID + `,"error":{"code":-32601,"message":"verify answers no requests"}}`
	_, _ = c.send(context.WithoutCancel(ctx), []byte(body))
}

// createTask makes a task-augmented tools/call; it returns the task id and the status.
func (c *legacyClient) createTask(ctx context.Context, t Tool) (string, string, reply, error) {
	r, err := c.call(ctx, "tools/call", map[string]any{"name": t.Name, "arguments": t.args(), "task": map[string]any{}})
	if err != nil || r.Error != nil {
		return "", "", r, err
	}
	id := gjson.GetBytes(r.Result, "task.taskId").Str
	if id == "" {
		return "", "", r, fmt.Errorf("tools/call with params.task answered no task: %.120s", r.Result)
	}
	return id, gjson.GetBytes(r.Result, "task.status").Str, r, nil
}

// status is tasks/get's status ("" with the answer on an error).
func (c *legacyClient) status(ctx context.Context, id string) (string, reply, error) {
	r, err := c.call(ctx, "tasks/get", map[string]any{"taskId": id})
	if err != nil || r.Error != nil {
		return "", r, err
	}
	return gjson.GetBytes(r.Result, "status").Str, r, nil
}

// newModernClient is verify's built-in 2026-07-28 client (the bridge's own upstream client
// type, pointed at the bridge), with the principal's credential.
func newModernClient(url string, hc *http.Client, h http.Header) *sep2663.Client {
	return sep2663.NewClient(sep2663.ClientOptions{URL: url, HTTPClient: hc, Header: h,
		ClientInfo: sep2663.Implementation{Name: "taskbridge-verify", Version: "1"}})
}

// freshHTTP is an HTTP client with a transport of its own: closing its connections cuts
// only the client it belongs to.
func freshHTTP() *http.Client {
	return &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
}

// cutClient is a 2025-11-25 client for principal i on its own transport (the recovery
// gate's transport cuts), initialized; drop closes its connections at the end.
func (r *run) cutClient(ctx context.Context, i int) (*legacyClient, error) {
	c := newLegacyClient(r.url, freshHTTP(), r.who[i].header, withTasksCaps)
	c.own = true
	res, err := c.initialize(ctx)
	if err != nil {
		c.drop()
		return nil, fmt.Errorf("initialize: %w", err)
	}
	if res.Error != nil {
		c.drop()
		return nil, fmt.Errorf("initialize: %s", res.errText())
	}
	return c, nil
}

// reconnect closes every connection of a cutClient: its next request opens a new one
// (the session stays: it is the Mcp-Session-Id header, not the connection).
func (c *legacyClient) reconnect() {
	if c.own {
		c.hc.Swap(freshHTTP()).CloseIdleConnections()
	}
}

// drop closes a cutClient's connections for good.
func (c *legacyClient) drop() {
	if c.own {
		c.hc.Load().CloseIdleConnections()
	}
}

// cutWait bounds how long cutRequest waits for its condition before it cuts anyway.
const cutWait = 5 * time.Second

// cutRequest sends one request (JSON-RPC id) and cuts it: once until() holds (or, with
// until nil, once the answer's headers arrived) the request is cancelled, which closes its
// TCP connection, and the answer is never read. It says where the cut landed.
func (c *legacyClient) cutRequest(ctx context.Context, id int64, method string, params any, until func() bool) (string, error) {
	p, err := json.Marshal(params)
	if err != nil {
		return "", err
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	req, err := c.request(cctx, requestBody(id, method, p))
	if err != nil {
		return "", err
	}
	type answer struct {
		resp *http.Response
		err  error
	}
	got := make(chan answer, 1)
	go func() {
		resp, err := c.hc.Load().Do(req)
		got <- answer{resp, err}
	}()
	deadline := time.NewTimer(cutWait)
	defer deadline.Stop()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	var a *answer
wait:
	for until == nil || !until() {
		select {
		case x := <-got:
			a = &x
			if until == nil || x.err != nil {
				break wait
			} // with a condition: wait for it, the body unread
		case <-tick.C:
		case <-deadline.C:
			break wait
		case <-ctx.Done():
			break wait
		}
	}
	cancel()
	if a == nil {
		x := <-got
		a = &x
	}
	where := "before the answer's headers"
	if a.resp != nil {
		a.resp.Body.Close() // unread: the connection is closed, not reused
		where = "after the answer's headers, its body unread"
	}
	c.reconnect()
	return where, nil
}

// question is one server→client request the bridge sent on a tasks/result stream.
type question struct {
	id     string // the raw JSON-RPC id
	method string
}

// questions opens tasks/result for the task and reads its stream up to the first
// server→client request and for questionGrace more (the task's other questions), then
// cuts the stream: its connection is closed, the requests unanswered. A stream that ends
// with the answer instead returns it (no questions).
func (c *legacyClient) questions(ctx context.Context, taskID string) ([]question, reply, error) {
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	p, _ := json.Marshal(map[string]any{"taskId": taskID})
	var qs []question
	var grace *time.Timer
	res, err := c.exchange(cctx, requestBody(c.nextID.Add(1), "tasks/result", p), func(m gjson.Result) {
		qs = append(qs, question{id: m.Get("id").Raw, method: m.Get("method").Str})
		if grace == nil {
			grace = time.AfterFunc(questionGrace, cancel)
		}
	})
	if grace != nil {
		grace.Stop()
	}
	if len(qs) > 0 {
		cancel()
		c.reconnect()
		return qs, reply{}, nil
	}
	return nil, res, err
}

// declineAnswer is verify's answer to every elicitation: it never confirms anything.
const declineAnswer = `{"action":"decline"}`

// answer sends verify's answer to a question (decline for an elicitation, -32601 for
// anything else) and returns the HTTP status (202 when accepted).
func (c *legacyClient) answer(ctx context.Context, q *question) (int, error) {
	body := `{"jsonrpc":"2.0","id":` + q.id + `,"result":` + declineAnswer + `}`
	if q.method != "elicitation/create" {
		body = `{"jsonrpc":"2.0","id":` + q.id + `,"error":{"code":-32601,"message":"verify answers elicitations only"}}`
	}
	res, err := c.send(ctx, []byte(body))
	return res.Status, err
}
