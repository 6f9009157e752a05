package verify

import (
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/internal/jsonrpc"
	"github.com/taskbridge/taskbridge/internal/metrics"
)

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

// CountCall is a child upstream's call hook (child.Options.OnCall): every request either
// face's client sends the child is counted by its method, as CountTransport and the
// instrumented HTTP transport count theirs. A JSON-RPC error answer is an answer ("ok").
func CountCall(m *metrics.Metrics) func(method string, d time.Duration, err error) {
	return func(method string, d time.Duration, err error) {
		outcome := "ok"
		var je *jsonrpc.Error
		if err != nil && !errors.As(err, &je) {
			outcome = "transport_error"
		}
		m.Upstream(method, outcome, d)
	}
}
