// Package trace is taskbridge's OpenTelemetry tracing: one server span per client message
// (at the front door for HTTP, per message on WebSocket and stdio), one client span per
// upstream call, and the W3C trace context (traceparent, tracestate) read from the client
// and propagated to the upstream, both ways MCP instrumentations use: HTTP headers and
// params._meta (SEP-414: the unprefixed _meta keys traceparent and tracestate).
//
// Tracing is off unless Start is given an endpoint or OTEL_EXPORTER_OTLP_ENDPOINT (or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) is set. Off, every hook returns at the first load of
// one atomic pointer: no span, no context value, no header or _meta read or written, so
// the hot path costs what it cost before (docs/operations.md has the benchmark figures).
//
// A task's life is linked through its record: the create's span context is stored on the
// task record (record.Task.TraceParent, written once at create). A later client request
// about the task (poll, result, cancel, input answer) keeps its own parent (the client's
// trace) and gains a span link to the create span and the attribute taskbridge.task.id;
// the bridge's own background work on the task (the coalesced upstream polls, input relay)
// runs as a child of the create span (ForTask), so it lands in the creating client's trace.
//
// What a span carries is fixed here and nowhere else: the JSON-RPC method, route, client
// era, transport, the bridge task id, the upstream's revision, and an error class (a
// JSON-RPC code or "transport"). Never a payload, an argument, a tool result, a header
// value, a token, an upstream URL or an error message.
package trace

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync/atomic"

	"github.com/tidwall/gjson"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/taskbridge/taskbridge/internal/jsonobj"
	"github.com/taskbridge/taskbridge/internal/jsonrpc"
)

// Attribute keys. The mcp.* ones are the OpenTelemetry MCP semantic conventions'; the
// taskbridge.* ones are this bridge's own.
const (
	AttrMethod    = "mcp.method.name"
	AttrRoute     = "taskbridge.route"
	AttrEra       = "taskbridge.era"
	AttrTransport = "taskbridge.transport"
	AttrTaskID    = "taskbridge.task.id"
	AttrUpstream  = "taskbridge.upstream.revision"
	AttrErrorCode = "rpc.jsonrpc.error_code"
	AttrErrorType = "error.type"
)

// provider is tracing switched on: the SDK's tracer provider and our tracer.
type provider struct {
	tp     *sdktrace.TracerProvider
	tracer oteltrace.Tracer
}

// on is nil while tracing is off: every hook checks it first and returns.
var on atomic.Pointer[provider]

// propagator reads and writes traceparent and tracestate.
var propagator = propagation.TraceContext{}

// Config configures Start.
type Config struct {
	// Endpoint is the OTLP/HTTP collector's base URL (as OTEL_EXPORTER_OTLP_ENDPOINT:
	// traces go to Endpoint + "/v1/traces"), e.g. http://127.0.0.1:4318. "": the OTEL_*
	// environment variables decide; none set: tracing stays off.
	Endpoint string
	// ServiceName and ServiceVersion name this process in the traces (service.name,
	// service.version); OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES still apply.
	ServiceName    string
	ServiceVersion string
}

// Enabled reports whether Start switched tracing on for c: an endpoint is configured or
// the OTLP endpoint environment variables are set.
func Enabled(c Config) bool {
	return c.Endpoint != "" || os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" ||
		os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// Start switches tracing on when Enabled(c), and returns the function that flushes the
// spans still queued and switches it off again (call it on shutdown). Off, it returns a
// no-op shutdown and tracing stays off.
func Start(ctx context.Context, c Config) (shutdown func(context.Context) error, err error) {
	if !Enabled(c) {
		return func(context.Context) error { return nil }, nil
	}
	var opts []otlptracehttp.Option
	if c.Endpoint != "" {
		u, err := url.Parse(c.Endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("trace: otel_endpoint must be an http(s) URL")
		}
		u.Path = strings.TrimSuffix(u.Path, "/") + "/v1/traces"
		opts = append(opts, otlptracehttp.WithEndpointURL(u.String()))
	}
	exp, err := otlptracehttp.New(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("trace: OTLP exporter: %w", err)
	}
	name := c.ServiceName
	if name == "" {
		name = "taskbridge"
	}
	// Ours first, then OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME, which win.
	res, err := resource.New(ctx, resource.WithAttributes(attribute.String("service.name", name),
		attribute.String("service.version", c.ServiceVersion)), resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil {
		res = resource.Default()
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	p := &provider{tp: tp, tracer: tp.Tracer("github.com/taskbridge/taskbridge")}
	on.Store(p)
	return func(ctx context.Context) error {
		on.CompareAndSwap(p, nil)
		return tp.Shutdown(ctx)
	}, nil
}

// End ends a span; err (may be nil) sets its status and error class, never its message.
type End func(err error)

func noEnd(error) {}

// endSpan returns the End of span.
func endSpan(span oteltrace.Span) End {
	return func(err error) {
		if err != nil {
			var je *jsonrpc.Error
			if errors.As(err, &je) {
				span.SetAttributes(attribute.Int64(AttrErrorCode, je.Code), attribute.String(AttrErrorType, "jsonrpc"))
			} else {
				span.SetAttributes(attribute.String(AttrErrorType, "transport"))
			}
			span.SetStatus(codes.Error, "")
		}
		span.End()
	}
}

// Labels are what the front door knows of a client request: its route, client era and
// transport. The door puts them in the context (WithLabels); the spans read them there.
type Labels struct {
	Route, Era, Transport string
}

type labelsKey struct{}

// WithLabels returns ctx carrying l (ctx itself while tracing is off).
func WithLabels(ctx context.Context, l Labels) context.Context {
	if on.Load() == nil {
		return ctx
	}
	return context.WithValue(ctx, labelsKey{}, l)
}

// StartRequest starts the server span of one client message: raw is the JSON-RPC message
// (only its method, params.taskId and params._meta.traceparent/tracestate are read, with
// gjson); header is the HTTP request's (nil on WebSocket and stdio). The parent is the
// client's trace context: _meta first (it travels with the message on every transport),
// else the HTTP headers.
func StartRequest(ctx context.Context, header http.Header, raw []byte) (context.Context, End) {
	p := on.Load()
	if p == nil {
		return ctx, noEnd
	}
	parent := extract(ctx, header, raw)
	method := gjson.GetBytes(raw, "method").Str
	name := method
	if name == "" {
		name = "response" // a client's answer to a request of ours (input relay)
	}
	l, _ := ctx.Value(labelsKey{}).(Labels)
	attrs := []attribute.KeyValue{attribute.String(AttrMethod, name), attribute.String(AttrRoute, l.Route),
		attribute.String(AttrEra, l.Era), attribute.String(AttrTransport, l.Transport)}
	if id := gjson.GetBytes(raw, "params.taskId"); id.Type == gjson.String && strings.HasPrefix(method, "tasks/") {
		attrs = append(attrs, attribute.String(AttrTaskID, id.Str))
	}
	ctx, span := p.tracer.Start(parent, name, oteltrace.WithSpanKind(oteltrace.SpanKindServer), oteltrace.WithAttributes(attrs...))
	return ctx, endSpan(span)
}

// StartHTTP starts the server span of an HTTP request without a JSON-RPC body (GET: the
// SSE stream; DELETE: session end), named by its HTTP method.
func StartHTTP(ctx context.Context, r *http.Request) (context.Context, End) {
	p := on.Load()
	if p == nil {
		return ctx, noEnd
	}
	l, _ := ctx.Value(labelsKey{}).(Labels)
	ctx, span := p.tracer.Start(propagator.Extract(ctx, propagation.HeaderCarrier(r.Header)), r.Method,
		oteltrace.WithSpanKind(oteltrace.SpanKindServer), oteltrace.WithAttributes(attribute.String(AttrRoute, l.Route),
			attribute.String(AttrEra, l.Era), attribute.String(AttrTransport, l.Transport)))
	return ctx, endSpan(span)
}

// extract returns ctx with the client's remote span context, if it sent a valid one.
func extract(ctx context.Context, header http.Header, raw []byte) context.Context {
	meta := gjson.GetBytes(raw, "params._meta")
	if tp := meta.Get("traceparent"); tp.Type == gjson.String {
		c := propagation.MapCarrier{"traceparent": tp.Str}
		if ts := meta.Get("tracestate"); ts.Type == gjson.String {
			c["tracestate"] = ts.Str
		}
		if out := propagator.Extract(ctx, c); oteltrace.SpanContextFromContext(out).IsValid() {
			return out
		}
	}
	if header != nil {
		return propagator.Extract(ctx, propagation.HeaderCarrier(header))
	}
	return ctx
}

// Task marks the current span as one about bridge task id and links it to the task's
// create span (traceParent as stored on the record; "" links nothing). A span already
// inside the create span's trace is not linked to it again.
func Task(ctx context.Context, id, traceParent string) {
	if on.Load() == nil {
		return
	}
	span := oteltrace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(attribute.String(AttrTaskID, id))
	if sc := parse(traceParent); sc.IsValid() && sc.SpanID() != span.SpanContext().SpanID() {
		span.AddLink(oteltrace.Link{SpanContext: sc})
	}
}

// TraceParent returns the W3C traceparent of ctx's current span, to store on a task record
// at create; "" while tracing is off or without a span.
func TraceParent(ctx context.Context) string {
	if on.Load() == nil {
		return ""
	}
	c := propagation.MapCarrier{}
	propagator.Inject(ctx, c)
	return c["traceparent"]
}

// ForTask returns ctx for the bridge's own work on a task, outside any client request (the
// coalesced upstream polls, an input answer forwarded upstream): its spans become children
// of the task's create span (traceParent from the record) and carry the task id.
func ForTask(ctx context.Context, id, traceParent string) context.Context {
	if on.Load() == nil {
		return ctx
	}
	if sc := parse(traceParent); sc.IsValid() && !oteltrace.SpanContextFromContext(ctx).IsValid() {
		ctx = oteltrace.ContextWithRemoteSpanContext(ctx, sc)
	}
	return context.WithValue(ctx, taskKey{}, id)
}

type taskKey struct{}

// parse reads a stored traceparent.
func parse(traceParent string) oteltrace.SpanContext {
	if traceParent == "" {
		return oteltrace.SpanContext{}
	}
	return oteltrace.SpanContextFromContext(propagator.Extract(context.Background(), propagation.MapCarrier{"traceparent": traceParent}))
}

// Upstream revisions, for StartUpstream.
const (
	Modern = "2026-07-28"
	Legacy = "2025-11-25"
)

// StartUpstream starts the client span of one upstream call of method to an upstream of
// revision (Modern or Legacy). Inject the returned context into the request (InjectHeaders,
// InjectMeta) so the upstream's spans become its children.
func StartUpstream(ctx context.Context, revision, method string) (context.Context, End) {
	p := on.Load()
	if p == nil {
		return ctx, noEnd
	}
	attrs := []attribute.KeyValue{attribute.String(AttrMethod, method), attribute.String(AttrUpstream, revision)}
	if id, ok := ctx.Value(taskKey{}).(string); ok {
		attrs = append(attrs, attribute.String(AttrTaskID, id))
	}
	ctx, span := p.tracer.Start(ctx, "upstream "+method, oteltrace.WithSpanKind(oteltrace.SpanKindClient), oteltrace.WithAttributes(attrs...))
	return ctx, endSpan(span)
}

// InjectHeaders sets traceparent (and tracestate) on an upstream HTTP request from ctx's
// current span; nothing while tracing is off.
func InjectHeaders(ctx context.Context, h http.Header) {
	if on.Load() == nil {
		return
	}
	propagator.Inject(ctx, propagation.HeaderCarrier(h))
}

// InjectMeta returns params with params._meta.traceparent (and tracestate) set from ctx's
// current span, replacing any a client sent (the upstream's parent is our upstream span);
// every other byte is kept (internal/jsonobj). While tracing is off, or for params that are
// not an object (or absent: "{}" is not invented), params is returned as it is.
func InjectMeta(ctx context.Context, params json.RawMessage) json.RawMessage {
	if on.Load() == nil || len(params) == 0 {
		return params
	}
	c := propagation.MapCarrier{}
	propagator.Inject(ctx, c)
	if c["traceparent"] == "" {
		return params
	}
	out, err := jsonobj.Edit(params, func(o jsonobj.Object) jsonobj.Object {
		o = o.SetMeta("traceparent", jsonobj.Quote(c["traceparent"]))
		if ts := c["tracestate"]; ts != "" {
			return o.SetMeta("tracestate", jsonobj.Quote(ts))
		}
		return o.DropMeta("tracestate")
	})
	if err != nil {
		return params
	}
	return out
}

// Created marks the current span as the create of bridge task id and returns its
// traceparent, to store on the new record (record.Task.TraceParent); "" while off.
func Created(ctx context.Context, id string) string {
	if on.Load() == nil {
		return ""
	}
	Task(ctx, id, "")
	return TraceParent(ctx)
}

// Flush exports the spans ended so far, without switching tracing off (a test waiting for
// a span that ends just after its answer was sent). Off, it does nothing.
func Flush(ctx context.Context) error {
	if p := on.Load(); p != nil {
		return p.tp.ForceFlush(ctx)
	}
	return nil
}
