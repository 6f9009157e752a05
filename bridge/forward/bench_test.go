package forward_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"runtime"
	"testing"
)

// BenchmarkPassthrough measures one synchronous tools/call through the bridge (legacy
// client → bridge → SEP-2663 fixture), all on loopback.
func BenchmarkPassthrough(b *testing.B) {
	e := newEnv(b)
	sid := e.sessionB(b)
	body := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`)
	c := &http.Client{}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		req, _ := http.NewRequest(http.MethodPost, e.url, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", sid)
		req.Header.Set("MCP-Protocol-Version", "2025-11-25")
		resp, err := c.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Fatal(resp.Status)
		}
	}
}

// BenchmarkPassthroughParallel is BenchmarkPassthrough from 32 concurrent clients on one
// session (16 per CPU on the 2-core machine), each on its own keep-alive connection: the
// load under which per-request goroutines and allocations cost the most.
func BenchmarkPassthroughParallel(b *testing.B) {
	e := newEnv(b)
	sid := e.sessionB(b)
	body := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`)
	c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	defer c.CloseIdleConnections()
	b.ReportAllocs()
	b.SetParallelism(32 / runtime.GOMAXPROCS(0))
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			req, _ := http.NewRequest(http.MethodPost, e.url, bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("Mcp-Session-Id", sid)
			req.Header.Set("MCP-Protocol-Version", "2025-11-25")
			resp, err := c.Do(req)
			if err != nil {
				b.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				b.Error(resp.Status)
				return
			}
		}
	})
}

func (e *env) sessionB(b *testing.B) string {
	c := newClientT(e.url)
	if _, err := c.Initialize(context.Background()); err != nil {
		b.Fatal(err)
	}
	return c.SessionID()
}
