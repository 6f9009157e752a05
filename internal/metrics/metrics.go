// Package metrics holds taskbridge's Prometheus registry and the small typed functions the
// bridge, the store decorator and the upstream transport call to record what they do.
//
// Every method is safe on a nil *Metrics (it does nothing), so code under test and tools
// that do not serve /metrics pass nil instead of threading a flag around.
//
// Label values that come from peers are bounded: unknown methods and protocol versions are
// counted as "other", JSON-RPC error codes outside the reserved range as "error_other",
// and at most maxClients distinct (clientInfo name, version) pairs get their own series;
// the rest share name="other". A client that invents a new name per session therefore
// cannot blow up the registry.
//
// Every counter family is exported from the start: the label values of a fixed
// vocabulary (modes, decisions, refusal reasons, relayed methods, the main methods) are
// created at zero, so a rate() or an absent() alert works before the first event.
//
// Concurrency: all methods are safe for concurrent use; the collectors are internally
// locked, clients is guarded by mu.
package metrics

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/taskbridge/taskbridge/internal/jsonrpc"
)

// Namespace prefixes every metric name.
const Namespace = "taskbridge"

// maxClients bounds the distinct (client name, version) label pairs.
const maxClients = 200

// knownMethods are the JSON-RPC methods that get their own label value.
var knownMethods = map[string]bool{
	"initialize": true, "ping": true, "tools/call": true, "tools/list": true,
	"tasks/get": true, "tasks/result": true, "tasks/list": true, "tasks/cancel": true, "tasks/update": true,
	"resources/list": true, "resources/read": true, "resources/templates/list": true,
	"resources/subscribe": true, "resources/unsubscribe": true,
	"prompts/list": true, "prompts/get": true, "completion/complete": true,
	"logging/setLevel": true, "server/discover": true,
	"elicitation/create": true, "sampling/createMessage": true, "roots/list": true,
}

// protocolVersions are the MCP revisions that get their own protocol_version label value.
var protocolVersions = map[string]bool{
	"2024-11-05": true, "2025-03-26": true, "2025-06-18": true, "2025-11-25": true, "2026-07-28": true,
}

// RefusalReasons are the tasks_refused_total reasons, created at zero. The admission code
// refuses with exactly these.
var RefusalReasons = []string{"draining", "kill_switch", "lock_drift", "sunset", "max_concurrent_tasks", "overloaded"}

// Method returns the label value for a JSON-RPC method: itself when known, else "other".
func Method(m string) string {
	if knownMethods[m] {
		return m
	}
	return "other"
}

// Metrics is taskbridge's metric set on its own registry.
type Metrics struct {
	reg *prometheus.Registry

	requests        *prometheus.CounterVec
	requestDuration *prometheus.HistogramVec
	upstream        *prometheus.HistogramVec
	storeOps        *prometheus.HistogramVec
	tasksCreated    *prometheus.CounterVec
	tasksRefused    *prometheus.CounterVec
	fallback        *prometheus.CounterVec
	pollsCoalesced  prometheus.Counter
	upstreamPolls   prometheus.Counter
	inputsRelayed   *prometheus.CounterVec
	answersRefused  *prometheus.CounterVec
	legacyClients   *prometheus.CounterVec
	draining        prometheus.Gauge
	killSwitch      prometheus.Gauge
	sunsetTime      prometheus.Gauge
	sunsetUnix      atomic.Int64 // the sunset for sunset_remaining_seconds; 0: none
	lockDrift       prometheus.Gauge
	lockChecks      *prometheus.CounterVec

	// The upstream's shape and push streams (shape.go).
	probes        *prometheus.CounterVec
	shapeChanges  prometheus.Counter
	routes        *prometheus.GaugeVec
	listenOpens   *prometheus.CounterVec
	streamsOpened *prometheus.CounterVec

	mu      sync.Mutex
	clients map[[2]string]bool // (name, version) pairs with their own series

	tasks *tasksCollector
}

// New returns a Metrics with every family registered (plus the Go runtime and process
// collectors), labelled with the build version.
func New(version string) *Metrics {
	reg := prometheus.NewRegistry()
	m := &Metrics{reg: reg, clients: map[[2]string]bool{}}
	f := factory{reg}
	m.requests = f.counterVec("requests_total",
		"MCP requests served, by face (legacy or modern), method and outcome (ok or the JSON-RPC error class).",
		"face", "method", "outcome")
	m.requestDuration = f.histogramVec("request_duration_seconds",
		"Time to answer an MCP request, by face and method (long-running calls included).",
		[]float64{.001, .005, .01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300}, "face", "method")
	m.upstream = f.histogramVec("upstream_request_duration_seconds",
		"Latency of upstream HTTP requests, until the response body was read or closed, by method and outcome.",
		[]float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}, "method", "outcome")
	m.storeOps = f.histogramVec("store_operation_duration_seconds",
		"Latency of task store operations, by operation and outcome.",
		[]float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, 1}, "op", "outcome")
	m.tasksCreated = f.counterVec("tasks_created_total",
		"Tasks created for legacy clients, by mode (translate, host, complete).", "mode")
	m.tasksRefused = f.counterVec("tasks_refused_total",
		"Task creations refused before reaching the upstream, by reason (draining, kill_switch, lock_drift, sunset, max_concurrent_tasks, overloaded).", "reason")
	m.fallback = f.counterVec("fallback_decisions_total",
		"Route decisions for tools/call, by decision (translate, host, collapse, passthrough, refuse).", "decision")
	m.pollsCoalesced = f.counter("polls_coalesced_total",
		"Client tasks/get calls answered from a fresh record or a shared in-flight poll instead of a new upstream tasks/get.")
	m.upstreamPolls = f.counter("upstream_polls_total",
		"Upstream tasks/get polls made on behalf of legacy tasks.")
	m.inputsRelayed = f.counterVec("input_requests_relayed_total",
		"Upstream input requests relayed to legacy clients as server-to-client requests, by method.", "method")
	m.answersRefused = f.counterVec("answers_refused_total",
		"Peer answers the bridge refused to adopt, by kind (upstream_task_mismatch, upstream_invalid_reply, foreign_input_answer).", "kind")
	m.legacyClients = f.counterVec("legacy_clients_total",
		"Legacy sessions opened, by clientInfo name and version and protocol version.",
		"client_name", "client_version", "protocol_version")
	m.draining = f.gauge("draining", "1 while this replica drains: new task-augmented starts are refused.")
	m.killSwitch = f.gauge("kill_switch", "1 while the kill switch refuses all new task creation.")
	m.sunsetTime = f.gauge("sunset_timestamp_seconds",
		"Unix time of the configured sunset of the 2025-11-25 experimental tasks API (0: none).")
	reg.MustRegister(&sunsetCollector{m: m, desc: prometheus.NewDesc(Namespace+"_sunset_remaining_seconds",
		"Seconds left until the configured sunset, at scrape time (negative after it; absent without a sunset).", nil, nil)})
	m.lockDrift = f.gauge("lock_drift",
		"Pinned facts of the serve --lock file that differ from the live upstream now (0: none, or no lock).")
	m.lockChecks = f.counterVec("lock_checks_total",
		"Comparisons of the live upstream with the serve --lock file, by result (match, drift, failed: the upstream or the lock could not be read).", "result")
	bi := f.gaugeVec("build_info", "Always 1, labelled with the taskbridge version.", "version")
	bi.WithLabelValues(version).Set(1)
	m.tasks = &tasksCollector{desc: prometheus.NewDesc(Namespace+"_tasks_in_flight",
		"Non-terminal tasks in the store, by status (all replicas sharing the store).", []string{"status"}, nil)}
	reg.MustRegister(m.tasks,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.registerShape(f)
	m.zeroSeries()
	return m
}

// zeroSeries creates the series of the fixed vocabularies at zero (see the package
// comment).
func (m *Metrics) zeroSeries() {
	for _, method := range []string{"initialize", "ping", "tools/list", "tools/call", "tasks/get", "tasks/result", "tasks/list", "tasks/cancel"} {
		m.requests.WithLabelValues("legacy", method, "ok")
	}
	for _, mode := range []string{"translate", "host", "complete"} {
		m.tasksCreated.WithLabelValues(mode)
	}
	for _, r := range RefusalReasons {
		m.tasksRefused.WithLabelValues(r)
	}
	for _, d := range []string{"translate", "host", "collapse", "passthrough", "refuse"} {
		m.fallback.WithLabelValues(d)
	}
	for _, method := range []string{"elicitation/create", "sampling/createMessage", "roots/list"} {
		m.inputsRelayed.WithLabelValues(method)
	}
	for _, kind := range []string{"upstream_task_mismatch", "upstream_invalid_reply", "foreign_input_answer"} {
		m.answersRefused.WithLabelValues(kind)
	}
	m.legacyClients.WithLabelValues("other", "other", "other")
	for _, r := range LockResults {
		m.lockChecks.WithLabelValues(r)
	}
}

// Registry returns the underlying registry (for tests and extra collectors).
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the registry in the Prometheus exposition format.
func (m *Metrics) Handler() http.Handler {
	if m == nil {
		return http.NotFoundHandler()
	}
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// Request records one served MCP request. outcome is "ok" or an error class (see Outcome).
func (m *Metrics) Request(face, method, outcome string, d time.Duration) {
	if m == nil {
		return
	}
	method = Method(method)
	m.requests.WithLabelValues(face, method, outcome).Inc()
	m.requestDuration.WithLabelValues(face, method).Observe(d.Seconds())
}

// Upstream records one upstream HTTP exchange.
func (m *Metrics) Upstream(method, outcome string, d time.Duration) {
	if m == nil {
		return
	}
	m.upstream.WithLabelValues(Method(method), outcome).Observe(d.Seconds())
}

// Store records one store operation.
func (m *Metrics) Store(op string, err error, d time.Duration) {
	if m == nil {
		return
	}
	outcome := "ok"
	if err != nil {
		outcome = "error"
	}
	m.storeOps.WithLabelValues(op, outcome).Observe(d.Seconds())
}

// TaskCreated counts a task created in mode (translate, host, complete).
func (m *Metrics) TaskCreated(mode string) {
	if m == nil {
		return
	}
	m.tasksCreated.WithLabelValues(mode).Inc()
}

// TaskRefused counts a creation refused by the admission gate (draining, kill_switch, sunset).
func (m *Metrics) TaskRefused(reason string) {
	if m == nil {
		return
	}
	m.tasksRefused.WithLabelValues(reason).Inc()
}

// Fallback counts one route decision (translate, host, collapse, passthrough, refuse).
func (m *Metrics) Fallback(decision string) {
	if m == nil {
		return
	}
	m.fallback.WithLabelValues(decision).Inc()
}

// PollCoalesced counts a tasks/get answered without its own upstream poll.
func (m *Metrics) PollCoalesced() {
	if m == nil {
		return
	}
	m.pollsCoalesced.Inc()
}

// UpstreamPoll counts an upstream tasks/get made for a legacy task.
func (m *Metrics) UpstreamPoll() {
	if m == nil {
		return
	}
	m.upstreamPolls.Inc()
}

// InputRelayed counts an input request sent to a legacy client.
func (m *Metrics) InputRelayed(method string) {
	if m == nil {
		return
	}
	m.inputsRelayed.WithLabelValues(Method(method)).Inc()
}

// AnswerRefused counts a peer answer that was not adopted: an upstream tasks/get about
// another task, an upstream reply that breaks the protocol, an input answer from a session
// or principal that was not asked. kind is one of a fixed set chosen by the caller.
func (m *Metrics) AnswerRefused(kind string) {
	if m == nil {
		return
	}
	m.answersRefused.WithLabelValues(kind).Inc()
}

// LegacyClient counts a legacy session opened by a client with this clientInfo.
func (m *Metrics) LegacyClient(name, version, protocolVersion string) {
	if m == nil {
		return
	}
	name, version = label(name), label(version)
	if !protocolVersions[protocolVersion] {
		protocolVersion = "other"
	}
	key := [2]string{name, version}
	m.mu.Lock()
	if !m.clients[key] {
		if len(m.clients) >= maxClients {
			name, version = "other", "other"
		} else {
			m.clients[key] = true
		}
	}
	m.mu.Unlock()
	m.legacyClients.WithLabelValues(name, version, protocolVersion).Inc()
}

// SetDraining sets the draining gauge.
func (m *Metrics) SetDraining(on bool) {
	if m == nil {
		return
	}
	m.draining.Set(b2f(on))
}

// SetKillSwitch sets the kill switch gauge.
func (m *Metrics) SetKillSwitch(on bool) {
	if m == nil {
		return
	}
	m.killSwitch.Set(b2f(on))
}

// SetSunset records the sunset; sunset_remaining_seconds counts down to it at scrape time.
// A zero sunset clears it.
func (m *Metrics) SetSunset(sunset time.Time) {
	if m == nil {
		return
	}
	if sunset.IsZero() {
		m.sunsetTime.Set(0)
		m.sunsetUnix.Store(0)
		return
	}
	m.sunsetTime.Set(float64(sunset.Unix()))
	m.sunsetUnix.Store(sunset.Unix())
}

// sunsetCollector reports taskbridge_sunset_remaining_seconds at scrape time.
type sunsetCollector struct {
	m    *Metrics
	desc *prometheus.Desc
}

func (c *sunsetCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *sunsetCollector) Collect(ch chan<- prometheus.Metric) {
	if at := c.m.sunsetUnix.Load(); at != 0 {
		left := time.Until(time.Unix(at, 0)).Seconds()
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(int64(left)))
	}
}

// DaysUntil returns the whole days from now until t, rounded down (negative once past).
func DaysUntil(t, now time.Time) int {
	d := t.Sub(now)
	days := int(d / (24 * time.Hour))
	if d < 0 && d%(24*time.Hour) != 0 {
		days--
	}
	return days
}

// SetTasksSource installs the function that counts non-terminal tasks by status at scrape
// time. Results are cached for a few seconds so frequent scrapes do not load the store.
func (m *Metrics) SetTasksSource(fn func(context.Context) (map[string]int, error)) {
	if m == nil {
		return
	}
	m.tasks.mu.Lock()
	m.tasks.fn = fn
	m.tasks.at = time.Time{}
	m.tasks.mu.Unlock()
}

// Outcome classifies an error for the requests metric: "ok", or "error_<code>" with the
// JSON-RPC error code the client saw (internal failures are -32603). Codes outside the
// range JSON-RPC reserves (-32768 to -32000), which an upstream may invent, are
// "error_other".
func Outcome(err error) string {
	if err == nil {
		return "ok"
	}
	code := jsonrpc.AsError(err).Code
	if code < -32768 || code > -32000 {
		return "error_other"
	}
	return "error_" + strconv.FormatInt(code, 10)
}

// label makes a peer-supplied string safe and short as a label value.
func label(s string) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsPrint(r) {
			return r
		}
		return -1
	}, s)
	if len(s) > 64 {
		s = s[:64]
	}
	if s == "" {
		return "unknown"
	}
	return s
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// tasksCollector reports taskbridge_tasks_in_flight from a store query at scrape time.
type tasksCollector struct {
	desc *prometheus.Desc

	mu   sync.Mutex
	fn   func(context.Context) (map[string]int, error)
	at   time.Time
	last map[string]int
}

func (c *tasksCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *tasksCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fn != nil && time.Since(c.at) > 5*time.Second {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		counts, err := c.fn(ctx)
		cancel()
		if err == nil {
			c.last, c.at = counts, time.Now()
		}
	}
	for _, st := range []string{"working", "input_required"} {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(c.last[st]), st)
	}
}

// factory registers namespaced collectors on one registry.
type factory struct{ reg *prometheus.Registry }

func (f factory) counterVec(name, help string, labels ...string) *prometheus.CounterVec {
	v := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: name, Help: help}, labels)
	f.reg.MustRegister(v)
	return v
}

func (f factory) counter(name, help string) prometheus.Counter {
	v := prometheus.NewCounter(prometheus.CounterOpts{Namespace: Namespace, Name: name, Help: help})
	f.reg.MustRegister(v)
	return v
}

func (f factory) gauge(name, help string) prometheus.Gauge {
	v := prometheus.NewGauge(prometheus.GaugeOpts{Namespace: Namespace, Name: name, Help: help})
	f.reg.MustRegister(v)
	return v
}

func (f factory) gaugeVec(name, help string, labels ...string) *prometheus.GaugeVec {
	v := prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: Namespace, Name: name, Help: help}, labels)
	f.reg.MustRegister(v)
	return v
}

func (f factory) histogramVec(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	v := prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace, Name: name, Help: help, Buckets: buckets}, labels)
	f.reg.MustRegister(v)
	return v
}

// Values returns the current values of one metric family (name without the namespace),
// keyed by its label values joined with "/", for the status page. A nil Metrics or an
// unknown family gives an empty map.
func (m *Metrics) Values(name string) map[string]float64 {
	out := map[string]float64{}
	if m == nil {
		return out
	}
	fams, err := m.reg.Gather()
	if err != nil {
		return out
	}
	for _, f := range fams {
		if f.GetName() != Namespace+"_"+name {
			continue
		}
		for _, mt := range f.GetMetric() {
			var parts []string
			for _, l := range mt.GetLabel() {
				parts = append(parts, l.GetValue())
			}
			v := mt.GetCounter().GetValue() + mt.GetGauge().GetValue() + mt.GetUntyped().GetValue()
			out[strings.Join(parts, "/")] = v
		}
	}
	return out
}
