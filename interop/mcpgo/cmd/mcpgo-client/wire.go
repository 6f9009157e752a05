package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"sync"
)

// wireRequest is one server→client JSON-RPC request seen on an SSE stream: which HTTP
// request's response carried it ("GET" is the standalone stream, "POST" a response stream)
// and, for a POST, the JSON-RPC method that POST carried.
type wireRequest struct {
	Method     string `json:"method"`
	Stream     string `json:"stream"`
	PostMethod string `json:"postMethod,omitempty"`
}

// recorder is an http.RoundTripper that watches the SSE bodies mcp-go's client reads and
// records every server→client request on them. It changes no bytes.
type recorder struct {
	next http.RoundTripper
	mu   sync.Mutex
	seen []wireRequest
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	postMethod := ""
	if req.Method == http.MethodPost && req.Body != nil {
		b, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		req.Body = io.NopCloser(bytes.NewReader(b))
		var m struct {
			Method string `json:"method"`
		}
		_ = json.Unmarshal(b, &m)
		postMethod = m.Method
	}
	resp, err := r.next.RoundTrip(req)
	if err != nil || resp.Header.Get("Content-Type") != "text/event-stream" {
		return resp, err
	}
	resp.Body = &sseTap{ReadCloser: resp.Body, onData: func(data []byte) {
		var m struct {
			Method string          `json:"method"`
			ID     json.RawMessage `json:"id"`
		}
		if json.Unmarshal(data, &m) != nil || m.Method == "" || len(m.ID) == 0 {
			return // a response or a notification
		}
		r.mu.Lock()
		r.seen = append(r.seen, wireRequest{Method: m.Method, Stream: req.Method, PostMethod: postMethod})
		r.mu.Unlock()
	}}
	return resp, nil
}

func (r *recorder) requests() []wireRequest {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]wireRequest{}, r.seen...)
}

// sseTap passes an SSE body through and calls onData with each complete "data:" line.
type sseTap struct {
	io.ReadCloser
	buf    []byte
	onData func([]byte)
}

func (t *sseTap) Read(p []byte) (int, error) {
	n, err := t.ReadCloser.Read(p)
	t.buf = append(t.buf, p[:n]...)
	for {
		i := bytes.IndexByte(t.buf, '\n')
		if i < 0 {
			break
		}
		line := bytes.TrimRight(t.buf[:i], "\r")
		if data, ok := bytes.CutPrefix(line, []byte("data:")); ok {
			t.onData(bytes.TrimSpace(data))
		}
		t.buf = t.buf[i+1:]
	}
	return n, err
}
