package trace

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/taskbridge/taskbridge/internal/testenv"
)

// TestOffTouchesNothing: with tracing off the hooks leave the context, the headers and the
// params exactly as they were.
func TestOffTouchesNothing(t *testing.T) {
	ctx := context.Background()
	raw := []byte(`{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"t","_meta":{"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}}`)
	c2, end := StartRequest(WithLabels(ctx, Labels{Route: "forward"}), http.Header{}, raw)
	end(nil)
	if c2 != ctx {
		t.Error("StartRequest changed the context while off")
	}
	h := http.Header{}
	InjectHeaders(ctx, h)
	params := json.RawMessage(`{"a":1}`)
	if got := InjectMeta(ctx, params); string(got) != `{"a":1}` || len(h) != 0 || TraceParent(ctx) != "" || ForTask(ctx, "t", "x") != ctx {
		t.Errorf("off: params %s, headers %v", got, h)
	}
}

// BenchmarkHooksOff is the per-request cost of every hook on the hot path while tracing is
// off: the door's span, one upstream span, the header and _meta injection.
func BenchmarkHooksOff(b *testing.B) {
	ctx := context.Background()
	raw := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`)
	params := json.RawMessage(`{"name":"echo","arguments":{"text":"hi"}}`)
	h := http.Header{}
	b.ReportAllocs()
	for b.Loop() {
		c := WithLabels(ctx, Labels{Route: "forward", Era: Legacy, Transport: "http"})
		c, end := StartRequest(c, h, raw)
		uc, uend := StartUpstream(c, Modern, "tools/call")
		_ = InjectMeta(uc, params)
		InjectHeaders(uc, h)
		Task(uc, "t", "")
		uend(nil)
		end(nil)
	}
}

// TestOnExportsWithServiceName: on, a span reaches an OTLP/HTTP collector named by
// service.name and service.version, and OTEL_SERVICE_NAME wins over the default name.
func TestOnExportsWithServiceName(t *testing.T) {
	for _, envName := range []string{"", "bridge-eu-1"} {
		t.Setenv("OTEL_SERVICE_NAME", envName)
		rcv := testenv.NewOTLPReceiver(t)
		shutdown, err := Start(context.Background(), Config{Endpoint: rcv.URL, ServiceName: "taskbridge", ServiceVersion: "v9"})
		if err != nil {
			t.Fatal(err)
		}
		_, end := StartUpstream(context.Background(), Modern, "tools/call")
		end(nil)
		if err := shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		want := "taskbridge"
		if envName != "" {
			want = envName
		}
		got := map[string]string{}
		for _, r := range rcv.Resources() {
			for _, kv := range r.Attributes {
				got[kv.Key] = kv.Value.GetStringValue()
			}
		}
		if len(rcv.Spans()) != 1 || got["service.name"] != want || got["service.version"] != "v9" {
			t.Errorf("OTEL_SERVICE_NAME=%q: %d spans, resource %v; want service.name %q", envName, len(rcv.Spans()), got, want)
		}
		if InjectMeta(context.Background(), json.RawMessage(`{}`)) == nil || TraceParent(context.Background()) != "" {
			t.Error("after shutdown tracing must be off")
		}
	}
}

// TestBadEndpointIsAnError: otel_endpoint must be an http(s) URL.
func TestBadEndpointIsAnError(t *testing.T) {
	if _, err := Start(context.Background(), Config{Endpoint: "collector:4318"}); err == nil {
		t.Error("a URL without a scheme was accepted")
	}
}
