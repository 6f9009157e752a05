package metrics

import (
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// Transport wraps rt so every upstream HTTP exchange is timed into
// taskbridge_upstream_request_duration_seconds, labelled with the request's Mcp-Method
// header (the 2026-07-28 client sets it on every POST) and the outcome: "ok" for 2xx,
// "http_<status>" otherwise, "transport_error" when no response came. The clock stops when
// the response body is read to the end or closed, so streamed (SSE) answers count in full.
// A nil Metrics returns rt unchanged.
func (m *Metrics) Transport(rt http.RoundTripper) http.RoundTripper {
	if m == nil {
		return rt
	}
	if rt == nil {
		rt = http.DefaultTransport
	}
	return &transport{m: m, rt: rt}
}

type transport struct {
	m  *Metrics
	rt http.RoundTripper
}

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	method := req.Header.Get("Mcp-Method")
	if method == "" {
		method = "other"
	}
	start := time.Now()
	resp, err := t.rt.RoundTrip(req)
	if err != nil {
		t.m.Upstream(method, "transport_error", time.Since(start))
		return nil, err
	}
	outcome := "ok"
	if resp.StatusCode/100 != 2 {
		outcome = "http_" + strconv.Itoa(resp.StatusCode)
	}
	resp.Body = &timedBody{ReadCloser: resp.Body, done: func() { t.m.Upstream(method, outcome, time.Since(start)) }}
	return resp, nil
}

// timedBody calls done once, at EOF or Close, whichever comes first.
type timedBody struct {
	io.ReadCloser
	once sync.Once
	done func()
}

func (b *timedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.once.Do(b.done)
	}
	return n, err
}

func (b *timedBody) Close() error {
	b.once.Do(b.done)
	return b.ReadCloser.Close()
}
