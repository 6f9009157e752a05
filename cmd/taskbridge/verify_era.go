package main

import (
	"context"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/rs/zerolog"

	"github.com/taskbridge/taskbridge/bridge"
	"github.com/taskbridge/taskbridge/fallback"
	"github.com/taskbridge/taskbridge/internal/config"
	"github.com/taskbridge/taskbridge/internal/jsonrpc"
	"github.com/taskbridge/taskbridge/internal/metrics"
	"github.com/taskbridge/taskbridge/legacy"
	"github.com/taskbridge/taskbridge/sep2663"
)

// "taskbridge verify" still tells the upstream's era once, from server/discover, and
// builds one route pair per run, as serve did before the era router (bridge.Router, which
// probes both faces and picks the route per client era). Kept here, apart, until verify
// builds its bridge through the router too.

// verifyEra tells the upstream's era the way MCP 2026-07-28 prescribes: server/discover
// first; an answer, or a 2026-07-28 error (-32020/-32021/-32022), means a modern server;
// any other error means a legacy server. Transport failures are retried with backoff
// (backoff/v5) until limit; then the era is unknown.
func verifyEra(ctx context.Context, c *sep2663.Client, limit time.Duration, log zerolog.Logger) upstreamEra {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	bo := &backoff.ExponentialBackOff{InitialInterval: 200 * time.Millisecond, RandomizationFactor: 0.2,
		Multiplier: 2, MaxInterval: 2 * time.Second}
	bo.Reset()
	for {
		_, err := c.Discover(ctx)
		if err == nil {
			return eraModern
		}
		if fallback.DiscoverMeansLegacy(err) {
			return eraLegacy
		}
		var je *jsonrpc.Error
		if errors.As(err, &je) {
			return eraModern // a 2026-07-28 refusal: the forward bridge reports it on use
		}
		log.Warn().Err(err).Msg("upstream era detection: server/discover failed; retrying")
		select {
		case <-ctx.Done():
			return eraUnknown
		case <-time.After(bo.NextBackOff()):
		}
	}
}

// newReverseFromConfig builds and starts the reverse bridge for a legacy upstream at url.
func newReverseFromConfig(ctx context.Context, rc bridge.ReverseConfig, url string, h http.Header, hc *http.Client) (*bridge.Reverse, error) {
	rc.Upstream = legacy.NewClient(legacy.ClientOptions{URL: url, Header: h, HTTPClient: hc,
		ClientInfo: legacy.Implementation{Name: "taskbridge", Version: version}})
	r, err := bridge.NewReverse(rc)
	if err != nil {
		return nil, err
	}
	if err := r.Start(ctx); err != nil {
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = r.Close(cctx)
		return nil, err
	}
	return r, nil
}

// openUpstream builds the 2026-07-28 client of an HTTP upstream (the instrumented
// transport, the configured Authorization); verifyUpstream starts a stdio child itself.
func openUpstream(up upstreamFlags, cfg *config.Config, m *metrics.Metrics, tl *tlsSet, _ zerolog.Logger, _ io.Writer) (*sep2663.Client, func(context.Context) error, error) {
	hc, h := upstreamHTTP(cfg, m, tl)
	c := sep2663.NewClient(sep2663.ClientOptions{URL: up.url, Header: h, HTTPClient: hc,
		ClientInfo: sep2663.Implementation{Name: "taskbridge", Version: version}})
	return c, func(context.Context) error { return nil }, nil
}
