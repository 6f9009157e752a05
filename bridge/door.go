package bridge

// The front door (design §2): the one handler mounted at /mcp and the one entry of
// "taskbridge stdio". Every request, on every transport and for every route, passes this
// chain, in this order, before any face or route sees it:
//
//	transport limits  method; Origin (DNS-rebinding defence, one rule for every face);
//	                  Content-Length ≤ max_body
//	authentication    from the headers alone (the authenticator never sees the body), before
//	                  a byte of the body is read; 401 is built in one place (unauthorized)
//	rate limit        per principal (golang.org/x/time/rate); without authentication per
//	                  session (legacy) or remote address (modern); 429 with retryAfterMs
//	body              read only now, at most max_body, under body_read_timeout
//	                  (ResponseController.SetReadDeadline, cleared once it is read, so long
//	                  SSE answers are unaffected): a trickled body is cut off
//	era and route     from the headers where they tell (Mcp-Session-Id, GET/DELETE/WebSocket
//	                  → 2025-11-25; a non-legacy MCP-Protocol-Version → 2026-07-28); else
//	                  from the first eraSniffBytes of the (authenticated) body
//	route             the chosen route's face; inside it, the work gate (internal/gate)
//	                  decides every new task and every upstream call
//
// The principal travels in the request context (auth.WithPrincipal); the faces read it
// there and never authenticate. A message connection (WebSocket, stdio) is admitted once
// and then each of its messages passes the same rate limit (legacy.WithAdmission).
//
// The door knows routes, not engines: an Engine hands it the face of its 2025-11-25 route
// and the handler of its 2026-07-28 route, and the door dispatches to nothing else.
// Routes() enumerates every route × transport it can dispatch to, from dispatchTable, the
// same table NewDoor checks an engine against; the table test over every route × transport
// (door_table_test.go) fails for a route it has no row for.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"github.com/tidwall/gjson"

	"github.com/taskbridge/taskbridge/internal/auth"
	"github.com/taskbridge/taskbridge/internal/defaults"
	"github.com/taskbridge/taskbridge/internal/jsonrpc"
	"github.com/taskbridge/taskbridge/internal/trace"
	"github.com/taskbridge/taskbridge/legacy"
	"github.com/taskbridge/taskbridge/sep2663"
)

// Route names one route behind the door.
type Route string

// The routes.
const (
	// RouteForward: 2025-11-25 clients in front of a SEP-2663 upstream (translation).
	RouteForward Route = "forward"
	// RouteModernPassThrough: 2026-07-28 clients in front of a 2026-07-28 upstream.
	RouteModernPassThrough Route = "modern-passthrough"
	// RouteReverse: 2026-07-28 clients in front of a 2025-11-25 upstream (translation).
	RouteReverse Route = "reverse"
	// RouteLegacyPassThrough: 2025-11-25 clients in front of a 2025-11-25 upstream.
	RouteLegacyPassThrough Route = "legacy-passthrough"
)

// Transport names how a client reaches the door.
type Transport string

// The transports.
const (
	TransportHTTP      Transport = "http"      // Streamable HTTP: POST, GET, DELETE on /mcp
	TransportWebSocket Transport = "websocket" // an Upgrade on /mcp, one session per connection
	TransportStdio     Transport = "stdio"     // taskbridge stdio: one session per process
)

// Dispatch is one route on one transport.
type Dispatch struct {
	Route     Route
	Transport Transport
}

// dispatchEntry is one route of the dispatch table.
type dispatchEntry struct {
	route      Route
	era        clientEra
	transports []Transport
}

// clientEra is the protocol era of a client request.
type clientEra int

const (
	eraLegacy clientEra = iota + 1 // 2025-11-25 (and older)
	eraModern                      // 2026-07-28
)

// dispatchTable is every route the door can dispatch to, with the client era it serves and
// the transports it serves it on. NewDoor accepts only engines whose routes are here, and
// Routes lists exactly these: a new route must be added here to be reachable at all, and
// then the table test fails until it has a row.
var dispatchTable = []dispatchEntry{
	{RouteForward, eraLegacy, []Transport{TransportHTTP, TransportWebSocket, TransportStdio}},
	{RouteModernPassThrough, eraModern, []Transport{TransportHTTP}},
	{RouteReverse, eraModern, []Transport{TransportHTTP}},
	{RouteLegacyPassThrough, eraLegacy, []Transport{TransportHTTP, TransportWebSocket, TransportStdio}},
}

// Routes lists every route × transport the door dispatches to.
func Routes() []Dispatch {
	var out []Dispatch
	for _, e := range dispatchTable {
		for _, t := range e.transports {
			out = append(out, Dispatch{Route: e.route, Transport: t})
		}
	}
	return out
}

// Engine is the set of routes serving one upstream, one per client era: *Forward (a
// 2026-07-28 upstream) or *Reverse (a 2025-11-25 upstream), built by the era router
// (routes.go). Only the door reaches them.
type Engine interface {
	endpoints() endpoints
}

// endpoints are an engine's two faces, one per client era.
type endpoints struct {
	legacyRoute Route
	legacy      *legacy.Server // 2025-11-25 clients: HTTP, WebSocket and stdio
	modernRoute Route
	modern      http.Handler // 2026-07-28 clients: HTTP
}

// eraSniffBytes is the most of a body the era decision looks at, when the headers do not
// tell.
const eraSniffBytes = 4 << 10

// DoorConfig configures a Door. Zero values take the documented defaults.
type DoorConfig struct {
	// Auth authenticates every HTTP request (internal/auth: API keys, JWT, trusted header).
	// Nil is single-user mode: no principal; tasks are bound to the session (legacy) or
	// shared by all anonymous callers (modern).
	Auth auth.Authenticator
	// AuthChallenge, when set, gives the WWW-Authenticate value of a 401 for the request and
	// the authentication error (with JWT auth: the OAuth protected-resource challenge of
	// RFC 9728, auth.ProtectedResource.Challenge). Nil: Bearer realm="taskbridge".
	AuthChallenge func(r *http.Request, err error) string
	// AllowedOrigins are exact Origin values allowed besides loopback ones; "*" allows all.
	AllowedOrigins []string
	// MaxBodyBytes caps a request body and a stdio line (default: internal/defaults).
	MaxBodyBytes int64
	// BodyReadTimeout bounds reading one request body (default: internal/defaults;
	// negative: no deadline).
	BodyReadTimeout time.Duration
	// RequestRate caps a principal's requests per second, with bursts of RequestBurst
	// (default 2×rate); 0 means no cap. Per replica, unless Tokens is set.
	RequestRate  float64
	RequestBurst int
	// Tokens, when set, is the store the replicas share: the rate is then shared by all of
	// them (door_limit_shared.go). Nil: each process keeps its own buckets.
	Tokens TokenStore
	// StdioPrincipal is the principal of a stdio session (the process's user): its tasks
	// belong to "/<StdioPrincipal>", as an API key's of that principal without a tenant.
	// "": single-user mode, tasks bound to the session.
	StdioPrincipal string
	Logger         zerolog.Logger
	// Now is the rate limiter's clock (default time.Now).
	Now func() time.Time
}

// Door is the front door. Mount it at /mcp; serve stdio with ServeStdio.
//
// Concurrency: safe for concurrent use. The rate limiter and the authenticator are atomic
// pointers a reload replaces (SetRate, SetAuth in door_live.go); wsConns is atomic;
// everything else is read-only after NewDoor.
type Door struct {
	cfg     DoorConfig
	log     zerolog.Logger
	origins originPolicy
	limit   atomic.Pointer[rateLimiter] // nil: no rate limit
	authn   atomic.Pointer[authBox]     // never nil after NewDoor; a nil authenticator in it: no auth
	engine  Engine                      // its endpoints are read per request (a Router replaces them)
	wsConns atomic.Uint64               // numbers WebSocket connections (their rate key without auth)
}

// NewDoor returns the door in front of e's routes. It fails for an engine whose routes
// are not in the dispatch table. A Router may have none yet (it has not reached its
// upstream): the door then answers the retry error until it has.
func NewDoor(cfg DoorConfig, e Engine) (*Door, error) {
	if ep := e.endpoints(); !ep.none() || !isLive(e) {
		if err := checkEndpoints(ep); err != nil {
			return nil, err
		}
	}
	defaults.Fill(&cfg.MaxBodyBytes, defaults.Defaults.MaxBodyBytes)
	if cfg.BodyReadTimeout == 0 {
		cfg.BodyReadTimeout = defaults.Defaults.BodyReadTimeout
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	d := &Door{cfg: cfg, log: cfg.Logger, origins: newOriginPolicy(cfg.AllowedOrigins), engine: e}
	d.limit.Store(newRateLimiter(cfg.RequestRate, cfg.RequestBurst, cfg.Now, cfg.Tokens))
	d.authn.Store(&authBox{cfg.Auth})
	return d, nil
}

// checkEndpoints refuses routes that are not in the dispatch table for their client era.
func checkEndpoints(ep endpoints) error {
	if !inTable(ep.legacyRoute, eraLegacy) || !inTable(ep.modernRoute, eraModern) || ep.legacy == nil || ep.modern == nil {
		return fmt.Errorf("bridge: the door has no dispatch entry for routes %q/%q", ep.legacyRoute, ep.modernRoute)
	}
	return nil
}

// none reports whether ep names no route at all (a Router before its first probe).
func (ep endpoints) none() bool {
	return ep.legacy == nil && ep.modern == nil && ep.legacyRoute == "" && ep.modernRoute == ""
}

// isLive reports whether e chooses its routes at run time (a Router).
func isLive(e Engine) bool { _, ok := e.(liveEngine); return ok }

func inTable(r Route, era clientEra) bool {
	return slices.ContainsFunc(dispatchTable, func(e dispatchEntry) bool { return e.route == r && e.era == era })
}

// HTTP-level refusals of the door, sent with id null.
var (
	errMethodNotAllowed = jsonrpc.NewError(jsonrpc.CodeInvalidRequest, "Method not allowed")
	errOriginForbidden  = jsonrpc.NewError(jsonrpc.CodeInvalidRequest, "Forbidden: Origin not allowed")
	errBodyTooLarge     = jsonrpc.NewError(jsonrpc.CodeInvalidRequest, "Request body too large")
	errBodyTimeout      = jsonrpc.NewError(jsonrpc.CodeInvalidRequest, "Request Timeout: the body did not arrive in time")
	errBodyUnreadable   = jsonrpc.NewError(jsonrpc.CodeParseError, "Parse error: reading the body failed")
	errUnauthorized     = jsonrpc.NewError(jsonrpc.CodeInvalidRequest, "Unauthorized")
)

// ServeHTTP implements http.Handler: the chain above, then the route.
func (d *Door) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !d.transportLimits(w, r) {
		return
	}
	ctx, ok := d.authenticate(w, r)
	if !ok {
		return
	}
	key := d.rateKey(ctx, r)
	if err := d.limit.Load().admit(key); err != nil {
		rateLimited(w, r, err)
		return
	}
	var body []byte
	if r.Method == http.MethodPost {
		if body, ok = d.readBody(w, r); !ok {
			return
		}
	}
	era := eraOf(r, body)
	ctx = trace.WithLabels(ctx, d.labels(r, era))
	if legacy.IsWebSocketUpgrade(r) {
		ctx = legacy.WithAdmission(ctx, d.connAdmission(ctx)) // spans: one per message (legacy face)
	} else {
		var end trace.End
		ctx, end = d.startSpan(ctx, r, body)
		defer end(nil)
	}
	r = r.WithContext(ctx)
	if body != nil {
		r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	}
	ep := d.endpoints(ctx)
	if ep.none() {
		notReached(w, r)
		return
	}
	if era == eraModern {
		ep.modern.ServeHTTP(w, r)
		return
	}
	ep.legacy.ServeHTTP(w, r)
}

// firstProbeWait bounds how long a request that comes while the engine's first probe of
// its upstream runs waits for it.
const firstProbeWait = 5 * time.Second

// liveEngine is an engine that chooses its routes at run time (a Router).
type liveEngine interface {
	Engine
	Ready() <-chan struct{}
	Settled() <-chan struct{}
}

// endpoints are the engine's routes for this request. Before a live engine's first probe
// ended, the request waits for it (at most firstProbeWait), so a bridge that has just
// started answers rather than refuse; after a failed probe it does not wait.
func (d *Door) endpoints(ctx context.Context) endpoints {
	ep := d.engine.endpoints()
	live, ok := d.engine.(liveEngine)
	if !ep.none() || !ok {
		return ep
	}
	t := time.NewTimer(firstProbeWait)
	defer t.Stop()
	select {
	case <-live.Ready():
	case <-live.Settled():
	case <-t.C:
	case <-ctx.Done():
	}
	return d.engine.endpoints()
}

// notReached answers every request while the engine has no routes yet (a Router whose
// first probe has not succeeded): HTTP 503, Retry-After, and -32010 saying to retry.
func notReached(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Retry-After", "1")
	refuse(w, r, http.StatusServiceUnavailable, errNotReachedYet)
}

// transportLimits applies what needs neither identity nor body; false when it answered.
func (d *Door) transportLimits(w http.ResponseWriter, r *http.Request) bool {
	switch r.Method {
	case http.MethodGet, http.MethodPost, http.MethodDelete:
	default:
		w.Header().Set("Allow", "GET, POST, DELETE")
		refuse(w, r, http.StatusMethodNotAllowed, errMethodNotAllowed)
		return false
	}
	if !d.origins.allowed(r.Header.Get("Origin")) {
		refuse(w, r, http.StatusForbidden, errOriginForbidden)
		return false
	}
	if r.Method == http.MethodPost && r.ContentLength > d.cfg.MaxBodyBytes {
		refuse(w, r, http.StatusRequestEntityTooLarge, errBodyTooLarge.Wrapf("limit is %d bytes", d.cfg.MaxBodyBytes))
		return false
	}
	return true
}

// refuse answers a request the door will not serve. A body it has not read (or not read to
// the end) must not hold the connection: net/http would read up to 256 KiB of it after
// the answer, at the sender's pace, to reuse the connection. So the read deadline is set
// to now and the connection closes after the answer: a refused caller costs a few KiB and
// no time.
func refuse(w http.ResponseWriter, r *http.Request, status int, e *jsonrpc.Error) {
	if r.ContentLength != 0 {
		w.Header().Set("Connection", "close")
		_ = http.NewResponseController(w).SetReadDeadline(time.Now())
	}
	writeHTTPError(w, status, e)
}

// authenticate identifies the caller from the headers; false when it answered 401. The
// authenticator gets a shallow copy of r without a body, so it cannot read one.
func (d *Door) authenticate(w http.ResponseWriter, r *http.Request) (context.Context, bool) {
	authn := d.authn.Load().a
	if authn == nil {
		return r.Context(), true
	}
	headersOnly := *r
	headersOnly.Body = http.NoBody
	p, err := authn.Authenticate(&headersOnly)
	if err != nil {
		d.log.Info().Err(err).Str("remote", r.RemoteAddr).Msg("front door: authentication failed")
		d.unauthorized(w, r, err)
		return nil, false
	}
	return auth.WithPrincipal(r.Context(), p), true
}

// unauthorized is the one 401 of every route and transport: a JSON-RPC error body with id
// null and a Bearer challenge (AuthChallenge's, e.g. with the RFC 9728 resource_metadata).
func (d *Door) unauthorized(w http.ResponseWriter, r *http.Request, err error) {
	challenge := `Bearer realm="taskbridge"`
	if d.cfg.AuthChallenge != nil {
		challenge = d.cfg.AuthChallenge(r, err)
	}
	w.Header().Set("WWW-Authenticate", challenge)
	refuse(w, r, http.StatusUnauthorized, errUnauthorized)
}

// readBody reads the whole body of an authenticated POST, at most MaxBodyBytes, under the
// body deadline; false when it answered (413, 408, 400).
func (d *Door) readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	rc := http.NewResponseController(w)
	if d.cfg.BodyReadTimeout > 0 {
		_ = rc.SetReadDeadline(time.Now().Add(d.cfg.BodyReadTimeout))
	}
	var buf bytes.Buffer
	if n := r.ContentLength; n > 0 {
		buf.Grow(int(n)) // bounded by transportLimits
	}
	_, err := buf.ReadFrom(io.LimitReader(r.Body, d.cfg.MaxBodyBytes+1))
	switch {
	case err != nil && isTimeout(err):
		refuse(w, r, http.StatusRequestTimeout, errBodyTimeout.Wrapf("limit is %s", d.cfg.BodyReadTimeout))
		return nil, false
	case err != nil:
		refuse(w, r, http.StatusBadRequest, errBodyUnreadable)
		return nil, false
	case int64(buf.Len()) > d.cfg.MaxBodyBytes:
		refuse(w, r, http.StatusRequestEntityTooLarge, errBodyTooLarge.Wrapf("limit is %d bytes", d.cfg.MaxBodyBytes))
		return nil, false
	}
	if d.cfg.BodyReadTimeout > 0 {
		_ = rc.SetReadDeadline(time.Time{}) // the answer may be a long SSE stream
	}
	return buf.Bytes(), true
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, os.ErrDeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

// eraOf tells the era of a request: from the headers where they tell, else from the first
// eraSniffBytes of the body (a POST without a session and without a non-legacy
// MCP-Protocol-Version: the 2026-07-28 _meta envelope is modern, whatever the method;
// anything else, initialize included, is 2025-11-25).
func eraOf(r *http.Request, body []byte) clientEra {
	if r.Method != http.MethodPost || r.Header.Get("Mcp-Session-Id") != "" {
		return eraLegacy // GET, DELETE, WebSocket and session traffic
	}
	switch v := r.Header.Get(sep2663.HeaderProtocolVersion); {
	case v != "" && !isLegacyVersion(v):
		return eraModern
	case v != "":
		return eraLegacy // a legacy revision named in the header
	}
	// The modern envelope decides before the method name: an initialize that carries
	// per-request _meta is a 2026-07-28 request (versioning: "a request carrying modern
	// per-request _meta is served statelessly"), which gets that revision's answer
	// (404, -32601), not a new legacy session.
	head := body[:min(len(body), eraSniffBytes)]
	if gjson.GetBytes(head, "params._meta."+gjson.Escape(sep2663.MetaProtocolVersion)).Exists() {
		return eraModern
	}
	return eraLegacy
}

// ServeStdio serves one 2025-11-25 client on r and w ("taskbridge stdio") through the same
// chain as far as it applies: the line size cap (MaxBodyBytes); the principal, fixed for
// the process (StdioPrincipal; none: single-user mode); the rate limit, per message, keyed
// by that principal or by the process; then the legacy route. There are no credentials to
// check: whoever can start the process is its user.
func (d *Door) ServeStdio(ctx context.Context, r io.Reader, w io.Writer) error {
	key := "process:stdio"
	if d.cfg.StdioPrincipal != "" {
		p := auth.Principal{ID: d.cfg.StdioPrincipal}
		ctx = auth.WithPrincipal(ctx, p)
		key = "principal:" + p.Key()
	}
	// The limiter is read per message: a reload that sets or lifts the rate applies here too.
	ctx = legacy.WithAdmission(ctx, func(context.Context) error { return d.limit.Load().admit(key) })
	if live, ok := d.engine.(liveEngine); ok {
		// One session per process, bound to one route: wait until there is one (the
		// client's first message waits in the pipe meanwhile).
		select {
		case <-live.Ready():
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	ep := d.engine.endpoints()
	ctx = trace.WithLabels(ctx, trace.Labels{Route: string(ep.legacyRoute), Era: trace.Legacy, Transport: string(TransportStdio)})
	return ep.legacy.ServeStdio(ctx, r, w, legacy.StdioOptions{MaxLineBytes: int(d.cfg.MaxBodyBytes)})
}

// labels are what a request's spans say of it: route, client era, transport. The routes
// are the engine's now (empty before a Router's first probe).
func (d *Door) labels(r *http.Request, era clientEra) trace.Labels {
	ep := d.engine.endpoints()
	l := trace.Labels{Route: string(ep.legacyRoute), Era: trace.Legacy, Transport: string(TransportHTTP)}
	if era == eraModern {
		l.Route, l.Era = string(ep.modernRoute), trace.Modern
	}
	if legacy.IsWebSocketUpgrade(r) {
		l.Transport = string(TransportWebSocket)
	}
	return l
}

// startSpan starts the server span of one HTTP request (internal/trace; a no-op while
// tracing is off): a POST's is named by its JSON-RPC method, a GET's or DELETE's by the
// HTTP method. Only routing fields are read from the body, never a payload.
func (d *Door) startSpan(ctx context.Context, r *http.Request, body []byte) (context.Context, trace.End) {
	if r.Method == http.MethodPost {
		return trace.StartRequest(ctx, r.Header, body)
	}
	return trace.StartHTTP(ctx, r)
}

// connAdmission is the per-message rate limit of a WebSocket connection: its principal's
// bucket, or the connection's own without authentication (the connection is the session).
func (d *Door) connAdmission(ctx context.Context) func(context.Context) error {
	key := "session:ws-" + fmt.Sprint(d.wsConns.Add(1))
	if p, ok := auth.PrincipalFrom(ctx); ok {
		key = "principal:" + p.Key()
	}
	return func(context.Context) error { return d.limit.Load().admit(key) }
}

// rateKey names whose bucket a request draws on: its principal; without authentication
// its legacy session, else its remote address.
func (d *Door) rateKey(ctx context.Context, r *http.Request) string {
	if p, ok := auth.PrincipalFrom(ctx); ok {
		return "principal:" + p.Key()
	}
	if id := r.Header.Get("Mcp-Session-Id"); id != "" && len(id) <= 128 {
		return "session:" + id
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	return "addr:" + host
}

// writeHTTPError answers with an HTTP status and a JSON-RPC error body with id null.
func writeHTTPError(w http.ResponseWriter, status int, e *jsonrpc.Error) {
	b, err := jsonrpc.Encode(jsonrpc.NewErrorResponse(jsonrpc.ID{}, e))
	if err != nil {
		b = []byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"Internal error"}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// isLegacyVersion reports whether v is a revision the legacy face negotiates.
func isLegacyVersion(v string) bool { return slices.Contains(legacy.SupportedVersions, v) }
