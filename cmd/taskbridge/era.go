package main

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/rs/zerolog"

	"github.com/taskbridge/taskbridge/bridge"
	"github.com/taskbridge/taskbridge/fallback"
	"github.com/taskbridge/taskbridge/internal/jsonrpc"
	"github.com/taskbridge/taskbridge/legacy"
	"github.com/taskbridge/taskbridge/sep2663"
)

// mcpBridge is what serve runs: the forward bridge (2026-07-28 upstream) or the reverse
// bridge (2025-11-25 upstream). Both serve both client eras on one /mcp, behind the front
// door (bridge.NewDoor).
type mcpBridge interface {
	bridge.Engine
	ActiveTasks() int
	CheckUpstream(context.Context) error
	Close(context.Context) error
}

// upstreamEra is the result of era detection at start.
type upstreamEra int

const (
	eraModern  upstreamEra = iota // server/discover answered (or the era could not be told)
	eraLegacy                     // server/discover got a non-modern error: 2025-11-25 or older
	eraUnknown                    // the upstream did not answer at all within the limit
)

// detectEra tells the upstream's era the way MCP 2026-07-28 prescribes: server/discover
// first; an answer, or a 2026-07-28 error (-32020/-32021/-32022), means a modern server;
// any other error (a 2025-11-25 server's "no session" 400, 404, 405, -32601, …) means a
// legacy server, which is then initialized. The server's name or version is never used.
// Transport failures are retried with backoff until limit; then the era is unknown.
func detectEra(ctx context.Context, c *sep2663.Client, limit time.Duration, log zerolog.Logger) upstreamEra {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	backoff := 200 * time.Millisecond
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
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 2*time.Second)
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
