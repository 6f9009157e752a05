package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/taskbridge/taskbridge/bridge"
	"github.com/taskbridge/taskbridge/internal/redact"
)

// "taskbridge verify" builds its in-process bridge as serve does: the era router
// (bridge.Router over both faces of the upstream, routerConfig and newRouter in era.go),
// which probes both faces and picks the route per client era. So a dual-era upstream
// (mcp-go) is verified through the routes serve would give it. Each start of the bridge
// (verify restarts it between steps) waits for the router's first successful probe; the
// first router is built before the run, and what it chose names the era and route facts.

// waitRouted waits until rt has routes (its first probe succeeded; failed probes are
// retried with backoff) or limit passes.
func waitRouted(ctx context.Context, rt *bridge.Router, limit time.Duration, describe string) error {
	t := time.NewTimer(limit)
	defer t.Stop()
	select {
	case <-rt.Ready():
		return nil
	case <-t.C:
		if err := rt.LastProbeError(); err != nil { // what kept failing: invalid reply, refused, …
			return fmt.Errorf("the upstream %s is not usable after %s of probing: %s", describe, limit, redact.Error(err))
		}
		return fmt.Errorf("the upstream %s did not answer within %s", describe, limit)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// routedFacts names what rt's probe found: the upstream's era (the faces it serves:
// "2026-07-28", "2025-11-25" or both), the route per client era, e.g. "forward (2025-11-25
// clients) + modern pass-through (2026-07-28 clients)", and whether the 2025-11-25 clients'
// route is the forward route.
func routedFacts(rt *bridge.Router) (era, route string, forward bool) {
	shape, routes, ok := rt.Shape()
	if !ok {
		return "unknown", "unknown", false
	}
	var faces []string
	if shape.Modern != nil {
		faces = append(faces, "2026-07-28")
	}
	if shape.Legacy != nil {
		faces = append(faces, "2025-11-25")
	}
	names := map[bridge.Route]string{bridge.RouteForward: "forward", bridge.RouteLegacyPassThrough: "legacy pass-through",
		bridge.RouteModernPassThrough: "modern pass-through", bridge.RouteReverse: "reverse"}
	legacyRoute, modernRoute := routeOf(routes.Legacy, true), routeOf(routes.Modern, false)
	return strings.Join(faces, " + "), names[legacyRoute] + " (2025-11-25 clients) + " + names[modernRoute] + " (2026-07-28 clients)",
		legacyRoute == bridge.RouteForward
}
