package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/taskbridge/taskbridge/bridge"
	"github.com/taskbridge/taskbridge/fallback"
	childproc "github.com/taskbridge/taskbridge/internal/child"
	"github.com/taskbridge/taskbridge/internal/config"
	"github.com/taskbridge/taskbridge/internal/metrics"
	"github.com/taskbridge/taskbridge/legacy"
	"github.com/taskbridge/taskbridge/sep2663"
	"github.com/taskbridge/taskbridge/store"
)

// mcpBridge is what serve and stdio run: the era router (bridge.Router), which probes the
// upstream's faces and serves both client eras on one /mcp behind the front door
// (bridge.NewDoor).
type mcpBridge interface {
	bridge.Engine
	ActiveTasks() int
	CheckUpstream(context.Context) error
	Close(context.Context) error
}

// upstreamEra is what config check --connect reports of the upstream.
type upstreamEra int

const (
	eraModern  upstreamEra = iota // some client era is served by the modern face
	eraLegacy                     // every client era is served by the 2025-11-25 face
	eraUnknown                    // not probed, or no answer
)

// upstreams are the two clients of the one upstream (one per face) and how to stop it.
// Over stdio both share one child process (internal/child), so a dual-era child is
// reached by both.
type upstreams struct {
	modern *sep2663.Client
	legacy *legacy.Client
	stop   func(context.Context) error // shuts a child down; a no-op for a URL
}

// upstreamHooks tell the era router of failed upstream requests (Router.Observe).
type upstreamHooks struct {
	router atomic.Pointer[bridge.Router]
}

func (h *upstreamHooks) observe(e fallback.Era) func(string, error) {
	return func(method string, err error) {
		if r := h.router.Load(); r != nil {
			r.Observe(e, method, err)
		}
	}
}

// openUpstreams builds both clients: over HTTP with hc and header (nil: defaults), or a
// child process over stdio started here (the shutdown sequence close stdin, wait, SIGTERM,
// wait, SIGKILL runs in stop).
func openUpstreams(u upstreamFlags, hc *http.Client, header http.Header, hooks *upstreamHooks, log zerolog.Logger, childStderr io.Writer) (upstreams, error) {
	minfo := sep2663.Implementation{Name: "taskbridge", Version: version}
	linfo := legacy.Implementation{Name: "taskbridge", Version: version}
	switch {
	case u.url != "" && u.cmd != "":
		return upstreams{}, errors.New("give one of --upstream and --upstream-cmd, not both")
	case u.url != "":
		return upstreams{
			modern: sep2663.NewClient(sep2663.ClientOptions{URL: u.url, Header: header, HTTPClient: hc, ClientInfo: minfo,
				OnError: hooks.observe(fallback.EraModern)}),
			legacy: legacy.NewClient(legacy.ClientOptions{URL: u.url, Header: header, HTTPClient: hc, ClientInfo: linfo,
				OnError: hooks.observe(fallback.EraLegacy)}),
			stop: func(context.Context) error { return nil },
		}, nil
	case u.cmd != "":
		argv, err := childproc.SplitCommand(u.cmd)
		if err != nil {
			return upstreams{}, fmt.Errorf("--upstream-cmd: %w", err)
		}
		tr, err := legacy.StartStdio(childproc.Options{Command: argv, Stderr: childStderr, Logger: &log,
			CloseWait: u.closeWait, TermWait: u.termWait, OnCall: u.onCall})
		if err != nil {
			return upstreams{}, err
		}
		return upstreams{
			modern: sep2663.NewClient(sep2663.ClientOptions{Transport: sep2663.StdioOver(tr.Proc()), ClientInfo: minfo,
				OnError: hooks.observe(fallback.EraModern)}),
			legacy: legacy.NewClient(legacy.ClientOptions{Transport: tr, ClientInfo: linfo,
				OnError: hooks.observe(fallback.EraLegacy)}),
			stop: tr.Close,
		}, nil
	}
	return upstreams{}, errors.New("--upstream URL or --upstream-cmd CMD is required")
}

// routerConfig is the era router's share of the configuration: the forward and the reverse
// routes' (forwardConfig, reverseConfig) over one store and one work gate. serve and verify
// build the same bridge from it; the upstream clients are set by newRouter.
func routerConfig(cfg *config.Config, st store.Store, log zerolog.Logger, m *metrics.Metrics, gate *bridge.Gate, accessLog func() bool, describe string) (bridge.RouterConfig, error) {
	bcfg := forwardConfig(cfg, st, nil, log, m, gate, accessLog)
	var err error
	if bcfg.ToolTaskSupport, err = parseToolTaskSupport(cfg.ToolTaskSupport); err != nil {
		return bridge.RouterConfig{}, err
	}
	rc := reverseConfig(cfg, st, log, gate)
	rc.Metrics = m
	return bridge.RouterConfig{Forward: bcfg, Reverse: rc, Logger: log, Metrics: m, Describe: describe,
		ProbeTimeout: cfg.StatusTimeout}, nil
}

// newRouter builds and starts the era router over both clients; hooks then report to it.
func newRouter(rc bridge.RouterConfig, ups upstreams, hooks *upstreamHooks) (*bridge.Router, error) {
	rc.Forward.Upstream, rc.Reverse.Upstream = ups.modern, ups.legacy
	r, err := bridge.NewRouter(rc)
	if err != nil {
		return nil, err
	}
	hooks.router.Store(r)
	r.Start()
	return r, nil
}

// detectEra probes the upstream once (config check --connect): the routes per client era,
// and eraLegacy when both client eras are served by its 2025-11-25 face.
func detectEra(ctx context.Context, ups upstreams, limit time.Duration) (upstreamEra, fallback.Routes, error) {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	shape, err := bridge.Probe(ctx, bridge.ProbeClients{Modern: ups.modern, Legacy: ups.legacy})
	if err != nil {
		return eraUnknown, fallback.Routes{}, err
	}
	routes, err := fallback.ChooseRoutes(shape)
	if err != nil {
		return eraUnknown, routes, err
	}
	if routes.Legacy.Face == fallback.EraLegacy && routes.Modern.Face == fallback.EraLegacy {
		return eraLegacy, routes, nil
	}
	return eraModern, routes, nil
}

// routeOf names the route a client era's choice makes (client 2025-11-25 when legacyClient).
func routeOf(c fallback.Choice, legacyClient bool) bridge.Route {
	switch {
	case legacyClient && c.Face == fallback.EraModern:
		return bridge.RouteForward
	case legacyClient:
		return bridge.RouteLegacyPassThrough
	case c.Face == fallback.EraModern:
		return bridge.RouteModernPassThrough
	}
	return bridge.RouteReverse
}
