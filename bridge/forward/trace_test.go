package forward_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/taskbridge/taskbridge/internal/fixture"
	"github.com/taskbridge/taskbridge/internal/testenv"
	"github.com/taskbridge/taskbridge/internal/trace"
)

// upstreamSeen is what the upstream received: per request, its method and the trace
// context in the headers and in params._meta.
type upstreamSeen struct {
	method, header, meta string
}

type upstreamWatch struct {
	mu   sync.Mutex
	seen []upstreamSeen
}

func (u *upstreamWatch) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(b))
		if m := gjson.GetBytes(b, "method"); m.Exists() {
			u.mu.Lock()
			u.seen = append(u.seen, upstreamSeen{m.Str, r.Header.Get("traceparent"), gjson.GetBytes(b, "params._meta.traceparent").Str})
			u.mu.Unlock()
		}
		next.ServeHTTP(w, r)
	})
}

func (u *upstreamWatch) all() []upstreamSeen {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]upstreamSeen(nil), u.seen...)
}

// TestTraceOfOneForwardTask is issue 18's acceptance 3: one forward task (create, polls,
// input relay, result; and a second one cancelled) exported to an in-process OTLP/HTTP collector yields spans under the
// client's trace id, linked to the create span and carrying the task id; the upstream gets
// the trace context in its headers and in params._meta; no span attribute holds an
// argument, a result or a header value the client planted.
func TestTraceOfOneForwardTask(t *testing.T) {
	rcv := testenv.NewOTLPReceiver(t)
	shutdown, err := trace.Start(context.Background(), trace.Config{Endpoint: rcv.URL, ServiceName: "taskbridge-test"})
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			_ = shutdown(context.Background())
		}
	}()
	watch := &upstreamWatch{}
	e := newEnv(t, func(c *envConfig, _ *fixture.Options) { c.WrapUpstream = watch.wrap })

	const (
		clientTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
		headerSpan  = "00f067aa0ba902b7"
		metaSpan    = "b7ad6b7169203331"
		canaryArg   = "CANARY-ARG-7f3a"
		canaryToken = "CANARY-SECRET-91c2"
	)
	c, _ := answering(t, e.url, `{"confirm":true}`)
	c.Header = http.Header{
		"Traceparent":   {"00-" + clientTrace + "-" + headerSpan + "-01"},
		"Authorization": {"Bearer " + canaryToken},
	}
	tid := call(t, c, "tools/call", raw(`{"name":"confirm_delete","arguments":{"filename":"`+canaryArg+`.txt"},"task":{}}`)).Get("task.taskId").Str
	if tid == "" {
		t.Fatal("no task id")
	}
	// Polls carry their trace context in params._meta (SEP-414), which wins over the header.
	pollParams := raw(`{"taskId":"` + tid + `","_meta":{"traceparent":"00-` + clientTrace + `-` + metaSpan + `-01"}}`)
	deadline := time.Now().Add(10 * time.Second)
	for polls := 0; polls < 2 || time.Now().Before(deadline); polls++ {
		st := call(t, c, "tasks/get", pollParams).Get("status").Str
		if polls >= 2 && st == "input_required" {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	res := call(t, c, "tasks/result", raw(`{"taskId":"`+tid+`"}`))
	if got := res.Get("content.0.text").Str; got != "Deleted "+canaryArg+".txt" {
		t.Fatalf("result = %s", res.Raw)
	}
	// A second task, cancelled: the cancel links to its own create.
	tid2 := call(t, c, "tools/call", raw(`{"name":"long_job","arguments":{"seconds":600},"task":{}}`)).Get("task.taskId").Str
	call(t, c, "tasks/cancel", raw(`{"taskId":"`+tid2+`"}`))
	e.b.Close(context.Background()) // the bridge's own polls end
	// A server span ends just after its answer went out: wait (bounded) for the last one.
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if err := trace.Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
		if hasSpan(rcv.Spans(), "tasks/result", tid) && hasSpan(rcv.Spans(), "response", tid) && hasSpan(rcv.Spans(), "tasks/cancel", tid2) {
			break
		}
	}
	if err := shutdown(context.Background()); err != nil {
		t.Fatalf("flushing spans: %v", err)
	}
	stopped = true

	spans, bad := rcv.Spans(), rcv.Refused()
	if len(bad) > 0 {
		t.Fatalf("the collector refused exports: %v", bad)
	}
	checkTaskTrace(t, spans, tid, clientTrace, headerSpan, metaSpan)
	checkUpstreamGotContext(t, watch.all(), spans, clientTrace)
	checkCancelLinked(t, spans, tid2)
	for _, s := range spans {
		for _, kv := range s.Attributes {
			v := kv.Value.String()
			if strings.Contains(v, "CANARY") || strings.Contains(v, "Deleted") || strings.Contains(v, "confirm") && kv.Key != trace.AttrMethod {
				t.Errorf("span %q attribute %s = %s: a payload, argument or secret", s.Name, kv.Key, v)
			}
		}
	}
}

// hasSpan reports whether a span named name about task tid is in spans.
func hasSpan(spans []*tracepb.Span, name, tid string) bool {
	for _, s := range spans {
		if s.Name == name && attr(s, trace.AttrTaskID) == tid {
			return true
		}
	}
	return false
}

func hexOf(b []byte) string { return hex.EncodeToString(b) }

func attr(s *tracepb.Span, key string) string {
	for _, kv := range s.Attributes {
		if kv.Key == key {
			return kv.Value.GetStringValue()
		}
	}
	return ""
}

// checkTaskTrace: the client's requests about the task are server spans under the
// client's trace with the task id; each after the create links to the create span; the
// bridge's own upstream polls are children of the create span.
func checkTaskTrace(t *testing.T, spans []*tracepb.Span, tid, clientTrace, headerSpan, metaSpan string) {
	t.Helper()
	var create *tracepb.Span
	byName := map[string][]*tracepb.Span{}
	for _, s := range spans {
		if hexOf(s.TraceId) != clientTrace {
			continue
		}
		byName[s.Name] = append(byName[s.Name], s)
		if s.Name == "tools/call" && s.Kind == tracepb.Span_SPAN_KIND_SERVER && attr(s, trace.AttrTaskID) == tid {
			create = s
		}
	}
	if create == nil {
		t.Fatalf("no tools/call server span under the client's trace; got %d spans", len(spans))
	}
	if hexOf(create.ParentSpanId) != headerSpan || attr(create, trace.AttrTaskID) != tid ||
		attr(create, trace.AttrRoute) != "forward" || attr(create, trace.AttrEra) != trace.Legacy || attr(create, trace.AttrTransport) != "http" {
		t.Errorf("create span: parent %s, attributes %v", hexOf(create.ParentSpanId), create.Attributes)
	}
	linked := func(s *tracepb.Span) bool {
		for _, l := range s.Links {
			if hexOf(l.SpanId) == hexOf(create.SpanId) && hexOf(l.TraceId) == clientTrace {
				return true
			}
		}
		return false
	}
	for _, name := range []string{"tasks/get", "tasks/result", "response"} {
		got := byName[name]
		if len(got) == 0 {
			t.Errorf("no %s span under the client's trace", name)
		}
		for _, s := range got {
			if attr(s, trace.AttrTaskID) != tid || !linked(s) {
				t.Errorf("%s span: task id %q, links %v; want %q and a link to the create span", name, attr(s, trace.AttrTaskID), s.Links, tid)
			}
			if name == "tasks/get" && hexOf(s.ParentSpanId) != metaSpan {
				t.Errorf("tasks/get span's parent = %s, want the _meta traceparent's %s", hexOf(s.ParentSpanId), metaSpan)
			}
		}
	}
	if len(byName["tasks/get"]) < 2 {
		t.Errorf("%d tasks/get spans, want one per poll (at least 2)", len(byName["tasks/get"]))
	}
	polls := 0
	for _, s := range byName["upstream tasks/get"] {
		if hexOf(s.ParentSpanId) == hexOf(create.SpanId) && attr(s, trace.AttrTaskID) == tid {
			polls++
		}
	}
	if polls == 0 {
		t.Errorf("no upstream tasks/get span of the bridge's polls as a child of the create span")
	}
	for _, s := range byName["upstream tasks/update"] {
		if attr(s, trace.AttrTaskID) != tid {
			t.Errorf("upstream tasks/update (input relay) span without the task id: %v", s.Attributes)
		}
	}
	if len(byName["upstream tools/call"]) == 0 || len(byName["upstream tasks/update"]) == 0 {
		t.Errorf("upstream spans under the client's trace: tools/call %d, tasks/update %d; want both",
			len(byName["upstream tools/call"]), len(byName["upstream tasks/update"]))
	}
}

// checkUpstreamGotContext: every task call the upstream got carries the same traceparent in
// its header and its params._meta, under the client's trace, naming an exported upstream span.
func checkUpstreamGotContext(t *testing.T, seen []upstreamSeen, spans []*tracepb.Span, clientTrace string) {
	t.Helper()
	ids := map[string]bool{}
	for _, s := range spans {
		if s.Kind == tracepb.Span_SPAN_KIND_CLIENT {
			ids[hexOf(s.SpanId)] = true
		}
	}
	got := map[string]bool{}
	for _, u := range seen {
		switch u.method {
		case "tools/call", "tasks/get", "tasks/update":
		default:
			continue
		}
		parts := strings.Split(u.header, "-")
		if u.header == "" || u.header != u.meta || len(parts) != 4 || parts[1] != clientTrace || !ids[parts[2]] {
			t.Errorf("upstream %s: traceparent header %q, _meta %q; want the same, under trace %s, of an upstream span", u.method, u.header, u.meta, clientTrace)
			continue
		}
		got[u.method] = true
	}
	for _, m := range []string{"tools/call", "tasks/get", "tasks/update"} {
		if !got[m] {
			t.Errorf("the upstream got no %s with the propagated trace context", m)
		}
	}
}

// checkCancelLinked: the tasks/cancel span of task tid links to that task's create span,
// and the upstream tasks/cancel is its child.
func checkCancelLinked(t *testing.T, spans []*tracepb.Span, tid string) {
	t.Helper()
	var create, cancel *tracepb.Span
	for _, s := range spans {
		switch {
		case s.Name == "tools/call" && attr(s, trace.AttrTaskID) == tid:
			create = s
		case s.Name == "tasks/cancel" && attr(s, trace.AttrTaskID) == tid:
			cancel = s
		}
	}
	if create == nil || cancel == nil {
		t.Fatalf("spans of the cancelled task: create %v, cancel %v", create != nil, cancel != nil)
	}
	if len(cancel.Links) != 1 || hexOf(cancel.Links[0].SpanId) != hexOf(create.SpanId) {
		t.Errorf("tasks/cancel links %v, want the create span %s", cancel.Links, hexOf(create.SpanId))
	}
	for _, s := range spans {
		if s.Name == "upstream tasks/cancel" && hexOf(s.ParentSpanId) == hexOf(cancel.SpanId) {
			return
		}
	}
	t.Errorf("no upstream tasks/cancel span under the client's tasks/cancel")
}
