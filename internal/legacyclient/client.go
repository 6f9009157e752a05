// Package legacyclient is a small MCP 2025-11-25 Streamable HTTP client: enough to drive the
// bridge from the demo and from Go tests (sessions, JSON or SSE replies, server→client
// requests answered by a handler, the standalone GET stream). The interop tests use the
// real TS SDK v1 client; this one exists so Go tests can count, time and fault-inject.
package legacyclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/taskbridge/taskbridge/internal/jsonrpc"
	"github.com/taskbridge/taskbridge/internal/sse"
)

// RequestHandler answers a server→client request (elicitation/create, …). It returns the
// result object, or an error sent as a JSON-RPC error.
type RequestHandler func(method string, params json.RawMessage) (json.RawMessage, error)

// Client is one legacy session. Safe for concurrent use.
type Client struct {
	URL       string
	HTTP      *http.Client
	Version   string         // protocol version to offer; default 2025-11-25
	Caps      string         // client capabilities JSON; default {"elicitation":{"form":{}}}
	OnRequest RequestHandler // nil: server requests go to Requests, or get -32601
	// Requests receives server→client requests unanswered when OnRequest is nil, so a test
	// can answer them itself (with Respond), late, twice, or through another bridge.
	Requests chan *jsonrpc.Message
	Header   http.Header // extra headers (Authorization, …)

	session atomic.Value // string
	nextID  atomic.Int64

	mu       sync.Mutex
	notified []jsonrpc.Message // notifications seen on any stream
}

// New returns a client for url.
func New(url string) *Client {
	return &Client{URL: url, HTTP: &http.Client{}, Version: "2025-11-25", Caps: `{"elicitation":{"form":{}}}`}
}

// SessionID returns the session id the bridge issued.
func (c *Client) SessionID() string { s, _ := c.session.Load().(string); return s }

// SetSessionID reuses an existing session (e.g. after a bridge restart).
func (c *Client) SetSessionID(id string) { c.session.Store(id) }

// Notifications returns the notifications received so far.
func (c *Client) Notifications() []jsonrpc.Message {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]jsonrpc.Message(nil), c.notified...)
}

// Initialize opens a session.
func (c *Client) Initialize(ctx context.Context) (json.RawMessage, error) {
	params := fmt.Sprintf(`{"protocolVersion":%q,"capabilities":%s,"clientInfo":{"name":"taskbridge-go-client","version":"1.0.0"}}`, c.Version, c.Caps)
	res, err := c.Call(ctx, "initialize", json.RawMessage(params))
	if err != nil {
		return nil, err
	}
	return res, c.post(ctx, &jsonrpc.Message{JSONRPC: "2.0", Method: "notifications/initialized"}, nil)
}

// Call sends a request and returns its result; a JSON-RPC error is returned as *jsonrpc.Error.
func (c *Client) Call(ctx context.Context, method string, params any) (json.RawMessage, error) {
	msg, err := jsonrpc.NewRequest(jsonrpc.IntID(c.nextID.Add(1)), method, params)
	if err != nil {
		return nil, err
	}
	var resp *jsonrpc.Message
	if err := c.post(ctx, msg, &resp); err != nil {
		return nil, err
	}
	if resp == nil {
		return nil, fmt.Errorf("%s: stream ended without a response", method)
	}
	if resp.Error != nil {
		return nil, resp.Error
	}
	return resp.Result, nil
}

// Notify sends a notification.
func (c *Client) Notify(ctx context.Context, method string, params any) error {
	msg, err := jsonrpc.NewNotification(method, params)
	if err != nil {
		return err
	}
	return c.post(ctx, msg, nil)
}

// Respond POSTs a response to a server→client request.
func (c *Client) Respond(ctx context.Context, id jsonrpc.ID, result json.RawMessage) error {
	return c.post(ctx, &jsonrpc.Message{JSONRPC: "2.0", ID: id, Result: result}, nil)
}

// HTTPError is a non-2xx reply without a usable JSON-RPC body.
type HTTPError struct {
	Status int
	Body   string
}

func (e *HTTPError) Error() string { return fmt.Sprintf("HTTP %d: %s", e.Status, e.Body) }

func (c *Client) newRequest(ctx context.Context, method string, body []byte) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.URL, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if s := c.SessionID(); s != "" {
		req.Header.Set("Mcp-Session-Id", s)
		req.Header.Set("MCP-Protocol-Version", c.Version)
	}
	for k, v := range c.Header {
		req.Header[k] = v
	}
	return req, nil
}

func (c *Client) post(ctx context.Context, msg *jsonrpc.Message, resp **jsonrpc.Message) error {
	body, err := jsonrpc.Encode(msg)
	if err != nil {
		return err
	}
	req, err := c.newRequest(ctx, http.MethodPost, body)
	if err != nil {
		return err
	}
	r, err := c.HTTP.Do(req)
	if err != nil {
		return err
	}
	defer r.Body.Close()
	if s := r.Header.Get("Mcp-Session-Id"); s != "" {
		c.session.Store(s)
	}
	if r.StatusCode == http.StatusAccepted {
		return nil
	}
	ct := r.Header.Get("Content-Type")
	if strings.HasPrefix(ct, "text/event-stream") {
		return c.readSSE(ctx, r.Body, resp)
	}
	b, _ := io.ReadAll(r.Body)
	m, derr := jsonrpc.Decode(b)
	if derr != nil {
		return &HTTPError{Status: r.StatusCode, Body: string(b)}
	}
	if resp != nil {
		*resp = m
	}
	if m.Error != nil && resp == nil {
		return m.Error
	}
	return nil
}

// readSSE reads events until the response arrives, answering server requests on the way.
func (c *Client) readSSE(ctx context.Context, r io.Reader, resp **jsonrpc.Message) error {
	return ReadEvents(r, func(data []byte) bool {
		m, err := jsonrpc.Decode(data)
		if err != nil {
			return true
		}
		switch {
		case m.IsResponse():
			if resp != nil {
				*resp = m
			}
			return false
		case m.IsRequest() && c.OnRequest == nil && c.Requests != nil:
			c.Requests <- m
		case m.IsRequest():
			go c.answer(ctx, m)
		default:
			c.mu.Lock()
			c.notified = append(c.notified, *m)
			c.mu.Unlock()
		}
		return true
	})
}

func (c *Client) answer(ctx context.Context, m *jsonrpc.Message) {
	var out *jsonrpc.Message
	if c.OnRequest == nil {
		out = jsonrpc.NewErrorResponse(m.ID, jsonrpc.ErrMethodNotFound)
	} else if res, err := c.OnRequest(m.Method, m.Params); err != nil {
		out = jsonrpc.NewErrorResponse(m.ID, err)
	} else {
		out = &jsonrpc.Message{JSONRPC: "2.0", ID: m.ID, Result: res}
	}
	_ = c.post(context.WithoutCancel(ctx), out, nil)
}

// OpenGetStream opens the standalone GET stream; server requests on it are answered with
// OnRequest and notifications recorded, until ctx ends.
func (c *Client) OpenGetStream(ctx context.Context) error {
	req, err := c.newRequest(ctx, http.MethodGet, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "text/event-stream")
	r, err := c.HTTP.Do(req)
	if err != nil {
		return err
	}
	if r.StatusCode != http.StatusOK {
		r.Body.Close()
		return &HTTPError{Status: r.StatusCode}
	}
	go func() {
		defer r.Body.Close()
		_ = c.readSSE(ctx, r.Body, nil)
	}()
	return nil
}

// ReadEvents calls fn with the data of each SSE event (internal/sse) until fn returns
// false or r ends; events with empty data (priming events) are skipped.
func ReadEvents(r io.Reader, fn func(data []byte) bool) error {
	rd := sse.NewReader(r, 64<<20)
	for {
		ev, err := rd.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if len(ev.Data) > 0 && !fn(ev.Data) {
			return nil
		}
	}
}
