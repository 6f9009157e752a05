package testenv

import (
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// OTLPReceiver is an in-process OTLP/HTTP trace collector for tests: it decodes the real
// OTLP protobuf an exporter posts to /v1/traces (gzip or not) and keeps the spans.
type OTLPReceiver struct {
	URL string // base URL, as otel_endpoint takes it

	mu        sync.Mutex
	spans     []*tracepb.Span
	resources []*resourcepb.Resource
	refused   []string
}

// NewOTLPReceiver starts a receiver on loopback, closed when the test ends.
func NewOTLPReceiver(t testing.TB) *OTLPReceiver {
	o := &OTLPReceiver{}
	srv := httptest.NewServer(o)
	t.Cleanup(srv.Close)
	o.URL = srv.URL
	return o
}

// Spans returns every span received so far.
func (o *OTLPReceiver) Spans() []*tracepb.Span {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]*tracepb.Span(nil), o.spans...)
}

// Resources returns the resource of every batch received (service.name, …).
func (o *OTLPReceiver) Resources() []*resourcepb.Resource {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]*resourcepb.Resource(nil), o.resources...)
}

// Refused lists the exports it could not take (wrong path, content type or protobuf).
func (o *OTLPReceiver) Refused() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.refused...)
}

func (o *OTLPReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			o.refuse(w, "gzip: "+err.Error())
			return
		}
		body = zr
	}
	b, err := io.ReadAll(body)
	var req coltracepb.ExportTraceServiceRequest
	if err == nil {
		err = proto.Unmarshal(b, &req)
	}
	switch {
	case r.URL.Path != "/v1/traces":
		o.refuse(w, "path "+r.URL.Path)
		return
	case r.Header.Get("Content-Type") != "application/x-protobuf":
		o.refuse(w, "content type "+r.Header.Get("Content-Type"))
		return
	case err != nil:
		o.refuse(w, "body: "+err.Error())
		return
	}
	o.mu.Lock()
	for _, rs := range req.ResourceSpans {
		o.resources = append(o.resources, rs.Resource)
		for _, ss := range rs.ScopeSpans {
			o.spans = append(o.spans, ss.Spans...)
		}
	}
	o.mu.Unlock()
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

func (o *OTLPReceiver) refuse(w http.ResponseWriter, why string) {
	o.mu.Lock()
	o.refused = append(o.refused, why)
	o.mu.Unlock()
	http.Error(w, "bad export", http.StatusBadRequest)
}
