package verify

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"time"

	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/internal/jsonrpc"
	"github.com/taskbridge/taskbridge/internal/metrics"
	"github.com/taskbridge/taskbridge/sep2663"
)

// CountTransport counts every request sent over a non-HTTP upstream transport (a stdio
// child) into m's upstream histogram, labelled by its method as the instrumented HTTP
// transport labels an HTTP upstream's, so verify reads one counter for both.
func CountTransport(m *metrics.Metrics, t sep2663.Transport) sep2663.Transport {
	return &countTransport{Transport: t, m: m}
}

type countTransport struct {
	sep2663.Transport
	m *metrics.Metrics
}

func (c *countTransport) RoundTrip(ctx context.Context, id jsonrpc.ID, body []byte, onMessage func(*jsonrpc.Message)) (json.RawMessage, *jsonrpc.Error, error) {
	start := time.Now()
	res, rpcErr, err := c.Transport.RoundTrip(ctx, id, body, onMessage)
	outcome := "ok"
	if err != nil {
		outcome = "transport_error"
	}
	c.m.Upstream(gjson.GetBytes(body, "method").Str, outcome, time.Since(start))
	return res, rpcErr, err
}

// CountHTTP counts the requests of an HTTP upstream that carry no Mcp-Method header (a
// 2025-11-25 upstream's: the instrumented transport labels those "other") by the method
// in their body, into the same histogram. Bodies are read from GetBody, never consumed.
func CountHTTP(m *metrics.Metrics, rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		method := ""
		if req.Header.Get("Mcp-Method") == "" && req.GetBody != nil {
			if b, err := req.GetBody(); err == nil {
				raw, _ := io.ReadAll(io.LimitReader(b, 1<<20))
				b.Close()
				method = gjson.GetBytes(raw, "method").Str
			}
		}
		start := time.Now()
		resp, err := rt.RoundTrip(req)
		if method != "" {
			outcome := "ok"
			if err != nil {
				outcome = "transport_error"
			}
			m.Upstream(method, outcome, time.Since(start))
		}
		return resp, err
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
