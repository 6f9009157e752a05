package metrics

import "github.com/prometheus/client_golang/prometheus"

// The upstream's shape (which faces it serves, the route per client era) and its push
// streams: the probes that decide the routes, the changes they found, the route each
// client era gets, the forward route's subscriptions/listen opens (their rate is the
// reconnect rate), and the standalone GET streams opened to 2025-11-25 upstream sessions.

// ProbeOutcomes label upstream_probes_total.
var ProbeOutcomes = []string{"ok", "unreachable", "no_face"}

// ListenOutcomes label upstream_listen_opens_total: how the listen opened then ended.
var ListenOutcomes = []string{"delivered", "empty", "failed", "refused", "replaced"}

// StreamRoutes label upstream_get_streams_opened_total.
var StreamRoutes = []string{"reverse", "legacy-passthrough"}

func (m *Metrics) registerShape(f factory) {
	m.probes = f.counterVec("upstream_probes_total",
		"Probes of the upstream's faces (server/discover, initialize), by outcome (ok, unreachable, no_face).", "outcome")
	m.shapeChanges = f.counter("upstream_shape_changes_total",
		"Probes that found the upstream's faces, capabilities or routes changed since the previous successful probe.")
	m.routes = f.gaugeVec("upstream_route",
		"1 for the route each client era is served by (client_era 2025-11-25 or 2026-07-28), 0 for the others.", "client_era", "route")
	m.listenOpens = f.counterVec("upstream_listen_opens_total",
		"subscriptions/listen opened to the upstream by the forward route, by how it ended (delivered, empty, failed, refused, replaced): the reconnect rate.", "outcome")
	m.streamsOpened = f.counterVec("upstream_get_streams_opened_total",
		"Standalone GET streams opened (or re-opened) to 2025-11-25 upstream sessions, by route.", "route")
	for _, o := range ProbeOutcomes {
		m.probes.WithLabelValues(o)
	}
	for _, o := range ListenOutcomes {
		m.listenOpens.WithLabelValues(o)
	}
	for _, r := range StreamRoutes {
		m.streamsOpened.WithLabelValues(r)
	}
}

// Probe records one probe of the upstream (outcome: one of ProbeOutcomes).
func (m *Metrics) Probe(outcome string) {
	if m == nil {
		return
	}
	m.probes.WithLabelValues(outcome).Inc()
}

// ShapeChanged records a probe that found the upstream changed.
func (m *Metrics) ShapeChanged() {
	if m == nil {
		return
	}
	m.shapeChanges.Inc()
}

// SetRoutes records the route of each client era (route names as bridge.Route).
func (m *Metrics) SetRoutes(legacyRoute, modernRoute string) {
	if m == nil {
		return
	}
	for _, r := range []string{"forward", "legacy-passthrough"} {
		m.routes.With(prometheus.Labels{"client_era": "2025-11-25", "route": r}).Set(b2f(r == legacyRoute))
	}
	for _, r := range []string{"modern-passthrough", "reverse"} {
		m.routes.With(prometheus.Labels{"client_era": "2026-07-28", "route": r}).Set(b2f(r == modernRoute))
	}
}

// ListenOpened records one subscriptions/listen to the upstream and how it ended.
func (m *Metrics) ListenOpened(outcome string) {
	if m == nil {
		return
	}
	m.listenOpens.WithLabelValues(outcome).Inc()
}

// GetStreamOpened records one standalone GET stream opened to a legacy upstream session.
func (m *Metrics) GetStreamOpened(route string) {
	if m == nil {
		return
	}
	m.streamsOpened.WithLabelValues(route).Inc()
}
