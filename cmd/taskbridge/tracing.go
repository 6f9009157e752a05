package main

import (
	"context"
	"fmt"
	"time"

	"github.com/rs/zerolog"

	"github.com/taskbridge/taskbridge/internal/config"
	"github.com/taskbridge/taskbridge/internal/redact"
	"github.com/taskbridge/taskbridge/internal/trace"
)

// startTracing switches OpenTelemetry traces on when otel_endpoint or
// OTEL_EXPORTER_OTLP_ENDPOINT is set (internal/trace; off, nothing is started). The
// returned stop flushes the spans still queued, for at most five seconds, and switches
// tracing off; call it after the listeners have closed.
func startTracing(ctx context.Context, cfg *config.Config, log zerolog.Logger) (stop func(), err error) {
	tc := trace.Config{Endpoint: cfg.OTelEndpoint, ServiceName: "taskbridge", ServiceVersion: version}
	shutdown, err := trace.Start(ctx, tc)
	if err != nil {
		return nil, fmt.Errorf("traces: %w", err)
	}
	if trace.Enabled(tc) {
		where := "OTEL_EXPORTER_OTLP_* environment"
		if cfg.OTelEndpoint != "" {
			where = redact.URL(cfg.OTelEndpoint)
		}
		log.Info().Str("collector", where).Msg("OpenTelemetry traces on (OTLP/HTTP)")
	}
	return func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := shutdown(sctx); err != nil {
			log.Warn().Err(err).Msg("traces: flushing the last spans failed")
		}
	}, nil
}
