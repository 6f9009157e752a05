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

	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/internal/sse"
	"github.com/taskbridge/taskbridge/sep2663"
)

// legacyClient is verify's built-in 2025-11-25 client: one session, raw answers kept, so
// not-found answers can be compared byte for byte. Server→client requests are refused
// (-32601): verify only runs tools that need no input.
type legacyClient struct {
	url    string
	hc     *http.Client
	header http.Header // the principal's credential (nil without authentication)
	caps   string      // the capabilities offered in initialize
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
	return &legacyClient{url: url, hc: hc, header: h, caps: caps}
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
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`, c.nextID.Add(1), method, p)
	return c.send(ctx, []byte(body))
}

func (c *legacyClient) send(ctx context.Context, body []byte) (reply, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return reply{}, err
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
	resp, err := c.hc.Do(req)
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
				if m.Get("id").Exists() { // a server→client request: verify answers none
					c.refuse(ctx, m.Get("id").Raw)
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
