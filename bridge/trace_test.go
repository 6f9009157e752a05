package bridge_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/tidwall/gjson"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/taskbridge/taskbridge/bridge"
	"github.com/taskbridge/taskbridge/bridge/internal/sessions"
	"github.com/taskbridge/taskbridge/internal/testenv"
	"github.com/taskbridge/taskbridge/internal/trace"
	"github.com/taskbridge/taskbridge/legacy"
	"github.com/taskbridge/taskbridge/sep2663"
)

// legacyWatch records the trace context a 2025-11-25 upstream receives per method: the
// traceparent header and params._meta.traceparent.
type legacyWatch struct {
	h  http.Handler
	mu sync.Mutex
	m  map[string][2]string
}

func (l *legacyWatch) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(b))
	if m := gjson.GetBytes(b, "method").Str; m != "" {
		l.mu.Lock()
		l.m[m] = [2]string{r.Header.Get("traceparent"), gjson.GetBytes(b, "params._meta.traceparent").Str}
		l.mu.Unlock()
	}
	l.h.ServeHTTP(w, r)
}

// watchedReverseHarness is reverseHarness with the upstream's requests watched.
func watchedReverseHarness(t *testing.T) (*harness, *legacyWatch) {
	u := &tableUpstream{tasks: map[string]*legacy.Task{}, done: map[string]chan struct{}{}}
	upFace := legacy.NewServer(legacy.Options{Store: sessions.New(openStore(t)), Handler: u, ResumeWindow: -1})
	watch := &legacyWatch{h: upFace, m: map[string][2]string{}}
	upSrv := httptest.NewServer(watch)
	g, draining := newGate(tableOpts{})
	r, err := bridge.NewReverse(bridge.ReverseConfig{Upstream: legacy.NewClient(legacy.ClientOptions{URL: upSrv.URL}),
		Store: openStore(t), Logger: zerolog.Nop(), PollFloorMs: 100, Gate: g})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		r.Close(ctx)
		upSrv.CloseClientConnections()
		upSrv.Close()
		upFace.Close(ctx)
	})
	h := &harness{t: t, gate: g, draining: draining, taskTool: "long", taskArgs: `{}`}
	h.serve(r, tableOpts{})
	return h, watch
}

// TestSpansOnEveryRouteAndTransport: with tracing on, a client message on every route ×
// transport the door serves gets a server span naming its method, route, era and transport;
// upstream calls to a 2025-11-25 upstream get client spans and carry their trace context
// in the headers and in params._meta.
func TestSpansOnEveryRouteAndTransport(t *testing.T) {
	rcv := testenv.NewOTLPReceiver(t)
	shutdown, err := trace.Start(context.Background(), trace.Config{Endpoint: rcv.URL})
	if err != nil {
		t.Fatal(err)
	}
	defer shutdown(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	fwd := forwardHarness(t, tableOpts{})
	rev, watch := watchedReverseHarness(t)
	dials := []struct {
		h        *harness
		dial     func(*harness, string) (tableClient, error)
		method   string
		route    bridge.Route
		tr       bridge.Transport
		era      string
		upstream string // a method the upstream must have got, or ""
	}{
		{fwd, dialLegacyHTTP, "ping", bridge.RouteForward, bridge.TransportHTTP, trace.Legacy, ""},
		{fwd, dialWebSocket, "ping", bridge.RouteForward, bridge.TransportWebSocket, trace.Legacy, ""},
		{fwd, dialStdio, "ping", bridge.RouteForward, bridge.TransportStdio, trace.Legacy, ""},
		{fwd, dialModern, "server/discover", bridge.RouteModernPassThrough, bridge.TransportHTTP, trace.Modern, ""},
		{rev, dialModern, "tools/call", bridge.RouteReverse, bridge.TransportHTTP, trace.Modern, "tools/call"},
		{rev, dialLegacyHTTP, "tools/list", bridge.RouteLegacyPassThrough, bridge.TransportHTTP, trace.Legacy, "tools/list"},
		{rev, dialWebSocket, "tools/list", bridge.RouteLegacyPassThrough, bridge.TransportWebSocket, trace.Legacy, "tools/list"},
		{rev, dialStdio, "tools/list", bridge.RouteLegacyPassThrough, bridge.TransportStdio, trace.Legacy, "tools/list"},
	}
	for _, d := range dials {
		c, err := d.dial(d.h, aliceKey)
		if err != nil {
			t.Fatalf("%s/%s: dial: %v", d.route, d.tr, err)
		}
		params := `{}`
		if d.method == "tools/call" {
			params = `{"name":"quick","arguments":{}}`
		}
		if _, err := c.call(ctx, d.method, params); err != nil {
			t.Fatalf("%s/%s: %s: %v", d.route, d.tr, d.method, err)
		}
	}
	// A reverse task: its tasks/get links to its create, which the bridge stored.
	mc, err := dialModern(rev, aliceKey)
	if err != nil {
		t.Fatal(err)
	}
	out, err := mc.(*modernHTTP).c.CallTool(ctx, json.RawMessage(`{"name":"long","arguments":{}}`), sep2663.RequestMeta{}, nil)
	if err != nil || out.Kind != sep2663.KindTask {
		t.Fatalf("reverse task: %v, %+v", err, out)
	}
	rtid := out.Task.TaskID
	if _, err := mc.(*modernHTTP).c.GetTask(ctx, rtid, sep2663.RequestMeta{}); err != nil {
		t.Fatal(err)
	}

	// A span ends just after its answer went out: wait (bounded) until each has arrived.
	want := func(i int) (string, string, string, string) {
		return dials[i].method, string(dials[i].route), string(dials[i].tr), dials[i].era
	}
	var spans []*tracepb.Span
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if err := trace.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if spans = rcv.Spans(); missingSpans(spans, len(dials), want) == "" && reverseLinked(spans, rtid) || time.Now().After(deadline) {
			break
		}
	}
	if bad := rcv.Refused(); len(bad) > 0 {
		t.Fatalf("the collector refused exports: %v", bad)
	}
	attr := func(i int, key string) string { return spanAttr(spans[i], key) }
	upstreamSpans := map[string]string{} // span id → method, of 2025-11-25 upstream calls
	for i, s := range spans {
		for _, kv := range s.Attributes {
			if strings.Contains(kv.Value.String(), aliceKey) {
				t.Errorf("span %q attribute %s holds the API key", s.Name, kv.Key)
			}
		}
		if attr(i, trace.AttrUpstream) == trace.Legacy {
			upstreamSpans[hex.EncodeToString(s.SpanId)] = attr(i, trace.AttrMethod)
		}
	}
	if missing := missingSpans(spans, len(dials), want); missing != "" {
		t.Errorf("no server span for: %s", missing)
	}
	if !reverseLinked(spans, rtid) {
		t.Errorf("the reverse route's tasks/get of task %s has no link to its create span", rtid)
	}
	for _, d := range dials {
		if d.upstream == "" {
			continue
		}
		watch.mu.Lock()
		got := watch.m[d.upstream]
		watch.mu.Unlock()
		parts := strings.Split(got[0], "-")
		if got[0] == "" || got[0] != got[1] || len(parts) != 4 || upstreamSpans[parts[2]] != d.upstream {
			t.Errorf("2025-11-25 upstream %s: traceparent header %q, _meta %q; want the same, naming an upstream span", d.upstream, got[0], got[1])
		}
	}
}

func spanAttr(s *tracepb.Span, key string) string {
	for _, kv := range s.Attributes {
		if kv.Key == key {
			return kv.Value.GetStringValue()
		}
	}
	return ""
}

// missingSpans names the wanted (method, route, transport, era) server spans not in spans.
func missingSpans(spans []*tracepb.Span, n int, want func(int) (method, route, tr, era string)) string {
	var missing []string
	for i := range n {
		method, route, tr, era := want(i)
		found := false
		for _, s := range spans {
			if spanAttr(s, trace.AttrMethod) == method && spanAttr(s, trace.AttrRoute) == route &&
				spanAttr(s, trace.AttrTransport) == tr && spanAttr(s, trace.AttrEra) == era {
				found = true
			}
		}
		if !found {
			missing = append(missing, method+" on "+route+"/"+tr+" ("+era+")")
		}
	}
	return strings.Join(missing, ", ")
}

// reverseLinked: a reverse-route tasks/get span about task tid links to the tools/call span
// that created it.
func reverseLinked(spans []*tracepb.Span, tid string) bool {
	var create []byte
	for _, s := range spans {
		if s.Name == "tools/call" && spanAttr(s, trace.AttrRoute) == string(bridge.RouteReverse) && spanAttr(s, trace.AttrTaskID) == tid {
			create = s.SpanId
		}
	}
	for _, s := range spans {
		if s.Name != "tasks/get" || spanAttr(s, trace.AttrTaskID) != tid {
			continue
		}
		for _, l := range s.Links {
			if create != nil && bytes.Equal(l.SpanId, create) {
				return true
			}
		}
	}
	return false
}
