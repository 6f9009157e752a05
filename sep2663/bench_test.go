package sep2663

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/tidwall/gjson"
	"github.com/valyala/fasthttp"

	"github.com/taskbridge/taskbridge/internal/hop"
)

// netHTTPClient is the upstream HTTP client the bridge used before internal/hop: net/http's
// Transport with the pool of design §10. It is kept here, and only here, so that
// BenchmarkClientCall measures the two side by side in the same run.
func netHTTPClient() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns, t.MaxIdleConnsPerHost, t.IdleConnTimeout = 1024, 256, 90*time.Second
	return &http.Client{Transport: t}
}

// benchUpstream is a minimal 2026-07-28 server on loopback (a fasthttp server, so that its
// own cost stays small beside the client's): it answers every tools/call with a one-line
// JSON result carrying the request's id.
func benchUpstream(b *testing.B) string {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	// A short MaxIdleWorkerDuration: the server's worker cleaner sleeps that long before it
	// sees Shutdown, and TestMain's leak check waits for it.
	srv := &fasthttp.Server{MaxIdleWorkerDuration: 100 * time.Millisecond, Handler: func(ctx *fasthttp.RequestCtx) {
		id := gjson.GetBytes(ctx.PostBody(), "id").Raw
		ctx.SetContentType("application/json")
		ctx.SetBodyString(`{"jsonrpc":"2.0","id":` + id + `,"result":{"resultType":"complete","content":[{"type":"text","text":"hi"}]}}`)
	}}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ln) }()
	b.Cleanup(func() { _ = srv.Shutdown(); <-done })
	return "http://" + ln.Addr().String() + "/mcp"
}

// BenchmarkClientCall is the upstream client alone: one synchronous tools/call (envelope,
// headers, POST, JSON reply read and checked) over loopback, on internal/hop (what the
// bridge uses) and on the old net/http Transport, serially and from 32 goroutines.
//
//	go test -run XXX -bench ClientCall -benchtime 2s ./sep2663/
func BenchmarkClientCall(b *testing.B) {
	url := benchUpstream(b)
	params := json.RawMessage(`{"name":"echo","arguments":{"text":"hi"}}`)
	clients := []struct {
		name string
		hc   func() *http.Client
	}{
		{"hop", func() *http.Client { return &http.Client{Transport: hop.NewTransport(hop.Options{})} }},
		{"nethttp", netHTTPClient},
	}
	for _, cl := range clients {
		for _, par := range []int{1, 32} {
			name := cl.name + "/serial"
			if par > 1 {
				name = cl.name + "/parallel32"
			}
			b.Run(name, func(b *testing.B) {
				hc := cl.hc()
				defer hc.CloseIdleConnections()
				c := NewClient(ClientOptions{URL: url, HTTPClient: hc})
				call := func() {
					if _, err := c.Call(context.Background(), "tools/call", params, RequestMeta{}, nil); err != nil {
						b.Error(err)
					}
				}
				call() // the connection is open before the clock starts
				b.ReportAllocs()
				b.ResetTimer()
				if par == 1 {
					for b.Loop() {
						call()
					}
					return
				}
				b.SetParallelism((par + 1) / 2) // GOMAXPROCS 2 on the project's machine
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						call()
					}
				})
			})
		}
	}
}
